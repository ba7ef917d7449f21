# Scopes owned by roles where the portable engine differs from the C++ one
# (docs/portable.md, "What the portable engine does differently"); the
# shared behaviour is test/sql/80_scope_owner.sql, run on both engines.
#  - idem.require_scope_owner has no registered setting: a session may SET
#    it, and it counts as on when the session's value or the database's
#    (ALTER DATABASE ... SET) is on, so a session can turn it on, not off;
#  - idem.scope_owner is read at each call: a claim_or_wait that is polling
#    in READ COMMITTED sees an owner change committed while it waits;
#  - a 1.1 install (no idem.scope_owner) uses every scope, and the upgrade
#    to 1.2 brings the check.
# Installed with the SQL file by the database's owner, not a superuser.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemPortable;

my $node = portable_node('scope_owner');
$node->safe_psql('postgres', q{
	CREATE ROLE dbowner LOGIN NOSUPERUSER;
	CREATE ROLE svc_a NOLOGIN;
	CREATE ROLE svc_b NOLOGIN;
	CREATE ROLE app_a LOGIN IN ROLE svc_a;
	CREATE ROLE app_b LOGIN IN ROLE svc_b;
	CREATE DATABASE shop OWNER dbowner;
	CREATE DATABASE shop11 OWNER dbowner;});

my ($rc, $out, $err) = psql_file($node, 'shop', 'dbowner', tree_file('dist/idem-portable.sql'));
is($rc, 0, 'dbowner installs dist/idem-portable.sql') or diag($err);
for my $app ('app_a', 'app_b')
{
	grant_request_path($node, 'shop', 'dbowner', $app);
	sql_as($node, 'shop', 'dbowner', qq{
		GRANT EXECUTE ON FUNCTION idem.claim_or_wait(text, text, text, interval, text, interval, interval),
		    idem.may_use_scope(text) TO $app;});
}
sql_as($node, 'shop', 'dbowner', q{INSERT INTO idem.scope_owner VALUES ('a.', 'svc_a'), ('b.', 'svc_b')});

# The call's error as "SQLSTATE: message", or its output.
sub call_as
{
	my ($user, $sql, $db) = @_;
	my ($ret, $stdout, $stderr) = $node->psql($db // 'shop', "\\set VERBOSITY verbose\n$sql",
		extra_params => [ '-U', $user ]);
	return $stderr =~ /ERROR:  (\w{5}: [^\n]*)/ ? $1 : $stdout;
}

sub claim_as
{
	my ($user, $scope, $key, $sql_before, $db) = @_;
	return call_as($user, ($sql_before // '')
		  . "\nSELECT kind FROM idem.claim_idempotency_key('$scope', '$key', 'h')", $db);
}

is(claim_as('app_a', 'a.1', 'k'), 'new_claim', 'a member of the owner claims its scope');
is(claim_as('app_b', 'a.1', 'k'), '42501: permission denied for idempotency scope "a.1"',
	'another role is refused with 42501');
is(claim_as('app_b', 'free', 'k'), 'new_claim', 'an uncovered scope is anyone\'s while the setting is off');

# ---- require_scope_owner: the session turns it on ----
is(claim_as('app_b', 'free', 'k2', 'SET idem.require_scope_owner = on;'),
	'42501: permission denied for idempotency scope "free"', 'a session turns the setting on');
is(claim_as('dbowner', 'free', 'k3', 'SET idem.require_scope_owner = on;'),
	'new_claim', 'the extension\'s owner still uses an uncovered scope');
is(claim_as('app_b', 'free', 'k4', 'SET idem.require_scope_owner = maybe;'),
	'22023: parameter "idem.require_scope_owner" requires a Boolean value',
	'a value that is no boolean is refused');

# ---- the database turns it on: no session turns it off ----
# A placeholder in ALTER DATABASE ... SET needs a superuser (or, from 15,
# GRANT SET ON PARAMETER): the database's owner alone may not.
like(call_as('dbowner', 'ALTER DATABASE shop SET idem.require_scope_owner = on'),
	qr/^42501: permission denied to set parameter "idem.require_scope_owner"/,
	'the database\'s owner may not set the database\'s value');
$node->safe_psql('postgres', 'ALTER DATABASE shop SET idem.require_scope_owner = on');
for my $off ('', 'SET idem.require_scope_owner = off;', q{SET idem.require_scope_owner = '';},
	'RESET idem.require_scope_owner;', 'SET LOCAL idem.require_scope_owner = false;')
{
	is(claim_as('app_b', 'free', 'k5', $off),
		'42501: permission denied for idempotency scope "free"',
		"the database's value holds after '$off'");
}
$node->safe_psql('postgres', 'ALTER ROLE app_b SET idem.require_scope_owner = off');
is(claim_as('app_b', 'free', 'k5'), '42501: permission denied for idempotency scope "free"',
	'and after a role\'s own value');
$node->safe_psql('postgres', 'ALTER ROLE app_b RESET idem.require_scope_owner');
is(claim_as('app_b', 'b.1', 'k'), 'new_claim', 'a covered scope is its owner\'s members\'');
$node->safe_psql('postgres', q{ALTER DATABASE shop SET idem.require_scope_owner = 'sometimes'});
is(claim_as('app_b', 'free', 'k6'),
	'22023: parameter "idem.require_scope_owner" requires a Boolean value',
	'a database value that is no boolean is refused');
$node->safe_psql('postgres', 'ALTER DATABASE shop RESET idem.require_scope_owner');
is(claim_as('app_b', 'free', 'k6'), 'new_claim', 'the database\'s value reset: off again');

# ---- an owner changed while claim_or_wait polls ----
# app_a holds a.w; a second app_a session waits for it; the scope then
# passes to svc_b, committed: the wait's next attempt is refused.
is(claim_as('app_a', 'a.w', 'k'), 'new_claim', 'app_a holds a.w');
my $waiter = $node->background_psql('shop', extra_params => [ '-U', 'app_a' ], on_error_stop => 0);
$waiter->query_until(qr/waiting/, q{
	\echo waiting
	SELECT kind FROM idem.claim_or_wait('a.w', 'k', 'h', '5 minutes');
});
ok( $node->poll_query_until('shop', q{
			SELECT count(*) = 1 FROM pg_stat_activity
			 WHERE usename = 'app_a' AND wait_event = 'PgSleep'}),
	'the second session polls');
sql_as($node, 'shop', 'dbowner', q{UPDATE idem.scope_owner SET owner = 'svc_b' WHERE scope_prefix = 'a.'});
ok( $node->poll_query_until('shop', q{
			SELECT count(*) = 0 FROM pg_stat_activity
			 WHERE usename = 'app_a' AND state = 'active'}),
	'the wait ends');
$waiter->quit;
like($waiter->{stderr}, qr/permission denied for idempotency scope "a\.w"/,
	'refused at its next attempt, before its max_wait');

# ---- the audit reached the server log ----
like(slurp_file($node->logfile),
	qr/idem: scope owner update by role dbowner \(session user dbowner\): prefix 'a\.' owned by svc_b, was prefix 'a\.' owned by svc_a/,
	'the owner change is in the server log');

# ---- 1.1: no owners; the upgrade brings them ----
($rc, $out, $err) = psql_file($node, 'shop11', 'dbowner', tree_file('build/portable/idem-portable--1.1.sql'));
is($rc, 0, 'dbowner installs 1.1') or diag($err);
grant_request_path($node, 'shop11', 'dbowner', 'app_b');
sql_as($node, 'shop11', 'dbowner', q{
	GRANT EXECUTE ON FUNCTION idem.outbox_put(text, text, text, jsonb, text, text, jsonb, timestamptz),
	    idem.outbox_lease(integer, interval, text[]) TO app_b;});
is(claim_as('app_b', 'a.1', 'k', 'SET idem.require_scope_owner = on;', 'shop11'), 'new_claim',
	'1.1: every scope is used, whatever the setting');
like(call_as('app_b', q{SELECT idem.outbox_put('a.1', 'k', 'e', '{}') IS NOT NULL;
	SELECT count(*) FROM idem.outbox_lease(10, '1 hour');}, 'shop11'), qr/^t\n1$/,
	'1.1: the outbox leases every scope');
($rc, $out, $err) = psql_file($node, 'shop11', 'dbowner', tree_file('dist/idem-portable--1.1--1.2.sql'));
is($rc, 0, 'dbowner upgrades it to 1.2') or diag($err);
sql_as($node, 'shop11', 'dbowner', q{INSERT INTO idem.scope_owner VALUES ('a.', 'svc_a')});
is(claim_as('app_b', 'a.1', 'k2', '', 'shop11'), '42501: permission denied for idempotency scope "a.1"',
	'1.2: the upgraded database checks the owner');
# An event of a.2 put by the superuser (a member of every role): app_b may
# not lease it, the superuser may.
$node->safe_psql('shop11', q{SELECT idem.outbox_put('a.2', 'k', 'e', '{}')});
is(call_as('app_b', q{SELECT count(*) FROM idem.outbox_lease(10);}, 'shop11'), '0',
	'1.2: the outbox leases only the role\'s scopes');
is($node->safe_psql('shop11', q{SELECT scope FROM idem.outbox_lease(10)}), 'a.2',
	'and a member of the owner leases them');

$node->stop;
done_testing();
