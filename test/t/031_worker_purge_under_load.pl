# 200,000 expired outcomes are purged completely while 8 clients keep
# claiming and completing fresh keys: no client waits on a lock the worker
# holds (log_lock_waits with deadlock_timeout = 20 ms, shorter than one
# batch, and pg_blocking_pids sampled all through the purge), no processing
# row is purged, and the purge rate and the clients' latencies are printed.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use POSIX qw(WNOHANG);
use FindBin;
use lib $FindBin::RealBin;
use IdemWorkerTest qw(set_and_reload wait_for_round_ends);
use IdemProof qw(fork_child);

my $expired_rows = 200_000;
my $clients = 8;
my $load_tps = 400;    # all clients together: a busy service, not a saturated CPU

my $node = PostgreSQL::Test::Cluster->new('worker_purge');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'idem'
idem.naptime = 1
idem.worker_enabled = off
max_connections = 30
log_lock_waits = on
deadlock_timeout = '20ms'
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idem');

# The backlog: expired outcomes of every kind, and in-flight keys that are
# past their expiry but still locked (neither sweepable nor purgeable).
$node->safe_psql('postgres', qq{
INSERT INTO idem.idempotency_request (scope, key, request_hash, status, recovery_point, fence,
    claimed_at, created_at, updated_at, finished_at, expires_at, response_code, failure_code)
SELECT 'old', g::text, 'h', s.status::idem.idempotency_status,
    CASE WHEN s.status = 'succeeded' THEN 'finished' ELSE 'started' END,
    nextval('idem.fence_seq'), now() - interval '2 days', now() - interval '2 days',
    now() - interval '2 days', now() - interval '2 days',
    now() - interval '1 day' - g * interval '1 ms',
    CASE WHEN s.status = 'succeeded' THEN 200 END,
    CASE WHEN s.status <> 'succeeded' THEN 'boom' END
FROM generate_series(1, $expired_rows) g,
     LATERAL (SELECT (ARRAY['succeeded', 'failed_final', 'failed_retryable'])[g % 3 + 1] AS status) s;
INSERT INTO idem.idempotency_request (scope, key, request_hash, status, fence, claimed_at,
    locked_until, created_at, updated_at, expires_at)
SELECT 'inflight', g::text, 'h', 'processing', nextval('idem.fence_seq'),
    now() - interval '2 days', now() + interval '1 hour', now() - interval '2 days',
    now() - interval '2 days', now() - interval '1 day'
FROM generate_series(1, 1000) g;
});

my $script = $node->basedir . '/claim_and_complete.sql';
append_to_file($script, q{
\set k random(1, 1000000000000)
SELECT fence FROM idem.claim_idempotency_key('load', 'c' || :client_id || '-' || :k, 'h') \gset
SELECT idem.mark_succeeded('load', 'c' || :client_id || '-' || :k, :fence, 201);
});
# The load runs in back-to-back pgbench bursts until the purge is done, so it
# covers the whole purge however long a busy machine makes it take.
my $log_prefix = $node->basedir . '/txlog';
my $burst_seconds = 3;

sub start_burst
{
	my ($n) = @_;
	# fork_child: pgbench dies with the test, should the test die first.
	return fork_child("pgbench burst $n", sub {
		open(STDOUT, '>', $node->basedir . "/pgbench.$n.out") or die $!;
		open(STDERR, '>', $node->basedir . "/pgbench.$n.err") or die $!;
		exec('pgbench', '-n', '-c', $clients, '-j', 2, '-T', $burst_seconds, '-R', $load_tps,
			'-f', $script, '-l', "--log-prefix=$log_prefix$n", '-d', $node->connstr('postgres'))
		  or die "exec pgbench: $!";
	});
}

# One sample: the expired rows left, and the client backends that wait on a
# lock held by a background process (the worker, or a completer it runs)
# at this instant. Sampled every 100 ms all through the purge, it sees waits
# far shorter than log_lock_waits' 20 ms whenever they happen often.
my $blocked_sql = q{
SELECT (SELECT count(*) FROM idem.idempotency_request WHERE scope = 'old'),
       (SELECT count(*) FROM pg_stat_activity a
         WHERE a.backend_type = 'client backend' AND a.wait_event_type = 'Lock'
           AND EXISTS (SELECT FROM pg_stat_activity w
                        WHERE w.pid = ANY (pg_blocking_pids(a.pid))
                          AND w.backend_type <> 'client backend'))};
my ($samples, $blocked_samples) = (0, 0);

sub old_rows_left
{
	my ($left, $blocked) = split /\|/, $node->safe_psql('postgres', $blocked_sql);
	$samples++;
	$blocked_samples++ if $blocked > 0;
	return $left;
}

# A deadline, not a measurement: 20 batches of 10,000 take their 4 pauses
# (2 + 1 + 0.5 + 0.25 s at idem.batch_delay's default) and then go flat out.
my $purge_deadline = 2 * $PostgreSQL::Test::Utils::timeout_default;
my $log_offset = -s $node->logfile;
my ($purge_started, $purge_wall, $bursts, $bursts_ok, $clients_at_work);
$bursts_ok = 1;
for ($bursts = 0; !defined $purge_wall; $bursts++)
{
	my $pid = start_burst($bursts);
	if ($bursts == 0)
	{
		# The clients are at work (their keys are coming in) before the
		# worker starts purging.
		$clients_at_work = $node->poll_query_until('postgres',
			"SELECT count(*) >= $clients FROM idem.idempotency_request WHERE scope = 'load'");
		set_and_reload($node, 'idem.worker_enabled', 'on');
		$purge_started = time;
	}
	while (waitpid($pid, WNOHANG) == 0)
	{
		$purge_wall = time - $purge_started if !defined $purge_wall && old_rows_left() == 0;
		usleep(100_000);
	}
	$bursts_ok &&= $? == 0;
	die "the purge did not finish in $purge_deadline s" if time - $purge_started > $purge_deadline;
}
ok($clients_at_work, 'the clients were at work before the worker started purging');
ok(defined $purge_wall, "all $expired_rows expired rows purged while the clients were working");
ok($bursts_ok, "pgbench ran without errors ($bursts bursts of $burst_seconds s)");

my $processed = 0;
for my $n (0 .. $bursts - 1)
{
	my ($count) = slurp_file($node->basedir . "/pgbench.$n.out")
	  =~ /number of transactions actually processed: (\d+)/;
	$processed += $count // 0;
}
ok($processed > 0, "the clients completed $processed claims");
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FILTER (WHERE status = 'succeeded') || '/' || count(*)
FROM idem.idempotency_request WHERE scope = 'load'}),
	"$processed/$processed",
	'every key the clients claimed and completed is there, succeeded');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM idem.idempotency_request WHERE scope = 'inflight' AND status = 'processing'}),
	'1000', 'no processing row was purged (nor swept while locked)');

# The last batch committed, but the round that purged it logs only once it
# has ended: wait for that round to end and the next one to begin.
ok(wait_for_round_ends($node, 'postgres', 2), 'the worker ended the round that purged the backlog');

# Lock waits: any wait over deadlock_timeout (20 ms) is logged with who holds
# the lock. None may be held by the worker.
my $worker_pid = $node->safe_psql('postgres',
	q{SELECT pid FROM idem.worker_status WHERE database = 'postgres'});
my $log = slurp_file($node->logfile, $log_offset);
my @waits = $log =~ /(still waiting for .*)/g;
my @worker_waits = $log =~ /(Process(?:es)? holding the lock: (?:\d+, )*$worker_pid\b)/g;
note sprintf('lock waits over 20 ms during the run: %d (held by the worker: %d)',
	scalar @waits, scalar @worker_waits);
is(scalar @worker_waits, 0, 'no client waited on a lock held by the worker');
note "samples of pg_blocking_pids during the purge: $samples";
ok($samples > 0 && $blocked_samples == 0,
	"no client was seen waiting on a lock held by a background process "
	  . "($blocked_samples of $samples samples)");

# Duration of the clients' claim-and-complete transactions (pgbench's log:
# field 3 is the latency from the scheduled start, field 7 the schedule lag,
# how late pgbench itself started the transaction), printed, not asserted:
# on a loaded machine a transaction's time is the machine's, and what the
# worker could do to it, make it wait on a lock, is asserted above.
my (@latencies, @own_times);
for my $file (glob("$log_prefix*")) {
	for my $line (split /\n/, slurp_file($file)) {
		my @field = split / /, $line;
		push @latencies, $field[2] / 1000.0;
		push @own_times, ($field[2] - $field[6]) / 1000.0;
	}
}
@latencies = sort { $a <=> $b } @latencies;
@own_times = sort { $a <=> $b } @own_times;
my $max_ms = $own_times[-1];
note sprintf('client transactions: %d; own time p99 %.1f ms, max %.1f ms; '
	  . 'latency with schedule lag p99 %.1f ms, max %.1f ms',
	scalar @own_times, $own_times[int(0.99 * $#own_times)], $max_ms,
	$latencies[int(0.99 * $#latencies)], $latencies[-1]);

# The rate from the worker's own log lines (time spent in purge rounds).
my ($purged, $round_ms) = (0, 0);
while ($log =~ /idem worker for database "postgres": swept \d+ stale keys, purged (\d+) expired keys in ([0-9.]+) ms/g) {
	$purged += $1;
	$round_ms += $2;
}
is($purged, $expired_rows, 'the worker logged every purged row');
my $rate = $round_ms > 0 ? $purged / ($round_ms / 1000.0) : 0;
note sprintf('purge rate under load of %d clients: %.0f rows/s (%d rows in %.0f ms of rounds, %.2f s wall)',
	$clients, $rate, $purged, $round_ms, $purge_wall);
diag(sprintf('purge rate: %.0f rows/s under %d clients (%d rows in %.0f ms)', $rate, $clients, $purged, $round_ms));

$node->stop;
done_testing();
