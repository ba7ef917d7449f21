# Keys survive a change of engine by a plain pg_dump (schema and data, not
# data-only), both ways between extension installs of the two engines, as
# docs/operating.md "Moving between engines" tells:
#   (a) a database where idem is the portable engine, created through pg_tle,
#       is dumped with pg_dump -Fc and restored with pg_restore into a
#       cluster of the C++ installation, pg_tle and its pgtle schema left out
#       of the restore list: the dump's CREATE EXTENSION idem is then the C++
#       extension, at the same version;
#   (b) a database of the C++ extension is dumped and restored, by a role
#       granted pgtle_admin and not a superuser, into a database of the
#       portable installation where pg_tle is loaded and dist/idem-pgtle.sql
#       was run first: the dump's CREATE EXTENSION idem is then pg_tle's.
# The keys (every state, scope policies, the inbox and the outbox) and the
# checks are those of test/t/089_engine_move.pl (test/t/IdemEngineMove.pm).
use strict;
use warnings;
use File::Basename qw(dirname);
use FindBin;
use lib "$FindBin::RealBin/../../t";
use IdemEngineMove;
use IdemPortable;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

plan skip_all => 'pg_tle: SKIP (no pg_tle source: set PG_TLE_SRC, docs/testing.md)'
  unless $ENV{IDEM_PG_TLE};
my $cpp_bin = $ENV{IDEM_CPP_BIN} or BAIL_OUT('IDEM_CPP_BIN is not set');
my $pgtle_sql = tree_file('dist/idem-pgtle.sql');

# The C++ installation's cluster. No worker: nothing may sweep or purge the
# keys between the steps.
my $cpp = PostgreSQL::Test::Cluster->new('move_cpp', install_path => dirname($cpp_bin));
$cpp->init;
$cpp->append_conf('postgresql.conf', "shared_preload_libraries = 'idem'\nidem.worker_enabled = off\n");
$cpp->start;

# The portable installation's, with pg_tle. tle_admin stands for a managed
# service's customer; pg_read_all_stats lets the portable engine (running as
# tle_admin, idem's owner) tell that a bound key's session is gone.
my $tle = portable_node('move_pgtle', preload => ['pg_tle']);
$tle->safe_psql('postgres', 'CREATE ROLE tle_admin LOGIN NOSUPERUSER; GRANT pg_read_all_stats TO tle_admin');

# A database of $tle with pg_tle, where tle_admin registered idem
# (dist/idem-pgtle.sql) but did not create it.
sub pgtle_database {
	my ($name) = @_;
	$tle->safe_psql('postgres', "CREATE DATABASE $name");
	$tle->safe_psql($name, qq{CREATE EXTENSION pg_tle; GRANT pgtle_admin TO tle_admin;
		GRANT CREATE ON DATABASE $name TO tle_admin});
	my ($rc, $out, $err) = psql_file($tle, $name, 'tle_admin', $pgtle_sql);
	is($rc, 0, "$name: tle_admin registers idem with dist/idem-pgtle.sql") or diag $err;
}

# Which engine idem is in a database, by the language of its claim.
sub engine_of {
	my ($node, $db) = @_;
	return $node->safe_psql($db, q{
		SELECT e.extversion || ' ' || l.lanname || ' ' || e.extowner::regrole
		  FROM pg_extension e, pg_proc p JOIN pg_language l ON l.oid = p.prolang
		 WHERE e.extname = 'idem' AND p.oid = 'idem.claim_idempotency_key(text, text, text, text, interval, interval)'::regprocedure});
}

sub dump_db {
	my ($node, $db) = @_;
	my $file = PostgreSQL::Test::Utils::tempdir() . "/$db.dump";
	$node->command_ok([ $node->installed_command('pg_dump'), '-Fc', '-d', $node->connstr($db), '-f', $file ],
		"$db: pg_dump -Fc");
	return $file;
}

# (a) pg_tle -> C++.
pgtle_database('tle_a');
sql_as($tle, 'tle_a', 'tle_admin', 'CREATE EXTENSION idem');
is(engine_of($tle, 'tle_a'), '1.3 plpgsql tle_admin', 'tle_a: idem 1.3 is the portable engine, created by tle_admin');
my $keys = make_keys($tle, 'tle_a');
my $dump = dump_db($tle, 'tle_a');

# The restore list without pg_tle (the extension, its pgtle schema and what
# pgtle.install_extension put there): the target has the C++ extension.
# --no-owner: tle_admin, idem's owner in the source, need not exist here.
my $list = $dump =~ s/\.dump$/.list/r;
my ($all) = run_command([ $cpp->installed_command('pg_restore'), '-l', $dump ]);
my @kept = grep { !/\bpgtle\b|\bpg_tle\b/ } split /\n/, $all;
ok((grep { /EXTENSION - pg_tle\s*$/ } split /\n/, $all), 'the dump holds the pg_tle extension (left out)');
ok((grep { /EXTENSION - idem\s*$/ } @kept), 'the restore list keeps CREATE EXTENSION idem');
PostgreSQL::Test::Utils::append_to_file($list, join("\n", @kept) . "\n");
$cpp->safe_psql('postgres', 'CREATE DATABASE cpp_b');
$cpp->command_ok([ $cpp->installed_command('pg_restore'), '--exit-on-error', '--single-transaction', '--no-owner',
		'-L', $list, '-d', $cpp->connstr('cpp_b'), $dump ], 'cpp_b: pg_restore of the pg_tle database');
is(engine_of($cpp, 'cpp_b'), '1.3 c ' . $cpp->safe_psql('postgres', 'SELECT current_user'),
	'cpp_b: idem 1.3 is the C++ extension');
check_keys($cpp, 'cpp_b', $keys, 'pg_tle -> C++ (pg_dump)');

# (b) C++ -> pg_tle.
$cpp->safe_psql('postgres', 'CREATE DATABASE cpp_c');
$cpp->safe_psql('cpp_c', 'CREATE EXTENSION idem');
$keys = make_keys($cpp, 'cpp_c');
$dump = dump_db($cpp, 'cpp_c');
pgtle_database('tle_d');
$tle->command_ok([ $tle->installed_command('pg_restore'), '--exit-on-error', '--single-transaction', '--no-owner',
		'-d', $tle->connstr('tle_d') . ' user=tle_admin', $dump ], 'tle_d: pg_restore of the C++ database as tle_admin');
is(engine_of($tle, 'tle_d'), '1.3 plpgsql tle_admin', 'tle_d: idem 1.3 is the portable engine, owned by tle_admin');
check_keys($tle, 'tle_d', $keys, 'C++ -> pg_tle (pg_dump)');

ok(!$tle->log_contains(qr/terminated by signal|server process .* was terminated/), 'no backend crashed (pg_tle)');
ok(!$cpp->log_contains(qr/terminated by signal|server process .* was terminated/), 'no backend crashed (C++)');
$tle->stop;
$cpp->stop;
done_testing();
