# The completer flip race. A policy writer flips its
# completer between SECURITY INVOKER and DEFINER in a loop (ALTER FUNCTION
# takes no lock) while idem.run_maintenance() runs as the extension's owner
# and, then, while the writer's own idem.run_completers() runs. Before 1.2's
# fix the portable engine checked prosecdef and then called the function by
# name, and some runs executed as the extension's owner. Now a completer is
# called only in a call made as its owner: run_maintenance leaves the
# tenant's completer alone (a LOG line, "completer_keys_left"), and
# run_completers runs it as the tenant whatever its SECURITY. The completer
# records current_user and session_user in a table anyone may write, so a
# run as another role is seen. 1,000 calls each, with idem.batch_size 1.
# Installed with the SQL file by the database's owner, not a superuser.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use IdemPortable;

my $calls = 1000;
my $node = portable_node('completer_flip');
$node->safe_psql('postgres', q{
	CREATE ROLE dbowner LOGIN NOSUPERUSER;
	CREATE ROLE tenant LOGIN NOSUPERUSER;
	CREATE DATABASE shop OWNER dbowner;});
my ($rc, $out, $err) = psql_file($node, 'shop', 'dbowner', tree_file('dist/idem-portable.sql'));
is($rc, 0, 'dbowner installs dist/idem-portable.sql') or diag($err);
$node->safe_psql('shop', q{
	CREATE SCHEMA tenant AUTHORIZATION tenant;
	CREATE TABLE public.runs (scope text, key text, ran_as name, session_role name);
	GRANT INSERT, SELECT ON public.runs TO PUBLIC;});
grant_request_path($node, 'shop', 'dbowner', 'tenant');
sql_as($node, 'shop', 'dbowner', q{
	INSERT INTO idem.scope_owner VALUES ('t/', 'tenant');
	GRANT SELECT, INSERT, UPDATE, DELETE ON idem.scope_policy TO tenant;
	GRANT EXECUTE ON FUNCTION idem.run_completers(), idem.portable_claim_own_completer_keys(),
	    idem.portable_completer_outcome(text, text, bigint) TO tenant;});
sql_as($node, 'shop', 'tenant', qq{
	GRANT USAGE ON SCHEMA tenant TO dbowner;
	CREATE TABLE tenant.flipper (stop boolean NOT NULL, flips bigint NOT NULL);
	INSERT INTO tenant.flipper VALUES (false, 0);
	CREATE FUNCTION tenant.complete(scope text, key text, fence bigint, recovery_point text,
	                                attempt_count integer)
	RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS \$\$
	BEGIN
	    INSERT INTO public.runs VALUES (scope, key, current_user, session_user);
	    PERFORM idem.mark_succeeded(scope, key, fence, 200);
	END \$\$;
	INSERT INTO idem.scope_policy (scope, completer) VALUES ('t/flip', 'tenant.complete');
	SELECT count(*) FROM generate_series(1, 2 * $calls) g,
	       idem.claim_idempotency_key('t/flip', 'k' || g, 'h', NULL, interval '1 millisecond');});
$node->poll_query_until('shop',
	q{SELECT bool_and(locked_until < clock_timestamp()) FROM idem.idempotency_request})
  or die 'the keys\' locks did not run out';

# The flipper: as the tenant, INVOKER and DEFINER in turn, each committed,
# until told to stop (bounded, should the test die first).
my $flip_sql = q{
DO $flip$
BEGIN
    FOR i IN 1 .. 10000000 LOOP
        EXIT WHEN (SELECT stop FROM tenant.flipper);
        ALTER FUNCTION tenant.complete(text, text, bigint, text, integer) SECURITY INVOKER;
        COMMIT;
        ALTER FUNCTION tenant.complete(text, text, bigint, text, integer) SECURITY DEFINER;
        UPDATE tenant.flipper SET flips = flips + 1;
        COMMIT;
    END LOOP;
END
$flip$;};
sub start_flipper
{
	my ($fout, $ferr) = ('', '');
	sql_as($node, 'shop', 'tenant', 'UPDATE tenant.flipper SET stop = false, flips = 0');
	my $h = IPC::Run::start([ $node->installed_command('psql'), '-X', '-q', '-v', 'ON_ERROR_STOP=1',
			'-h', $node->host, '-p', $node->port, '-U', 'tenant', '-d', 'shop', '-c', $flip_sql ],
		'<', \undef, '>', \$fout, '2>', \$ferr);
	$node->poll_query_until('shop', 'SELECT flips >= 10 FROM tenant.flipper')
	  or die 'the flipper did not start';
	return $h;
}
sub stop_flipper
{
	my ($h) = @_;
	sql_as($node, 'shop', 'tenant', 'UPDATE tenant.flipper SET stop = true');
	$h->finish;
	return sql_as($node, 'shop', 'tenant', 'SELECT flips FROM tenant.flipper');
}

# $calls calls of one statement as a role, one key each, in one session.
sub call_many
{
	my ($user, $statement) = @_;
	my $file = $node->basedir . "/calls_$user.sql";
	open my $fh, '>', $file or die $!;
	print $fh "SET idem.batch_size = 1;\n", "$statement;\n" x $calls;
	close $fh;
	return psql_file($node, 'shop', $user, $file);
}

# The extension's owner, as pg_cron runs it.
my $flipper = start_flipper();
($rc, $out, $err) = call_many('dbowner', 'SELECT idem.run_maintenance()');
my $flips = stop_flipper($flipper);
is($rc, 0, "$calls calls of idem.run_maintenance() as the extension's owner") or diag($err);
cmp_ok($flips, '>', 10, "the completer was flipped while they ran ($flips flips)");
is($node->safe_psql('shop', q{SELECT count(*) FROM public.runs WHERE ran_as <> 'tenant'}), '0',
	'no run as anyone but the completer\'s owner during run_maintenance');
is($node->safe_psql('shop', q{SELECT count(*) FROM public.runs}), '0',
	'run_maintenance left the tenant\'s completer to the tenant');
like($node->safe_psql('shop', q{SELECT idem.run_maintenance()->>'completer_keys_left'}), qr/^[1-9]/,
	'and reports the keys it left (completer_keys_left)');

# The tenant runs its completer itself.
$flipper = start_flipper();
($rc, $out, $err) = call_many('tenant', 'SELECT idem.run_completers()');
$flips = stop_flipper($flipper);
is($rc, 0, "$calls calls of idem.run_completers() as the tenant") or diag($err);
cmp_ok($flips, '>', 10, "the completer was flipped while they ran ($flips flips)");
is($node->safe_psql('shop', q{SELECT count(*) FROM public.runs}), $calls,
	"the tenant's calls ran the completer $calls times");
is($node->safe_psql('shop', q{SELECT count(*) FROM public.runs WHERE ran_as <> 'tenant' OR session_role <> 'tenant'}),
	'0', 'every run was as the completer\'s owner, the tenant');
is($node->safe_psql('shop', q{SELECT count(*) FROM idem.idempotency_request WHERE status = 'succeeded'}),
	$calls, 'each run recorded its outcome');

# run_completers as another role's function: refused, the role that runs
# the completers must be the session's.
sql_as($node, 'shop', 'postgres', q{
	CREATE ROLE other LOGIN;
	CREATE FUNCTION public.lend() RETURNS jsonb LANGUAGE sql SECURITY DEFINER
	    SET search_path = pg_catalog AS 'SELECT idem.run_completers()';
	ALTER FUNCTION public.lend() OWNER TO tenant;});
my ($ret, $stdout, $stderr) = $node->psql('shop', "\\set VERBOSITY verbose\nSELECT public.lend()",
	extra_params => [ '-U', 'other' ]);
like($stderr, qr/ERROR:  42501: idem.run_completers\(\) runs as role "tenant" in a session of role "other" logged in as "other"/,
	'run_completers called through another role\'s SECURITY DEFINER function is refused with 42501');
is($node->safe_psql('shop', q{SELECT count(*) FROM public.runs}), $calls, 'and runs nothing');
# Nor after SET ROLE from a login role with more rights: an INVOKER completer
# could RESET ROLE back to them.
sql_as($node, 'shop', 'postgres', q{GRANT tenant TO other});
($ret, $stdout, $stderr) = $node->psql('shop', "\\set VERBOSITY verbose\nSET ROLE tenant;\nSELECT idem.run_completers()",
	extra_params => [ '-U', 'other' ]);
like($stderr, qr/ERROR:  42501: idem.run_completers\(\) runs as role "tenant" in a session of role "tenant" logged in as "other"/,
	'run_completers after SET ROLE is refused with 42501');

done_testing();
