# The worker survives pg_cancel_backend: between rounds the cancel has
# nothing to cancel and is dropped; during a round it aborts the batch at
# hand and the worker carries on. The same process keeps doing rounds.
# pg_terminate_backend still ends it at once, and the launcher starts a new
# one after its restart interval. The launcher shrugs off a cancel too.
# Every wait polls for its event with a deadline.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemProof qw(poll_until);
use IdemWorkerTest qw(expired_outcomes_sql set_and_reload wait_for_log_match wait_for_round_ends
  wait_for_loop_passes);

my $node = PostgreSQL::Test::Cluster->new('worker_cancel');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'idem'\nidem.naptime = 1\nautovacuum = off\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idem');

sub worker_pid {
	return $node->safe_psql('postgres',
		q{SELECT pid FROM idem.worker_status WHERE database = 'postgres'});
}

sub launcher_pid {
	return $node->safe_psql('postgres',
		q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'idem launcher'});
}

ok(wait_for_round_ends($node, 'postgres', 1), 'the worker does rounds');
my $pid = worker_pid();

# --- A cancel between rounds. The worker sleeps in its naptime (state idle,
# its waiting activity) when the cancel comes; it drops it and says so.
ok( $node->poll_query_until(
		'postgres', qq{SELECT state = 'idle' AND query = 'idem: waiting for the next round'
		                 FROM pg_stat_activity WHERE pid = $pid}),
	'the worker is between rounds');
my $offset = -s $node->logfile;
is($node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)"), 't', 'cancel sent');
ok( wait_for_log_match(
		$node,
		qr/idem worker for database "postgres" ignored a cancel request: no round was running|"idem worker" \(PID $pid\) exited/,
		$offset),
	'the worker took the cancel');
unlike(slurp_file($node->logfile, $offset), qr/ERROR|FATAL|exited/, 'as no error');
ok(wait_for_round_ends($node, 'postgres', 2), 'rounds go on');
is(worker_pid(), $pid, 'in the same process');
ok(kill(0, $pid), 'which is alive');

# --- A cancel in the middle of a round: a purge of many small batches, the
# first one followed by a pause of a minute (idem.batch_delay), which holds
# the round open. The pause (or the batch at hand) is cut short, the error
# logged, and the next rounds finish the purge in the same process.
set_and_reload($node, 'idem.worker_enabled', 'off');
ok( $node->poll_query_until(
		'postgres', q{SELECT state = 'disabled' FROM idem.worker_status WHERE database = 'postgres'}),
	'worker paused');
$node->safe_psql('postgres', expired_outcomes_sql('wc', 100000));
$node->safe_psql('postgres', 'ALTER SYSTEM SET idem.batch_size = 200');
$node->safe_psql('postgres', q{ALTER SYSTEM SET idem.batch_delay = '1min'});
set_and_reload($node, 'idem.worker_enabled', 'on');
ok( $node->poll_query_until(
		'postgres', q{
SELECT state = 'working' AND (SELECT count(*) < 100000 FROM idem.idempotency_request)
FROM idem.worker_status WHERE database = 'postgres'}),
	'the purge is under way');
$offset = -s $node->logfile;
is($node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)"), 't', 'cancel sent');
ok( wait_for_log_match(
		$node, qr/ERROR:  canceling statement due to user request\n(?:[^\n]*\n){0,4}?[^\n]*idem worker round in database "postgres"/,
		$offset),
	'the round logged the cancel');
# Full batches again, so the rest goes in a round or two.
$node->safe_psql('postgres', 'ALTER SYSTEM RESET idem.batch_size');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET idem.batch_delay');
$node->reload;
ok($node->poll_query_until('postgres', 'SELECT count(*) = 0 FROM idem.idempotency_request'),
	'later rounds finished the purge');
unlike(slurp_file($node->logfile, $offset), qr/FATAL|exited/, 'without a FATAL or an exit');
is(worker_pid(), $pid, 'in the same process');

# --- The launcher: a cancel is ignored, it keeps watching.
my $launcher = launcher_pid();
is($node->safe_psql('postgres', "SELECT pg_cancel_backend($launcher)"), 't', 'cancel sent to the launcher');
ok(wait_for_loop_passes($node, 2, "backend_type = 'idem launcher'"), 'the launcher keeps looking');
is(launcher_pid(), $launcher, 'in the same process');

# --- pg_terminate_backend still ends the worker, and the launcher starts a
# new one after worker_restart_interval.
is($node->safe_psql('postgres', "SELECT pg_terminate_backend($pid, 10000)"),
	't', 'pg_terminate_backend ends the worker');
ok(poll_until('the terminated worker to exit', sub { !kill(0, $pid) }, 0.01), 'it is gone');
ok( $node->poll_query_until(
		'postgres', qq{SELECT pid IS NOT NULL AND pid <> $pid FROM idem.worker_status WHERE database = 'postgres'}),
	'the launcher started a new worker');
ok(wait_for_round_ends($node, 'postgres', 1), 'which does rounds');
is( $node->safe_psql(
		'postgres', q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'idem worker'}),
	'1', 'exactly one worker for the database');

$node->stop;
done_testing();
