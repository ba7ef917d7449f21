# Databases of idem.database that do not exist yet, or lack the extension:
# the worker logs one clear line each and waits, without errors; it maintains
# a database within two naptimes of CREATE EXTENSION idem there, and starts on
# its own for a database created later. Without the preload, the SQL functions
# work and idem.worker_status() says why it has nothing to show.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use FindBin;
use lib $FindBin::RealBin;
use IdemWorkerTest qw(wait_for_log_match logged_round_ms wait_for_loop_passes);

my $node = PostgreSQL::Test::Cluster->new('worker_missing');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'idem'\nidem.naptime = 1\nidem.database = 'appdb, latedb'\n");
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE appdb');
# postgres is not in idem.database: the extension there only shows the status.
$node->safe_psql('postgres', 'CREATE EXTENSION idem');
$node->stop;
my $offset = -s $node->logfile;
$node->start;    # so that appdb exists from the start and latedb does not

ok( $node->poll_query_until(
		'postgres', q{
SELECT string_agg(database || ':' || state, ',' ORDER BY database) = 'appdb:waiting for extension,latedb:waiting for database'
FROM idem.worker_status()}),
	'worker_status: appdb waits for the extension, latedb for the database');
# Three more looks of each (appdb's worker checks for the extension once a
# naptime, the launcher for latedb about once a second): still one line
# each, no errors.
ok( wait_for_loop_passes(
		$node, 3,
		q{backend_type = 'idem worker' AND datname = 'appdb'},
		q{backend_type = 'idem launcher'}),
	'the appdb worker and the launcher looked again three times each');
my $log = slurp_file($node->logfile, $offset);
my @extension_lines = ($log =~ /(idem worker for database "appdb" is waiting: extension "idem" is not installed there)/g);
is(scalar @extension_lines, 1, 'one clear line for the database without the extension');
my @database_lines = ($log =~ /(idem worker is waiting for database "latedb", which does not exist)/g);
is(scalar @database_lines, 1, 'one clear line for the missing database');
unlike($log, qr/ERROR|FATAL/, 'no errors while waiting');

# CREATE EXTENSION with a backlog in the same transaction: an expired outcome
# and a zombie.
$node->safe_psql('appdb', q{
BEGIN;
CREATE EXTENSION idem;
INSERT INTO idem.idempotency_request (scope, key, request_hash, status, recovery_point, fence,
    claimed_at, created_at, updated_at, finished_at, expires_at, response_code)
VALUES ('s', 'expired', 'h', 'succeeded', 'finished', nextval('idem.fence_seq'),
    now() - interval '2 days', now() - interval '2 days', now() - interval '2 days',
    now() - interval '2 days', now() - interval '1 day', 200);
INSERT INTO idem.idempotency_request (scope, key, request_hash, status, fence, claimed_at,
    locked_until, created_at, updated_at, expires_at)
VALUES ('s', 'zombie', 'h', 'processing', nextval('idem.fence_seq'), now() - interval '1 hour',
    now() - interval '1 minute', now() - interval '1 hour', now() - interval '1 hour',
    now() + interval '1 day');
COMMIT;
});
my $created = time;
ok( $node->poll_query_until(
		'appdb', q{
SELECT count(*) = 1 FROM idem.idempotency_request WHERE key = 'zombie' AND failure_code = 'abandoned'
  AND NOT EXISTS (SELECT FROM idem.idempotency_request WHERE key = 'expired')}),
	'after CREATE EXTENSION the worker sweeps and purges appdb');
# When the round ended, on the server's clock: it began with the sweep (the
# zombie's finished_at) and its log line says how long it took. Measured so,
# the figure does not include how long this script took to notice.
my $round_ms = logged_round_ms($node, 'appdb', 1, 1, $offset);
ok(defined $round_ms, 'one round swept and purged it');
my $took = $node->safe_psql('appdb',
	qq{SELECT extract(epoch FROM finished_at) FROM idem.idempotency_request WHERE key = 'zombie'})
  + ($round_ms // 0) / 1000.0 - $created;
note sprintf('appdb maintained %.2f s after CREATE EXTENSION (naptime 1 s)', $took);
ok($took <= 2.0, sprintf('within two naptimes (%.2f s)', $took));
ok( wait_for_log_match($node, qr/idem worker resumes maintaining database "appdb"/, $offset),
	'and logged that it resumed');

$node->safe_psql('postgres', 'CREATE DATABASE latedb');
ok( $node->poll_query_until(
		'postgres', q{
SELECT state = 'waiting for extension' AND pid IS NOT NULL FROM idem.worker_status() WHERE database = 'latedb'}),
	'a database created later gets its worker');
ok( wait_for_log_match($node, qr/idem worker found database "latedb" and starts maintaining it/, $offset),
	'the launcher logged that it found it');
is( $node->safe_psql(
		'postgres', q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'idem worker'}),
	'2', 'one worker per database of idem.database');
unlike(slurp_file($node->logfile, $offset), qr/ERROR|FATAL/, 'no errors at all');

# Binary upgrade (pg_upgrade starts the server with -b): the launcher starts
# no worker and says so in worker_status.
$node->stop;
command_ok([ 'pg_ctl', '-D', $node->data_dir, '-l', $node->logfile, '-o', '-b', '-w', 'start' ],
	'server started in binary upgrade mode');
ok( $node->poll_query_until(
		'appdb', q{
SELECT bool_and(state = 'binary upgrade' AND pid IS NULL) FROM idem.worker_status}),
	'binary upgrade: every database shows state "binary upgrade", no worker');
# The launcher, looking again, still starts none.
ok(wait_for_loop_passes($node, 2, q{backend_type = 'idem launcher'}),
	'binary upgrade: the launcher looked again twice');
is( $node->safe_psql(
		'appdb', q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'idem worker'}),
	'0', 'binary upgrade: no worker process');
command_ok([ 'pg_ctl', '-D', $node->data_dir, '-m', 'fast', '-w', 'stop' ],
	'binary upgrade server stopped');

# Without the preload: no worker, no status, but the functions work.
$node->adjust_conf('postgresql.conf', 'shared_preload_libraries', "''");
$node->start;
is( $node->safe_psql(
		'postgres', q{SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'idem%'}),
	'0', 'not preloaded: no idem processes');
my ($ret, $out, $err) = $node->psql('appdb', "\\set VERBOSITY verbose\nSELECT * FROM idem.worker_status");
like($err, qr/ERROR:  55000: idem's background worker is not running/,
	'not preloaded: idem.worker_status raises 55000');
like($err, qr/HINT:  Add idem to shared_preload_libraries/, 'with a hint');
is( $node->safe_psql(
		'appdb', q{
UPDATE idem.idempotency_request SET status = 'processing', failure_code = NULL, failure_message = NULL,
  finished_at = NULL, locked_until = now() - interval '1 second' WHERE key = 'zombie';
SELECT idem.sweep_stale(), idem.purge_expired()}),
	'1|0', 'not preloaded: sweep_stale and purge_expired work by hand');

$node->stop;
done_testing();
