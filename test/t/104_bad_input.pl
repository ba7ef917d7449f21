# Bad input: a SQL-level fuzzer calling every idem function with generated
# arguments (NULLs, empty and huge strings, control and multi-byte
# characters, extreme intervals, fences and limits, random and deeply nested
# JSON, numbers at the edges of double precision), from a fixed seed. Zero
# server crashes; every error carries a documented P4 SQLSTATE or a standard
# Postgres one; never P4099.
use strict;
use warnings;
use utf8;
use FindBin;
use lib $FindBin::RealBin;
use IdemProof qw(now start_node);
use PostgreSQL::Test::Utils;
use Test::More;
use DBI;

my $calls = $ENV{BAD_INPUT_CALLS} // 20000;
my $seed  = $ENV{BAD_INPUT_SEED} // 20261122;
srand($seed);

my $node = start_node('bad_input');
my $log_start = -s $node->logfile;
my $dsn = IdemProof::dsn_of($node);

sub connect_db {
	my $dbh = DBI->connect($dsn, '', '',
		{ AutoCommit => 1, RaiseError => 0, PrintError => 0, pg_enable_utf8 => 1 })
	  or die "connect: $DBI::errstr";
	$dbh->do(q{SET statement_timeout = '20s'});
	$dbh->do(q{SET client_min_messages = warning});
	return $dbh;
}
my $dbh = connect_db();
my $first_backend = $dbh->{pg_pid};

# ---- generators ---------------------------------------------------------

sub pick { return $_[ int(rand(@_)) ]; }
sub chance { return rand() < $_[0]; }

my @multibyte = ('é', '€', 'ß', 'Ω', '中', '文', '😀', '🇫🇷', "e\x{301}", "\x{202E}", "\x{FEFF}", "\x{10FFFF}");
my @controls  = map { chr } (1 .. 31, 127);

sub random_chars {
	my ($n, @alphabet) = @_;
	return join '', map { $alphabet[ int(rand(@alphabet)) ] } 1 .. $n;
}

# Any text argument: NULL, empty, tiny, control, multi-byte, at the 255
# limit, huge, or hostile-looking.
sub gen_text {
	my $r = rand();
	return undef if $r < 0.08;
	return ''    if $r < 0.14;
	return random_chars(1 + int(rand(12)), 'a' .. 'z', 0 .. 9, '-', '_') if $r < 0.40;
	return random_chars(1 + int(rand(20)), @controls, 'x') if $r < 0.48;
	return random_chars(1 + int(rand(30)), @multibyte, 'a') if $r < 0.58;
	return pick(random_chars(255, 'k'), random_chars(256, 'k'), random_chars(255, '€'),
		random_chars(256, '😀'), random_chars(254, 'k') . '😀') if $r < 0.68;
	return random_chars(100, 'a' .. 'f', '€') x (100 + int(rand(900))) if $r < 0.70;
	return 'z' x 1_000_000 if $r < 0.703;
	return pick(q{'; DROP TABLE idem.idempotency_request; --}, '%s%n%x', '\\', '"', '${x}',
		' ', "\t", 'NULL', 'null', 'finished', 'started', 'processing', "a\x{0}b" =~ s/\x{0}//r);
}

# Scope and key: mostly a small pool, so calls meet existing rows.
my @pool = map { "k$_" } 1 .. 6;
sub gen_key { return chance(0.5) ? pick(@pool) : gen_text(); }
sub gen_scope { return chance(0.6) ? pick('s1', 's2') : gen_text(); }

sub gen_interval {
	return pick(undef, '1 microsecond', '0', '-1 second', '-1 microsecond', '1 millisecond',
		'200 milliseconds', '5 minutes', '1 day', '1 mon', '1 mon -30 days', '-1 mon 31 days',
		'1000 years', '178000000 years', '-178000000 years', '2147483647 days',
		'-2147483648 months', '2147483647 hours', 'P1Y2M3DT4H5M6S', '00:00:00.000001',
		'not an interval', '');
}

my @fences;    # fences granted so far, to aim owner writes at live rows
my @owned;     # [scope, key, fence] of claims that granted ownership

# Scope, key and fence of an owner write: half the time those of a real
# claim, so the outcome arguments reach the fenced UPDATE itself.
sub gen_owner {
	return @{ $owned[ int(rand(@owned)) ] } if @owned && chance(0.5);
	return (gen_scope(), gen_key(), gen_fence());
}

sub gen_fence {
	return $fences[-1] if @fences && chance(0.3);
	return $fences[ int(rand(@fences)) ] + pick(-1, 0, 1) if @fences && chance(0.3);
	return pick(undef, 0, -1, 1, 2, '9223372036854775807', '-9223372036854775808',
		int(rand(1_000_000)));
}

sub gen_int {
	return pick(undef, '-2147483648', -1, 0, 1, 99, 100, 200, 201, 404, 599, 600, 1000,
		'2147483647', int(rand(700)));
}

sub gen_bool { return pick(undef, 'true', 'false'); }

my @edge_numbers = qw(
	0 -0 0.0 -0.0 0e0 1 -1 0.1 0.2 0.3 1.5 1e21 1e-7 1e+21 1e20 123e-20
	9007199254740991 9007199254740992 9007199254740993 -9007199254740993
	1.7976931348623157e308 -1.7976931348623157e308 1.7976931348623158e308
	1.7976931348623159e308 1e309 2.2250738585072014e-308 2.2250738585072011e-308
	4.9e-324 5e-324 -5e-324 2.4703282292062327e-324 2.4703282292062328e-324 1e-400
	123456789012345678901234567890 12345678901234567890 0.30000000000000004
	100000000000000000000 1E400 -1E400 0.000001 0.0000001);

sub gen_number {
	return pick(@edge_numbers) if chance(0.6);
	return sprintf('%.17g', (rand() - 0.5) * 10**(int(rand(600)) - 300));
}

sub json_string {
	my $s = chance(0.5) ? random_chars(int(rand(8)), 'a' .. 'z', @multibyte, @controls)
	  : pick('', '\u0041', '\ud83d\ude00', '\ud800', '\u0000', '\\"', '\n\t', '€');
	$s =~ s/([\x00-\x1f"\\])/sprintf('\\u%04x', ord $1)/ge unless $s =~ /^\\/;
	return qq{"$s"};
}

sub gen_json_value {
	my ($depth) = @_;
	my $r = rand();
	if ($depth > 0 && $r < 0.25) {
		return '[' . join(',', map { gen_json_value($depth - 1) } 1 .. int(rand(5))) . ']';
	}
	if ($depth > 0 && $r < 0.50) {
		return '{' . join(',', map { json_string() . ':' . gen_json_value($depth - 1) } 1 .. int(rand(5))) . '}';
	}
	return gen_number() if $r < 0.75;
	return json_string() if $r < 0.90;
	return pick('true', 'false', 'null');
}

# JSON text for a jsonb argument: random documents, deep nesting around the
# canonicalizer's limit and far past it, edge numbers, invalid JSON, NULL.
sub gen_json {
	my $r = rand();
	return undef if $r < 0.05;
	return gen_json_value(1 + int(rand(5))) if $r < 0.60;
	return gen_number() if $r < 0.75;
	if ($r < 0.85) {
		my $depth = pick(10, 999, 1000, 1001, 1002, 5000, 50_000);
		my ($open, $close) = chance(0.5) ? ('[', ']') : ('{"a":', '}');
		return ($open x $depth) . gen_number() . ($close x $depth);
	}
	if ($r < 0.88) {
		return '[' . join(',', (map { gen_number() } 1 .. 100) x 200) . ']';
	}
	return pick('{', '[1,]', 'nan', 'NaN', 'Infinity', '01', '1.', '.5', '+1', '"\ud800"',
		"\"\\u0000\"", '{"a":1,"a":2}', ' ', '');
}

sub gen_bytea {
	return pick(undef, '', '\\x', '\\x00', '\\xff' x 1000, 'not hex \\x',
		'\\x' . join('', map { sprintf '%02x', int(rand(256)) } 1 .. int(rand(64))));
}

# ---- the calls ----------------------------------------------------------

my @functions = (
	[ 'claim_idempotency_key',
		q{SELECT kind::text, fence FROM idem.claim_idempotency_key($1::text, $2::text, $3::text, $4::text, $5::interval, $6::interval)},
		sub { (gen_scope(), gen_key(), chance(0.5) ? 'h' : gen_text(), gen_text(), gen_interval(), gen_interval()) } ],
	[ 'mark_succeeded',
		q{SELECT idem.mark_succeeded($1::text, $2::text, $3::bigint, $4::int, $5::jsonb, $6::text, $7::text)},
		sub { (gen_owner(), chance(0.5) ? 200 : gen_int(), gen_json(), gen_text(), gen_text()) } ],
	[ 'mark_failed',
		q{SELECT idem.mark_failed($1::text, $2::text, $3::bigint, $4::boolean, $5::text, $6::text, $7::int, $8::jsonb)},
		sub { (gen_owner(), gen_bool(), gen_text(), gen_text(), gen_int(), gen_json()) } ],
	[ 'set_recovery_point',
		q{SELECT idem.set_recovery_point($1::text, $2::text, $3::bigint, $4::text)},
		sub { (gen_owner(), chance(0.2) ? 'finished' : gen_text()) } ],
	[ 'release',
		q{SELECT idem.release($1::text, $2::text, $3::bigint)},
		sub { (gen_owner()) } ],
	[ 'peek',
		q{SELECT kind::text, fence FROM idem.peek($1::text, $2::text)},
		sub { (gen_scope(), gen_key()) } ],
	[ 'purge_expired', q{SELECT idem.purge_expired($1::int)}, sub { (gen_int()) } ],
	[ 'sweep_stale',   q{SELECT idem.sweep_stale($1::int)},   sub { (gen_int()) } ],
	[ 'request_hash(jsonb)', q{SELECT idem.request_hash($1::jsonb)}, sub { (gen_json()) } ],
	[ 'request_hash(bytea)', q{SELECT idem.request_hash($1::bytea)}, sub { (gen_bytea()) } ],
);

# Documented P4 codes, and the standard classes a bad argument may earn.
my %documented = map { $_ => 1 } qw(P4000 P4001 P4002 P4003 P4004 P4005 P4010 P4011 P4012 P4013 P4015);
sub acceptable {
	my ($state) = @_;
	return 1 if $documented{$state};
	return 1 if $state =~ /^(22|54)/;    # data exception, program limit exceeded
	return 1 if $state =~ /^(25006|40001|53200|57014)$/;
	# A CHECK of the table refusing what the argument checks let through is
	# a standard code too, but it is reported below as a finding.
	return 1 if $state =~ /^23/;
	return 0;
}

my (%histogram, %per_function, @unexpected, @check_violations, $lost_connections);
my $t_start = now();
for my $n (1 .. $calls) {
	my ($name, $sql, $args) = @{ pick(@functions) };
	my @args = $args->();
	# Now and then inside a READ ONLY transaction: only replays may succeed there.
	my $read_only = chance(0.03);
	if ($read_only) { $dbh->begin_work; $dbh->do('SET TRANSACTION READ ONLY'); }
	my $sth = $dbh->prepare_cached($sql);
	my $row = $sth ? $dbh->selectrow_arrayref($sth, undef, @args) : undef;
	my $state = $dbh->err ? ($dbh->state || 'none') : 'ok';
	if ($dbh->err && ($dbh->ping // 0) <= 0) {
		$lost_connections++;
		$state = 'connection lost';
		$dbh = connect_db();
	}
	$dbh->rollback if $read_only && !$dbh->{AutoCommit};
	if ($state eq 'ok' && $name eq 'claim_idempotency_key' && defined $row->[1]) {
		push @fences, $row->[1];
		push @owned, [ @args[ 0, 1 ], $row->[1] ];
	}
	$histogram{$state}++;
	$per_function{$name}{ $state eq 'ok' ? 'ok' : 'error' }++;
	next if $state eq 'ok';
	my $what = "$name: $state: " . (split /\n/, $dbh->errstr // $state)[0]
	  . ' args: ' . join(', ', map { defined $_ ? substr($_, 0, 40) : 'NULL' } @args);
	push @unexpected, $what unless acceptable($state);
	push @check_violations, $what if $state =~ /^23/;
}
my $elapsed = now() - $t_start;

is($lost_connections // 0, 0, 'no call lost its connection');
is($dbh->{pg_pid}, $first_backend, 'the same backend served every call');
is($histogram{P4099} // 0, 0, 'no P4099 (internal error)');
is(scalar(@unexpected), 0, 'every error carries a documented P4 SQLSTATE or a standard Postgres one');
diag($_) for @unexpected[0 .. ($#unexpected < 19 ? $#unexpected : 19)];

my $log = PostgreSQL::Test::Utils::slurp_file($node->logfile, $log_start);
my @crash_lines = $log =~ /^.*(?:terminated by signal|terminated by exception|exited with exit code|PANIC|TRAP:).*$/mg;
is(scalar(@crash_lines), 0, 'the postmaster log shows no crashed backend');
diag($_) for @crash_lines[0 .. ($#crash_lines < 9 ? $#crash_lines : 9)];
my ($rows) = $dbh->selectrow_array('SELECT count(*) FROM idem.idempotency_request');
ok(defined $rows, 'the key store is still readable');
my ($invalid) = $dbh->selectrow_array(q{
	SELECT count(*) FROM idem.idempotency_request
	 WHERE NOT (char_length(key) BETWEEN 1 AND 255 AND char_length(scope) BETWEEN 1 AND 255
	            AND fence > 0 AND ((recovery_point = 'finished') = (status = 'succeeded')))});
is($invalid, 0, 'every stored row still keeps the table invariants');

note(sprintf('bad input: %d calls (seed %d) in %.1fs, %d claims granted a fence, %d rows stored',
	$calls, $seed, $elapsed, scalar(@fences), $rows // 0));
note('bad input: per function ok/error: ' . join(', ',
	map { "$_ " . ($per_function{$_}{ok} // 0) . '/' . ($per_function{$_}{error} // 0) } sort keys %per_function));
note('bad input: SQLSTATE histogram: ' . join(', ',
	map { "$_ $histogram{$_}" } sort { $histogram{$b} <=> $histogram{$a} } keys %histogram));
note('bad input: unexpected SQLSTATEs ' . scalar(@unexpected) . ', server crashes ' . scalar(@crash_lines)
	  . ', lost connections ' . ($lost_connections // 0));
if (@check_violations) {
	note('bad input: finding: ' . scalar(@check_violations) . ' calls passed the argument checks but '
		  . 'were refused by a table CHECK (23xxx), e.g.:');
	note("bad input:   $_") for @check_violations[0 .. ($#check_violations < 2 ? $#check_violations : 2)];
}

$node->stop;
done_testing();
