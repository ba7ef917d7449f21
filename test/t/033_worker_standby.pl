# On a streaming standby the worker runs but does nothing and writes nothing;
# once the standby is promoted it maintains the new primary on its own.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use FindBin;
use lib $FindBin::RealBin;
use IdemWorkerTest qw(expired_outcomes_sql wait_for_log_match logged_round_ms wait_for_loop_passes);

my $primary = PostgreSQL::Test::Cluster->new('worker_primary');
$primary->init(allows_streaming => 1);
# The primary's worker is off, so the backlog reaches the standby untouched.
$primary->append_conf('postgresql.conf',
	"shared_preload_libraries = 'idem'\nidem.naptime = 1\nidem.worker_enabled = off\n");
$primary->start;
$primary->safe_psql('postgres', 'CREATE EXTENSION idem; ' . expired_outcomes_sql('old', 1000) . q{
INSERT INTO idem.idempotency_request (scope, key, request_hash, status, fence, claimed_at,
    locked_until, created_at, updated_at, expires_at)
SELECT 'zombie', g::text, 'h', 'processing', nextval('idem.fence_seq'), now() - interval '1 hour',
    now() - interval '1 minute', now() - interval '1 hour', now() - interval '1 hour',
    now() + interval '1 day'
FROM generate_series(1, 10) g;
});
$primary->backup('base');

my $standby = PostgreSQL::Test::Cluster->new('worker_standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->append_conf('postgresql.conf', "idem.worker_enabled = on\n");
$standby->start;
$primary->wait_for_catchup($standby);

my $backlog = q{
SELECT count(*) FILTER (WHERE scope = 'old') || '/' ||
       count(*) FILTER (WHERE scope = 'zombie' AND status = 'processing')
FROM idem.idempotency_request};

ok( $standby->poll_query_until(
		'postgres', q{SELECT state = 'standby' FROM idem.worker_status WHERE database = 'postgres'}),
	'on the standby the worker reports state "standby"');
# Three more naptimes, in which the worker looks again each time and must
# still do nothing.
ok( wait_for_loop_passes($standby, 3, q{backend_type = 'idem worker' AND datname = 'postgres'}),
	'the standby worker looked again three times');
is($standby->safe_psql('postgres', $backlog), '1000/10', 'the standby still has the whole backlog');
is( $standby->safe_psql(
		'postgres', q{SELECT total_rounds FROM idem.worker_status WHERE database = 'postgres'}),
	'0', 'the standby worker ran no round');
is( $standby->safe_psql(
		'postgres', q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'idem worker'}),
	'1', 'the worker runs there, idle');
my $log = slurp_file($standby->logfile);
my @idle_lines = $log =~ /(idem worker for database "postgres" is idle: the server is a standby)/g;
is(scalar @idle_lines, 1, 'it said so once in the log');
unlike($log, qr/ERROR|FATAL/, 'and raised no error (it tried no write)');

$primary->stop;
my $offset = -s $standby->logfile;
my $promoted = time;    # before pg_ctl promote, which waits for the promotion
$standby->promote;
ok($standby->poll_query_until('postgres', "SELECT ($backlog) = '0/0'"),
	'after promote the worker purges and sweeps the new primary');
# When the round ended, on the server's clock: it began with the sweep (the
# zombies' finished_at) and its log line says how long it took. Measured so,
# the figure does not include how long this script took to notice.
my $round_ms = logged_round_ms($standby, 'postgres', 10, 1000, $offset);
ok(defined $round_ms, 'one round swept and purged it all');
my $took = $standby->safe_psql('postgres',
	q{SELECT extract(epoch FROM max(finished_at)) FROM idem.idempotency_request WHERE scope = 'zombie'})
  + ($round_ms // 0) / 1000.0 - $promoted;
note sprintf('maintained %.2f s after promotion (naptime 1 s)', $took);
ok($took <= 2.0, sprintf('within two naptimes of the promotion (%.2f s)', $took));
is( $standby->safe_psql(
		'postgres', q{
SELECT count(*) FROM idem.idempotency_request WHERE scope = 'zombie' AND failure_code = 'abandoned'}),
	'10', 'the zombies were swept, not purged');
ok(wait_for_log_match($standby, qr/idem worker resumes maintaining database "postgres"/, $offset),
	'and it logged that it resumed');

$standby->stop;
done_testing();
