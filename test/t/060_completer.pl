# The completer under the worker (docs/contract.md "The completer"): abandoned keys
# of a scope with a completer are claimed by the worker ('idem completer')
# and driven to their end by the completer, run as its owner. One scope per
# behaviour: success, raise, an infinite loop (cancelled by the key's lock),
# no outcome, an owner without a privilege, and a server restart while a
# completer runs. The times from each key's abandonment to its end are
# printed, and idem.stats's completer counters are checked against the log.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use FindBin;
use lib $FindBin::RealBin;
use IdemWorkerTest qw(set_and_reload wait_for_log_match wait_for_round_ends);

my $node = PostgreSQL::Test::Cluster->new('completer');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'idem'\nidem.naptime = 1\nidem.worker_enabled = off\n");
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION idem;
CREATE TABLE done (scope text, key text, attempt integer, by_role text, at timestamptz DEFAULT clock_timestamp());
CREATE TABLE secret (card text);
-- LOGIN: a completer runs in a process connected as its owner, and on
-- PostgreSQL 15 that role must be able to log in (docs/policy.md, "The completer").
CREATE ROLE idem_weak LOGIN;
GRANT INSERT ON done TO idem_weak;
GRANT EXECUTE ON FUNCTION idem.mark_succeeded(text, text, bigint, integer, jsonb, text, text),
                          idem.mark_failed(text, text, bigint, boolean, text, text, integer, jsonb)
  TO idem_weak;

-- Finishes the request from its recovery point and records the outcome.
CREATE FUNCTION finish(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.done VALUES (scope, key, attempt_count, current_user);
  PERFORM idem.mark_succeeded(scope, key, fence, 201, jsonb_build_object('resumed_from', recovery_point));
END $$;
CREATE FUNCTION explode(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'gateway unreachable on attempt %', attempt_count;
END $$;
CREATE FUNCTION spin(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  LOOP
    PERFORM pg_sleep(0.05);
  END LOOP;
END $$;
CREATE FUNCTION shrug(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql AS $$ BEGIN END $$;
-- Owned by idem_weak, which may not read secret.
CREATE FUNCTION peek(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM count(*) FROM public.secret;
  INSERT INTO public.done VALUES (scope, key, attempt_count, current_user);
  PERFORM idem.mark_succeeded(scope, key, fence, 200);
END $$;
ALTER FUNCTION peek(text, text, bigint, text, integer) OWNER TO idem_weak;
-- Waits long on its first try (attempt 2), so the server can be restarted
-- under it; finishes on the next.
CREATE FUNCTION slow_once(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF attempt_count = 2 THEN
    PERFORM pg_sleep(300);
  END IF;
  PERFORM public.finish(scope, key, fence, recovery_point, attempt_count);
END $$;

INSERT INTO idem.scope_policy (scope, lock_timeout, max_attempts, completer, completer_delay) VALUES
  ('c_ok',      '5 seconds', 3, 'finish(text, text, bigint, text, integer)',    '1 second'),
  ('c_raise',   '1 second',  3, 'explode(text, text, bigint, text, integer)',   '1 second'),
  ('c_loop',    '2 seconds', 2, 'spin(text, text, bigint, text, integer)',      '1 second'),
  ('c_noop',    '1 second',  2, 'shrug(text, text, bigint, text, integer)',     '1 second'),
  ('c_priv',    '2 seconds', 2, 'peek(text, text, bigint, text, integer)',      '1 second'),
  ('c_restart', '10 seconds', 4, 'slow_once(text, text, bigint, text, integer)', '1 second');
});

# Every client charges, checkpoints and disappears: a 1 s lock, no retry.
for my $scope (qw(c_ok c_raise c_loop c_noop c_priv)) {
	$node->safe_psql('postgres', qq{
SELECT idem.set_recovery_point('$scope', 'k', c.fence, 'charged')
  FROM idem.claim_idempotency_key('$scope', 'k', 'h', 'client', '1 second') c});
}
$node->poll_query_until('postgres',
	q{SELECT bool_and(locked_until <= now()) FROM idem.idempotency_request})
  or die 'the clients\' locks did not run out';
is( $node->safe_psql('postgres', q{
SELECT string_agg(scope || '=' || awaiting_completer, ' ' ORDER BY scope) FROM idem.key_health}),
	'c_loop=1 c_noop=1 c_ok=1 c_priv=1 c_raise=1',
	'key_health shows each abandoned key waiting for its completer');

my $offset = -s $node->logfile;
my $start = time;
set_and_reload($node, 'idem.worker_enabled', 'on');

# Success: finished from its recovery point, once, as the function's owner.
ok($node->poll_query_until('postgres',
	q{SELECT status = 'succeeded' FROM idem.idempotency_request WHERE scope = 'c_ok'}),
	'c_ok: the completer finished the key');
note sprintf('c_ok finished %.1f s after the worker was enabled', time - $start);
is( $node->safe_psql('postgres', q{
SELECT r.claimed_by, r.attempt_count, r.response_code, r.response_body->>'resumed_from',
       (SELECT count(*) FROM done d WHERE d.scope = 'c_ok'),
       (SELECT by_role = (SELECT proowner::regrole::text FROM pg_proc WHERE proname = 'finish')
          FROM done d WHERE d.scope = 'c_ok')
  FROM idem.idempotency_request r WHERE r.scope = 'c_ok'}),
	'idem completer|2|201|charged|1|t',
	'c_ok: claimed by the worker (attempt 2), resumed at "charged", its effect written once');

# Raise: logged with scope and key each time, retried after completer_delay,
# until max_attempts ends the key. (The completer's name is printed as
# regprocedure does under the search_path it ran under: schema-qualified
# under the worker's pinned pg_catalog, pg_temp.)
ok(wait_for_log_match($node,
	qr/ERROR:  gateway unreachable on attempt 2\n(?:.*\n){0,3}?\s*idem completer (?:public\.)?explode\(text,text,bigint,text,integer\) for scope "c_raise", key "k"/,
	$offset), 'c_raise: the error is logged with the completer, scope and key');
ok($node->poll_query_until('postgres',
	q{SELECT status = 'failed_final' FROM idem.idempotency_request WHERE scope = 'c_raise'}),
	'c_raise: the key ends');
is( $node->safe_psql('postgres', q{
SELECT failure_code, attempt_count FROM idem.idempotency_request WHERE scope = 'c_raise'}),
	'too_many_attempts|3', 'c_raise: as too_many_attempts after max_attempts (3) attempts');
like(slurp_file($node->logfile, $offset), qr/gateway unreachable on attempt 3/,
	'c_raise: the completer was retried after its first failure');
note sprintf('c_raise ended %.1f s after the worker was enabled', time - $start);

# Infinite loop: cancelled by the statement_timeout the key's lock (2 s) sets.
ok(wait_for_log_match($node,
	qr/ERROR:  canceling statement due to statement timeout\n(?:.*\n){0,3}?\s*idem completer (?:public\.)?spin\S+ for scope "c_loop", key "k"/,
	$offset), 'c_loop: the looping completer was cancelled, logged with scope and key');
ok($node->poll_query_until('postgres',
	q{SELECT failure_code = 'too_many_attempts' FROM idem.idempotency_request WHERE scope = 'c_loop'}),
	'c_loop: the cancelled run counted as an attempt (max_attempts 2 ends the key)');
note sprintf('c_loop ended %.1f s after the worker was enabled', time - $start);

# No outcome: logged, left to the next round (which max_attempts ends).
ok(wait_for_log_match($node,
	qr/idem completer (?:public\.)?shrug\(text,text,bigint,text,integer\) recorded no outcome for scope "c_noop", key "k"/,
	$offset), 'c_noop: a completer that records nothing is logged');
ok($node->poll_query_until('postgres',
	q{SELECT failure_code = 'too_many_attempts' FROM idem.idempotency_request WHERE scope = 'c_noop'}),
	'c_noop: the key was left to the next round, then ended by max_attempts');

# Owner privileges: idem_weak's completer cannot read what idem_weak cannot.
ok(wait_for_log_match($node,
	qr/ERROR:  permission denied for table secret\n(?:.*\n){0,3}?\s*idem completer (?:public\.)?peek\S+ for scope "c_priv", key "k"/,
	$offset), 'c_priv: the completer ran as its owner, who may not read secret');
ok($node->poll_query_until('postgres',
	q{SELECT status = 'failed_final' FROM idem.idempotency_request WHERE scope = 'c_priv'}),
	'c_priv: the key ends after max_attempts');
is($node->safe_psql('postgres', q{SELECT count(*) FROM done WHERE scope = 'c_priv'}),
	'0', 'c_priv: nothing was written');

# The counters of the log lines add up, once a round has ended after the last key did.
wait_for_round_ends($node, 'postgres', 2);
my $log = slurp_file($node->logfile, $offset);
# A round logs the completers it started and, apart, those started earlier
# that ended (the worker does not wait for them).
my ($started, $runs, $ok, $failed) = (0, 0, 0, 0);
$started += $1 while $log =~ /started (\d+) completers/g;
while ($log =~ /(\d+) completers ended: (\d+) recorded an outcome, (\d+) failed/g) {
	$runs += $1; $ok += $2; $failed += $3;
}
is("$started $runs $ok $failed", '6 6 1 5',
	'rounds logged 6 runs started and ended: 1 success (c_ok), 5 failures (c_raise 2, c_loop, c_noop, c_priv)')
  or diag($log);
# idem.stats counts the same runs (the worker counts each as it ends; the
# poll waits for the last one).
ok( $node->poll_query_until('postgres', q{
SELECT completer_runs = 6 AND completer_successes = 1 AND completer_failures = 5
  FROM idem.stats WHERE datname = current_database()}),
	'idem.stats: completer_runs 6, completer_successes 1, completer_failures 5')
  or diag($node->safe_psql('postgres', q{
SELECT completer_runs, completer_successes, completer_failures FROM idem.stats}));
note 'idem.stats: ' . $node->safe_psql('postgres', q{
SELECT format('completer_runs %s, completer_successes %s, completer_failures %s',
              completer_runs, completer_successes, completer_failures)
  FROM idem.stats WHERE datname = current_database()});

# Restart mid-completer: the worker's claim was committed, the completer's
# transaction dies with the server; after the lock runs out the completer
# runs again and finishes (attempt 3), and the effect is written once.
$node->safe_psql('postgres', q{
SELECT idem.set_recovery_point('c_restart', 'k', c.fence, 'charged')
  FROM idem.claim_idempotency_key('c_restart', 'k', 'h', 'client', '1 second') c});
ok($node->poll_query_until('postgres', q{
SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idem completer' AND wait_event = 'PgSleep'}),
	'c_restart: the completer is running');
$start = time;
$node->restart;
ok($node->poll_query_until('postgres',
	q{SELECT status = 'succeeded' FROM idem.idempotency_request WHERE scope = 'c_restart'}),
	'c_restart: after the restart the completer finished the key');
note sprintf('c_restart finished %.1f s after the restart began (lock 10 s, delay 1 s)', time - $start);
is( $node->safe_psql('postgres', q{
SELECT r.attempt_count, (SELECT count(*) FROM done d WHERE d.scope = 'c_restart')
  FROM idem.idempotency_request r WHERE r.scope = 'c_restart'}),
	'3|1', 'c_restart: finished on attempt 3, its effect written once');
# The counters live in shared memory: the restart zeroed them, and the run
# after it is the only one counted since.
ok( $node->poll_query_until('postgres', q{
SELECT completer_runs = 1 AND completer_successes = 1 AND completer_failures = 0
  FROM idem.stats WHERE datname = current_database()}),
	'c_restart: idem.stats counts one run since the restart, a success');

$node->stop;
done_testing();
