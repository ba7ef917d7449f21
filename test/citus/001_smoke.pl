# The Citus cluster of the proofs (IdemCitus.pm), checked before anything
# runs on it: a coordinator and two workers, idem on every node through the
# engine IDEM_ENGINE names, its tables distributed as docs/beyond-one-server.md
# says, and one key's life through the coordinator: a delegated claim (the
# call runs on the worker holding the key's shard), the outcome, a replay,
# and the same inside a transaction block, where the coordinator runs the
# call itself. The key's row is in its shard on its worker, and nowhere else.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin, "$FindBin::RealBin/../t";
use IdemCitus qw(start_citus engine_name);
use PostgreSQL::Test::Utils;
use Test::More;

my $cluster = start_citus('smoke');
my $c = $cluster->coordinator;

is($c->safe_psql('proof', q{SELECT count(*) FROM pg_dist_node WHERE noderole = 'primary' AND groupid <> 0}),
	'2', 'two workers in the cluster');
is(join(',', $cluster->on_every_node(q{SELECT to_regprocedure('idem.claim_idempotency_key(text, text, text, text, interval, interval)') IS NOT NULL})),
	't,t,t', 'idem is on the coordinator and on both workers');
if (engine_name() eq 'c++') {
	is(join(',', $cluster->on_every_node(q{SELECT count(*) FROM pg_extension WHERE extname = 'idem'})),
		'1,1,1', 'CREATE EXTENSION idem on the coordinator reached both workers');
}

# The distribution: the key table by key; the calls that take a key
# delegated to its shard, colocated with it.
is($c->safe_psql('proof', q{SELECT partmethod::text || ' ' || column_to_column_name(logicalrelid, partkey)
	FROM pg_dist_partition WHERE logicalrelid = 'idem.idempotency_request'::regclass}),
	'h key', 'idem.idempotency_request is hash-distributed by key');
is($c->safe_psql('proof', q{
	SELECT d.distribution_argument_index || ' ' || (d.colocationid = p.colocationid)
	  FROM pg_dist_object d, pg_dist_partition p
	 WHERE d.classid = 'pg_proc'::regclass
	   AND d.objid = 'idem.claim_idempotency_key(text, text, text, text, interval, interval)'::regprocedure
	   AND p.logicalrelid = 'idem.idempotency_request'::regclass}),
	'1 true', 'claim_idempotency_key is distributed by its key, colocated with the key table');

# A claim through the coordinator, outside a transaction block: delegated.
my ($ok, $out, $err) = $c->psql('proof', q{SET client_min_messages = debug1;
	SELECT kind, fence FROM idem.claim_idempotency_key('smoke', 'k1', 'h1', 'me', '1 minute')});
my ($kind, $fence) = split /\|/, $out;
is($kind, 'new_claim', 'a first claim through the coordinator is new_claim');
like($err, qr/pushing down the function call/, '... and the coordinator delegated it to the worker of the key');
$c->safe_psql('proof', qq{SELECT idem.mark_succeeded('smoke', 'k1', $fence, 201, '{"id": 1}')});
is($c->safe_psql('proof', q{SELECT kind || ' ' || response_code || ' ' || response_body::text
	FROM idem.claim_idempotency_key('smoke', 'k1', 'h1')}), 'replay_success 201 {"id": 1}',
	'the same key replays its stored answer');
is($c->safe_psql('proof', q{SELECT (idem.peek('smoke', 'k1')).kind}), 'replay_success', 'peek reads it too');

# The same inside a transaction block: not delegated; the coordinator runs
# the calls and routes their statements to the key's shard.
$out = $c->safe_psql('proof', q{
BEGIN;
SELECT fence FROM idem.claim_idempotency_key('smoke', 'k2', 'h2', 'me', '1 minute') \gset
SELECT idem.set_recovery_point('smoke', 'k2', :fence, 'validated');
SELECT idem.mark_succeeded('smoke', 'k2', :fence, 200, '{"id": 2}');
COMMIT;
SELECT kind || ' ' || response_body::text FROM idem.claim_idempotency_key('smoke', 'k2', 'h2');});
is((split /\n/, $out)[-1], 'replay_success {"id": 2}', 'claim, checkpoint and outcome in one transaction block, then a replay');

# Where the row is: in the key's shard, on the worker that holds it.
for my $key ('k1', 'k2') {
	my ($shard, $port) = split /\|/, $c->safe_psql('proof', qq{
		SELECT s.shardid, p.nodeport FROM pg_dist_shard s JOIN pg_dist_shard_placement p USING (shardid)
		 WHERE s.shardid = get_shard_id_for_distribution_column('idem.idempotency_request', '$key')});
	my @found = map {
		my $node = $_;
		$node->safe_psql('proof', qq{SELECT count(*) FROM idem.idempotency_request_$shard WHERE key = '$key'})
	} grep { $_->port == $port } $cluster->workers;
	is("@found", '1', "$key is in shard $shard on the worker that holds it");
}
is($c->safe_psql('proof', q{SELECT count(*) FROM idem.idempotency_request WHERE scope = 'smoke'}), '2',
	'the coordinator reads both keys across the shards');

$cluster->stop;
done_testing();
