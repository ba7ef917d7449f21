# The portable engine as one SQL file, for services without pg_tle (Cloud
# SQL, Azure, Neon, Aiven): the database's owner, not a superuser, runs
# dist/idem-portable.sql with psql -f; idem.installed_version records the
# version, and dist/idem-portable--X--Y.sql files upgrade it with the keys
# in place. An upgrade file run against another version changes nothing.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemPortable;

my $node = portable_node('sqlfile');
my $install = tree_file('dist/idem-portable.sql');
my $install_11 = tree_file('build/portable/idem-portable--1.1.sql');
my $install_12 = tree_file('build/portable/idem-portable--1.2.sql');
my $upgrade_11 = tree_file('dist/idem-portable--1.1--1.2.sql');
my $upgrade = tree_file('dist/idem-portable--1.2--1.3.sql');
$node->safe_psql('postgres', q{
	CREATE ROLE dbowner LOGIN NOSUPERUSER;
	CREATE ROLE app LOGIN;
	CREATE DATABASE shop OWNER dbowner;
	CREATE DATABASE shop11 OWNER dbowner;
	CREATE DATABASE shop12 OWNER dbowner;});
is($node->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'dbowner'}),
	'f', 'dbowner is not a superuser');

sub installed_version
{
	my ($db) = @_;
	return sql_as($node, $db, 'dbowner', 'SELECT version FROM idem.installed_version');
}

# A fresh install of the newest version.
my ($rc, $out, $err) = psql_file($node, 'shop', 'dbowner', $install);
is($rc, 0, 'dbowner runs dist/idem-portable.sql') or diag($err);
is(installed_version('shop'), '1.3', 'idem.installed_version says 1.3');
is($node->safe_psql('shop', q{SELECT nspowner::regrole FROM pg_namespace WHERE nspname = 'idem'}),
	'dbowner', 'the schema is the owner\'s');
grant_request_path($node, 'shop', 'dbowner', 'app');
round_trip($node, 'shop', 'app', 'file', 'k1');

# The upgrade files against a database already at 1.3: a clear error, and
# nothing changed.
for my $file ($upgrade_11, $upgrade) {
	($rc, $out, $err) = psql_file($node, 'shop', 'dbowner', $file);
	isnt($rc, 0, "$file refuses a database at 1.3");
	like($err, qr/ERROR:/, 'with an error') and note($err);
	is(installed_version('shop'), '1.3', 'the database is still at 1.3');
}
replays($node, 'shop', 'app', 'file', 'k1');

# 1.1, keys, then the upgrades: the keys replay at 1.3.
($rc, $out, $err) = psql_file($node, 'shop11', 'dbowner', $install_11);
is($rc, 0, 'dbowner installs 1.1 (build/portable/idem-portable--1.1.sql)') or diag($err);
is(installed_version('shop11'), '1.1', 'idem.installed_version says 1.1');
grant_request_path($node, 'shop11', 'dbowner', 'app');
round_trip($node, 'shop11', 'app', 'file11', 'k1');
# As if 1.1 had been installed by an older idem: the upgrades must leave
# the same functions as a fresh 1.3 install, bodies included.
cmp_ok(age_engine_bodies($node, 'shop11', 'dbowner'), '>', 30,
	'the 1.1 install is given older bodies');
isnt(functions_of($node, 'shop11'), functions_of($node, 'shop'), 'which differ from 1.3');
($rc, $out, $err) = psql_file($node, 'shop11', 'dbowner', $upgrade);
isnt($rc, 0, 'dist/idem-portable--1.2--1.3.sql refuses a database at 1.1');
is(installed_version('shop11'), '1.1', 'which stays at 1.1');
($rc, $out, $err) = psql_file($node, 'shop11', 'dbowner', $upgrade_11);
is($rc, 0, 'dbowner runs dist/idem-portable--1.1--1.2.sql') or diag($err);
is(installed_version('shop11'), '1.2', 'idem.installed_version says 1.2 after the first upgrade');
($rc, $out, $err) = psql_file($node, 'shop11', 'dbowner', $upgrade);
is($rc, 0, 'dbowner runs dist/idem-portable--1.2--1.3.sql') or diag($err);
is(installed_version('shop11'), '1.3', 'idem.installed_version says 1.3 after the second');
grant_request_path($node, 'shop11', 'dbowner', 'app');
is(functions_of($node, 'shop11'), functions_of($node, 'shop'),
	'the database upgraded from 1.1 has the functions of a fresh 1.3 install, bodies and grants included');
replays($node, 'shop11', 'app', 'file11', 'k1');
round_trip($node, 'shop11', 'app', 'file11', 'k2');

# 1.2 (the released 1.2.0), keys, then the one upgrade.
($rc, $out, $err) = psql_file($node, 'shop12', 'dbowner', $install_12);
is($rc, 0, 'dbowner installs 1.2 (build/portable/idem-portable--1.2.sql)') or diag($err);
is(installed_version('shop12'), '1.2', 'idem.installed_version says 1.2');
grant_request_path($node, 'shop12', 'dbowner', 'app');
round_trip($node, 'shop12', 'app', 'file12', 'k1');
cmp_ok(age_engine_bodies($node, 'shop12', 'dbowner'), '>', 30,
	'the 1.2 install is given older bodies');
($rc, $out, $err) = psql_file($node, 'shop12', 'dbowner', $upgrade);
is($rc, 0, 'dbowner runs dist/idem-portable--1.2--1.3.sql') or diag($err);
is(installed_version('shop12'), '1.3', 'idem.installed_version says 1.3 after the upgrade');
grant_request_path($node, 'shop12', 'dbowner', 'app');
is(functions_of($node, 'shop12'), functions_of($node, 'shop'),
	'the database upgraded from 1.2 has the functions of a fresh 1.3 install, bodies and grants included');
replays($node, 'shop12', 'app', 'file12', 'k1');
round_trip($node, 'shop12', 'app', 'file12', 'k2');

# An upgrade file on a database without idem: an error, nothing created.
$node->safe_psql('postgres', 'CREATE DATABASE empty OWNER dbowner');
($rc, $out, $err) = psql_file($node, 'empty', 'dbowner', $upgrade);
isnt($rc, 0, 'the upgrade file refuses a database without idem');
is($node->safe_psql('empty', q{SELECT count(*) FROM pg_namespace WHERE nspname = 'idem'}),
	'0', 'and creates nothing there');

$node->stop;
done_testing();
