# One tenant's completer cannot stall the worker for the others (the
# C++ engine). Tenant a's completer catches every cancel and sleeps on, on a
# scope whose lock lasts 30 days; while it hangs:
# - the worker's rounds go on: another scope's stale key is swept while the
#   hostile completer still hangs (the time it took is measured and printed);
# - tenant b's completer runs and finishes its key;
# - a's other due keys wait, unclaimed: one owner runs at most
#   idem.completer_max_per_owner completers at once;
# - idem.completer_timeout (a server setting: the scope's 30-day lock cannot
#   raise it) ends a's completer: the worker terminates its process, logs
#   it with scope and key, and counts it as a failure;
# - a completer that calls idem.run_maintenance() in its own process is
#   refused (55000).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use FindBin;
use lib $FindBin::RealBin;
use IdemWorkerTest qw(set_and_reload wait_for_log_match sql_true_within);

my $naptime = 2;
my $node = PostgreSQL::Test::Cluster->new('completer_hostile');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'idem'\nidem.naptime = $naptime\n"
	  . "idem.completer_max_processes = 3\nidem.completer_max_per_owner = 1\n");
$node->start;
sub sql { return $node->safe_psql('postgres', $_[0]); }

my $args = 'scope text, key text, fence bigint, recovery_point text, attempt_count integer';
my $sig = '(text, text, bigint, text, integer)';
sql(qq{
CREATE EXTENSION idem;
CREATE ROLE tenant_a LOGIN;
CREATE ROLE tenant_b LOGIN;
CREATE TABLE done (scope text, key text, by_role text);
GRANT INSERT ON done TO tenant_b;
GRANT USAGE ON SCHEMA idem TO tenant_a, tenant_b;
GRANT EXECUTE ON FUNCTION idem.mark_succeeded(text, text, bigint, integer, jsonb, text, text),
  idem.run_maintenance() TO tenant_b;

-- Tenant a's: catches its cancel and sleeps on, forever.
CREATE FUNCTION hostile($args) RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
  LOOP
    BEGIN
      PERFORM pg_sleep(0.05);
    EXCEPTION WHEN query_canceled THEN
      NULL;
    END;
  END LOOP;
END \$\$;
ALTER FUNCTION hostile$sig OWNER TO tenant_a;
-- Tenant b's: finishes its key.
CREATE FUNCTION finish($args) RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
  INSERT INTO public.done VALUES (scope, key, current_user);
  PERFORM idem.mark_succeeded(scope, key, fence, 201);
END \$\$;
ALTER FUNCTION finish$sig OWNER TO tenant_b;
-- Tenant b's: tries maintenance from inside its run.
CREATE FUNCTION nest($args) RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
  PERFORM idem.run_maintenance();
  PERFORM idem.mark_succeeded(scope, key, fence, 201);
END \$\$;
ALTER FUNCTION nest$sig OWNER TO tenant_b;

INSERT INTO idem.scope_policy (scope, lock_timeout, completer) VALUES
  ('hostile', '30 days', 'hostile$sig'),
  ('fine',    NULL,      'finish$sig');
INSERT INTO idem.scope_policy (scope, max_attempts, completer) VALUES
  ('nest', 2, 'nest$sig');
});

sub rounds {
	return sql('SELECT worker_rounds FROM idem.stats WHERE datname = current_database()');
}

# Three of a's clients claim and vanish (a 1 s lock).
my $offset = -s $node->logfile;
sql(q{SELECT idem.claim_idempotency_key('hostile', 'k' || i, 'h', 'client', '1 second')
        FROM generate_series(1, 3) i});
ok( sql_true_within($node, 'a\'s completer', q{
SELECT count(*) >= 1 FROM pg_stat_activity
 WHERE backend_type = 'idem completer' AND usename = 'tenant_a'}),
	'a\'s hostile completer runs');

# The worker keeps its rounds while it hangs, and never runs a second
# completer of a's (idem.completer_max_per_owner = 1).
my $start = rounds();
ok( sql_true_within($node, 'three more rounds', qq{
SELECT worker_rounds >= $start + 3 FROM idem.stats WHERE datname = current_database()}, 30),
	'the worker ran three more rounds while a\'s completer hangs');
my $most = sql(q{SELECT count(*) FROM pg_stat_activity
               WHERE backend_type = 'idem completer' AND usename = 'tenant_a'});
is($most, '1', 'one completer process of a\'s at a time');
is( sql(q{SELECT count(*) FROM idem.idempotency_request
           WHERE scope = 'hostile' AND claimed_by = 'idem completer'}),
	'1', 'a\'s other due keys wait, unclaimed (no attempt spent)');

# Tenant b's completer runs meanwhile.
sql(q{SELECT idem.claim_idempotency_key('fine', 'k', 'h', 'client', '1 second')});
ok( sql_true_within($node, 'b\'s key', q{
SELECT status = 'succeeded' FROM idem.idempotency_request WHERE scope = 'fine'}, 30),
	'b\'s completer finishes its key while a\'s hangs');
is(sql(q{SELECT by_role FROM done WHERE scope = 'fine'}), 'tenant_b', 'as tenant_b');

# Another scope's stale key is swept while a's completer hangs: polled, with
# the time it took printed for the record (a test asserts what happened, not
# how fast the machine was).
my $locked_until = sql(q{
SELECT extract(epoch FROM c.locked_until) FROM idem.claim_idempotency_key('other', 'k', 'h', 'client', '1 second') c});
ok( sql_true_within($node, 'the other scope\'s stale key', q{
SELECT status <> 'processing' FROM idem.idempotency_request WHERE scope = 'other'}, 4 * $naptime + 10),
	'another scope\'s stale key is swept while a\'s completer hangs');
my $swept_after = sql(q{SELECT extract(epoch FROM clock_timestamp())}) - $locked_until;
note sprintf('stale key swept %.2f s after its lock ended, with a hostile completer hanging (naptime %d s)',
	$swept_after, $naptime);
is( sql(q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'idem completer' AND usename = 'tenant_a'}),
	'1', 'a\'s completer still hangs');

# idem.completer_timeout ends it (the worker terminates the process).
my $t0 = time;
set_and_reload($node, 'idem.completer_timeout', '3s');
ok( wait_for_log_match($node,
		qr/WARNING:  idem completer (?:public\.)?hostile\S+ for scope "hostile", key "k\d" ended without a result\n.*DETAIL:  It ran past idem.completer_timeout \(3000 ms\) and was terminated/,
		$offset),
	'idem.completer_timeout: a\'s completer is terminated, logged with scope and key');
note sprintf('terminated %.1f s after the reload', time - $t0);
ok( sql_true_within($node, 'a failure counted', q{
SELECT completer_failures >= 1 FROM idem.stats WHERE datname = current_database()}),
	'idem.stats counts the terminated run as a failure');
ok( sql_true_within($node, 'a\'s next key', q{
SELECT count(*) >= 2 FROM idem.idempotency_request WHERE scope = 'hostile' AND claimed_by = 'idem completer'}),
	'with a\'s process gone, its next key gets its turn');

# A completer may not run maintenance from its own process.
sql(q{SELECT idem.claim_idempotency_key('nest', 'k', 'h', 'client', '1 second')});
ok( wait_for_log_match($node,
		qr/ERROR:  idem.run_maintenance\(\) may not be called by a completer\n(?:.*\n){0,6}?.*idem completer (?:public\.)?nest\S+ for scope "nest", key "k"/,
		$offset),
	'a completer calling idem.run_maintenance() in its process is refused');
is(sql(q{SELECT status || ' ' || claimed_by FROM idem.idempotency_request WHERE scope = 'nest'}),
	'processing idem completer', 'its work undone: the key stays the worker\'s until its lock runs out');

$node->stop;
done_testing();
