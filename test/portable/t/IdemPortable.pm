# What the portable engine's install tests share: a cluster of the private
# installation without idem's files (IDEM_PORTABLE_BIN, test/portable.sh
# makes it), a psql -f run as a chosen role, and the request path's
# round-trip as an application role.
package IdemPortable;

use strict;
use warnings;
use Exporter 'import';
use File::Basename qw(dirname);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use Test::More;

our @EXPORT = qw(portable_node psql_file sql_as tree_file grant_request_path
  round_trip replays extversion age_engine_bodies functions_of);

# A file of the tree under test (dist/..., build/portable/...).
sub tree_file
{
	my ($rel) = @_;
	my $path = "$ENV{IDEM_TREE}/$rel";
	BAIL_OUT("$path is missing: make portable writes it") unless -f $path;
	return $path;
}

# A started cluster of the portable installation, with the libraries given
# preloaded and further postgresql.conf lines.
sub portable_node
{
	my ($name, %opt) = @_;
	my $bin = $ENV{IDEM_PORTABLE_BIN} or BAIL_OUT('IDEM_PORTABLE_BIN is not set');
	my $node = PostgreSQL::Test::Cluster->new($name, install_path => dirname($bin));
	$node->init;
	my @conf = @{ $opt{conf} || [] };
	push @conf, "shared_preload_libraries = '" . join(',', @{ $opt{preload} }) . "'"
	  if $opt{preload};
	$node->append_conf('postgresql.conf', join("\n", @conf) . "\n") if @conf;
	$node->start;
	# The copy has none of idem's files: what is tested here is what a
	# server that cannot load idem's library can do.
	my $ext = $node->config_data('--sharedir') . '/extension/idem.control';
	BAIL_OUT("$ext exists: the portable installation must not hold idem's files") if -e $ext;
	return $node;
}

# psql -f FILE as a role; returns (exit status, stdout, stderr).
sub psql_file
{
	my ($node, $db, $user, $file) = @_;
	my ($out, $err) = ('', '');
	my @cmd = ($node->installed_command('psql'), '-X', '-q', '-v', 'ON_ERROR_STOP=1',
		'-h', $node->host, '-p', $node->port, '-U', $user, '-d', $db, '-f', $file);
	IPC::Run::run(\@cmd, '<', \undef, '>', \$out, '2>', \$err);
	return ($? >> 8, $out, $err);
}

# safe_psql as a role (a login of its own, not SET ROLE).
sub sql_as
{
	my ($node, $db, $user, $sql) = @_;
	return $node->safe_psql($db, $sql, extra_params => [ '-U', $user ]);
}

# README, "Privileges": what an application role is granted. Run by the
# extension's owner (who holds the grant option), not a superuser.
sub grant_request_path
{
	my ($node, $db, $owner, $app) = @_;
	sql_as($node, $db, $owner, qq{
		GRANT EXECUTE ON FUNCTION
		    idem.claim_idempotency_key(text, text, text, text, interval, interval),
		    idem.mark_succeeded(text, text, bigint, integer, jsonb, text, text),
		    idem.mark_failed(text, text, bigint, boolean, text, text, integer, jsonb),
		    idem.set_recovery_point(text, text, bigint, text),
		    idem.mark_succeeded_returning(text, text, bigint, integer, jsonb, text, text),
		    idem.mark_failed_returning(text, text, bigint, boolean, text, text, integer, jsonb),
		    idem.retry_after(text, idem.claim)
		  TO $app;});
}

# A claim, a recovery point, an outcome, then the replay of that outcome,
# all as the application role; a different request under the same key is
# refused with P4002.
sub round_trip
{
	my ($node, $db, $app, $scope, $key) = @_;
	my ($kind, $fence) = split /\|/, sql_as($node, $db, $app,
		qq{SELECT kind, fence FROM idem.claim_idempotency_key('$scope', '$key', 'h1')});
	is($kind, 'new_claim', "$scope/$key: the first claim is new_claim");
	like($fence, qr/^\d+$/, "$scope/$key: with a fence");
	sql_as($node, $db, $app, qq{
		SELECT idem.set_recovery_point('$scope', '$key', $fence, 'charged');
		SELECT idem.mark_succeeded('$scope', '$key', $fence, 201, '{"order": 7}');});
	replays($node, $db, $app, $scope, $key);
	my ($ret, $stdout, $stderr) = $node->psql($db,
		"\\set VERBOSITY verbose\nSELECT * FROM idem.claim_idempotency_key('$scope', '$key', 'other')",
		extra_params => [ '-U', $app ]);
	like($stderr, qr/ERROR:  P4002:/, "$scope/$key: another request under the key is refused with P4002");
}

# The key replays its stored answer to the application role.
sub replays
{
	my ($node, $db, $app, $scope, $key) = @_;
	is( sql_as($node, $db, $app, qq{
			SELECT kind || ' ' || response_code || ' ' || response_body::text
			  FROM idem.claim_idempotency_key('$scope', '$key', 'h1')}),
		'replay_success 201 {"order": 7}',
		"$scope/$key: the same request replays the stored answer");
}

# The functions whose bodies are the portable engine's own: the C++
# engine's LANGUAGE C functions (read from its 1.1 script) and the support
# functions idem.portable_*. An install made by an older idem release has
# other bodies under the same headers.
sub engine_function_names
{
	open my $fh, '<', tree_file('sql/idem--1.1.sql') or die $!;
	local $/;
	my $script = <$fh>;
	my @names = $script =~ /^CREATE (?:OR REPLACE )?FUNCTION idem\.(\w+)\([^;]*?AS 'MODULE_PATHNAME'/mg;
	BAIL_OUT('no LANGUAGE C function found in sql/idem--1.1.sql') unless @names;
	return @names;
}

# Makes an install look like one made by an older idem release: every
# engine function gets another body (a comment more) and a setting that no
# release gives it. Run as the functions' owner.
sub age_engine_bodies
{
	my ($node, $db, $owner) = @_;
	my $names = join(',', map { qq{"$_"} } engine_function_names());
	return sql_as($node, $db, $owner, qq{
		DO \$aging\$
		DECLARE
		    f regprocedure;
		    aged integer := 0;
		BEGIN
		    FOR f IN SELECT p.oid FROM pg_proc p
		              WHERE p.pronamespace = 'idem'::regnamespace
		                AND (p.proname LIKE 'portable\\_%' OR p.proname = ANY ('{$names}'::text[]))
		    LOOP
		        EXECUTE replace(pg_get_functiondef(f), E'\$function\$\\n',
		                        E'\$function\$\\n-- a body from an older release\\n');
		        EXECUTE format('ALTER FUNCTION %s SET application_name = %L', f, 'idem, an older release');
		        aged := aged + 1;
		    END LOOP;
		    RAISE NOTICE 'aged %', aged;
		END
		\$aging\$;
		SELECT count(*) FROM pg_proc p
		 WHERE p.pronamespace = 'idem'::regnamespace
		   AND 'application_name=idem, an older release' = ANY (p.proconfig);});
}

# Every function of schema idem as its definition and privileges, one line
# each: two installs at the same version must give the same text.
sub functions_of
{
	my ($node, $db) = @_;
	return $node->safe_psql($db, q{
		SELECT string_agg(p.oid::regprocedure::text || ' ' || md5(pg_get_functiondef(p.oid))
		                  || ' ' || coalesce(p.proacl::text, '-'), E'\n'
		                  ORDER BY p.oid::regprocedure::text)
		  FROM pg_proc p
		 WHERE p.pronamespace = 'idem'::regnamespace});
}

sub extversion
{
	my ($node, $db) = @_;
	return $node->safe_psql($db, q{SELECT extversion FROM pg_extension WHERE extname = 'idem'});
}

1;
