# The portable engine through pg_tle, as on Amazon RDS, Aurora and Supabase:
# a superuser creates pg_tle once; a role granted pgtle_admin and CREATE on
# the database, not a superuser, registers idem with dist/idem-pgtle.sql and
# then creates, drops, recreates at 1.1 or 1.2 and updates it like any
# extension.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemPortable;

plan skip_all => 'pg_tle: SKIP (no pg_tle source: set PG_TLE_SRC, docs/testing.md)'
  unless $ENV{IDEM_PG_TLE};

my $node = portable_node('pgtle', preload => ['pg_tle']);
my $db = 'postgres';
my $pgtle_sql = tree_file('dist/idem-pgtle.sql');
$node->safe_psql($db, q{
	CREATE EXTENSION pg_tle;
	CREATE ROLE tle_admin LOGIN NOSUPERUSER;
	GRANT pgtle_admin TO tle_admin;
	GRANT CREATE ON DATABASE postgres TO tle_admin;
	CREATE ROLE app LOGIN;});
is($node->safe_psql($db, q{SELECT rolsuper FROM pg_roles WHERE rolname = 'tle_admin'}),
	'f', 'tle_admin is not a superuser');

my ($rc, $out, $err) = psql_file($node, $db, 'tle_admin', $pgtle_sql);
is($rc, 0, 'tle_admin runs dist/idem-pgtle.sql') or diag($err);

sql_as($node, $db, 'tle_admin', 'CREATE EXTENSION idem');
is(extversion($node, $db), '1.3', 'CREATE EXTENSION idem as tle_admin installs 1.3');
is($node->safe_psql($db, q{SELECT extowner::regrole FROM pg_extension WHERE extname = 'idem'}),
	'tle_admin', 'owned by tle_admin');
grant_request_path($node, $db, 'tle_admin', 'app');
round_trip($node, $db, 'app', 'tle', 'k1');

# Every version it registered installs, and the update path reaches the
# newest; keys made under 1.1 or 1.2 replay after the update.
my $fresh = functions_of($node, $db);
sql_as($node, $db, 'tle_admin', q{DROP EXTENSION idem; CREATE EXTENSION idem VERSION '1.1'});
is(extversion($node, $db), '1.1', q{CREATE EXTENSION idem VERSION '1.1'});
grant_request_path($node, $db, 'tle_admin', 'app');
round_trip($node, $db, 'app', 'tle11', 'k1');
# As if 1.1 had been registered by an older idem: the update must leave
# the functions of a fresh 1.3, bodies included.
cmp_ok(age_engine_bodies($node, $db, 'tle_admin'), '>', 30, 'the 1.1 extension is given older bodies');
sql_as($node, $db, 'tle_admin', 'ALTER EXTENSION idem UPDATE');
is(extversion($node, $db), '1.3', 'ALTER EXTENSION idem UPDATE reaches 1.3 from 1.1');
grant_request_path($node, $db, 'tle_admin', 'app');
is(functions_of($node, $db), $fresh,
	'the extension updated from 1.1 has the functions of a fresh 1.3, bodies and grants included');
replays($node, $db, 'app', 'tle11', 'k1');

# The same from the released 1.2.
sql_as($node, $db, 'tle_admin', q{DROP EXTENSION idem; CREATE EXTENSION idem VERSION '1.2'});
is(extversion($node, $db), '1.2', q{CREATE EXTENSION idem VERSION '1.2'});
grant_request_path($node, $db, 'tle_admin', 'app');
round_trip($node, $db, 'app', 'tle12', 'k1');
cmp_ok(age_engine_bodies($node, $db, 'tle_admin'), '>', 30, 'the 1.2 extension is given older bodies');
sql_as($node, $db, 'tle_admin', 'ALTER EXTENSION idem UPDATE');
is(extversion($node, $db), '1.3', 'ALTER EXTENSION idem UPDATE reaches 1.3 from 1.2');
grant_request_path($node, $db, 'tle_admin', 'app');
is(functions_of($node, $db), $fresh,
	'the extension updated from 1.2 has the functions of a fresh 1.3, bodies and grants included');
replays($node, $db, 'app', 'tle12', 'k1');

# Registering again (a re-run of the same file, or of a newer one) succeeds
# and leaves the installed extension alone.
($rc, $out, $err) = psql_file($node, $db, 'tle_admin', $pgtle_sql);
is($rc, 0, 'dist/idem-pgtle.sql runs a second time') or diag($err);
is(extversion($node, $db), '1.3', 'the installed extension is still at 1.3');
replays($node, $db, 'app', 'tle12', 'k1');

ok(!$node->log_contains(qr/terminated by signal|server process .* was terminated/),
	'no backend crashed');
$node->stop;
done_testing();
