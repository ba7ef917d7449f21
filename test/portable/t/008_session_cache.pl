# What the portable engine reads once per session (docs/portable.md, "What
# the portable engine costs"): the database's own idem.require_scope_owner
# (pg_db_role_setting, a shared catalog) and the session's token of
# idem.bind_lock_to_session (its backend_start, from the status array). Each
# reader is folded by the planner into a constant of the calling function's
# plan, which the backend keeps for the session; nothing a caller can SET,
# create or call reaches that plan:
#  - four covered calls, or four bound claims, of one session read the
#    catalog, or the status array, once;
#  - a session that turns the setting off before its first covered call, and
#    puts a reader of its own first on its search_path, is still refused
#    where the database's value is on;
#  - PUBLIC may not call the readers;
#  - a session's bound claims all carry its own token, made of its
#    backend_start; another session's is another.
# Installed with the SQL file by the database's owner, not a superuser.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemPortable;

my $node = portable_node('session_cache');
$node->safe_psql('postgres', q{
	CREATE ROLE dbowner LOGIN NOSUPERUSER;
	CREATE ROLE app LOGIN;
	CREATE DATABASE shop OWNER dbowner;
	GRANT pg_read_all_stats TO dbowner;
	ALTER DATABASE shop SET track_functions = 'all';});
my ($rc, $out, $err) = psql_file($node, 'shop', 'dbowner', tree_file('dist/idem-portable.sql'));
is($rc, 0, 'dbowner installs dist/idem-portable.sql') or diag($err);
grant_request_path($node, 'shop', 'dbowner', 'app');
sql_as($node, 'shop', 'dbowner', 'GRANT EXECUTE ON FUNCTION idem.may_use_scope(text) TO app');

# The calls of an idem function counted so far (a session's count reaches
# the statistics when it ends).
sub calls_of
{
	my ($function) = @_;
	return $node->safe_psql('shop', qq{
		SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions
		 WHERE schemaname = 'idem' AND funcname = '$function'});
}

# Runs a session of app; waits until the statistics count more calls of
# $reader than before, and returns (stdout, stderr, the calls it added).
sub session_reading
{
	my ($reader, $sql) = @_;
	my $before = calls_of($reader);
	my ($ret, $stdout, $stderr) = $node->psql('shop', "\\set VERBOSITY verbose\n$sql",
		extra_params => [ '-U', 'app' ], on_error_stop => 0);
	$node->poll_query_until('shop', qq{
		SELECT coalesce(sum(calls), 0) > $before FROM pg_stat_user_functions
		 WHERE schemaname = 'idem' AND funcname = '$reader'})
	  or diag("the statistics never counted a call of $reader");
	return ($stdout, $stderr, calls_of($reader) - $before);
}

# ---- the database's idem.require_scope_owner ----
$node->safe_psql('postgres', 'ALTER DATABASE shop SET idem.require_scope_owner = on');
my ($stdout, $stderr, $reads) = session_reading('portable_database_require_scope_owner', q{
	SET idem.require_scope_owner = off;
	CREATE FUNCTION pg_temp.portable_database_require_scope_owner() RETURNS text
	    LANGUAGE sql AS $$ SELECT 'off' $$;
	SET search_path = pg_temp, public, pg_catalog;
	SELECT idem.may_use_scope('free');
	SELECT idem.may_use_scope('free');
	SELECT idem.may_use_scope('free');
	SELECT kind FROM idem.claim_idempotency_key('free', 'k1', 'h');
	SELECT 'reader: ' || idem.portable_database_require_scope_owner();
});
is($stdout, "f\nf\nf", 'turned off by the session before its first covered call, the database\'s on holds');
like($stderr, qr/ERROR:  42501: permission denied for idempotency scope "free"/,
	'the claim is refused');
like($stderr, qr/ERROR:  42501: permission denied for function portable_database_require_scope_owner/,
	'PUBLIC may not call the reader');
unlike($stdout, qr/reader:/, 'nor read the kept value');
is($reads, 1, 'four covered calls of one session read the database\'s value once');

$node->safe_psql('postgres', 'ALTER DATABASE shop RESET idem.require_scope_owner');
($stdout, $stderr, $reads) = session_reading('portable_database_require_scope_owner', q{
	SET idem.require_scope_owner = off;
	SELECT idem.may_use_scope('free');
	SELECT kind FROM idem.claim_idempotency_key('free', 'k2', 'h');
});
is($stdout, "t\nnew_claim", 'a new session reads the database\'s value again: off, and the scope is free');
is($reads, 1, 'once');

# ---- the session's token ----
sub bound_session
{
	my ($keys) = @_;
	my $sql = "SET idem.bind_lock_to_session = on;\n";
	$sql .= "SELECT kind FROM idem.claim_idempotency_key('bound', '$_', 'h');\n" for @$keys;
	$sql .= q{SELECT ((extract(epoch FROM backend_start) - 946684800) * 1000000)::bigint
	            FROM pg_stat_activity WHERE pid = pg_backend_pid();};
	my ($stdout, $stderr, $reads) = session_reading('portable_backend_start', $sql);
	my @lines = split /\n/, $stdout;
	is(join(' ', @lines[ 0 .. $#$keys ]), join(' ', ('new_claim') x @$keys), "bound claims of @$keys")
	  or diag($stderr);
	return ($lines[-1], $reads);
}
my ($token_a, $reads_a) = bound_session([ 'a1', 'a2', 'a3', 'a4' ]);
my ($token_b, $reads_b) = bound_session([ 'b1' ]);
is($reads_a, 1, 'four bound claims of one session read the status array once');
is($reads_b, 1, 'and the next session reads its own');
is($node->safe_psql('shop', q{
	SELECT string_agg(DISTINCT bound_session::text, ' ') FROM idem.idempotency_request
	 WHERE scope = 'bound' AND key LIKE 'a%'}), $token_a,
	'each claim of the first session carries its token, made of its backend_start');
is($node->safe_psql('shop', q{
	SELECT bound_session FROM idem.idempotency_request WHERE scope = 'bound' AND key = 'b1'}), $token_b,
	'the second session\'s claim carries its own');
isnt($token_a, $token_b, 'two sessions, two tokens');
like(call_token(), qr/42501: permission denied for function portable_backend_start/,
	'PUBLIC may not call the token\'s reader');

sub call_token
{
	my ($ret, $stdout, $stderr) = $node->psql('shop', "\\set VERBOSITY verbose\nSELECT idem.portable_backend_start()",
		extra_params => [ '-U', 'app' ], on_error_stop => 0);
	return $stderr;
}

$node->stop;
done_testing();
