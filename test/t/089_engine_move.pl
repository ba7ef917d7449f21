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
# stale, an expired key starts afresh, scope policies and scope owners are
# in force, and consumed messages and outbox events (ids, lease fences)
# carry on.
#
# IDEM_MOVE_BOTH_CPP=1 moves from the C++ engine to the C++ engine (the
# test's own check). Without dist/idem-portable.sql the test is skipped.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemEngineMove;
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

# The recipe of docs/operating.md "Moving between engines": idem's tables
# and sequences, data only, restored in one transaction by idem's owner.
# The source has a policy of an owned scope, restored by an owner that is
# no member of the scope's owner (the portable engine's): the extension's
# owner may write it, whichever table's data comes first.
my @moved = qw(idem.idempotency_request idem.fence_seq idem.scope_policy idem.scope_owner idem.consumed_message
  idem.outbox_event idem.outbox_event_id_seq idem.outbox_lease_fence_seq);

sub move {
	my ($from, $to, $to_owner) = @_;
	my $file = PostgreSQL::Test::Utils::tempdir() . "/$from.sql";
	$node->command_ok([ 'pg_dump', '--data-only', (map { ('--table', $_) } @moved),
			'-d', $node->connstr($from), '-f', $file ], "$from: pg_dump --data-only of idem's tables");
	$node->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '--single-transaction',
			'-d', $node->connstr($to) . " user=$to_owner", '-f', $file ], "$to: the data restores as $to_owner");
}

# (a) from the C++ engine to the portable one, (b) back.
for my $way ([ 'cpp_a', 'cpp', 'portable_b', 'portable' ], [ 'portable_c', 'portable', 'cpp_d', 'cpp' ]) {
	my ($from, $from_engine, $to, $to_engine) = @$way;
	my $what = $both_cpp ? "$from -> $to (both C++)" : "$from_engine -> $to_engine";
	make_database($from, $from_engine);
	my $to_owner = make_database($to, $to_engine);
	my $keys = make_keys($node, $from);
	move($from, $to, $to_owner);
	check_keys($node, $to, $keys, $what);
}

$node->stop;
done_testing();
