# The owner of a scope under the database's collation.
# A scope is covered by the longest idem.scope_owner prefix it starts with,
# the longest by length as the C++ engine takes it
# (src/pure/scope_prefix.cpp). The portable engine once took the greatest
# prefix under ORDER BY scope_prefix DESC, which is the longest only where
# a string sorts after its prefixes: ICU cy-GB makes "ng" one letter that
# sorts before "n" ('shop/ng' < 'shop/n'), and ICU th-TH sorts a Thai
# leading vowel after the consonant that follows it ('x/เก' < 'x/เ'). In
# databases with those collations the role owning the longer prefix must
# own the scope, and the other role be refused, as on the C++ engine.
# Installed with the SQL file by the database's owner, not a superuser.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemPortable;
use Encode qw(encode);

# The Thai prefixes are sent and read back as UTF-8 bytes.
$ENV{PGCLIENTENCODING} = 'UTF8';
my $node = portable_node('collation_owner');
my %case = (
	cy => { locale => 'cy-GB', short => 'shop/n', long => 'shop/ng', scope => 'shop/ng-payments' },
	th => { locale => 'th-TH', short => encode('UTF-8', "x/\x{0e40}"),
		long => encode('UTF-8', "x/\x{0e40}\x{0e01}"),
		scope => encode('UTF-8', "x/\x{0e40}\x{0e01}\x{0e21}") });
$node->safe_psql('postgres', q{
	CREATE ROLE dbowner LOGIN NOSUPERUSER;
	CREATE ROLE svc_short NOLOGIN;
	CREATE ROLE svc_long NOLOGIN;
	CREATE ROLE app_short LOGIN IN ROLE svc_short;
	CREATE ROLE app_long LOGIN IN ROLE svc_long;});

for my $db (sort keys %case)
{
	my $c = $case{$db};
	$node->safe_psql('postgres', qq{
		CREATE DATABASE $db OWNER dbowner TEMPLATE template0 ENCODING UTF8
		    LOCALE_PROVIDER icu ICU_LOCALE '$c->{locale}' LC_COLLATE 'C' LC_CTYPE 'C'});
	my ($rc, $out, $err) = psql_file($node, $db, 'dbowner', tree_file('dist/idem-portable.sql'));
	is($rc, 0, "$db: dbowner installs dist/idem-portable.sql") or diag($err);
	grant_request_path($node, $db, 'dbowner', $_) for ('app_short', 'app_long');
	sql_as($node, $db, 'dbowner', qq{
		GRANT EXECUTE ON FUNCTION idem.may_use_scope(text) TO app_short, app_long;
		INSERT INTO idem.scope_owner VALUES ('$c->{short}', 'svc_short'), ('$c->{long}', 'svc_long');});
	# The premise: under this collation the longer prefix sorts first.
	is($node->safe_psql($db, q{SELECT scope_prefix FROM idem.scope_owner ORDER BY scope_prefix LIMIT 1}),
		$c->{long}, "$db: under $c->{locale} the longer prefix sorts before the shorter one");

	is(sql_as($node, $db, 'app_long', qq{SELECT idem.may_use_scope('$c->{scope}')}), 't',
		"$db: the role owning the longest prefix may use the scope");
	is(sql_as($node, $db, 'app_short', qq{SELECT idem.may_use_scope('$c->{scope}')}), 'f',
		"$db: the role owning the shorter prefix may not");
	is(sql_as($node, $db, 'app_long',
			qq{SELECT kind FROM idem.claim_idempotency_key('$c->{scope}', 'k', 'h')}),
		'new_claim', "$db: the owner of the longest prefix claims a key of the scope");
	my ($ret, $stdout, $stderr) = $node->psql($db,
		"\\set VERBOSITY verbose\nSELECT kind FROM idem.claim_idempotency_key('$c->{scope}', 'k2', 'h')",
		extra_params => [ '-U', 'app_short' ]);
	like($stderr, qr/ERROR:  42501: permission denied for idempotency scope/,
		"$db: the owner of the shorter prefix is refused with 42501");
	# The shorter prefix still covers its own scopes.
	is(sql_as($node, $db, 'app_short', qq{SELECT idem.may_use_scope('$c->{short}')}), 't',
		"$db: the shorter prefix's own scope is its owner's");
}

done_testing();
