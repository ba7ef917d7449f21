# idem.run_maintenance() on the portable engine whatever a completer does
# (a completer of another tenant must not stop the maintenance):
#  - a completer's error of any SQLSTATE, 57014 (query_canceled) raised by
#    it included, which PL/pgSQL's WHEN OTHERS does not catch, is contained,
#    logged with its scope and key, and counted, and the call's other
#    stages commit;
#  - the call's own statement_timeout ending a completer that hangs ends
#    the completers' stage only: the sweep and the purges, run before the
#    completers, are kept (PL/pgSQL cannot give one completer a limit of its
#    own, docs/portable.md);
#  - the same for a tenant's idem.run_completers();
#  - a tenant revoking USAGE on its schema (its completer's name then
#    cannot be resolved by the extension's owner: to_regprocedure raised
#    42501 for the whole call) makes that completer skipped with a WARNING,
#    and the other completers run.
# Installed with the SQL file by the database's owner, not a superuser.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemPortable;

my $node = portable_node('completer_containment');
$node->safe_psql('postgres', q{
	CREATE ROLE dbowner LOGIN NOSUPERUSER;
	CREATE ROLE tenant LOGIN NOSUPERUSER;
	CREATE DATABASE shop OWNER dbowner;});
my ($rc, $out, $err) = psql_file($node, 'shop', 'dbowner', tree_file('dist/idem-portable.sql'));
is($rc, 0, 'dbowner installs dist/idem-portable.sql') or diag($err);
$node->safe_psql('shop', q{CREATE SCHEMA tenant AUTHORIZATION tenant; CREATE SCHEMA ops AUTHORIZATION dbowner;});
grant_request_path($node, 'shop', 'dbowner', 'tenant');
sql_as($node, 'shop', 'dbowner', q{
	INSERT INTO idem.scope_owner VALUES ('t/', 'tenant');
	GRANT SELECT, INSERT, UPDATE, DELETE ON idem.scope_policy TO tenant;
	GRANT EXECUTE ON FUNCTION idem.run_completers(), idem.portable_claim_own_completer_keys(),
	    idem.portable_completer_outcome(text, text, bigint) TO tenant;
	CREATE FUNCTION ops.cancel(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
	RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
	BEGIN
	    PERFORM idem.mark_succeeded(scope, key, fence, 200);
	    RAISE EXCEPTION 'a completer that raises query_canceled' USING ERRCODE = 'query_canceled';
	END $$;
	CREATE FUNCTION ops.hang(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
	RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
	BEGIN
	    PERFORM idem.mark_succeeded(scope, key, fence, 200);
	    PERFORM pg_sleep(3600);
	END $$;
	CREATE FUNCTION ops.finish(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
	RETURNS void LANGUAGE sql SET search_path = pg_catalog, pg_temp
	AS $$ SELECT idem.mark_succeeded(scope, key, fence, 200) $$;});

# Keys whose locks have run out, in the scopes given.
sub stale
{
	my (@scopes) = @_;
	my $values = join(', ', map { "('$_')" } @scopes);
	sql_as($node, 'shop', 'dbowner', qq{
		SELECT count(*) FROM (VALUES $values) s(scope),
		       idem.claim_idempotency_key(s.scope, 'k', 'h', NULL, interval '1 millisecond')});
	$node->poll_query_until('shop', qq{
		SELECT bool_and(r.locked_until < clock_timestamp()) FROM idem.idempotency_request r
		 WHERE r.key = 'k' AND r.scope IN (SELECT s.scope FROM (VALUES $values) s(scope))})
	  or die 'the locks did not run out';
}
sub status_of
{
	my ($scope) = @_;
	return $node->safe_psql('shop', qq{
		SELECT status || coalesce(' ' || failure_code, '') FROM idem.idempotency_request
		 WHERE scope = '$scope' AND key = 'k'});
}
# A call's report (or its error) and its stderr.
sub call
{
	my ($user, $sql) = @_;
	my ($ret, $stdout, $stderr) = $node->psql('shop', "\\set VERBOSITY verbose\n$sql",
		extra_params => [ '-U', $user ]);
	return ($stderr =~ /ERROR:  (\w{5}: [^\n]*)/ ? $1 : $stdout, $stderr);
}

# 57014 raised by a completer.
sql_as($node, 'shop', 'dbowner', q{INSERT INTO idem.scope_policy (scope, completer) VALUES ('c/cancel', 'ops.cancel')});
stale('c/cancel', 'plain/1');
my ($report, $log) = call('dbowner', q{
	SELECT r->>'swept' || ' ' || (r->>'completer_runs') || ' ' || (r->>'completer_failures')
	  FROM idem.run_maintenance() r});
is($report, "2 1 1", 'a completer raising 57014 is contained and counted as a failure; the call answers');
like($log, qr/WARNING:  57014: idem completer ops\.cancel\(text,text,bigint,text,integer\) for scope "c\/cancel", key "k" failed: a completer that raises query_canceled/,
	'with a WARNING naming the completer, the scope and the key');
is(status_of('plain/1'), 'failed_retryable abandoned', 'the sweep of the same call committed');
like(status_of('c/cancel'), qr/^processing\b/, 'the completer\'s work was undone (the key stays claimed)');
sql_as($node, 'shop', 'dbowner', q{DELETE FROM idem.scope_policy WHERE scope = 'c/cancel'});

# The call's statement_timeout ends a completer that hangs.
sql_as($node, 'shop', 'dbowner', q{INSERT INTO idem.scope_policy (scope, completer) VALUES ('c/hang', 'ops.hang')});
stale('c/hang', 'plain/2');
($report, $log) = call('dbowner', q{SET statement_timeout = '1s';
	SELECT r->>'swept' || ' ' || (r->>'completer_runs') || ' ' || (r->>'completer_failures')
	  FROM idem.run_maintenance() r});
is($report, "2 1 1", 'a completer ended by the call\'s statement_timeout: the call answers, one failure');
like($log, qr/WARNING:  57014: idem completer ops\.hang\(text,text,bigint,text,integer\) for scope "c\/hang", key "k" failed: canceling statement due to statement timeout/,
	'with a WARNING naming it');
is(status_of('plain/2'), 'failed_retryable abandoned', 'the sweep before it committed');
like(status_of('c/hang'), qr/^processing\b/, 'the hanging completer\'s work was undone');
sql_as($node, 'shop', 'dbowner', q{DELETE FROM idem.scope_policy WHERE scope = 'c/hang'});

# The extension owner's completers are still held to the round's rules: a
# temporary object or a setting left behind fails the completer and undoes it.
sql_as($node, 'shop', 'dbowner', q{
	CREATE FUNCTION ops.leave_temp(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
	RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
	BEGIN
	    PERFORM idem.mark_succeeded(scope, key, fence, 200);
	    EXECUTE 'CREATE FUNCTION pg_temp.left_behind() RETURNS integer LANGUAGE sql AS $f$ SELECT 1 $f$';
	END $$;
	CREATE FUNCTION ops.leave_setting(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
	RETURNS void LANGUAGE plpgsql AS $$
	BEGIN
	    PERFORM idem.mark_succeeded(scope, key, fence, 200);
	    PERFORM pg_catalog.set_config('work_mem', '7MB', false);
	END $$;
	INSERT INTO idem.scope_policy (scope, completer) VALUES ('c/temp', 'ops.leave_temp'), ('c/setting', 'ops.leave_setting');});
stale('c/temp', 'c/setting');
($report, $log) = call('dbowner', q{
	SELECT r->>'completer_runs' || ' ' || (r->>'completer_failures') FROM idem.run_maintenance() r;
	SELECT current_setting('work_mem') || ' ' || count(*) FROM pg_proc WHERE pronamespace = pg_my_temp_schema();});
is($report, "2 2\n4MB 0", 'completers leaving a temporary function or a setting fail, and leave nothing');
like($log, qr/idem completer ops\.leave_temp\(text,text,bigint,text,integer\) for scope "c\/temp", key "k" failed: the completer left an object in the session's temporary schema/,
	'a temporary object left behind is named');
like($log, qr/idem completer ops\.leave_setting\(text,text,bigint,text,integer\) for scope "c\/setting", key "k" failed: the completer left a setting changed: work_mem/,
	'a setting left changed is named');
like(status_of('c/temp') . ' ' . status_of('c/setting'), qr/^processing\b.* processing\b/, 'both are undone');
sql_as($node, 'shop', 'dbowner', q{DELETE FROM idem.scope_policy WHERE scope IN ('c/temp', 'c/setting')});

# The tenant's own completer raising 57014, in its run_completers.
sql_as($node, 'shop', 'tenant', q{
	GRANT USAGE ON SCHEMA tenant TO dbowner;
	CREATE FUNCTION tenant.cancel(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
	RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
	BEGIN
	    RAISE EXCEPTION 'the tenant''s completer raises query_canceled' USING ERRCODE = 'query_canceled';
	END $$;
	INSERT INTO idem.scope_policy (scope, completer) VALUES ('t/cancel', 'tenant.cancel');
	SELECT kind FROM idem.claim_idempotency_key('t/cancel', 'k', 'h', NULL, interval '1 millisecond');});
$node->poll_query_until('shop', q{
	SELECT locked_until < clock_timestamp() FROM idem.idempotency_request WHERE scope = 't/cancel'})
  or die 'the lock did not run out';
($report, $log) = call('tenant', q{SELECT r->>'completer_runs' || ' ' || (r->>'completer_failures')
                                     FROM idem.run_completers() r});
is($report, "1 1", 'run_completers contains its completer\'s 57014 and counts it');
like($log, qr/WARNING:  57014: idem completer tenant\.cancel\(text,text,bigint,text,integer\) for scope "t\/cancel", key "k" failed/,
	'with a WARNING');

# A tenant revokes USAGE on its schema: its completer cannot be resolved by
# the extension's owner; maintenance goes on for the others.
sql_as($node, 'shop', 'tenant', q{
	REVOKE USAGE ON SCHEMA tenant FROM dbowner;
	SELECT kind FROM idem.claim_idempotency_key('t/cancel', 'k2', 'h', NULL, interval '1 millisecond');});
sql_as($node, 'shop', 'dbowner', q{INSERT INTO idem.scope_policy (scope, completer) VALUES ('c/finish', 'ops.finish')});
stale('c/finish');
$node->poll_query_until('shop', q{
	SELECT locked_until < clock_timestamp() FROM idem.idempotency_request
	 WHERE scope = 't/cancel' AND key = 'k2'}) or die 'the lock did not run out';
($report, $log) = call('dbowner', q{SELECT r->>'completer_runs' || ' ' || (r->>'completer_successes')
                                      FROM idem.run_maintenance() r});
is($report, "1 1", 'run_maintenance runs the other completers when a tenant revoked USAGE on its schema');
like($log, qr/WARNING:  01000: idem completer "tenant\.cancel\(pg_catalog\.text,pg_catalog\.text,bigint,pg_catalog\.text,integer\)" cannot be resolved: permission denied for schema tenant/,
	'and says which completer it could not resolve');
is(status_of('c/finish'), 'succeeded', 'the other scope\'s key is completed');
is($node->safe_psql('shop', q{SELECT status || ' ' || attempt_count FROM idem.idempotency_request
                               WHERE scope = 't/cancel' AND key = 'k2'}),
	'failed_retryable 1', 'the tenant\'s key is swept, not claimed');

done_testing();
