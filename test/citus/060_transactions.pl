# idem's calls inside transaction blocks through the Citus coordinator,
# where Citus does not delegate them: the coordinator runs the call and
# routes its statements to the key's worker, in the block's transaction
# there. A rolled-back block leaves nothing, a committed one its key and its
# effect together; one block may own keys on both workers (Citus commits it
# on both with two-phase commit). Then the application's function with
# force_delegation: delegated inside the block too, the rest of the block
# following it to the key's worker. Last, the same as an application's
# role, neither superuser nor idem's owner, as deployments run: idem's calls
# run with their owner's rights (SECURITY DEFINER) in the block that wrote
# the application's rows as the application's role.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin, "$FindBin::RealBin/../t";
use IdemCitus qw(start_citus);
use PostgreSQL::Test::Utils;
use Test::More;

my $cluster = start_citus('txn');
my $c = $cluster->coordinator;

# psql's output and its messages (DEBUG1 names what Citus delegated). As
# the owner of idem's objects, who writes the business rows beside idem's
# calls in one block (the portable engine's is idem_owner; IdemCitus.pm).
my @owner = IdemProof::portable_engine() ? ('-U', 'idem_owner') : ();
sub run {
	my ($sql) = @_;
	my ($ret, $out, $err) = $c->psql('proof', "SET client_min_messages = debug1;\n$sql", on_error_stop => 1,
		extra_params => [@owner]);
	die "psql failed ($ret): $err" if $ret;
	return ($out, $err);
}

my ($out, $err) = run(q{
BEGIN;
SELECT fence FROM idem.claim_idempotency_key('txn', 'rolled-back', 'h', 'me', '1 minute') \gset
INSERT INTO effects (scope, key, fence, client) VALUES ('txn', 'rolled-back', :fence, 1);
SELECT idem.mark_succeeded('txn', 'rolled-back', :fence, 200, '{"n": 1}');
ROLLBACK;});
unlike($err, qr/pushing down the function call/, 'inside a transaction block the calls are not delegated');
is($c->safe_psql('proof', q{SELECT (idem.peek('txn', 'rolled-back')) IS NULL})
	  . $c->safe_psql('proof', q{SELECT count(*) FROM effects WHERE key = 'rolled-back'}), 't0',
	'a rolled-back block leaves neither key nor effect');

run(q{
BEGIN;
SELECT fence FROM idem.claim_idempotency_key('txn', 'committed', 'h', 'me', '1 minute') \gset
INSERT INTO effects (scope, key, fence, client) VALUES ('txn', 'committed', :fence, 1);
SELECT idem.mark_succeeded('txn', 'committed', :fence, 200, '{"n": 2}');
COMMIT;});
is($c->safe_psql('proof', q{SELECT kind || ' ' || response_body::text FROM idem.claim_idempotency_key('txn', 'committed', 'h')}),
	'replay_success {"n": 2}', 'a committed block left its outcome, which replays');
is($c->safe_psql('proof', q{SELECT count(*) FROM effects e JOIN idem.idempotency_request r USING (scope, key)
	WHERE e.key = 'committed' AND e.fence = r.fence}), '1', '... and its effect, with the same fence');

# Two keys, one on each worker, in one block.
my %worker_of;
for (my $n = 0; keys(%worker_of) < 2; $n++) {
	my $port = $c->safe_psql('proof', qq{SELECT nodeport FROM pg_dist_placement p JOIN pg_dist_node USING (groupid)
		WHERE p.shardid = get_shard_id_for_distribution_column('idem.idempotency_request', 'pair$n')});
	$worker_of{$port} //= "pair$n";
}
my ($a, $b) = sort values %worker_of;
run(qq{
BEGIN;
SELECT fence AS fa FROM idem.claim_idempotency_key('txn', '$a', 'h', 'me', '1 minute') \\gset
SELECT fence AS fb FROM idem.claim_idempotency_key('txn', '$b', 'h', 'me', '1 minute') \\gset
SELECT idem.mark_succeeded('txn', '$a', :fa, 200);
SELECT idem.mark_succeeded('txn', '$b', :fb, 200);
COMMIT;});
is($c->safe_psql('proof', qq{SELECT count(*) FROM idem.idempotency_request WHERE scope = 'txn' AND key IN ('$a', '$b')
	AND status = 'succeeded'}), '2', 'one block completed keys on both workers');

# force_delegation: the application's function is delegated inside the block.
$c->safe_psql('proof', q{SELECT create_distributed_function('proof_effect_and_succeed(text, text, bigint, int, jsonb)',
	distribution_arg_name => 'key', colocate_with => 'idem.idempotency_request', force_delegation => true)});
my $fence = $c->safe_psql('proof', q{SELECT fence FROM idem.claim_idempotency_key('txn', 'forced', 'h', 'me', '1 minute')});
($out, $err) = run(qq{
BEGIN;
SELECT proof_effect_and_succeed('txn', 'forced', $fence, 1, '{"n": 3}');
SELECT count(*) FROM effects WHERE key = 'forced';
ROLLBACK;});
like($err, qr/pushing down function call in a multi-statement transaction/,
	'with force_delegation the function is delegated inside the block');
is($c->safe_psql('proof', q{SELECT (idem.peek('txn', 'forced')).kind}), 'processing_active',
	'... and the rollback of the block undid what it did on the worker');
run(qq{
BEGIN;
SELECT proof_effect_and_succeed('txn', 'forced', $fence, 1, '{"n": 3}');
COMMIT;});
is($c->safe_psql('proof', q{SELECT kind || ' ' || response_body::text FROM idem.claim_idempotency_key('txn', 'forced', 'h')}),
	'replay_success {"n": 3}', 'committed, its outcome replays');
is($c->safe_psql('proof', q{SELECT count(*) FROM effects WHERE key = 'forced'}), '1', '... with its one effect');

# The application's role: created on the coordinator (Citus creates it on
# the workers), granted the request path and its business table.
$c->safe_psql('proof', q{
CREATE ROLE app LOGIN;
GRANT USAGE ON SCHEMA idem TO app;
GRANT EXECUTE ON FUNCTION idem.claim_idempotency_key(text, text, text, text, interval, interval),
    idem.mark_succeeded(text, text, bigint, integer, jsonb, text, text), idem.peek(text, text) TO app;
GRANT SELECT, INSERT ON effects TO app;
GRANT USAGE ON SEQUENCE effects_id_seq TO app;});
# As the application's role: the block must commit, whatever node runs the
# calls (psql's exit status and error are the assertion's).
sub as_app {
	my ($sql, $what) = @_;
	my ($ret, $out, $err) = $c->psql('proof', $sql, on_error_stop => 1, extra_params => [ '-U', 'app' ]);
	is($ret, 0, $what) or diag($err);
}
# Through the coordinator, in a block of its own, the application's role
# writes its row after idem's call wrote as idem's owner: Citus refuses a
# second role's write to those placements (docs/beyond-one-server.md,
# "Known defects"), and the block leaves nothing behind.
my (undef, undef, $app_err) = $c->psql('proof', q{
BEGIN;
SELECT fence FROM idem.claim_idempotency_key('txn', 'as-app', 'h', 'app', '1 minute') \gset
INSERT INTO effects (scope, key, fence, client) VALUES ('txn', 'as-app', :fence, 2);
SELECT idem.mark_succeeded('txn', 'as-app', :fence, 200, '{"n": 4}');
COMMIT;}, on_error_stop => 1, extra_params => [ '-U', 'app' ]);
like($app_err, qr/modified in this transaction by a different user/,
	"the application's role: its row after idem's call in one block is refused by Citus (documented)");
is($c->safe_psql('proof', q{SELECT (idem.peek('txn', 'as-app')).kind IS NULL}), 't', '... and the block left no key');
is($c->safe_psql('proof', q{SELECT count(*) FROM effects WHERE key = 'as-app'}), '0', '... and no row');
$fence = $c->safe_psql('proof', q{SELECT fence FROM idem.claim_idempotency_key('txn', 'as-app-2', 'h', 'app', '1 minute')});
as_app(qq{SELECT proof_effect_and_succeed('txn', 'as-app-2', $fence, 2, '{"n": 5}');},
	"the application's role: its delegated function runs");
is($c->safe_psql('proof', q{SELECT kind || ' ' || response_body::text FROM idem.claim_idempotency_key('txn', 'as-app-2', 'h')}),
	'replay_success {"n": 5}', "the application's role: its delegated function, rows and outcome on the key's node");

$cluster->stop;
done_testing();
