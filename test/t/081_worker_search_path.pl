# The worker logs in as the bootstrap superuser. A database's owner (no
# superuser) may ALTER DATABASE ... SET search_path, which every new session
# of that database applies, the worker's included; whatever the worker runs
# (its statements, and the code they fire: triggers an operator put on the
# key table) must not resolve a name through the owner's schema. The worker
# pins its search_path to pg_catalog, pg_temp at connection (since 1.1).
#
# The owner shadows text = text; the superuser's own delete trigger on the
# key table, written without qualifying its operators, records the path it
# ran under. The worker's purge fires it.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemWorkerTest qw(expired_outcomes_sql);

my $node = PostgreSQL::Test::Cluster->new('worker_search_path');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'idem'\nidem.naptime = 1\nidem.database = 'shop'\n");
$node->start;
$node->safe_psql('postgres', q{
CREATE ROLE shop_owner LOGIN;
CREATE DATABASE shop OWNER shop_owner;
});
$node->safe_psql('shop', q{
CREATE EXTENSION idem;
CREATE TABLE public.trigger_ran (path text);
CREATE TABLE public.shadow_ran (ran_as name, promoted boolean);
GRANT INSERT ON public.trigger_ran, public.shadow_ran TO PUBLIC;
CREATE FUNCTION public.note_purge() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.scope = 'swp' THEN
    INSERT INTO public.trigger_ran VALUES (current_setting('search_path'));
  END IF;
  RETURN OLD;
END $$;
CREATE TRIGGER note_purge AFTER DELETE ON idem.idempotency_request
  FOR EACH ROW EXECUTE FUNCTION public.note_purge();
});

# The database's owner: its own schema, an operator that tries to make it
# superuser, and its schema first on the database's search_path.
$node->safe_psql('shop', q{
SET ROLE shop_owner;
CREATE SCHEMA evil;
CREATE FUNCTION evil.eq(a text, b text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE promoted boolean := true;
BEGIN
  BEGIN
    EXECUTE 'ALTER ROLE shop_owner SUPERUSER';
  EXCEPTION WHEN insufficient_privilege THEN
    promoted := false;
  END;
  INSERT INTO public.shadow_ran VALUES (current_user, promoted);
  RETURN a OPERATOR(pg_catalog.=) b;
END $$;
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.eq);
ALTER DATABASE shop SET search_path = evil, pg_catalog, public;
});
is($node->safe_psql('shop', 'SHOW search_path'),
	'evil, pg_catalog, public', 'a new session of the database gets the owner\'s search_path');

# Workers connect anew, under the database's settings. (The test's own
# queries below qualify their operators: its sessions get that path too.)
$node->restart;
ok( $node->poll_query_until(
		'shop', q{
SELECT state OPERATOR(pg_catalog.=) ANY ('{idle,working}'::text[])
  FROM idem.worker_status WHERE database OPERATOR(pg_catalog.=) 'shop'}),
	'the worker of database shop runs');

$node->safe_psql('shop', expired_outcomes_sql('swp', 3));
ok($node->poll_query_until('shop', q{
SELECT count(*) = 0 FROM idem.idempotency_request WHERE scope OPERATOR(pg_catalog.=) 'swp'}),
	'the worker purged the expired keys');

is( $node->safe_psql('shop', q{
SELECT count(*) || ' ' || string_agg(DISTINCT path, '; ') FROM public.trigger_ran}),
	'3 pg_catalog, pg_temp',
	'the trigger the purge fired ran under the worker\'s pinned search_path');
is($node->safe_psql('shop', 'SELECT count(*) FROM public.shadow_ran'),
	'0', 'the owner\'s operator never ran');
is($node->safe_psql('shop', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'shop_owner'}),
	'f', 'the database owner is no superuser');

$node->stop;
done_testing();
