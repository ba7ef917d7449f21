# A hostile search_path on a Citus node. idem's functions run as a
# superuser, and on Citus Citus plans each of their statements: for a shard
# this node holds it may deparse the shard's query and analyse that text
# again in the calling backend (local execution without the fast path's
# plan, citus.enable_local_fast_path_query_optimization = off, which any
# role may set). Citus's text names pg_catalog's types and functions
# unqualified ('k'::text), so the proof of idem's own text does not cover it
# (docs/security.md, "search_path"). A role that puts its own schema ahead
# of pg_catalog, with a domain "text" whose CHECK runs its function, and
# functions named as pg_catalog's, must see nothing of its run as a
# superuser, on either engine; the control shows that Citus's text is
# analysed under the role's path.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin, "$FindBin::RealBin/../t";
use IdemCitus qw(start_citus engine_name);
use PostgreSQL::Test::Utils;
use Test::More;

my $cluster = start_citus('hostile');
my $c = $cluster->coordinator;
my ($w) = $cluster->workers;

# The role (Citus creates it on every node) and what it may call; its
# schema and the record of what ran on each node (not propagated: each
# node its own).
$c->safe_psql('proof', q{
CREATE ROLE h85 LOGIN;
GRANT SELECT ON public.effects TO h85;
GRANT EXECUTE ON FUNCTION
    idem.claim_idempotency_key(text, text, text, text, interval, interval),
    idem.set_recovery_point(text, text, bigint, text),
    idem.mark_succeeded(text, text, bigint, integer, jsonb, text, text),
    idem.peek(text, text),
    idem.consume_once(text, text, text, interval)
  TO h85;
});
for my $node ($cluster->nodes) {
	$node->safe_psql('proof', q{
SET citus.enable_ddl_propagation = off;
CREATE TABLE public.h85_ran (what text, who name, superuser boolean);
GRANT INSERT ON public.h85_ran TO PUBLIC;
CREATE SCHEMA h85 AUTHORIZATION h85;
SET ROLE h85;
CREATE FUNCTION h85.spy(what pg_catalog.text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.h85_ran
  SELECT what, r.rolname, r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) current_user;
  RETURN true;
END $$;
CREATE DOMAIN h85.text AS pg_catalog.text CHECK (h85.spy('text'));
CREATE FUNCTION h85.statement_timestamp() RETURNS timestamptz LANGUAGE sql
  AS $$SELECT pg_catalog.clock_timestamp() WHERE h85.spy('statement_timestamp')$$;
CREATE FUNCTION h85.now() RETURNS timestamptz LANGUAGE sql
  AS $$SELECT pg_catalog.clock_timestamp() WHERE h85.spy('now')$$;
CREATE FUNCTION h85.nextval(regclass) RETURNS bigint LANGUAGE sql
  AS $$SELECT 1::bigint WHERE h85.spy('nextval')$$;
});
}

# A key whose shard this worker holds: the statements of a call made on
# it run on a local shard.
my $key = $c->safe_psql('proof', sprintf(q{
	SELECT k FROM pg_catalog.generate_series(1, 64) n, pg_catalog.concat('hk', n) k
	 WHERE EXISTS (SELECT FROM pg_dist_shard_placement p
	                WHERE p.shardid = get_shard_id_for_distribution_column('idem.idempotency_request', k)
	                  AND p.nodeport = %d)
	 ORDER BY n LIMIT 1}, $w->port));
ok($key ne '', "a key on the worker's own shard: $key");

my $hostile = q{SET search_path = h85, pg_catalog; SET citus.enable_local_fast_path_query_optimization = off; };

# The controls. A query of the role's own, with no cast to text, runs
# h85.text's CHECK as the role: Citus's text of the shard's query was
# analysed under the role's path. The same query run by a superuser under
# that path (what a function of idem's would be without the pin this file
# proves) runs it as the superuser.
my $control = $hostile . qq{SELECT count(*) FROM public.effects WHERE key OPERATOR(pg_catalog.=) '$key'};
$w->safe_psql('proof', $control, extra_params => ['-U', 'h85']);
is($w->safe_psql('proof', q{SELECT string_agg(DISTINCT who || ':' || superuser, ',') FROM public.h85_ran}),
	'h85:false', "control: Citus's text of the role's own query ran the role's domain check, as the role");
$w->safe_psql('proof', 'TRUNCATE public.h85_ran');
$w->safe_psql('proof', $control);
is($w->safe_psql('proof', q{SELECT bool_or(superuser) FROM public.h85_ran}),
	't', 'control: the same query run by a superuser under that path runs it as the superuser');
$w->safe_psql('proof', 'TRUNCATE public.h85_ran');

# idem's calls on the worker, under the role's path, on the local shard.
my $out = $w->safe_psql('proof', $hostile . qq{
SELECT fence FROM idem.claim_idempotency_key('h85', '$key', 'h', 'me', '1 minute') \\gset
SELECT 1 FROM (SELECT idem.set_recovery_point('h85', '$key', :fence, 'half')) s;
SELECT 1 FROM (SELECT idem.mark_succeeded('h85', '$key', :fence, 200, '{"ok": true}')) s;
SELECT kind FROM idem.claim_idempotency_key('h85', '$key', 'h');
SELECT (idem.peek('h85', '$key')).kind;
SELECT idem.consume_once('h85', '$key', 'h');
}, extra_params => ['-U', 'h85']);
is($out, "1\n1\nreplay_success\nreplay_success\nt",
	'claim, checkpoint, outcome, replay, peek and consume_once ran on the local shard under the hostile path');

# The same inside a transaction block on the coordinator (not delegated:
# the coordinator routes each statement).
$out = $c->safe_psql('proof', $hostile . qq{
BEGIN;
SELECT fence FROM idem.claim_idempotency_key('h85', '$key-c', 'h', 'me', '1 minute') \\gset
SELECT 1 FROM (SELECT idem.mark_succeeded('h85', '$key-c', :fence, 200)) s;
COMMIT;
SELECT kind FROM idem.claim_idempotency_key('h85', '$key-c', 'h');
}, extra_params => ['-U', 'h85']);
is((split /\n/, $out)[-1], 'replay_success', 'the same through the coordinator in a transaction block');

is(join(',', map { $_->safe_psql('proof', q{SELECT count(*) FROM public.h85_ran WHERE superuser}) } $cluster->nodes),
	'0,0,0', 'nothing of the role ran as a superuser on any node (' . engine_name() . ')');
note('what of the role ran, as itself: ' . join(' | ', map {
	$_->safe_psql('proof', q{SELECT coalesce(string_agg(what || ' as ' || who, ', '), 'nothing') FROM public.h85_ran}) } $cluster->nodes));

$cluster->stop;
done_testing();
