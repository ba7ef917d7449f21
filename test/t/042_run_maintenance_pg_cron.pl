# The C++ extension without its worker (idem not preloaded), maintained by
# idem.run_maintenance() under a real pg_cron, scheduled by a role that is
# not a superuser and was granted EXECUTE on it (README, "Background
# worker"). A stale key is swept, an expired key purged, and a scope's
# completer drives an abandoned key to its end as the completer's owner.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $libdir = `pg_config --pkglibdir`;
chomp $libdir;
plan skip_all => "pg_cron is not installed ($libdir/pg_cron.so)" unless -f "$libdir/pg_cron.so";

my $node = PostgreSQL::Test::Cluster->new('run_maintenance_cron');
$node->init;
# Jobs run in pg_cron's background workers: no connection settings involved.
$node->append_conf('postgresql.conf', join "\n", "shared_preload_libraries = 'pg_cron'",
	"cron.database_name = 'postgres'", 'cron.use_background_workers = on',
	'max_worker_processes = 16', '');
$node->start;
sub sql { return $node->safe_psql('postgres', $_[0]); }

sql(q{CREATE EXTENSION idem; CREATE EXTENSION pg_cron;
      CREATE ROLE ops LOGIN; CREATE ROLE app;
      GRANT USAGE ON SCHEMA cron TO ops;
      GRANT EXECUTE ON FUNCTION idem.run_maintenance() TO ops;
      GRANT USAGE ON SCHEMA idem TO app;
      GRANT EXECUTE ON FUNCTION idem.mark_succeeded(text, text, bigint, integer, jsonb, text, text) TO app;});
sql(q{CREATE FUNCTION public.finish(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
      RETURNS void LANGUAGE sql AS $$
        SELECT idem.mark_succeeded(scope, key, fence, 200, jsonb_build_object('ran_as', current_user::text)) $$;
      ALTER FUNCTION public.finish(text, text, bigint, text, integer) OWNER TO app;
      INSERT INTO idem.scope_policy (scope, completer) VALUES ('done', 'public.finish(text, text, bigint, text, integer)');});

# A stale key, an expired key, an abandoned key with a completer.
sql(q{SELECT kind FROM idem.claim_idempotency_key('cron', 'stale', 'h', lock_timeout => '1 millisecond');
      SELECT idem.mark_succeeded('cron', 'expired', c.fence, 200)
        FROM idem.claim_idempotency_key('cron', 'expired', 'h', retention => '1 millisecond') c;
      SELECT kind FROM idem.claim_idempotency_key('done', 'k', 'h', lock_timeout => '1 millisecond');});

# pg_cron 1.5 and later take seconds; 1.4 (Debian's for 15) only minutes.
my $cron_version = sql(q{SELECT extversion FROM pg_extension WHERE extname = 'pg_cron'});
my $schedule = $cron_version =~ /^1\.[0-4]\b/ ? '* * * * *' : '1 seconds';
note("pg_cron $cron_version: schedule '$schedule'");
my $job = $node->safe_psql('postgres',
	qq{SET ROLE ops; SELECT cron.schedule('idem maintenance', '$schedule', 'SELECT idem.run_maintenance()')});
like($job, qr/^\d+$/, 'ops schedules idem.run_maintenance() with pg_cron');

ok( $node->poll_query_until('postgres', q{
			SELECT NOT EXISTS (SELECT FROM idem.idempotency_request WHERE scope = 'cron' AND key = 'expired')
			   AND (SELECT status::text FROM idem.idempotency_request WHERE scope = 'cron' AND key = 'stale')
			       = 'failed_retryable'
			   AND (SELECT status::text FROM idem.idempotency_request WHERE scope = 'done' AND key = 'k')
			       = 'succeeded'}),
	'a run swept the stale key, purged the expired one and completed the abandoned one');
is(sql(q{SELECT failure_code FROM idem.idempotency_request WHERE scope = 'cron' AND key = 'stale'}),
	'abandoned', 'the stale key is abandoned');
is(sql(q{SELECT claimed_by || ' ' || (response_body->>'ran_as') FROM idem.idempotency_request WHERE scope = 'done'}),
	'idem completer app', 'the completer ran as its owner, not as the job owner');
is(sql(q{SELECT count(*) FROM cron.job_run_details WHERE status = 'failed'}), '0', 'no run failed');
is(sql(q{SELECT DISTINCT username FROM cron.job}), 'ops', 'the job runs as ops, not a superuser');

$node->safe_psql('postgres', q{SET ROLE ops; SELECT cron.unschedule('idem maintenance')});
$node->stop;
done_testing();
