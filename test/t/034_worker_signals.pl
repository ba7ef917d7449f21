# SIGHUP changes the naptime for the very next round; SIGTERM ends the worker
# in the middle of a large purge; a terminated worker comes back after its
# restart interval (5 s) and finishes the job. Durations are bounded below by
# what the worker must wait and above only where a wrong setting would show
# (a loaded machine may wake a process late; test 035 proves SIGTERM cuts a
# minute's pause short).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use FindBin;
use lib $FindBin::RealBin;
use IdemProof qw(poll_until);
use IdemWorkerTest qw(expired_outcomes_sql reload_and_wait wait_for_log_match);

my $node = PostgreSQL::Test::Cluster->new('worker_signals');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idem'\nidem.naptime = 1\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idem');

# The count, start and end of the worker's last completed round, read
# together (worker_status copies them under one lock).
sub last_round
{
	return split /\|/, $node->safe_psql(
		'postgres', q{
SELECT total_rounds, extract(epoch FROM last_round_start), extract(epoch FROM last_round_end)
FROM idem.worker_status WHERE database = 'postgres'});
}

sub wait_for_round_after
{
	my ($rounds) = @_;
	$node->poll_query_until('postgres',
		qq{SELECT total_rounds > $rounds FROM idem.worker_status WHERE database = 'postgres'})
	  or die 'no round completed';
}

# The pause between two consecutive rounds, the first of them ending after
# the call (so after any reload made before it): from the end of round n to
# the start of round n + 1. Should this script be so slow that it sees round
# n + 2 first, it measures the next pair instead.
sub gap_between_rounds
{
	my ($rounds) = last_round();
	wait_for_round_after($rounds);    # a round that ends after the call
	for (1 .. 10)
	{
		my ($n, undef, $end) = last_round();
		wait_for_round_after($n);
		my ($next, $start) = last_round();
		return $start - $end if $next == $n + 1;
	}
	die 'never saw two consecutive rounds';
}

sub set_and_reload { IdemWorkerTest::set_and_reload($node, @_); }

sub worker_pid
{
	return $node->safe_psql('postgres',
		q{SELECT pid FROM idem.worker_status WHERE database = 'postgres'});
}

# When the worker process now in worker_status was started, on the server's
# clock. A new worker takes its worker_status entry before it has connected
# and shows in pg_stat_activity, so this waits until it does.
my $worker_activity = q{FROM pg_stat_activity a JOIN idem.worker_status w ON a.pid = w.pid
WHERE w.database = 'postgres' AND a.backend_type = 'idem worker'};

sub worker_started_at
{
	$node->poll_query_until('postgres', "SELECT count(*) = 1 $worker_activity")
	  or die 'the worker does not show in pg_stat_activity';
	return $node->safe_psql('postgres', "SELECT extract(epoch FROM a.backend_start) $worker_activity");
}

# --- SIGHUP: naptime 1 s, then 3 s, measured between rounds.
my $gap = gap_between_rounds();
note sprintf('gap between rounds with naptime 1 s: %.3f s', $gap);
ok($gap >= 0.95 && $gap < 2.95, sprintf('naptime 1 s, shorter than the 3 s set next (%.3f s)', $gap));
set_and_reload('idem.naptime', '3s');
$gap = gap_between_rounds();
note sprintf('gap between rounds after SIGHUP set 3 s: %.3f s', $gap);
ok($gap >= 2.95 && $gap < 30,
	sprintf('after SIGHUP, naptime 3 s, not the default minute (%.3f s)', $gap));
set_and_reload('idem.naptime', '1s');

# --- SIGTERM in the middle of a large purge. A pause of a minute after its
# first full batch (idem.batch_delay) holds the round open, so it is surely
# under way when the signal comes (flat out, a backlog of small batches may
# be gone before the test looks).
set_and_reload('idem.worker_enabled', 'off');
$node->poll_query_until('postgres',
	q{SELECT state = 'disabled' FROM idem.worker_status WHERE database = 'postgres'})
  or die 'worker not disabled';
$node->safe_psql('postgres', expired_outcomes_sql('old', 200000));
$node->safe_psql('postgres', "ALTER SYSTEM SET idem.batch_size = 200");
$node->safe_psql('postgres', "ALTER SYSTEM SET idem.batch_delay = '1min'");
set_and_reload('idem.worker_enabled', 'on');
ok( $node->poll_query_until(
		'postgres', q{
SELECT state = 'working' AND (SELECT count(*) < 200000 FROM idem.idempotency_request)
FROM idem.worker_status WHERE database = 'postgres'}),
	'the purge is under way');
my $pid = worker_pid();
my $signalled = time;
kill 'TERM', $pid;
poll_until('the worker to exit after SIGTERM', sub { !kill(0, $pid) }, 0.005);
my $exited = time - $signalled;
my $left = $node->safe_psql('postgres', 'SELECT count(*) FROM idem.idempotency_request');
note sprintf('worker exited %.3f s after SIGTERM with %d rows still to purge', $exited, $left);
ok(!kill(0, $pid), 'SIGTERM ended the worker');
ok($left > 0, "in the middle of the backlog ($left rows left)");

# --- It comes back after the restart interval and finishes.
ok( $node->poll_query_until(
		'postgres', qq{SELECT pid IS NOT NULL AND pid <> $pid FROM idem.worker_status WHERE database = 'postgres'}),
	'the worker came back');
my $back = worker_started_at() - $signalled;
note sprintf('restarted %.2f s after SIGTERM', $back);
ok($back >= 4.5 && $back < 30,
	sprintf('after its restart interval of 5 s, not a minute\'s (%.2f s)', $back));
$node->safe_psql('postgres', "ALTER SYSTEM RESET idem.batch_size");
$node->safe_psql('postgres', "ALTER SYSTEM RESET idem.batch_delay");
reload_and_wait($node);
ok($node->poll_query_until('postgres', 'SELECT count(*) = 0 FROM idem.idempotency_request'),
	'and finished the purge');

# --- pg_terminate_backend: same story.
# pg_terminate_backend waits up to its timeout for the process to end (true)
# and gives up after it (false): 10 s leaves a loaded machine room to end a
# process that exits at once.
$pid = worker_pid();
my $terminated = time;
is($node->safe_psql('postgres', "SELECT pg_terminate_backend($pid, 10000)"),
	't', 'pg_terminate_backend ends the worker');
ok( $node->poll_query_until(
		'postgres', qq{SELECT pid IS NOT NULL AND pid <> $pid FROM idem.worker_status WHERE database = 'postgres'}),
	'the worker came back');
$back = worker_started_at() - $terminated;
note sprintf('restarted %.2f s after pg_terminate_backend', $back);
ok($back >= 4.5 && $back < 30, sprintf('after its restart interval (%.2f s)', $back));
is( $node->safe_psql(
		'postgres', q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'idem worker'}),
	'1', 'exactly one worker for the database');

# --- A round that fails is logged, rolled back and retried; the process
# lives on. A trigger makes every purge fail until it is dropped.
$pid = worker_pid();
my $offset = -s $node->logfile;
$node->safe_psql('postgres', q{
CREATE FUNCTION refuse_delete() RETURNS trigger LANGUAGE plpgsql AS
  $$BEGIN RAISE EXCEPTION 'deletes are refused today'; END$$;
CREATE TRIGGER refuse_delete BEFORE DELETE ON idem.idempotency_request
  FOR EACH ROW EXECUTE FUNCTION refuse_delete();
INSERT INTO idem.idempotency_request (scope, key, request_hash, status, recovery_point, fence,
    claimed_at, created_at, updated_at, finished_at, expires_at, response_code)
VALUES ('old', 'x', 'h', 'succeeded', 'finished', nextval('idem.fence_seq'),
    now() - interval '2 days', now() - interval '2 days', now() - interval '2 days',
    now() - interval '2 days', now() - interval '1 day', 200);
});
ok(wait_for_log_match($node, qr/ERROR:  deletes are refused today/, $offset),
	'the failed round logged its error');
ok(wait_for_log_match($node, qr/CONTEXT: .*idem worker round in database "postgres"/s, $offset),
	'naming the database');
$node->safe_psql('postgres', 'DROP TRIGGER refuse_delete ON idem.idempotency_request');
ok($node->poll_query_until('postgres', 'SELECT count(*) = 0 FROM idem.idempotency_request'),
	'a later round purged the row');
is(worker_pid(), $pid, 'with the same worker process');

$node->stop;
done_testing();
