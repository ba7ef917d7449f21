# Maintenance without idem's worker: the portable engine installed by the
# database's owner (not a superuser), idem.run_maintenance() scheduled by that
# owner with pg_cron, as every managed service allows. A key whose lock ran
# out is swept, an expired key purged, and pg_cron records succeeded runs.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemPortable;

# The jobs run in background workers of pg_cron's: no connection, so no
# password or host setting is involved.
my $node = portable_node('cron', preload => ['pg_cron'],
	conf => [ "cron.database_name = 'shop'", 'cron.use_background_workers = on',
		'max_worker_processes = 16' ]);
$node->safe_psql('postgres', q{
	CREATE ROLE dbowner LOGIN NOSUPERUSER;
	CREATE DATABASE shop OWNER dbowner;});
# pg_cron's launcher connects to cron.database_name when the server starts.
$node->restart;
# As on a managed service, the provider's administrator creates pg_cron and
# lets the database's owner schedule jobs.
$node->safe_psql('shop', q{
	CREATE EXTENSION pg_cron;
	GRANT USAGE ON SCHEMA cron TO dbowner;});
my ($rc, $out, $err) = psql_file($node, 'shop', 'dbowner', tree_file('dist/idem-portable.sql'));
is($rc, 0, 'dbowner installs the portable engine') or diag($err);

# A key whose owner vanished (its lock already ran out) and a finished key
# whose retention already ran out.
sql_as($node, 'shop', 'dbowner', q{
	SELECT kind FROM idem.claim_idempotency_key('cron', 'stale', 'h', lock_timeout => '1 millisecond');
	SELECT idem.mark_succeeded('cron', 'expired', c.fence, 200)
	  FROM idem.claim_idempotency_key('cron', 'expired', 'h', retention => '1 millisecond') c;});
is( $node->safe_psql('shop',
		q{SELECT string_agg(key || ':' || status, ' ' ORDER BY key) FROM idem.idempotency_request}),
	'expired:succeeded stale:processing',
	'a stale key and an expired key exist');

# pg_cron 1.5 and later take a schedule in seconds; 1.4 (Debian's for 15)
# only cron's minutes.
my $cron_version = $node->safe_psql('shop', q{SELECT extversion FROM pg_extension WHERE extname = 'pg_cron'});
my $schedule = $cron_version =~ /^1\.[0-4]\b/ ? '* * * * *' : '1 seconds';
note("pg_cron $cron_version: schedule '$schedule'");
my $job = sql_as($node, 'shop', 'dbowner',
	qq{SELECT cron.schedule('idem-maintenance', '$schedule', 'SELECT idem.run_maintenance()')});
like($job, qr/^\d+$/, 'dbowner schedules idem.run_maintenance() with pg_cron');

ok( $node->poll_query_until('shop', q{
			SELECT count(*) > 0 FROM cron.job_run_details d JOIN cron.job j USING (jobid)
			 WHERE j.jobname = 'idem-maintenance' AND d.status = 'succeeded'}),
	'pg_cron records a succeeded run');
ok( $node->poll_query_until('shop', q{
			SELECT (SELECT status || '/' || coalesce(failure_code, '') FROM idem.idempotency_request
			         WHERE scope = 'cron' AND key = 'stale') = 'failed_retryable/abandoned'
			   AND NOT EXISTS (SELECT FROM idem.idempotency_request WHERE scope = 'cron' AND key = 'expired')}),
	'the stale key was swept (abandoned) and the expired key purged');
is( $node->safe_psql('shop', q{
		SELECT count(*) FROM cron.job_run_details d JOIN cron.job j USING (jobid)
		 WHERE j.jobname = 'idem-maintenance' AND d.status NOT IN ('succeeded', 'running', 'starting')}),
	'0', 'no run failed');
is( $node->safe_psql('shop', q{SELECT DISTINCT username FROM cron.job WHERE jobname = 'idem-maintenance'}),
	'dbowner', 'the job runs as dbowner, not a superuser');

sql_as($node, 'shop', 'dbowner', q{SELECT cron.unschedule('idem-maintenance')});
$node->stop;
done_testing();
