# A completer runs wholly as its owner, in a session that ends with it
# (since 1.1; docs/policy.md, "The completer"). Hostile completers owned by
# a role that may only name them try what a session outlives a function
# with: a deferred constraint trigger and a WITH HOLD cursor that run at
# COMMIT (and try ALTER ROLE ... SUPERUSER there), ON COMMIT actions,
# session-level settings (search_path, idem.lock_timeout), temp objects
# that shadow names, SET ROLE and SET SESSION AUTHORIZATION. Then another
# role's completer runs and records what its session looks like: nothing
# the hostile ones left may reach it, and none of it may reach the worker.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemWorkerTest qw(sql_true_within);

my $node = PostgreSQL::Test::Cluster->new('completer_owner_session');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'idem'\nidem.naptime = 1\n");
$node->start;

# Polls $sql until it returns 't', for at most $seconds (a deadline of its
# own, shorter than the suite's).

my $completer_args = 'scope text, key text, fence bigint, recovery_point text, attempt_count integer';
my $signature = '(text, text, bigint, text, integer)';

$node->safe_psql('postgres', qq{
CREATE EXTENSION idem;
-- LOGIN: on PostgreSQL 15 a completer's process connects as its owner.
CREATE ROLE hostile LOGIN;
CREATE ROLE victim LOGIN;
CREATE TABLE public.observed (via text, what text, value text, at timestamptz DEFAULT clock_timestamp());
GRANT INSERT ON public.observed TO hostile, victim;
GRANT EXECUTE ON FUNCTION idem.mark_succeeded(text, text, bigint, integer, jsonb, text, text) TO hostile, victim;
-- So the victim's completer can read the lock the worker's claim took.
GRANT SELECT ON idem.idempotency_request TO victim;
CREATE SCHEMA hostile AUTHORIZATION hostile;
GRANT USAGE ON SCHEMA hostile TO PUBLIC;
CREATE SCHEMA victim AUTHORIZATION victim;

SET ROLE hostile;
-- A shadow of public.observed that anyone may write: a completer whose
-- search_path leads here writes where hostile reads.
CREATE TABLE hostile.observed (via text, what text, value text, at timestamptz);
GRANT INSERT ON hostile.observed TO PUBLIC;

-- Records who runs it, then tries to make hostile a superuser.
CREATE FUNCTION hostile.escalate(via text) RETURNS integer LANGUAGE plpgsql AS \$\$
BEGIN
  INSERT INTO public.observed (via, what, value) VALUES
    (via, 'current_user', current_user), (via, 'session_user', session_user);
  BEGIN
    EXECUTE 'ALTER ROLE hostile SUPERUSER';
    INSERT INTO public.observed (via, what, value) VALUES (via, 'alter role', 'succeeded');
  EXCEPTION WHEN insufficient_privilege THEN
    INSERT INTO public.observed (via, what, value) VALUES (via, 'alter role', SQLSTATE);
  END;
  RETURN 1;
END \$\$;

-- (a) A deferred constraint trigger: it fires at the completer's COMMIT.
CREATE TABLE hostile.audit (id integer);
CREATE FUNCTION hostile.audit_at_commit() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN
  PERFORM hostile.escalate('deferred trigger');
  RETURN NULL;
END \$\$;
CREATE CONSTRAINT TRIGGER audit_at_commit AFTER INSERT ON hostile.audit
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION hostile.audit_at_commit();
CREATE FUNCTION hostile.deferred($completer_args) RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
  INSERT INTO hostile.audit VALUES (1);
  PERFORM idem.mark_succeeded(scope, key, fence, 200);
END \$\$;

-- (b) ON COMMIT actions.
CREATE FUNCTION hostile.on_commit($completer_args) RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
  CREATE TEMP TABLE dropped_at_commit (x integer) ON COMMIT DROP;
  CREATE TEMP TABLE emptied_at_commit (x integer) ON COMMIT DELETE ROWS;
  INSERT INTO dropped_at_commit VALUES (1);
  INSERT INTO emptied_at_commit VALUES (1);
  PERFORM idem.mark_succeeded(scope, key, fence, 200);
END \$\$;

-- (c) Session-level settings.
CREATE FUNCTION hostile.session_settings($completer_args) RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
  PERFORM pg_catalog.set_config('search_path', 'hostile, public', false);
  PERFORM pg_catalog.set_config('idem.lock_timeout', '1h', false);
  PERFORM idem.mark_succeeded(scope, key, fence, 200);
END \$\$;

-- (d) A WITH HOLD cursor: its query runs to the end at COMMIT.
CREATE FUNCTION hostile.held_cursor($completer_args) RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
  EXECUTE 'DECLARE held CURSOR WITH HOLD FOR SELECT hostile.escalate(''with hold cursor'')';
  PERFORM idem.mark_succeeded(scope, key, fence, 200);
END \$\$;

-- (e) Temp objects shadowing names that others use unqualified.
CREATE FUNCTION hostile.temp_objects($completer_args) RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
  CREATE TEMP TABLE observed (via text, what text, value text, at timestamptz);
  CREATE TEMP VIEW pg_stat_activity AS
    SELECT pg_catalog.pg_backend_pid() AS pid, 'forged by hostile'::text AS backend_type;
  PERFORM idem.mark_succeeded(scope, key, fence, 200);
END \$\$;

-- (f) SET ROLE and SET SESSION AUTHORIZATION to the bootstrap superuser.
CREATE FUNCTION hostile.set_role($completer_args) RETURNS void LANGUAGE plpgsql AS \$\$
DECLARE
  superuser_name text := (SELECT rolname FROM pg_catalog.pg_roles WHERE oid = 10);
BEGIN
  BEGIN
    EXECUTE pg_catalog.format('SET ROLE %I', superuser_name);
    INSERT INTO public.observed (via, what, value) VALUES ('set role', 'result', 'succeeded');
  EXCEPTION WHEN insufficient_privilege THEN
    INSERT INTO public.observed (via, what, value) VALUES ('set role', 'result', SQLSTATE);
  END;
  BEGIN
    EXECUTE pg_catalog.format('SET SESSION AUTHORIZATION %I', superuser_name);
    INSERT INTO public.observed (via, what, value) VALUES ('set session authorization', 'result', 'succeeded');
  EXCEPTION WHEN insufficient_privilege THEN
    INSERT INTO public.observed (via, what, value) VALUES ('set session authorization', 'result', SQLSTATE);
  END;
  INSERT INTO public.observed (via, what, value) VALUES
    ('set role', 'current_user', current_user), ('set role', 'session_user', session_user);
  PERFORM idem.mark_succeeded(scope, key, fence, 200);
END \$\$;

RESET ROLE;
SET ROLE victim;
-- Another role's completer: records what its session looks like, writing
-- to "observed" and reading pg_stat_activity unqualified on purpose.
CREATE FUNCTION victim.victim_completer($completer_args) RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
  INSERT INTO observed (via, what, value) VALUES
    ('victim', 'search_path', current_setting('search_path')),
    ('victim', 'idem.lock_timeout', current_setting('idem.lock_timeout')),
    ('victim', 'lock seconds', (SELECT round(extract(epoch FROM r.locked_until - r.updated_at))::text
                                  FROM idem.idempotency_request r
                                 WHERE r.scope = victim_completer.scope AND r.key = victim_completer.key)),
    ('victim', 'temp relations', (SELECT count(*)::text FROM pg_catalog.pg_class
                                   WHERE relnamespace = pg_catalog.pg_my_temp_schema())),
    ('victim', 'cursors', (SELECT count(*)::text FROM pg_catalog.pg_cursors)),
    ('victim', 'backend_type', (SELECT backend_type FROM pg_stat_activity WHERE pid = pg_backend_pid())),
    ('victim', 'current_user', current_user),
    ('victim', 'session_user', session_user);
  PERFORM idem.mark_succeeded(scope, key, fence, 200);
END \$\$;
RESET ROLE;

INSERT INTO idem.scope_policy (scope, completer) VALUES
  ('h_deferred',  'hostile.deferred$signature'),
  ('h_on_commit', 'hostile.on_commit$signature'),
  ('h_settings',  'hostile.session_settings$signature'),
  ('h_cursor',    'hostile.held_cursor$signature'),
  ('h_temp',      'hostile.temp_objects$signature'),
  ('h_set_role',  'hostile.set_role$signature'),
  ('victim',      'victim.victim_completer$signature');
});

# The hostile keys first: clients claim and vanish (a 1 s lock).
$node->safe_psql('postgres', q{
SELECT idem.claim_idempotency_key(s, 'k', 'h', 'client', '1 second')
  FROM unnest(ARRAY['h_deferred', 'h_on_commit', 'h_settings', 'h_cursor', 'h_temp', 'h_set_role']) s});
ok( sql_true_within($node, 'the hostile keys to be completed', q{
SELECT count(*) = 6 FROM idem.idempotency_request
 WHERE scope LIKE 'h\_%' AND status = 'succeeded' AND claimed_by = 'idem completer'}),
	'each hostile completer ran and recorded its outcome')
  or diag($node->safe_psql('postgres',
	'SELECT scope, status, claimed_by, attempt_count FROM idem.idempotency_request ORDER BY scope'));

# Then the victim's key, after every hostile completer has committed.
$node->safe_psql('postgres',
	q{SELECT idem.claim_idempotency_key('victim', 'k', 'h', 'client', '1 second')});
ok( sql_true_within($node, 'the victim key to be completed', q{
SELECT status = 'succeeded' FROM idem.idempotency_request WHERE scope = 'victim'}),
	'the victim completer ran and recorded its outcome');

sub observed {
	my ($via) = @_;
	return $node->safe_psql('postgres', qq{
SELECT string_agg(what || '=' || coalesce(value, '<null>'), ' ' ORDER BY what COLLATE "C")
  FROM public.observed WHERE via = '$via'});
}

# (a) The deferred trigger fired at COMMIT as hostile, in hostile's session.
is(observed('deferred trigger'),
	'alter role=42501 current_user=hostile session_user=hostile',
	'(a) a deferred trigger fires at COMMIT as the owner, and cannot make it a superuser');
# (d) The WITH HOLD cursor's query ran at COMMIT as hostile too.
is(observed('with hold cursor'),
	'alter role=42501 current_user=hostile session_user=hostile',
	'(d) a WITH HOLD cursor is filled at COMMIT as the owner, and cannot make it a superuser');
# (f) No way up from inside.
is(observed('set role'), 'current_user=hostile result=42501 session_user=hostile',
	'(f) SET ROLE to the superuser is refused; the completer stays its owner');
is(observed('set session authorization'), 'result=42501',
	'(f) SET SESSION AUTHORIZATION to the superuser is refused');
is($node->safe_psql('postgres',
		q{SELECT string_agg(rolname || '=' || rolsuper, ' ' ORDER BY rolname) FROM pg_roles WHERE rolname IN ('hostile', 'victim')}),
	'hostile=false victim=false', 'no completer owner became a superuser');

# (b), (c), (e): nothing of the hostile sessions reached the victim's.
is(observed('victim'),
	join(' ',
		'backend_type=idem completer',
		'current_user=victim',
		'cursors=0',
		'idem.lock_timeout=5min',
		'lock seconds=300',
		'search_path="$user", public',
		'session_user=victim',
		'temp relations=0'),
	'(b, c, d, e) the victim completer runs in a fresh session of its own owner: default '
	  . 'search_path and idem settings, no temp relations or cursors, the real pg_stat_activity, '
	  . 'and the worker claimed its key with the default lock');
is($node->safe_psql('postgres', 'SELECT count(*) FROM hostile.observed'),
	'0', '(c) no completer wrote through the hostile search_path');

# Every run succeeded; the worker goes on with its rounds.
ok( sql_true_within($node, 'the counters', q{
SELECT completer_runs = 7 AND completer_successes = 7 AND completer_failures = 0
  FROM idem.stats WHERE datname = current_database()}),
	'idem.stats: 7 completer runs, 7 successes');
my $rounds = $node->safe_psql('postgres',
	'SELECT worker_rounds FROM idem.stats WHERE datname = current_database()');
ok( sql_true_within($node, 'two more worker rounds', qq{
SELECT worker_rounds >= $rounds + 2 FROM idem.stats WHERE datname = current_database()}),
	'the worker keeps running its rounds');

$node->stop;
done_testing();
