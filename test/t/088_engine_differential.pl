# The two engines answer alike: seeded random sequences of calls on a small
# key space go to the C++ engine (database "cpp", CREATE EXTENSION idem) and
# to the portable engine (database "portable", dist/idem-portable.sql run by
# the database's owner, not a superuser), call by call; every answer (the
# result, or SQLSTATE, message, detail and hint) and, after each sequence,
# every row of idem's tables (keys, consumed messages, outbox events, scope
# policies) must be the same in both. A mismatch is
# shrunk to the shortest sequence that still shows it (shortest prefix, then
# single calls dropped) and printed with both engines' answers.
#
# What differs by design is normalised away, nothing else: fence values,
# lease fences and outbox ids (each engine's sequences advance on their own)
# become symbols in the order they first appear (F1, F2, ...; L1...; E1...),
# so equal symbols still mean equal values and their order is kept; a
# bound_session token becomes "bound"; a timestamp becomes its class, NULL,
# infinity, "near" (within 10 s of now), "past" or "future". PL/pgSQL's
# CONTEXT lines are dropped. The events one outbox_lease hands out are
# compared in id order.
#
# Time, without sleeping: every interval a sequence passes is either tiny
# ('1 microsecond': run out by the next call) or an hour or more (never runs
# out during a sequence), and "time passes" is a step that moves every
# timestamp of idem's tables back by hours or days, in both databases by the
# same statement, as the superuser. Locks, leases, expiries and backoffs
# then run out exactly as if the time had passed, for both engines alike,
# and no answer depends on how fast the machine is. (An UPDATE of the
# tables, not of the clocks: the engines read now(), and both read the same
# rows.) The outbox's backoff base is a minute, so a failed event is never
# due again within a sequence unless time passes.
#
# IDEM_DIFF_SEQUENCES (default 200) sequences of IDEM_DIFF_CALLS (30) calls
# from IDEM_DIFF_SEED (printed; default fixed); IDEM_DIFF_ONLY=N runs
# sequence N alone. The portable engine runs in a cluster of its own without
# the library, as on a managed service (IDEM_DIFF_PORTABLE_APART=0 puts it
# beside the C++ engine, where the library's settings are registered). IDEM_DIFF_BOTH_CPP=1 puts the C++
# engine in both databases (the driver's own check: nothing may differ);
# IDEM_DIFF_INJECT='SQL' runs SQL in the second database after each reset
# (a difference put in on purpose must be found and shrunk). Without
# dist/idem-portable.sql (make portable writes it) the test is skipped.
#
# IDEM_DIFF_PORTABLE_VIA=pgtle installs the portable engine through pg_tle
# instead, as on Amazon RDS: its cluster preloads pg_tle, and a role granted
# pgtle_admin and CREATE on the database, not a superuser, runs
# dist/idem-pgtle.sql and then CREATE EXTENSION idem (skipped when the
# installation has no pg_tle). IDEM_PORTABLE_BIN and IDEM_CPP_BIN (bin
# directories; test/portable.sh sets them) name the installations the
# portable and the C++ clusters are made from; unset, the one on PATH.
use strict;
use warnings;
use utf8;
use DBI;
use Encode ();
use File::Basename qw(dirname);
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use Time::Local qw(timegm);

my $sequences = $ENV{IDEM_DIFF_SEQUENCES} // 200;
my $calls_per_sequence = $ENV{IDEM_DIFF_CALLS} // 30;
my $seed = $ENV{IDEM_DIFF_SEED} // 20261125;
my $only = $ENV{IDEM_DIFF_ONLY};
my $both_cpp = $ENV{IDEM_DIFF_BOTH_CPP};
my $apart = $ENV{IDEM_DIFF_PORTABLE_APART} // 1;
my $shown_mismatches = $ENV{IDEM_DIFF_SHOW} // 6;
my $via = $ENV{IDEM_DIFF_PORTABLE_VIA} // 'file';
# IDEM_DIFF_ICU_LOCALE=cy-GB makes both databases with that ICU collation
# (the engines must answer alike whatever the collation).
my $icu = $ENV{IDEM_DIFF_ICU_LOCALE} // '';
BAIL_OUT("IDEM_DIFF_ICU_LOCALE=$icu: an ICU locale name") unless $icu =~ /^[A-Za-z0-9_-]*$/;
my $db_options = $icu eq '' ? ''
  : " TEMPLATE template0 ENCODING UTF8 LOCALE_PROVIDER icu ICU_LOCALE '$icu' LC_COLLATE 'C' LC_CTYPE 'C'";
# A cluster's installation: the one whose bin directory $ENV{$var} names.
sub installation { my ($var) = @_; return $ENV{$var} ? (install_path => dirname($ENV{$var})) : (); }
BAIL_OUT("IDEM_DIFF_PORTABLE_VIA=$via: file or pgtle") unless $via =~ /^(file|pgtle)$/;
BAIL_OUT('IDEM_DIFF_PORTABLE_VIA=pgtle needs a cluster of its own (IDEM_DIFF_PORTABLE_APART=1)')
  if $via eq 'pgtle' && !$apart;

my $tree = $ENV{IDEM_TREE} // '.';
my $portable_sql = "$tree/dist/idem-" . ($via eq 'pgtle' ? 'pgtle' : 'portable') . '.sql';
plan skip_all => "$portable_sql is absent (make portable writes it)"
  unless $both_cpp || -f $portable_sql;
if ($via eq 'pgtle' && !$both_cpp) {
	my $pg_config = $ENV{IDEM_PORTABLE_BIN} ? "$ENV{IDEM_PORTABLE_BIN}/pg_config" : 'pg_config';
	chomp(my $share = `$pg_config --sharedir`);
	plan skip_all => "pg_tle: skipped ($share/extension/pg_tle.control not found)"
	  unless -f "$share/extension/pg_tle.control";
}

note "seed $seed, $sequences sequences of $calls_per_sequence calls"
  . ($both_cpp ? ', the C++ engine in both databases' : '');
diag "engine differential: IDEM_DIFF_SEED=$seed IDEM_DIFF_SEQUENCES=$sequences";

# ---- the cluster ---------------------------------------------------------------

my $node = PostgreSQL::Test::Cluster->new('engine_differential', installation('IDEM_CPP_BIN'));
$node->init;
# The worker stays out of it: it would sweep and purge in one database
# between calls and not in the other. Published events are kept an hour
# (a server-wide setting), so that time passing lets purge_published work.
$node->append_conf('postgresql.conf', <<'CONF');
shared_preload_libraries = 'idem'
idem.worker_enabled = off
idem.outbox_retention = '1h'
log_statement = none
CONF
$node->start;

$node->safe_psql('postgres', "CREATE DATABASE cpp$db_options");
$node->safe_psql('cpp', 'CREATE EXTENSION idem');

# By default the portable engine runs in a cluster of its own without the
# library, as on a managed service: its settings are
# then placeholders holding the text a user set, not values the C++
# engine's settings checked and normalised.
my $portable_node = $node;
if ($apart) {
	$portable_node = PostgreSQL::Test::Cluster->new('engine_differential_portable', installation('IDEM_PORTABLE_BIN'));
	$portable_node->init;
	$portable_node->append_conf('postgresql.conf', "idem.outbox_retention = '1h'\nlog_statement = none\n"
		. ($via eq 'pgtle' ? "shared_preload_libraries = 'pg_tle'\n" : ''));
	$portable_node->start;
}
# pg_read_all_stats: with idem.bind_lock_to_session the portable engine names
# the caller's session by its backend_start, which pg_stat_activity shows the
# extension's owner only for its own sessions without it (55000 says so).
$portable_node->safe_psql('postgres', "CREATE ROLE portable_owner LOGIN; CREATE DATABASE portable OWNER portable_owner$db_options;
	GRANT pg_read_all_stats TO portable_owner");
if ($both_cpp) {
	$portable_node->safe_psql('portable', 'CREATE EXTENSION idem');
} else {
	# Through pg_tle the owner registers idem and then creates it, as
	# pgtle_admin's member (a superuser creates pg_tle itself, once).
	$portable_node->safe_psql('portable', 'CREATE EXTENSION pg_tle; GRANT pgtle_admin TO portable_owner')
	  if $via eq 'pgtle';
	my ($ret, $out, $err) = $portable_node->psql('portable', undef,
		extra_params => [ '-U', 'portable_owner', '-v', 'ON_ERROR_STOP=1', '-f', $portable_sql ]);
	($ret, $out, $err) = $portable_node->psql('portable', 'CREATE EXTENSION idem',
		extra_params => [ '-U', 'portable_owner', '-v', 'ON_ERROR_STOP=1' ]) if $ret == 0 && $via eq 'pgtle';
	is($ret, 0, "the portable engine installs ($portable_sql"
		  . ($via eq 'pgtle' ? ', CREATE EXTENSION idem' : '') . ') as the database owner') or diag $err;
	BAIL_OUT('the portable engine did not install') if $ret != 0;
}

sub connect_db {
	my ($name, $on) = @_;
	my $dbh = DBI->connect('dbi:Pg:dbname=' . $name . ';host=' . $on->host . ';port=' . $on->port,
		'', '', { AutoCommit => 1, RaiseError => 0, PrintError => 0, PrintWarn => 1, pg_enable_utf8 => 1,
			pg_placeholder_nocolons => 1 })
	  or die "connect $name: $DBI::errstr";
	$dbh->do($_) or die "$name: $_: " . $dbh->errstr for (
		q{SET TimeZone = 'UTC'}, q{SET DateStyle = 'ISO'}, q{SET statement_timeout = '60s'},
		q{SET idem.outbox_backoff_base = '1min'});
	return $dbh;
}

my @dbs = ({ name => 'cpp', dbh => connect_db('cpp', $node) },
	{ name => 'portable', dbh => connect_db('portable', $portable_node) });

# Functions the C++ engine has: a call of one the portable engine lacks is a
# mismatch; a call of one neither has (a 1.2 call not written yet) is not
# generated.
my %has = map { $_ => 1 } @{ $dbs[0]{dbh}->selectcol_arrayref(
	q{SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'idem'}) };

# ---- generating calls ------------------------------------------------------

sub pick { return $_[ int(rand(@_)) ]; }
sub chance { return rand() < $_[0]; }

my @scopes = ('s1', 's2');
my @keys = ('k1', 'k2', 'k3');

# Mostly the key space; now and then a bad scope or key.
sub gen_scope { return chance(0.03) ? pick(undef, '', 'x' x 256) : pick(@scopes); }
sub gen_key { return chance(0.03) ? pick(undef, '', 'y' x 256) : pick(@keys); }
sub gen_hash { return chance(0.03) ? pick(undef, '') : chance(0.85) ? 'h1' : 'h2'; }

# Tiny (runs out by the next call) or at least an hour (never runs out
# within a sequence unless time passes); now and then a bad one.
sub gen_interval {
	return chance(0.05) ? pick('0', '-1 second', '1 mon -30 days') : pick('1 microsecond', '1 hour', '3 hours', '2 days');
}

# A fence as a reference resolved per database: the fence the last
# ownership-granting claim of that key returned there ("cur"), the one
# before ("prev"), the last one of another key ("other"), or a value that
# means the same in both (NULL, 0, -1, larger than any).
sub gen_fence {
	my ($scope, $key) = @_;
	my $r = rand();
	my $ref = $r < 0.65 ? 'cur' : $r < 0.82 ? 'prev' : $r < 0.9 ? 'other' : pick('null', '0', '-1', 'max');
	return [ 'fence', $ref, $scope, $key ];
}

sub arg { return [ $_[0], $_[1] ]; }    # [type, value]; undef value is NULL

sub optional {
	my ($calls, $name, $p, $type, $value) = @_;
	push @{ $calls->{named} }, [ $name, arg($type, $value) ] if chance($p);
}

my @json_docs = ('{"ok": true}', '{"n": 1, "a": [1, 2.0, "x"]}', '[]', '"é€😀"', '{"z": 1e21, "a": 0.1}',
	'{"amount": 12345678901234567890}', '{"b": {"y": null, "x": -0}}', '1.5e-7');

# The keys the sequence claimed last: owner writes aim at them most of the
# time, so that they reach the fenced update, not just "not owned".
my @claimed;

# A random JSON document for request_hash: keys whose order differs by
# UTF-16 code unit, code point and byte (RFC 8785 sorts by UTF-16 code
# units), escapes, and numbers at the edges of double precision (the ones
# that cannot be written exactly are P4005 in both engines).
my @json_strings = ('', 'a', 'B', 'é', "\x{E000}", "\x{FFFD}", "\x{1F600}", 'ab', 'a b', '\\"', '\\n\\t\\u0001',
	'\\u00e9', '\\ud83d\\ude00', '€', "\x{7F}", '/', 'z' x 40);
my @json_numbers = qw(0 -0 0.0 1 -1 1.0 1.5 0.1 0.3 1e21 1e20 1E+2 1e-7 123e-20 -1.5e-7 9007199254740991
  9007199254740993 1.7976931348623157e308 5e-324 4.9e-324 1e400 12345678901234567890 0.30000000000000004
  100 1e2 2.5E-3 333333333.33333329);

sub gen_json {
	my ($depth) = @_;
	my $r = rand();
	if ($depth > 0 && $r < 0.3) {
		my @keys = map { pick(@json_strings) } 1 .. int(rand(4));
		my %seen;
		return '{' . join(', ', map { '"' . $_ . '": ' . gen_json($depth - 1) } grep { !$seen{$_}++ } @keys) . '}';
	}
	if ($depth > 0 && $r < 0.45) {
		return '[' . join(', ', map { gen_json($depth - 1) } 1 .. int(rand(4))) . ']';
	}
	return pick('null', 'true', 'false') if $r < 0.55;
	return '"' . pick(@json_strings) . '"' if $r < 0.7;
	return chance(0.7) ? pick(@json_numbers) : sprintf('%.17g', (rand() - 0.5) * 10**(int(rand(40)) - 20));
}

sub claim_args {
	my ($c, $with_wait) = @_;
	my ($scope, $key) = (gen_scope(), gen_key());
	push @claimed, [ $scope, $key ];
	$c->{pos} = [ arg(text => $scope), arg(text => $key), arg(text => gen_hash()) ];
	push @{ $c->{pos} }, arg(interval => chance(0.9) ? '1 millisecond' : pick(undef, '0')) if $with_wait;
	optional($c, 'claimed_by', 0.3, text => pick('worker-1', 'worker-2', undef));
	optional($c, 'lock_timeout', 0.6, interval => chance(0.15) ? undef : gen_interval());
	optional($c, 'retention', 0.4, interval => chance(0.15) ? undef : gen_interval());
	return $c;
}

sub owner_args {
	my ($c) = @_;
	my ($scope, $key) = @claimed && chance(0.7) ? @{ $claimed[ -1 - int(rand(@claimed > 1 ? 2 : 1)) ] }
	  : (gen_scope(), gen_key());
	$c->{pos} = [ arg(text => $scope), arg(text => $key), gen_fence($scope, $key) ];
	return $c;
}

sub gen_response_code { return chance(0.05) ? pick(undef, 99, 600) : pick(200, 201, 402, 500); }
sub gen_body { return pick(undef, '{"ok": true}', '{"charge": "ch_1", "amount": 100}', '[1, "two"]'); }
sub gen_batch { return chance(0.1) ? pick(undef, 0, -1) : pick(1, 2, 100); }

sub gen_mark_succeeded {
	my $c = owner_args({ fn => $_[0] });
	push @{ $c->{pos} }, arg(int => gen_response_code());
	optional($c, 'response_body', 0.6, jsonb => gen_body());
	optional($c, 'result_ref_type', 0.3, text => pick('charge', undef));
	optional($c, 'result_ref_id', 0.3, text => pick('ch_1', undef));
	return $c;
}

sub gen_mark_failed {
	my $c = owner_args({ fn => $_[0] });
	push @{ $c->{pos} }, arg(bool => chance(0.05) ? undef : pick('true', 'false')),
	  arg(text => chance(0.06) ? pick(undef, '', 'abandoned', 'too_many_attempts') : pick('card_declined', 'timeout'));
	optional($c, 'failure_message', 0.4, text => pick('the bank said no', undef));
	optional($c, 'response_code', 0.4, int => gen_response_code());
	optional($c, 'response_body', 0.4, jsonb => gen_body());
	return $c;
}

# An outbox event: the one the last lease handed out, the n-th one seen,
# or an id that means the same in both (NULL, larger than any).
sub gen_outbox_event_ref {
	return [ 'event', chance(0.6) ? 'leased' : chance(0.9) ? int(rand(4)) : pick('null', 'max') ];
}

sub gen_lease_ref {
	my ($event) = @_;
	return [ 'lease', chance(0.75) ? 'cur' : pick('prev', 'prev', 'null', 'max'), $event ];
}

# Each generator returns one call: fn, positional and named arguments, and
# how it runs (tx: 'rollback' inside a transaction rolled back, 'read_only'
# inside a READ ONLY transaction).
my %generators = (
	claim_idempotency_key => [ 18, sub { claim_args({ fn => 'claim_idempotency_key' }) } ],
	claim_or_wait => [ 3, sub { claim_args({ fn => 'claim_or_wait' }, 1) } ],
	mark_succeeded => [ 8, sub { gen_mark_succeeded('mark_succeeded') } ],
	mark_succeeded_returning => [ 2, sub { gen_mark_succeeded('mark_succeeded_returning') } ],
	mark_failed => [ 6, sub { gen_mark_failed('mark_failed') } ],
	mark_failed_returning => [ 2, sub { gen_mark_failed('mark_failed_returning') } ],
	set_recovery_point => [ 4, sub {
		my $c = owner_args({ fn => 'set_recovery_point' });
		push @{ $c->{pos} }, arg(text => chance(0.1) ? pick(undef, '', 'finished') : pick('charged', 'shipped', 'started'));
		return $c; } ],
	extend_lock => [ 3, sub {
		my $c = owner_args({ fn => 'extend_lock' });
		push @{ $c->{pos} }, arg(interval => chance(0.1) ? undef : gen_interval());
		return $c; } ],
	release => [ 2, sub { owner_args({ fn => 'release' }) } ],
	peek => [ 2, sub { { fn => 'peek', pos => [ arg(text => gen_scope()), arg(text => gen_key()) ] } } ],
	sweep_stale => [ 2, sub { { fn => 'sweep_stale', pos => chance(0.5) ? [] : [ arg(int => gen_batch()) ] } } ],
	purge_expired => [ 2, sub { { fn => 'purge_expired', pos => chance(0.5) ? [] : [ arg(int => gen_batch()) ] } } ],
	lookup => [ 2, sub { { fn => 'lookup', pos => [ arg(text => gen_scope()), arg(text => gen_key()) ] } } ],
	evict => [ 1, sub { { fn => 'evict', pos => [ arg(text => gen_scope()), arg(text => gen_key()),
		chance(0.5) ? arg(bool => pick('true', 'false', undef)) : () ] } } ],
	force_expire => [ 1, sub { { fn => 'force_expire', pos => [ arg(text => gen_scope()), arg(text => gen_key()),
		chance(0.5) ? arg(bool => pick('true', 'false', undef)) : () ] } } ],
	request_hash => [ 2, sub { chance(0.8)
		? { fn => 'request_hash', pos => [ arg(jsonb => chance(0.3) ? pick(@json_docs) : gen_json(3)) ] }
		: { fn => 'request_hash', pos => [ arg(bytea => pick('\x', '\x00ff', '\x68656c6c6f')) ] } } ],
	consume_once => [ 4, sub {
		my $c = { fn => 'consume_once', pos => [ arg(text => chance(0.03) ? pick(undef, '') : pick('c1', 'c2')),
			arg(text => chance(0.03) ? pick(undef, '', 'm' x 256) : pick('m1', 'm2')), arg(text => gen_hash()) ] };
		optional($c, 'retention', 0.4, interval => chance(0.15) ? undef : gen_interval());
		return $c; } ],
	set_consumed_result => [ 2, sub { { fn => 'set_consumed_result',
		pos => [ arg(text => pick('c1', 'c2')), arg(text => pick('m1', 'm2')),
			arg(text => pick('order', undef)), arg(text => pick('o-1', 'o-2')) ] } } ],
	purge_consumed => [ 1, sub { { fn => 'purge_consumed', pos => chance(0.5) ? [] : [ arg(int => gen_batch()) ] } } ],
	outbox_put => [ 5, sub {
		my $c = { fn => 'outbox_put', pos => [ arg(text => gen_scope()), arg(text => gen_key()),
			arg(text => chance(0.03) ? pick(undef, '') : pick('created', 'paid')),
			arg(jsonb => chance(0.03) ? undef : pick('{"n": 1}', '{"n": 2}')) ] };
		optional($c, 'aggregate_type', 0.5, text => pick('order', undef));
		optional($c, 'aggregate_id', 0.5, text => pick('o-1', 'o-2', undef));
		optional($c, 'headers', 0.2, jsonb => pick('{"h": 1}', undef));
		optional($c, 'available_at', 0.3, timestamptz => pick('past', 'future', undef));
		return $c; } ],
	outbox_lease => [ 4, sub {
		my $c = { fn => 'outbox_lease', pos => [] };
		optional($c, 'batch_limit', 0.5, int => gen_batch());
		optional($c, 'lease', 0.7, interval => chance(0.1) ? undef : gen_interval());
		optional($c, 'event_types', 0.2, 'text[]' => pick('{created}', '{paid,created}', '{}'));
		return $c; } ],
	outbox_published => [ 3, sub {
		my $e = gen_outbox_event_ref();
		return { fn => 'outbox_published', pos => [ $e, gen_lease_ref($e) ] }; } ],
	outbox_failed => [ 3, sub {
		my $e = gen_outbox_event_ref();
		my $c = { fn => 'outbox_failed', pos => [ $e, gen_lease_ref($e), arg(text => chance(0.05) ? pick(undef, '') : '503 from the receiver') ] };
		optional($c, 'retry_after', 0.5, interval => pick(undef, '0', '1 hour', '-1 second'));
		return $c; } ],
	purge_published => [ 1, sub { { fn => 'purge_published', pos => chance(0.5) ? [] : [ arg(int => gen_batch()) ] } } ],
	run_maintenance => [ 1, sub { { fn => 'run_maintenance', pos => [] } } ],
	# Not functions: a scope's policy, a setting, time passing.
	policy => [ 3, sub { gen_policy() } ],
	setting => [ 1, sub { gen_setting() } ],
	time_passes => [ 3, sub { { fn => 'time_passes', by => pick('2 hours', '2 hours', '3 days', '8 days') } } ],
);

sub gen_policy {
	my $scope = pick(@scopes);
	return { fn => 'policy_delete', scope => $scope } if chance(0.2);
	my %p = (scope => $scope);
	$p{lock_timeout} = pick('1 microsecond', '1 hour', '0') if chance(0.4);
	$p{retention} = pick('1 microsecond', '1 hour', '2 days') if chance(0.3);
	$p{keep_forever} = pick('true', 'false') if chance(0.2);
	$p{max_attempts} = pick(1, 2, 3, 0) if chance(0.5);
	$p{bind_lock_to_session} = pick('true', 'false') if chance(0.2);
	return { fn => 'policy', policy => \%p };
}

sub gen_setting {
	return { fn => 'setting', name => pick('idem.lock_timeout', 'idem.retention', 'idem.bind_lock_to_session',
			'idem.outbox_max_attempts', 'idem.inbox_retention'),
		value => undef } if chance(0.3);    # RESET
	my $name = pick('idem.lock_timeout', 'idem.retention', 'idem.bind_lock_to_session', 'idem.outbox_max_attempts',
		'idem.inbox_retention');
	my %values = ('idem.lock_timeout' => [ '1h', '30min' ], 'idem.retention' => [ '-1', '1h', '3d' ],
		'idem.bind_lock_to_session' => [ 'on', 'off' ], 'idem.outbox_max_attempts' => [ 1, 2, 10 ],
		'idem.inbox_retention' => [ '-1', '1h' ]);
	return { fn => 'setting', name => $name, value => pick(@{ $values{$name} }) };
}

my @weighted;
for my $fn (sort keys %generators) {
	my $needs = $fn =~ /^(policy|setting|time_passes)$/ ? 'claim_idempotency_key' : $fn;
	next unless $has{$needs};
	push @weighted, ($fn) x $generators{$fn}[0];
}
note 'generated calls: ' . join(', ', sort keys %{ { map { $_ => 1 } @weighted } });

sub gen_sequence {
	my ($n) = @_;
	srand($seed + $n);
	@claimed = ();
	my @calls;
	for (1 .. $calls_per_sequence) {
		# Now and then a few calls in one transaction (now() stands still
		# there: a lock taken in it has not run out for a later call in it).
		if (chance(0.07)) {
			push @calls, { fn => 'transaction', end => chance(0.7) ? 'commit' : 'rollback',
				calls => [ map { $generators{ pick(@weighted) }[1]->() } 1 .. 2 + int(rand(3)) ] };
			next;
		}
		my $c = $generators{ pick(@weighted) }[1]->();
		$c->{tx} = chance(0.06) ? 'rollback' : chance(0.04) ? 'read_only' : undef
		  unless $c->{fn} =~ /^(policy|policy_delete|setting|time_passes)$/;
		push @calls, $c;
	}
	return \@calls;
}

# ---- running calls in one database --------------------------------------------

my $max_bigint = '9223372036854775807';

sub reset_db {
	my ($db) = @_;
	my $dbh = $db->{dbh};
	$dbh->rollback unless $dbh->{AutoCommit};
	$dbh->do(q{DELETE FROM idem.idempotency_request; DELETE FROM idem.consumed_message;
		DELETE FROM idem.outbox_event; DELETE FROM idem.scope_policy;
		RESET idem.lock_timeout; RESET idem.retention; RESET idem.bind_lock_to_session;
		RESET idem.outbox_max_attempts; RESET idem.inbox_retention}) or die "$db->{name}: reset: " . $dbh->errstr;
	# The driver's own check: a difference put in on purpose must be found
	# and shrunk (IDEM_DIFF_INJECT='SET idem.outbox_max_attempts = 1').
	$dbh->do($ENV{IDEM_DIFF_INJECT}) or die $dbh->errstr if $ENV{IDEM_DIFF_INJECT} && $db->{name} eq 'portable';
	$db->{sym} = { F => {}, L => {}, E => {} };
	$db->{count} = { F => 0, L => 0, E => 0 };
	$db->{fences} = {};         # "scope\0key" => [fences granted, in order]
	$db->{fence_log} = [];      # [ "scope\0key", fence ] in order
	$db->{events} = [];         # outbox ids in the order first seen
	$db->{leases} = {};         # outbox id => [lease fences, in order]
	$db->{last_leased} = undef; # the last event an outbox_lease handed out
	$db->{order_faults} = [];   # a granted fence not above every earlier one of its key
}

sub symbol {
	my ($db, $space, $value) = @_;
	return undef unless defined $value;
	return $db->{sym}{$space}{$value} //= $space . ++$db->{count}{$space};
}

sub quote_arg {
	my ($db, $a) = @_;
	my ($type, $value) = @$a;
	my $dbh = $db->{dbh};
	if ($type eq 'fence') {
		my (undef, $ref, $scope, $key) = @$a;
		my $mine = $db->{fences}{ ($scope // '') . "\0" . ($key // '') } // [];
		return 'NULL::bigint' if $ref eq 'null';
		return "'$ref'::bigint" if $ref eq '0' || $ref eq '-1';
		my $v = $ref eq 'cur' ? $mine->[-1] : $ref eq 'prev' ? $mine->[-2] : undef;
		if ($ref eq 'other') {
			my ($other) = grep { $_->[0] ne ($scope // '') . "\0" . ($key // '') } reverse @{ $db->{fence_log} };
			$v = $other->[1] if $other;
		}
		return ($v // $max_bigint) . '::bigint';
	}
	if ($type eq 'event') {
		return 'NULL::bigint' if $value eq 'null';
		return (event_id($db, $value) // $max_bigint) . '::bigint';
	}
	if ($type eq 'lease') {
		my (undef, $ref, $event) = @$a;
		return 'NULL::bigint' if $ref eq 'null';
		my $id = event_id($db, $event->[1]);
		my $leases = defined $id ? $db->{leases}{$id} // [] : [];
		my $v = $ref eq 'cur' ? $leases->[-1] : $ref eq 'prev' ? $leases->[-2] : undef;
		return ($v // $max_bigint) . '::bigint';
	}
	return "NULL::$type" unless defined $value;
	if ($type eq 'timestamptz') {
		return $value eq 'past' ? q{(pg_catalog.now() - interval '1 hour')} : q{(pg_catalog.now() + interval '1 hour')};
	}
	return $dbh->quote($value) . "::$type";
}

sub event_id {
	my ($db, $ref) = @_;
	my $events = $db->{events};
	return $db->{last_leased} if $ref eq 'leased';
	return $ref =~ /^\d+$/ && @$events ? $events->[ $ref % @$events ] : undef;
}

my %returns_rows = map { $_ => 1 } qw(claim_idempotency_key claim_or_wait mark_succeeded_returning
  mark_failed_returning peek lookup evict force_expire outbox_lease);

sub render {
	my ($db, $c) = @_;
	my $fn = $c->{fn};
	my $dbh = $db->{dbh};
	if ($fn eq 'time_passes') {
		my $by = "interval '$c->{by}'";
		return join ' ', map { "UPDATE $_->[0] SET " . join(', ', map { "$_ = $_ - $by" } @{ $_->[1] }) . ';' } (
			[ 'idem.idempotency_request', [qw(claimed_at locked_until created_at updated_at finished_at expires_at)] ],
			[ 'idem.consumed_message', [qw(consumed_at expires_at)] ],
			[ 'idem.outbox_event', [qw(available_at leased_until created_at published_at)] ]);
	}
	if ($fn eq 'setting') {
		return defined $c->{value} ? "SET $c->{name} = " . $dbh->quote($c->{value}) : "RESET $c->{name}";
	}
	if ($fn eq 'policy_delete') {
		return 'DELETE FROM idem.scope_policy WHERE scope = ' . $dbh->quote($c->{scope});
	}
	if ($fn eq 'policy') {
		my %p = %{ $c->{policy} };
		my @cols = grep { $_ ne 'scope' } sort keys %p;
		my %type = (lock_timeout => 'interval', retention => 'interval', keep_forever => 'boolean',
			max_attempts => 'integer', bind_lock_to_session => 'boolean');
		return 'INSERT INTO idem.scope_policy (scope' . join('', map { ", $_" } @cols) . ') VALUES ('
		  . $dbh->quote($p{scope}) . join('', map { ', ' . $dbh->quote($p{$_}) . "::$type{$_}" } @cols)
		  . ') ON CONFLICT (scope) DO UPDATE SET '
		  . join(', ', map { "$_ = EXCLUDED.$_" } qw(lock_timeout retention keep_forever max_attempts bind_lock_to_session));
	}
	my @args = map { quote_arg($db, $_) } @{ $c->{pos} };
	push @args, map { "$_->[0] => " . quote_arg($db, $_->[1]) } @{ $c->{named} // [] };
	my $call = "idem.$fn(" . join(', ', @args) . ')';
	return $returns_rows{$fn}
	  ? "SELECT coalesce(pg_catalog.json_agg(r), '[]')::text FROM $call r"
	  : "SELECT pg_catalog.to_json(r)::text FROM $call r";
}

my %timestamp_field = map { $_ => 1 } qw(claimed_at locked_until created_at updated_at finished_at expires_at
  consumed_at available_at leased_until published_at extend_lock);

sub time_class {
	my ($v) = @_;
	return undef unless defined $v;
	return $v if $v =~ /^-?infinity$/;
	my ($y, $mo, $d, $h, $mi, $s, $frac, $tz) =
	  $v =~ /^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(\.\d+)?([+-]\d\d(?::?\d\d)?)?$/
	  or return "unparsed time $v";
	my $t = timegm($s, $mi, $h, $d, $mo - 1, $y) + ($frac // 0);
	if (defined $tz && $tz =~ /^([+-])(\d\d):?(\d\d)?$/) {
		$t -= ($1 eq '-' ? -1 : 1) * ($2 * 3600 + ($3 // 0) * 60);
	}
	my $delta = $t - Time::HiRes::time();
	return $delta < -10 ? 'past' : $delta > 10 ? 'future' : 'near';
}

# Replaces what differs by design with its symbol or class (see the top);
# records the fences, events and leases the call handed out.
sub normalize {
	my ($db, $c, $value, $field, $row) = @_;
	my $fn = $c->{fn};
	if (ref $value eq 'ARRAY') {
		return [ map { normalize($db, $c, $_, $field) } @$value ];
	}
	if (ref $value eq 'HASH') {
		my $outbox_row = exists $value->{delivery_key};
		my %out;
		# outbox ids before lease fences, so an event's lease is recorded under its id
		for my $f (sort { ($b eq 'id') <=> ($a eq 'id') || $a cmp $b } keys %$value) {
			$out{$f} = normalize($db, $c, $value->{$f}, $f, $value);
		}
		return \%out;
	}
	return $value unless defined $field;
	if ($timestamp_field{$field}) {
		return time_class($value);
	}
	if ($field eq 'bound_session') {
		return defined $value ? 'bound' : undef;
	}
	if ($field eq 'fence') {
		if (defined $value && $fn =~ /^claim_/) {
			my $k = ($c->{pos}[0][1] // '') . "\0" . ($c->{pos}[1][1] // '');
			my $mine = $db->{fences}{$k} //= [];
			push @{ $db->{order_faults} }, "$fn: fence $value after $mine->[-1]"
			  if @$mine && $value <= $mine->[-1];
			push @$mine, $value;
			push @{ $db->{fence_log} }, [ $k, $value ];
		}
		return symbol($db, 'F', $value);
	}
	if ($field eq 'id' && $row && exists $row->{delivery_key} || $field eq 'outbox_put') {
		push @{ $db->{events} }, $value if defined $value && !exists $db->{sym}{E}{$value};
		return symbol($db, 'E', $value);
	}
	if ($field eq 'lease_fence') {
		if (defined $value && $fn eq 'outbox_lease') {
			my $list = $db->{leases}{ $row->{id} } //= [];
			$db->{last_leased} = $row->{id};
			push @$list, $value unless @$list && $list->[-1] == $value;
		}
		return symbol($db, 'L', $value);
	}
	return $value;
}

# An error as SQLSTATE, message, detail and hint, with the fences, lease
# fences and event ids it names as their symbols; CONTEXT dropped.
sub error_text {
	my ($db, $c, $dbh) = @_;
	my $text = $dbh->errstr // '';
	$text =~ s/\nCONTEXT:.*//s;
	$text =~ s/\s+$//;
	my $space = $c->{fn} =~ /^outbox_/ ? 'L' : 'F';
	my $sym = sub { my ($s, $v) = @_; return exists $db->{sym}{$s}{$v} ? $db->{sym}{$s}{$v} : $v; };
	$text =~ s/(outbox_\w+\()(\d+), (\d+)\)/$1 . $sym->('E', $2) . ', ' . $sym->('L', $3) . ')'/ge;
	$text =~ s/\bevent (\d+)/'event ' . $sym->('E', $1)/ge;
	$text =~ s/\bfence (\d+)/'fence ' . $sym->($space, $1)/ge;
	return 'ERROR ' . ($dbh->state // '?') . ": $text";
}

my $json = JSON::PP->new->canonical->allow_nonref;

# Runs one call; returns its SQL and the normalised answer (a string).
sub run_call {
	my ($db, $c) = @_;
	my $dbh = $db->{dbh};
	if ($c->{fn} eq 'transaction') {
		$dbh->begin_work;
		my @got = map { [ run_call($db, $_) ] } @{ $c->{calls} };
		if ($c->{end} eq 'commit') {
			local $SIG{__WARN__} = sub { };
			$dbh->commit or push @got, [ 'COMMIT', error_text($db, $c, $dbh) ];
		} else {
			$dbh->rollback;
		}
		return (join("\n    ", map { $_->[0] } @got),
			join("\n      => ", map { $_->[1] } @got) . ($c->{end} eq 'commit' ? ' (committed)' : ' (rolled back)'));
	}
	my $sql = render($db, $c);
	my @notices;
	local $SIG{__WARN__} = sub { my $m = shift; $m =~ s/\s+$//; push @notices, $m };
	if ($c->{tx}) {
		$dbh->begin_work;
		$dbh->do('SET TRANSACTION READ ONLY') if $c->{tx} eq 'read_only';
	}
	my $answer;
	if ($c->{fn} =~ /^(time_passes|setting|policy|policy_delete)$/) {
		$answer = defined $dbh->do($sql) ? 'ok' : error_text($db, $c, $dbh);
	} else {
		my $row = $dbh->selectrow_arrayref($sql);
		if (!$row) {
			$answer = error_text($db, $c, $dbh);
		} else {
			my $value = defined $row->[0] ? $json->decode($row->[0]) : undef;
			# One lease's events in id order: the statement (the same in both
			# engines) returns them, and draws their lease fences, in the
			# order of its join's plan, which the contract leaves open.
			$value = [ sort { $a->{id} <=> $b->{id} } @$value ] if $c->{fn} eq 'outbox_lease' && ref $value eq 'ARRAY';
			$answer = $json->encode(normalize($db, $c, $value, $returns_rows{ $c->{fn} } ? undef : $c->{fn}));
		}
	}
	if ($c->{tx}) {
		$c->{tx} eq 'rollback' ? $dbh->rollback : $dbh->commit;
		$answer .= ' (' . ($c->{tx} eq 'rollback' ? 'rolled back' : 'read only') . ')';
	}
	$answer .= join '', map { "\n  $_" } @notices;
	return ($sql, $answer);
}

# Every row of idem's three tables and the scope policies, normalised.
sub final_rows {
	my ($db) = @_;
	my $dbh = $db->{dbh};
	my %rows;
	for my $t ([ 'idempotency_request', 'scope, key' ], [ 'consumed_message', 'consumer, message_id' ],
		[ 'outbox_event', 'scope, key, event_type' ], [ 'scope_policy', 'scope' ]) {
		my ($text) = $dbh->selectrow_array(
			"SELECT coalesce(pg_catalog.json_agg(r ORDER BY $t->[1]), '[]')::text FROM idem.$t->[0] r");
		$rows{ $t->[0] } = defined $text
		  ? normalize($db, { fn => 'rows' }, $json->decode($text)) : 'ERROR ' . $dbh->errstr;
	}
	return $json->encode(\%rows);
}

# What the calls answered (kind, SQLSTATE, or a short form), counted per
# function: the closing note shows which states the sequences reached.
my (%coverage, $counting);
sub count_coverage {
	my ($c, $answer) = @_;
	return unless $counting;
	my $what = $answer =~ /^ERROR (\w+)/ ? $1
	  : $answer =~ /"kind":"(\w+)"/ ? $1
	  : $answer =~ /^\[\]/ ? 'no rows'
	  : $answer =~ /^(true|false|null|ok)\b/ ? $1
	  : $answer =~ /^\[/ ? 'rows'
	  : $answer =~ /^(\d+)/ ? ($1 > 0 ? 'count > 0' : '0')
	  : 'value';
	$what .= ' (rolled back)' if $answer =~ /\(rolled back\)$/;
	$what = $c->{end} if $c->{fn} eq 'transaction';
	$coverage{ $c->{fn} }{$what}++;
}

# Runs a sequence in both databases, call by call. Returns undef when they
# agree, else what differed, with both transcripts.
sub mismatch_of {
	my ($calls) = @_;
	reset_db($_) for @dbs;
	my (@transcript, $first);
	for my $i (0 .. $#$calls) {
		my @got = map { [ run_call($_, $calls->[$i]) ] } @dbs;
		push @transcript, \@got;
		count_coverage($calls->[$i], $got[0][1]);
		if ($got[0][1] ne $got[1][1]) {
			$first = "call " . ($i + 1) . " ($calls->[$i]{fn}) answered differently";
			last;
		}
	}
	my @rows = map { final_rows($_) } @dbs;
	$first //= 'the final rows differ' if $rows[0] ne $rows[1];
	for my $db (@dbs) {
		$first //= "$db->{name}: a fence did not rise: $db->{order_faults}[0]" if @{ $db->{order_faults} };
	}
	return undef unless $first;
	return { what => $first, transcript => \@transcript, rows => \@rows, calls => $calls };
}

# The shortest prefix that still differs, then without each single call
# (and each call inside a transaction) that is not needed for the difference.
sub shrink {
	my ($calls) = @_;
	my $found;
	for my $n (1 .. @$calls) {
		my $prefix = [ @$calls[ 0 .. $n - 1 ] ];
		if (mismatch_of($prefix)) { $found = $prefix; last; }
	}
	$found //= $calls;
	for (my $i = $#$found - 1; $i >= 0; $i--) {
		my $without = [ @$found[ grep { $_ != $i } 0 .. $#$found ] ];
		$found = $without if mismatch_of($without);
	}
	# Then the calls inside a transaction, one at a time.
	for my $t (grep { $found->[$_]{fn} eq 'transaction' } 0 .. $#$found) {
		my $inner = $found->[$t]{calls};
		for (my $i = $#$inner; $i >= 0 && @$inner > 1; $i--) {
			my %smaller = (%{ $found->[$t] }, calls => [ @$inner[ grep { $_ != $i } 0 .. $#$inner ] ]);
			my $without = [ @$found[ 0 .. $t - 1 ], \%smaller, @$found[ $t + 1 .. $#$found ] ];
			next unless mismatch_of($without);
			$found = $without;
			$inner = $smaller{calls};
		}
	}
	return mismatch_of($found);
}

sub describe_call {
	my ($c) = @_;
	return "transaction of " . join(', ', map { describe_call($_) } @{ $c->{calls} }) . ", $c->{end}"
	  if $c->{fn} eq 'transaction';
	return "$c->{fn}" . ($c->{tx} ? " [$c->{tx}]" : '');
}

# The rows that differ, field by field.
sub rows_difference {
	my ($cpp, $portable) = map { $json->decode($_) } @_;
	my @lines = ('  final rows that differ:');
	for my $table (sort keys %$cpp) {
		my ($a, $b) = ($cpp->{$table}, $portable->{$table});
		if (ref $a ne 'ARRAY' || ref $b ne 'ARRAY') {
			push @lines, "    $table: cpp " . $json->encode($a) . ', portable ' . $json->encode($b)
			  if $json->encode($a) ne $json->encode($b);
			next;
		}
		for my $i (0 .. ($#$a > $#$b ? $#$a : $#$b)) {
			my ($x, $y) = ($a->[$i], $b->[$i]);
			next if $json->encode($x) eq $json->encode($y);
			if (!$x || !$y) {
				push @lines, "    $table row " . ($i + 1) . ': cpp ' . $json->encode($x) . ', portable ' . $json->encode($y);
				next;
			}
			my $name = join '/', grep { defined } map { $x->{$_} } qw(scope key consumer message_id event_type);
			push @lines, "    $table $name: " . join(', ', map { "$_ cpp " . $json->encode($x->{$_}) . ' portable '
				  . $json->encode($y->{$_}) } grep { $json->encode($x->{$_}) ne $json->encode($y->{$_}) } sort keys %$x);
		}
	}
	return @lines;
}

sub report {
	my ($m) = @_;
	my @lines = ("$m->{what}; the shortest sequence that shows it (" . scalar(@{ $m->{calls} }) . ' calls):');
	for my $i (0 .. $#{ $m->{transcript} }) {
		my ($cpp, $portable) = @{ $m->{transcript}[$i] };
		push @lines, sprintf('%2d. %s', $i + 1, describe_call($m->{calls}[$i]));
		push @lines, "    cpp:      $cpp->[0]", "      => $cpp->[1]";
		push @lines, "    portable: $portable->[0]", "      => $portable->[1]";
	}
	push @lines, rows_difference(@{ $m->{rows} }) if $m->{rows}[0] ne $m->{rows}[1];
	return join "\n", @lines;
}

# ---- the run ----------------------------------------------------------------

my ($mismatched, %seen) = (0);
my $started = Time::HiRes::time();
for my $n (defined $only ? ($only) : (1 .. $sequences)) {
	my $calls = gen_sequence($n);
	$counting = 1;
	my $m = mismatch_of($calls);
	$counting = 0;
	if ($ENV{IDEM_DIFF_TRACE}) {
		reset_db($_) for @dbs;
		for my $c (@$calls) {
			my ($sql, $answer) = run_call($dbs[0], $c);
			note Encode::encode('UTF-8', "$sql\n  => $answer");
		}
	}
	if (!$m) {
		pass("sequence $n: same answers and rows");
		next;
	}
	$mismatched++;
	my $signature = $m->{what} =~ s/^call \d+ //r;
	if ($seen{$signature}++ || $mismatched > $shown_mismatches) {
		fail("sequence $n: $m->{what} (shown above or not shown: too many)");
		next;
	}
	fail("sequence $n (IDEM_DIFF_SEED=$seed IDEM_DIFF_ONLY=$n): $m->{what}");
	# As bytes: Test::More's handles (PostgreSQL::Test::Utils tees them) take no encoding layer.
	diag Encode::encode('UTF-8', report(shrink($calls) // $m));
}
for my $fn (sort keys %coverage) {
	note "$fn: " . join(', ', map { "$_ $coverage{$fn}{$_}" } sort keys %{ $coverage{$fn} });
}
note sprintf('%d sequences in %.1f s, %d mismatched', defined $only ? 1 : $sequences,
	Time::HiRes::time() - $started, $mismatched);

$_->{dbh}->disconnect for @dbs;
$node->stop;
$portable_node->stop if $apart;
done_testing();
