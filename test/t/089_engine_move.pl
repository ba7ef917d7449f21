# Keys survive a change of engine, both ways: a database's keys in every
# state are moved from the C++ engine to the portable engine, and from the
# portable engine to the C++ engine, with the recipe of README.md "Moving
# between engines" (a data-only pg_dump of idem's tables and sequences,
# restored into a database where the other engine is installed, by the
# role that owns idem there). In the new database every finished key
# replays the same answer, a stale fence is still refused, every new fence
# is greater than every old one, an in-flight key whose lock ran out is
# taken over with its recovery point, a live lock still holds and its owner
# completes it with its old fence, as the owner of a key swept as abandoned
# does, a key bound to a session that is gone is
# stale, an expired key starts afresh, scope policies are in force, and
# consumed messages and outbox events (ids, lease fences) carry on.
#
# IDEM_MOVE_BOTH_CPP=1 moves from the C++ engine to the C++ engine (the
# test's own check). Without dist/idem-portable.sql the test is skipped.
use strict;
use warnings;
use DBI;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $both_cpp = $ENV{IDEM_MOVE_BOTH_CPP};
my $tree = $ENV{IDEM_TREE} // '.';
my $portable_sql = "$tree/dist/idem-portable.sql";
plan skip_all => "$portable_sql is absent (make portable writes it)"
  unless $both_cpp || -f $portable_sql;

my $node = PostgreSQL::Test::Cluster->new('engine_move');
$node->init;
# No worker: nothing may sweep or purge the keys between the steps.
$node->append_conf('postgresql.conf', <<'CONF');
shared_preload_libraries = 'idem'
idem.worker_enabled = off
CONF
$node->start;
# pg_read_all_stats: the portable engine tells a bound key's session is gone
# from pg_stat_activity's backend_start, which its owner sees for other
# roles' sessions only with it (without it, bound keys wait for their locks).
$node->safe_psql('postgres', 'CREATE ROLE portable_owner LOGIN; GRANT pg_read_all_stats TO portable_owner');

# A database with an engine; returns the role that owns idem there (the
# one that restores the data).
sub make_database {
	my ($name, $engine) = @_;
	if ($engine eq 'cpp' || $both_cpp) {
		$node->safe_psql('postgres', "CREATE DATABASE $name");
		$node->safe_psql($name, 'CREATE EXTENSION idem');
		return $node->safe_psql('postgres', 'SELECT current_user');
	}
	$node->safe_psql('postgres', "CREATE DATABASE $name OWNER portable_owner");
	my ($ret, $out, $err) = $node->psql($name, undef,
		extra_params => [ '-U', 'portable_owner', '-v', 'ON_ERROR_STOP=1', '-f', $portable_sql ]);
	is($ret, 0, "$name: the portable engine installs as the database owner") or diag $err;
	return 'portable_owner';
}

sub connect_db {
	my ($name) = @_;
	my $dbh = DBI->connect('dbi:Pg:dbname=' . $name . ';host=' . $node->host . ';port=' . $node->port,
		'', '', { AutoCommit => 1, RaiseError => 1, PrintError => 0, pg_enable_utf8 => 1 })
	  or die "connect $name: $DBI::errstr";
	$dbh->do(q{SET TimeZone = 'UTC'});
	return $dbh;
}

sub claim_json {
	my ($dbh, $scope, $key, $hash, $extra) = @_;
	return $dbh->selectrow_array(
		'SELECT pg_catalog.to_jsonb(c)::text FROM idem.claim_idempotency_key(?, ?, ?' . ($extra // '') . ') c',
		undef, $scope, $key, $hash);
}

sub claim_of {
	my ($dbh, $scope, $key, $hash, $extra) = @_;
	return $dbh->selectrow_hashref(
		'SELECT * FROM idem.claim_idempotency_key(?, ?, ?' . ($extra // '') . ')', undef, $scope, $key, $hash);
}

# The SQLSTATE $sql fails with ('' when it does not fail).
sub sqlstate_of {
	my ($dbh, $sql, @bind) = @_;
	local $dbh->{RaiseError} = 0;
	return defined $dbh->do($sql, undef, @bind) ? '' : $dbh->state;
}

# Keys in every state, scope policies, a consumed message and outbox
# events, made in the source database. Returns what the checks compare.
sub make_keys {
	my ($name) = @_;
	my $dbh = connect_db($name);
	my %k;
	my $owner = sub {    # a claim that must grant ownership; its fence
		my ($key, $extra) = @_;
		my $c = claim_of($dbh, 'mv', $key, "h-$key", $extra);
		die "mv/$key: $c->{kind}" unless $c->{kind} eq 'new_claim';
		return $c->{fence};
	};

	my $f = $owner->('succeeded');
	$dbh->do(q{SELECT idem.mark_succeeded('mv', 'succeeded', ?, 201, '{"charge": "ch_1"}', 'charge', 'ch_1')},
		undef, $f);
	$f = $owner->('final');
	$dbh->do(q{SELECT idem.mark_failed('mv', 'final', ?, false, 'card_declined', 'the bank said no', 402,
		'{"error": "declined"}')}, undef, $f);
	$k{retry_fence} = $owner->('retry');
	$dbh->do(q{SELECT idem.set_recovery_point('mv', 'retry', ?, 'charged')}, undef, $k{retry_fence});
	$dbh->do(q{SELECT idem.mark_failed('mv', 'retry', ?, true, 'timeout')}, undef, $k{retry_fence});
	$k{live_fence} = $owner->('live', q{, lock_timeout => '1 hour'});
	$dbh->do(q{SELECT idem.set_recovery_point('mv', 'live', ?, 'charged')}, undef, $k{live_fence});
	# Swept as abandoned (its lock ran out), not claimed since: its owner
	# may still complete it, in the new database too.
	$k{swept_fence} = $owner->('swept', q{, lock_timeout => '1 microsecond'});
	$dbh->do(q{SELECT idem.set_recovery_point('mv', 'swept', ?, 'charged')}, undef, $k{swept_fence});
	my ($swept) = $dbh->selectrow_array(q{SELECT idem.sweep_stale()});
	die "swept $swept keys" unless $swept == 1;
	$k{stale_fence} = $owner->('stale', q{, lock_timeout => '1 microsecond'});
	$dbh->do(q{SELECT idem.set_recovery_point('mv', 'stale', ?, 'shipped')}, undef, $k{stale_fence});
	$f = $owner->('expired', q{, retention => '1 microsecond'});
	$dbh->do(q{SELECT idem.mark_succeeded('mv', 'expired', ?, 200)}, undef, $f);

	# Bound to a session that then ends: stale wherever the key goes.
	my $bound = connect_db($name);
	$bound->do('SET idem.bind_lock_to_session = on');
	my $c = claim_of($bound, 'mv', 'bound', 'h-bound', q{, lock_timeout => '1 hour'});
	die "mv/bound: $c->{kind}" unless $c->{kind} eq 'new_claim';
	$k{bound_fence} = $c->{fence};
	$bound->disconnect;

	# A scope with a policy: an hour's lock, two attempts at most; its key
	# "poison" has had both.
	$dbh->do(q{INSERT INTO idem.scope_policy (scope, lock_timeout, max_attempts) VALUES ('pol', '1 hour', 2)});
	for my $attempt (1, 2) {
		$c = claim_of($dbh, 'pol', 'poison', 'h', q{, lock_timeout => '1 microsecond'});
		die "pol/poison attempt $attempt: $c->{kind}" unless $c->{kind} eq ($attempt == 1 ? 'new_claim' : 'processing_stale');
	}

	$dbh->do(q{SELECT idem.consume_once('billing', 'm1', 'h-m1')});
	$dbh->do(q{SELECT idem.set_consumed_result('billing', 'm1', 'invoice', 'inv-1')});
	($k{event_id}) = $dbh->selectrow_array(q{SELECT idem.outbox_put('mv', 'succeeded', 'charged', '{"n": 1}')});
	my ($leased_id, $lease_fence) = $dbh->selectrow_array(
		q{SELECT id, lease_fence FROM idem.outbox_lease(1, '1 microsecond')});
	die "leased $leased_id, put $k{event_id}" unless $leased_id == $k{event_id};
	$k{lease_fence} = $lease_fence;

	# What the finished keys answer before the move, and the highest fence.
	$k{answer}{$_} = claim_json($dbh, 'mv', $_, "h-$_") for qw(succeeded final);
	($k{max_fence}) = $dbh->selectrow_array(
		q{SELECT greatest((SELECT max(fence) FROM idem.idempotency_request), (SELECT last_value FROM idem.fence_seq))});
	($k{live_until}) = $dbh->selectrow_array(
		q{SELECT locked_until::text FROM idem.idempotency_request WHERE scope = 'mv' AND key = 'live'});
	# Whether pg_dump carries the inbox and the outbox from here: an extension
	# marks them from 1.2 on; a SQL-file install's tables are always dumped.
	($k{messages_dumped}) = $dbh->selectrow_array(q{
		SELECT coalesce((SELECT 'idem.outbox_event'::regclass = ANY (extconfig)
		                   AND 'idem.consumed_message'::regclass = ANY (extconfig)
		                   FROM pg_extension WHERE extname = 'idem'), true)});
	$dbh->disconnect;
	return \%k;
}

# The recipe of README.md "Moving between engines": idem's tables and
# sequences, data only, restored in one transaction by idem's owner.
my @moved = qw(idem.idempotency_request idem.fence_seq idem.scope_policy idem.consumed_message
  idem.outbox_event idem.outbox_event_id_seq idem.outbox_lease_fence_seq);

sub move {
	my ($from, $to, $to_owner) = @_;
	my $file = PostgreSQL::Test::Utils::tempdir() . "/$from.sql";
	$node->command_ok([ 'pg_dump', '--data-only', (map { ('--table', $_) } @moved),
			'-d', $node->connstr($from), '-f', $file ], "$from: pg_dump --data-only of idem's tables");
	$node->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '--single-transaction',
			'-d', $node->connstr($to) . " user=$to_owner", '-f', $file ], "$to: the data restores as $to_owner");
}

sub check_keys {
	my ($name, $k, $what) = @_;
	my $dbh = connect_db($name);
	for my $key (qw(succeeded final)) {
		is(claim_json($dbh, 'mv', $key, "h-$key"), $k->{answer}{$key}, "$what: mv/$key replays the same answer");
	}
	is(sqlstate_of($dbh, q{SELECT idem.claim_idempotency_key('mv', 'succeeded', 'other')}), 'P4002',
		"$what: mv/succeeded still refuses another request");

	my $c = claim_of($dbh, 'mv', 'retry', 'h-retry');
	is("$c->{kind} $c->{recovery_point} $c->{attempt_count}", 'retryable_failure charged 2',
		"$what: mv/retry is taken over from its recovery point");
	cmp_ok($c->{fence}, '>', $k->{max_fence}, "$what: the new fence is greater than every old one");
	is(sqlstate_of($dbh, q{SELECT idem.mark_succeeded('mv', 'retry', ?, 200)}, $k->{retry_fence}), 'P4012',
		"$what: the old owner's fence of mv/retry is stale");

	$c = claim_of($dbh, 'mv', 'stale', 'h-stale');
	is("$c->{kind} $c->{recovery_point} $c->{attempt_count}", 'processing_stale shipped 2',
		"$what: mv/stale, its lock run out, is taken over from its recovery point");
	cmp_ok($c->{fence}, '>', $k->{max_fence}, "$what: its new fence is greater than every old one");
	is(sqlstate_of($dbh, q{SELECT idem.set_recovery_point('mv', 'stale', ?, 'x')}, $k->{stale_fence}), 'P4012',
		"$what: the zombie's fence of mv/stale is refused");

	$c = claim_of($dbh, 'mv', 'live', 'h-live');
	is($c->{kind}, 'processing_active', "$what: mv/live is still locked");
	my ($until) = $dbh->selectrow_array(q{SELECT ?::timestamptz = ?::timestamptz}, undef, $c->{locked_until},
		$k->{live_until});
	ok($until, "$what: until the same moment");
	is(sqlstate_of($dbh, q{SELECT idem.mark_succeeded('mv', 'live', ?, 200, '{"done": true}')}, $k->{live_fence}), '',
		"$what: mv/live's owner completes it with its old fence");
	is(claim_of($dbh, 'mv', 'live', 'h-live')->{kind}, 'replay_success', "$what: and mv/live replays");

	is(sqlstate_of($dbh, q{SELECT idem.mark_succeeded('mv', 'swept', ?, 200)}, $k->{swept_fence}), '',
		"$what: mv/swept, abandoned and not claimed since, is completed by its owner");
	is(claim_of($dbh, 'mv', 'swept', 'h-swept')->{kind}, 'replay_success', "$what: and mv/swept replays");

	$c = claim_of($dbh, 'mv', 'bound', 'h-bound');
	is($c->{kind}, 'processing_stale', "$what: mv/bound, its session gone, is stale although its lock is not over");
	cmp_ok($c->{fence}, '>', $k->{max_fence}, "$what: with a new fence");

	is(claim_of($dbh, 'mv', 'expired', 'another request')->{kind}, 'new_claim',
		"$what: mv/expired starts afresh");

	$c = claim_of($dbh, 'pol', 'poison', 'h');
	is("$c->{kind} $c->{failure_code}", 'final_failure too_many_attempts',
		"$what: pol's max_attempts stops the third attempt of pol/poison");
	$c = claim_of($dbh, 'pol', 'new', 'h');
	my ($hour) = $dbh->selectrow_array(q{SELECT ?::timestamptz > now() + interval '50 minutes'}, undef,
		$c->{locked_until});
	ok($hour, "$what: pol's lock_timeout of an hour is in force");

	{
		ok($k->{messages_dumped}, "$what: the source marks the inbox and the outbox for pg_dump (1.2)");
		my ($first_id) = $dbh->selectrow_array(q{SELECT idem.outbox_put('mv', 'new', 'charged', '{"n": 2}')});
		cmp_ok($first_id, '>', $k->{event_id}, "$what: a new outbox event's id is greater than the old ones");
		is($dbh->selectrow_array(q{SELECT idem.consume_once('billing', 'm1', 'h-m1')}) ? 'consumed again' : 'false',
			'false', "$what: a consumed message is not consumed again");
		is($dbh->selectrow_array(q{SELECT idem.outbox_put('mv', 'succeeded', 'charged', '{"n": 1}')}),
			$k->{event_id}, "$what: the same outbox event keeps its id");
		my ($id, $lease_fence) = $dbh->selectrow_array(q{SELECT id, lease_fence FROM idem.outbox_lease(1)});
		is($id, $k->{event_id}, "$what: the event whose lease ran out is leased again");
		cmp_ok($lease_fence // 0, '>', $k->{lease_fence}, "$what: under a greater lease fence");
		is(sqlstate_of($dbh, q{SELECT idem.outbox_published(?, ?)}, $k->{event_id}, $k->{lease_fence}), 'P4012',
			"$what: the old lease is lost");
	}
	$dbh->disconnect;
}

# (a) from the C++ engine to the portable one, (b) back.
for my $way ([ 'cpp_a', 'cpp', 'portable_b', 'portable' ], [ 'portable_c', 'portable', 'cpp_d', 'cpp' ]) {
	my ($from, $from_engine, $to, $to_engine) = @$way;
	my $what = $both_cpp ? "$from -> $to (both C++)" : "$from_engine -> $to_engine";
	make_database($from, $from_engine);
	my $to_owner = make_database($to, $to_engine);
	my $keys = make_keys($from);
	move($from, $to, $to_owner);
	check_keys($to, $keys, $what);
}

$node->stop;
done_testing();
