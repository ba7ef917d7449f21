# idem.run_maintenance() (the C++ engine, no worker: as pg_cron calls it)
# against hostile completers:
# - a completer that raises SQLSTATE 57014 itself (RAISE ... USING ERRCODE
#   = 'query_canceled') is contained like any other error: logged with scope
#   and key, counted, and the same call's sweep and purge commit;
# - a completer that sleeps is cancelled by idem.completer_timeout (a server
#   setting), contained, and the call commits;
# - a completer that catches every cancel and goes on ends the session
#   (FATAL, which no handler catches) shortly after its limit;
# - the call's own statement_timeout, and a pg_cancel_backend of the call,
#   still end the whole call;
# - a completer that calls idem.run_maintenance() is refused (55000), and
#   its calls of idem stay judged as its owner: it cannot peek another
#   tenant's key.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use FindBin;
use lib $FindBin::RealBin;
use IdemWorkerTest qw(sql_true_within);

my $node = PostgreSQL::Test::Cluster->new('run_maintenance_containment');
$node->init;
# No preload: idem.run_maintenance is how maintenance runs here. The limit
# is the server's (PGC_SIGHUP): no session or policy can raise it.
$node->append_conf('postgresql.conf', "idem.completer_timeout = '1s'\n");
$node->start;
sub sql { return $node->safe_psql('postgres', $_[0]); }

my $args = 'scope text, key text, fence bigint, recovery_point text, attempt_count integer';
my $sig = '(text, text, bigint, text, integer)';
sql(qq{
CREATE EXTENSION idem;
CREATE ROLE tenant_a LOGIN;
CREATE ROLE tenant_b LOGIN;
GRANT USAGE ON SCHEMA idem TO tenant_a, tenant_b;
GRANT EXECUTE ON FUNCTION idem.peek(text, text), idem.run_maintenance(),
  idem.mark_succeeded(text, text, bigint, integer, jsonb, text, text) TO tenant_a, tenant_b;
INSERT INTO idem.scope_owner VALUES ('a/', 'tenant_a'), ('b/', 'tenant_b');

CREATE FUNCTION raise_cancel($args) RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
  RAISE EXCEPTION 'x' USING ERRCODE = 'query_canceled';
END \$\$;
CREATE FUNCTION shrug($args) RETURNS void LANGUAGE plpgsql AS \$\$ BEGIN END \$\$;
CREATE FUNCTION sleeper($args) RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
  PERFORM pg_sleep(600);
END \$\$;
CREATE FUNCTION obstinate($args) RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
  LOOP
    BEGIN
      PERFORM pg_sleep(0.05);
    EXCEPTION WHEN query_canceled THEN
      NULL;
    END;
  END LOOP;
END \$\$;
-- Tenant a's: maintenance from inside its run, then a look at b's key.
CREATE FUNCTION nested($args) RETURNS void LANGUAGE plpgsql AS \$\$
DECLARE
  seen text;
BEGIN
  BEGIN
    PERFORM idem.run_maintenance();
    RAISE WARNING 'nested maintenance ran';
  EXCEPTION WHEN OTHERS THEN
    RAISE WARNING 'nested maintenance refused: %: %', SQLSTATE, SQLERRM;
  END;
  BEGIN
    SELECT p.response_body::text INTO seen FROM idem.peek('b/pay', 'k') p;
    RAISE WARNING 'peeked at b: %', seen;
  EXCEPTION WHEN OTHERS THEN
    RAISE WARNING 'peek of b refused: %', SQLSTATE;
  END;
  PERFORM idem.mark_succeeded(scope, key, fence, 200, jsonb_build_object('peeked', seen));
END \$\$;
DO \$\$
DECLARE f regprocedure;
BEGIN
  FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
            WHERE p.proname IN ('raise_cancel', 'shrug', 'sleeper', 'obstinate', 'nested')
              AND p.pronamespace = 'public'::regnamespace LOOP
    EXECUTE format('ALTER FUNCTION %s OWNER TO tenant_a', f);
  END LOOP;
END \$\$;
INSERT INTO idem.scope_policy (scope, completer) VALUES
  ('a/cancel',    'raise_cancel$sig'),
  ('a/noop',      'shrug$sig'),
  ('a/sleep',     'sleeper$sig'),
  ('a/obstinate', 'obstinate$sig'),
  ('a/nested',    'nested$sig');
-- b's stored answer, which a must never read.
SELECT idem.mark_succeeded('b/pay', 'k', c.fence, 200, '{"card": "b-secret-4242"}')
  FROM idem.claim_idempotency_key('b/pay', 'k', 'h') c;
});

# Work for the other stages of the same call: a stale key of scope `x` to
# sweep and an expired outcome to purge, and an abandoned key of `scope`
# due for its completer (the only one: every other key but b's goes).
sub stage_work {
	my ($scope) = @_;
	sql(qq{
DELETE FROM idem.idempotency_request WHERE scope <> 'b/pay';
SELECT idem.claim_idempotency_key('x', 'stale', 'h');
SELECT idem.mark_succeeded('x', 'old', c.fence, 200) FROM idem.claim_idempotency_key('x', 'old', 'h') c;
SELECT status FROM idem.force_expire('x', 'old');
UPDATE idem.idempotency_request SET locked_until = now() - interval '1 second'
 WHERE scope = 'x' AND key = 'stale';
SELECT idem.claim_idempotency_key('$scope', 'k', 'h');
UPDATE idem.idempotency_request
   SET status = 'failed_retryable', failure_code = 'abandoned', failure_message = 'test',
       locked_until = NULL, finished_at = now() - interval '1 minute',
       updated_at = now() - interval '1 minute'
 WHERE scope = '$scope' AND key = 'k';
});
}

sub stage_outcome {
	my ($scope) = @_;
	return sql(qq{
SELECT concat_ws(' ',
  (SELECT status FROM idem.idempotency_request WHERE scope = 'x' AND key = 'stale'),
  (SELECT count(*) FROM idem.idempotency_request WHERE scope = 'x' AND key = 'old'),
  (SELECT status || '/' || coalesce(claimed_by, '-') || '/' || attempt_count FROM idem.idempotency_request
    WHERE scope = '$scope' AND key = 'k'))});
}

# The counts of a call's report that these cases look at (jsonb orders its keys).
sub counts {
	my ($report) = @_;
	return join ' ', map { $report =~ /"$_": (\d+)/ ? "$_=$1" : "$_=?" }
	  qw(swept completer_runs completer_successes completer_failures purged_keys);
}

# ---- (4) a completer raising 57014 is contained ----
stage_work('a/cancel');
my ($ret, $stdout, $stderr) = $node->psql('postgres', 'SELECT idem.run_maintenance()');
is($ret, 0, '57014 from a completer: the call succeeds') or diag($stderr);
is(counts($stdout), 'swept=1 completer_runs=1 completer_successes=0 completer_failures=1 purged_keys=1',
	'57014 from a completer: swept 1, one completer failure, purged 1 in the same call');
like($stderr,
	qr/WARNING:  idem completer (?:public\.)?raise_cancel\S+ for scope "a\/cancel", key "k" failed: x/,
	'57014 from a completer: logged as a WARNING with scope and key');
is(stage_outcome('a/cancel'), 'failed_retryable 0 processing/idem completer/2',
	'57014 from a completer: the sweep and the purge committed, the call\'s claim kept');

# ---- (4) a sleeping completer is stopped by idem.completer_timeout ----
stage_work('a/sleep');
my $t0 = time;
my $timed_out = 0;
($ret, $stdout, $stderr) = $node->psql('postgres', 'SELECT idem.run_maintenance()',
	timeout => 60, timed_out => \$timed_out);
my $took = time - $t0;
note sprintf('a completer sleeping 600 s: the call returned after %.1f s (idem.completer_timeout 1 s)', $took);
ok(!$timed_out && $ret == 0, 'a sleeping completer: the call returns') or diag($stderr);
like($stderr,
	qr/WARNING:  idem completer (?:public\.)?sleeper\S+ for scope "a\/sleep", key "k" failed: canceling statement due to user request\nDETAIL:  It ran past idem.completer_timeout \(1000 ms\)/,
	'a sleeping completer: cancelled at idem.completer_timeout, logged with scope and key');
is(counts($stdout), 'swept=1 completer_runs=1 completer_successes=0 completer_failures=1 purged_keys=1',
	'a sleeping completer: counted as a failure; the call swept and purged');
is(stage_outcome('a/sleep'), 'failed_retryable 0 processing/idem completer/2',
	'a sleeping completer: the sweep and the purge committed');
# The cancel of the time limit does not strike the session's next statement.
is($node->safe_psql('postgres', q{SELECT (idem.run_maintenance())->>'swept'}), '0',
	'the next call in a new session runs normally');

# ---- the call's own statement_timeout ends the whole call ----
stage_work('a/sleep');
($ret, $stdout, $stderr) = $node->psql('postgres',
	q{SET statement_timeout = '300ms'; SELECT idem.run_maintenance()});
isnt($ret, 0, 'statement_timeout of the call: the call fails');
like($stderr, qr/ERROR:  canceling statement due to statement timeout/,
	'statement_timeout of the call: as a statement timeout');
is(stage_outcome('a/sleep'), 'processing 1 failed_retryable/-/1',
	'statement_timeout of the call: nothing it did stays');

# ---- pg_cancel_backend of the call ends the whole call ----
stage_work('a/sleep');
my ($in, $out, $err) = ('', '', '');
my $h = IPC::Run::start(
	[ 'psql', '-X', '-d', $node->connstr('postgres'), '-c',
	  q{SET application_name = 'cancelled_call'; SELECT idem.run_maintenance()} ],
	'<', \$in, '>', \$out, '2>', \$err);
ok( sql_true_within($node, 'the sleeping completer', q{
SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = 'cancelled_call' AND wait_event = 'PgSleep'}),
	'pg_cancel_backend: the completer sleeps');
sql(q{SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'cancelled_call'});
$h->finish;
like($err, qr/ERROR:  canceling statement due to user request/, 'pg_cancel_backend: the call is cancelled');
unlike($err, qr/WARNING:  idem completer/, 'pg_cancel_backend: not taken for the completer\'s failure');
is(stage_outcome('a/sleep'), 'processing 1 failed_retryable/-/1',
	'pg_cancel_backend: nothing the call did stays');
sql(q{DELETE FROM idem.idempotency_request WHERE scope = 'a/sleep'});

# ---- (4) a completer that catches every cancel: the session ends ----
stage_work('a/obstinate');
$t0 = time;
$timed_out = 0;
($ret, $stdout, $stderr) = $node->psql('postgres', 'SELECT idem.run_maintenance()',
	timeout => 60, timed_out => \$timed_out);
$took = time - $t0;
note sprintf('a completer catching its cancels: the session ended after %.1f s', $took);
ok(!$timed_out, 'a completer catching its cancels: the call does not hang');
like($stderr,
	qr/FATAL:  terminating connection due to administrator command\n(?:.*\n)*?CONTEXT:  (?:.*\n)*?.*idem completer (?:public\.)?obstinate\S+ for scope "a\/obstinate", key "k", run by idem.run_maintenance\(\), past idem.completer_timeout/,
	'a completer catching its cancels: FATAL, naming the completer, scope and key');
is(sql('SELECT 1'), '1', 'the server goes on');
sql(q{DELETE FROM idem.scope_policy WHERE scope = 'a/obstinate'; DELETE FROM idem.idempotency_request WHERE scope = 'a/obstinate'});

# ---- (7) a completer that calls idem.run_maintenance() ----
# A second due key, younger, gives the nested call a key of its own to
# claim: before 1.2's fix, that claim reset the judged role to the
# session's, so the completer's later peek was judged as the outer caller.
stage_work('a/nested');
sql(q{
SELECT idem.claim_idempotency_key('a/noop', 'k', 'h');
UPDATE idem.idempotency_request
   SET status = 'failed_retryable', failure_code = 'abandoned', failure_message = 'test',
       locked_until = NULL, finished_at = now() - interval '30 seconds',
       updated_at = now() - interval '30 seconds'
 WHERE scope = 'a/noop' AND key = 'k';
});
($ret, $stdout, $stderr) = $node->psql('postgres', 'SELECT idem.run_maintenance()');
note $stderr;
unlike($stderr, qr/b-secret-4242/, 'nested maintenance: b\'s stored body is never returned to a\'s completer');
like($stderr,
	qr/WARNING:  nested maintenance refused: 55000: idem.run_maintenance\(\) may not be called by a completer/,
	'nested maintenance: refused with 55000');
like($stderr, qr/WARNING:  peek of b refused: 42501/,
	'nested maintenance: the completer is still judged as tenant_a afterwards');
is($ret, 0, 'nested maintenance: the outer call succeeds');
unlike($stderr, qr/temporary schema/, 'nested maintenance: no spurious temporary-object failure');
is(sql(q{SELECT status || ' ' || coalesce(response_body->>'peeked', '<nothing>') FROM idem.idempotency_request WHERE scope = 'a/nested'}),
	'succeeded <nothing>', 'nested maintenance: the completer finished its own key, having read nothing of b');

# The same completer in a's own session: the refusal does not depend on who calls.
sql(q{DELETE FROM idem.idempotency_request WHERE scope = 'a/nested'});
stage_work('a/nested');
($ret, $stdout, $stderr) = $node->psql('postgres', q{SET ROLE tenant_a; SELECT idem.run_maintenance()});
unlike($stderr, qr/b-secret-4242/, 'nested maintenance called by tenant_a: b\'s body is never returned');

done_testing();
