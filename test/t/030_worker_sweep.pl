# The worker sweeps a zombie key within two naptimes of its lock expiring,
# keeping fence and recovery point, and the next claim takes the key over as
# retryable_failure. Also: the settings' units and contexts, pg_stat_activity.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemWorkerTest qw(wait_for_log_match);

my $node = PostgreSQL::Test::Cluster->new('worker_sweep');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idem'\nidem.naptime = 1\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idem');

is( $node->safe_psql(
		'postgres', q{
SELECT string_agg(format('%s %s %s %s', name, context, coalesce(unit, '-'), boot_val), ', ' ORDER BY name)
FROM pg_settings WHERE name IN ('idem.database', 'idem.naptime', 'idem.batch_size', 'idem.worker_enabled')}),
	'idem.batch_size sighup - 10000, idem.database postmaster - postgres, '
	  . 'idem.naptime sighup s 60, idem.worker_enabled sighup - on',
	'settings: idem.database needs a restart, the others a reload; naptime in seconds');

ok( $node->poll_query_until(
		'postgres', q{
SELECT count(*) = 1 FROM pg_stat_activity
WHERE backend_type = 'idem worker' AND datname = 'postgres'}),
	'pg_stat_activity shows the worker with backend_type "idem worker"');
is( $node->safe_psql(
		'postgres', q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'idem launcher'}),
	'1', 'and one launcher');

# A zombie: claimed with a 1 s lock, checkpointed, never completed.
my $offset = -s $node->logfile;
my ($fence, $locked_until) = split /\|/, $node->safe_psql(
	'postgres', q{
SELECT fence, locked_until FROM idem.claim_idempotency_key('pay', 'zombie', 'h1', 'w1',
    lock_timeout => '1 second')});
$node->safe_psql('postgres',
	"SELECT idem.set_recovery_point('pay', 'zombie', $fence, 'charged')");

ok( $node->poll_query_until(
		'postgres', q{
SELECT status <> 'processing' FROM idem.idempotency_request WHERE key = 'zombie'}),
	'the zombie was swept');
my ($status, $code, $kept_fence, $point, $delay) = split /\|/, $node->safe_psql(
	'postgres', qq{
SELECT status, failure_code, fence, recovery_point,
       extract(epoch FROM finished_at - '$locked_until'::timestamptz)
FROM idem.idempotency_request WHERE key = 'zombie'});
is($status, 'failed_retryable', 'swept to failed_retryable');
is($code, 'abandoned', 'with failure_code abandoned');
is($kept_fence, $fence, 'its fence is kept');
is($point, 'charged', 'its recovery point is kept');
note sprintf('swept %.3f s after the lock expired (naptime 1 s)', $delay);
ok($delay >= 0 && $delay <= 2.0, "swept within two naptimes of the lock expiring ($delay s)");
# The round logs once it has ended, after the sweep committed.
ok( wait_for_log_match(
		$node, qr/idem worker for database "postgres": swept 1 stale keys, purged 0 expired keys in [0-9.]+ ms/,
		$offset),
	'a round that swept logged what it did');

is( $node->safe_psql(
		'postgres', qq{
SELECT kind, fence > $fence, recovery_point, attempt_count
FROM idem.claim_idempotency_key('pay', 'zombie', 'h1', 'w2')}),
	"retryable_failure|t|charged|2",
	'the next claim takes the key over as retryable_failure, resuming at the recovery point');

# A zombie whose key expires before its lock does: swept to failed_final /
# expired, then purged by the same round (sweep runs first, and the key is
# already past its expiry). Claimed only now, so that no round can sweep it
# together with the first zombie.
$offset = -s $node->logfile;
$node->safe_psql('postgres', q{
SELECT idem.claim_idempotency_key('pay', 'late', 'h2', 'w1',
    lock_timeout => '2 seconds', retention => '1 second')});
ok( $node->poll_query_until(
		'postgres', q{SELECT count(*) = 0 FROM idem.idempotency_request WHERE key = 'late'}),
	'a zombie past its expiry is swept and then purged');
ok( wait_for_log_match(
		$node, qr/idem worker for database "postgres": swept 1 stale keys, purged 1 expired keys/, $offset),
	'by one round that swept it first and then purged it');

my ($state, $rounds) = split /\|/,
  $node->safe_psql('postgres', q{
SELECT state, total_rounds FROM idem.worker_status WHERE database = 'postgres'});
like($state, qr/^(idle|working)$/, "worker_status shows the worker at work ($state)");
ok($rounds >= 2, "worker_status counts its rounds ($rounds)");
# The round counts itself in idem.stats as its last step, after its log line.
ok( $node->poll_query_until(
		'postgres', q{
SELECT worker_rounds >= 2 AND rows_swept = 2 AND rows_purged = 1 AND last_worker_round IS NOT NULL
FROM idem.stats WHERE datname = 'postgres'}),
	'its rounds and rows are counted in idem.stats');

# The inbox and the outbox are purged in the same rounds, and counted
# (1.2): a consumed message past its retention, an event published before
# idem.outbox_retention (7 days by default).
$node->safe_psql('postgres', q{
SELECT idem.consume_once('mail', 'm1', 'h', interval '1 hour');
UPDATE idem.consumed_message SET consumed_at = now() - interval '2 hours',
       expires_at = now() - interval '1 hour';
SELECT idem.outbox_put('pay', 'order-1', 'receipt', '{}');
SELECT idem.outbox_published(l.id, l.lease_fence) FROM idem.outbox_lease() l;
UPDATE idem.outbox_event SET published_at = now() - interval '30 days'});
ok( $node->poll_query_until(
		'postgres', q{
SELECT s.messages_purged = 1 AND s.events_purged = 1
       AND NOT EXISTS (SELECT FROM idem.consumed_message)
       AND NOT EXISTS (SELECT FROM idem.outbox_event)
FROM idem.stats s WHERE s.datname = 'postgres'}),
	'the worker purges the expired message and the published event, and counts them');
ok(!$node->log_contains(qr/ERROR|FATAL/), 'no error in the server log');

$node->stop;
done_testing();
