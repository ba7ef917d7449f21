# Completers of every form the policy trigger accepts run:
# - a LANGUAGE sql completer, whose void result is a null (before 1.1 it
#   failed every round with "function ... returned NULL");
# - a scope whose lock lasts 30 days (before 1.1 the remaining milliseconds
#   were narrowed to int, wrapped negative, and the completer was cancelled
#   at once);
# - a completer that swallows its own statement timeout is terminated once
#   the key's lock is over, and the worker goes on;
# - a scope with bind_lock_to_session;
# - a completer whose worker ends under it is terminated with it;
# - an owner that may not log in: on PostgreSQL 15 the round says so, naming
#   scope, key and role, and leaves the key (no process is started for it);
#   from 17 the completer runs as that role.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemWorkerTest qw(wait_for_log_match sql_true_within);

my $node = PostgreSQL::Test::Cluster->new('completer_forms');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'idem'\nidem.naptime = 1\n");
$node->start;
my $major = int($node->safe_psql('postgres', 'SHOW server_version_num') / 10000);


my $args = 'scope text, key text, fence bigint, recovery_point text, attempt_count integer';
my $sig = '(text, text, bigint, text, integer)';
$node->safe_psql('postgres', qq{
CREATE EXTENSION idem;
CREATE ROLE sql_owner LOGIN;
CREATE ROLE group_owner NOLOGIN;
CREATE TABLE done (scope text, key text, attempt integer, recovery_point text, by_role text);
GRANT INSERT ON done TO sql_owner, group_owner;
GRANT EXECUTE ON FUNCTION idem.mark_succeeded(text, text, bigint, integer, jsonb, text, text)
  TO sql_owner, group_owner;

-- (14) LANGUAGE sql, returning void.
CREATE FUNCTION sql_finish($args) RETURNS void LANGUAGE sql AS \$\$
  INSERT INTO public.done VALUES (scope, key, attempt_count, coalesce(recovery_point, '<null>'), current_user);
  SELECT idem.mark_succeeded(scope, key, fence, 201);
\$\$;
ALTER FUNCTION sql_finish$sig OWNER TO sql_owner;

-- (5) Works a moment (interrupts are checked), then records its outcome.
CREATE FUNCTION slow_finish($args) RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
  PERFORM pg_sleep(0.2);
  INSERT INTO public.done VALUES (scope, key, attempt_count, recovery_point, current_user);
  PERFORM idem.mark_succeeded(scope, key, fence, 201);
END \$\$;

-- Catches its own cancel and goes on forever.
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

-- Sleeps long (the worker is terminated under it).
CREATE FUNCTION sleepy($args) RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
  PERFORM pg_sleep(300);
END \$\$;

-- Owned by a group role that may not log in.
CREATE FUNCTION group_finish($args) RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
  INSERT INTO public.done VALUES (scope, key, attempt_count, recovery_point, current_user);
  PERFORM idem.mark_succeeded(scope, key, fence, 201);
END \$\$;
ALTER FUNCTION group_finish$sig OWNER TO group_owner;

INSERT INTO idem.scope_policy (scope, lock_timeout, max_attempts, completer) VALUES
  ('sql',      NULL,      NULL, 'sql_finish$sig'),
  ('month',    '30 days', NULL, 'slow_finish$sig'),
  ('obstinate', '2 seconds', 2,  'obstinate$sig'),
  ('nologin',  NULL,      NULL, 'group_finish$sig');
-- The worker's claim binds the key to the worker's session here.
INSERT INTO idem.scope_policy (scope, bind_lock_to_session, completer) VALUES
  ('bound', true, 'slow_finish$sig');
});

my $offset = -s $node->logfile;
# Clients claim and vanish (a 1 s lock); two keys checkpoint first, 'sql'
# key 'bare' does not (its recovery point stays 'started').
$node->safe_psql('postgres', q{
SELECT idem.set_recovery_point('sql', 'k', c.fence, 'charged')
  FROM idem.claim_idempotency_key('sql', 'k', 'h', 'client', '1 second') c;
SELECT idem.set_recovery_point('month', 'k', c.fence, 'charged')
  FROM idem.claim_idempotency_key('month', 'k', 'h', 'client', '1 second') c;
SELECT idem.claim_idempotency_key('sql', 'bare', 'h', 'client', '1 second');
SELECT idem.claim_idempotency_key('obstinate', 'k', 'h', 'client', '1 second');
SELECT idem.claim_idempotency_key('nologin', 'k', 'h', 'client', '1 second');
SELECT idem.claim_idempotency_key('bound', 'k', 'h', 'client', '1 second');
});

# Defect 14: a LANGUAGE sql completer records its outcome.
ok( sql_true_within($node, 'the sql scope\'s keys', q{
SELECT count(*) = 2 FROM idem.idempotency_request WHERE scope = 'sql' AND status = 'succeeded'}),
	'(14) a LANGUAGE sql completer finishes its keys');
is( $node->safe_psql('postgres', q{
SELECT string_agg(key || ':' || attempt || ':' || recovery_point || ':' || by_role, ' ' ORDER BY key)
  FROM done WHERE scope = 'sql'}),
	'bare:2:started:sql_owner k:2:charged:sql_owner',
	'(14) run once per key, as its owner, given the key\'s recovery point');

# Defect 5: a 30-day lock is not a cancel at once.
ok( sql_true_within($node, 'the month scope\'s key', q{
SELECT status = 'succeeded' FROM idem.idempotency_request WHERE scope = 'month'}),
	'(5) a completer of a scope with a 30-day lock runs to its end');
is( $node->safe_psql('postgres', q{
SELECT r.attempt_count || ' ' || r.claimed_by || ' ' || (SELECT count(*) FROM done d WHERE d.scope = 'month')
  FROM idem.idempotency_request r WHERE r.scope = 'month'}),
	'2 idem completer 1', '(5) finished on the worker\'s first try, its effect written once');
unlike(slurp_file($node->logfile, $offset),
	qr/canceling statement due to statement timeout\n(?:.*\n){0,3}?\s*idem completer (?:public\.)?slow_finish/,
	'(5) the completer was not cancelled');

# A scope whose locks are bound to the claiming session: the worker's claim
# binds to the worker's session (registering its session token on first use)
# and the completer finishes the key; the round raised nothing.
ok( sql_true_within($node, 'the bound key', q{
SELECT status = 'succeeded' FROM idem.idempotency_request WHERE scope = 'bound'}),
	'bind_lock_to_session: the completer finishes the key');
unlike(slurp_file($node->logfile, $offset),
	qr/ERROR:  [^\n]*\n(?:[^\n]*(?:DETAIL|HINT):  [^\n]*\n)*[^\n]*CONTEXT:  idem worker round/,
	'bind_lock_to_session: no worker round raised an error');

# A completer that swallows its statement timeout is terminated after the
# key's lock, the run counts as a failure, and max_attempts ends the key.
ok( wait_for_log_match($node,
		qr/idem completer (?:public\.)?obstinate\S+ for scope "obstinate", key "k" ended without a result\n.*DETAIL:  It ran past the end of the key's lock and was terminated/,
		$offset),
	'a completer that ignores its cancel is terminated after the lock, logged with scope and key');
ok( sql_true_within($node, 'the obstinate key to end', q{
SELECT failure_code = 'too_many_attempts' FROM idem.idempotency_request WHERE scope = 'obstinate'}),
	'the terminated runs count as attempts: max_attempts (2) ends the key');

if ($major < 17) {
	# On 15 the owner needs LOGIN: the round says so and starts no process.
	ok( wait_for_log_match($node,
			qr/WARNING:  idem completer (?:public\.)?group_finish\S+ for scope "nologin", key "k" cannot be run\n.*DETAIL:  Its owner, role "group_owner", may not log in/,
			$offset),
		'NOLOGIN owner on 15: the round names scope, key and role');
	unlike(slurp_file($node->logfile, $offset), qr/is not permitted to log in/,
		'NOLOGIN owner on 15: no completer process tried to log in');
	is($node->safe_psql('postgres', q{SELECT count(*) FROM done WHERE scope = 'nologin'}),
		'0', 'NOLOGIN owner on 15: nothing ran');
	is( $node->safe_psql('postgres',
			q{SELECT status || ' ' || claimed_by FROM idem.idempotency_request WHERE scope = 'nologin'}),
		'processing idem completer',
		'NOLOGIN owner on 15: the key stays claimed until its lock ends, for a later round');
}
else {
	ok( sql_true_within($node, 'the nologin key', q{
SELECT status = 'succeeded' FROM idem.idempotency_request WHERE scope = 'nologin'}),
		'NOLOGIN owner from 17: the completer runs');
	is($node->safe_psql('postgres', q{SELECT by_role FROM done WHERE scope = 'nologin'}),
		'group_owner', 'NOLOGIN owner from 17: as that role');
}

# The worker ends while a completer runs: it takes the completer with it
# (no completer goes on without the worker that waits for it).
$node->safe_psql('postgres', qq{
INSERT INTO idem.scope_policy (scope, lock_timeout, completer) VALUES ('orphan', '10 minutes', 'sleepy$sig');
SELECT idem.claim_idempotency_key('orphan', 'k', 'h', 'client', '1 second');
});
ok( sql_true_within($node, 'the sleepy completer', q{
SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'idem completer' AND wait_event = 'PgSleep'}),
	'worker exit: the completer is running');
$offset = -s $node->logfile;
$node->safe_psql('postgres',
	q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'idem worker'});
ok( sql_true_within($node, 'the completer to end', q{
SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'idem completer'}, 30),
	'worker exit: the completer ends with the worker');
like(slurp_file($node->logfile, $offset),
	qr/terminating background worker "idem completer" due to administrator command\n.*CONTEXT:  .*\n(?:.*\n)*?\s*idem completer (?:public\.)?sleepy\S+ for scope "orphan", key "k"/,
	'worker exit: the completer was terminated in the middle of its run');

$node->stop;
done_testing();
