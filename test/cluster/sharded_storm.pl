# Sharding with PL/Proxy: 4 shard clusters, each an ordinary idem database,
# behind a proxy database (examples/sharding/proxy.sql). The twin storm of
# the proof suite (101_twin_storm.pl's clients, test/t/IdemProof.pm) runs
# through the proxy: exactly one effect per key, every answer the stored
# one, every key on the shard its hash names, the spread printed. Then one
# split (4 -> 8 partitions: shard 0's keys with hash & 7 = 4 move to a new
# shard) with keys in every state, each answering through the proxy after
# the split as before it.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin, "$FindBin::RealBin/../t";
use IdemProof qw(now run_clients read_logs total_stats storm_client);
use IdemCluster qw(port_of start_shards start_proxy proxy_dsn);
use PostgreSQL::Test::Utils;
use Test::More;
use DBI;

my $clients  = $ENV{STORM_CLIENTS} // 16;
my $keys     = $ENV{STORM_KEYS} // 1000;
my $duration = $ENV{STORM_SECONDS} // 10;
my $window   = 40;
my $chaos    = 0.03;
my $shard_count = 4;

my @shards = start_shards('shard', $shard_count, 0);
my $proxy  = start_proxy(10, @shards);
my $dsn    = proxy_dsn($proxy);
my $dir    = PostgreSQL::Test::Utils::tempdir;
my $t0     = now() + 1;
my $sweep_end = $t0 + 0.6 * $duration;
my $effect_call = 'SELECT proof_effect_and_succeed($1, $2, $3, $4, $5::jsonb)';

my $failed = run_clients($clients, sub {
	my ($id) = @_;
	srand(1000 + $id);
	my $c = IdemProof::Client->new(undef, $id, $dir, lock_ms => 500, scope => 'storm',
		dsn => $dsn, effect_call => $effect_call);
	storm_client($c, t0 => $t0, duration => $duration, sweep_end => $sweep_end, keys => $keys,
		window => $window, chaos => $chaos, clients => $clients);
});
is($failed, 0, 'every client got an answer to every request through the proxy');

my $events = read_logs($dir);
my $stats  = total_stats($events);

# Per shard: rows, succeeded, effects, doubled effects, keys on the wrong shard.
my (%stored, @spread);
my ($rows, $succeeded, $effects, $doubled, $misplaced, $matching) = (0) x 6;
for my $i (0 .. $#shards) {
	my $dbh = DBI->connect('dbi:Pg:' . IdemCluster::shard_conninfo($shards[$i]) =~ s/ /;/gr,
		'', '', { RaiseError => 1, AutoCommit => 1 });
	my @r = $dbh->selectrow_array(qq{
		SELECT (SELECT count(*) FROM idem.idempotency_request WHERE scope = 'storm'),
		       (SELECT count(*) FROM idem.idempotency_request WHERE scope = 'storm' AND status = 'succeeded'),
		       (SELECT count(*) FROM effects),
		       (SELECT count(*) FROM (SELECT key FROM effects GROUP BY key HAVING count(*) > 1) d),
		       (SELECT count(*) FROM idem.idempotency_request
		         WHERE hashtext(scope || '/' || key) & 3 <> $i),
		       (SELECT count(*) FROM effects e JOIN idem.idempotency_request r
		           ON r.scope = e.scope AND r.key = e.key
		         WHERE r.fence = e.fence AND r.result_ref_id = e.id::text)});
	$rows += $r[0]; $succeeded += $r[1]; $effects += $r[2]; $doubled += $r[3];
	$misplaced += $r[4]; $matching += $r[5];
	push @spread, $r[0];
	my %s = @{ $dbh->selectcol_arrayref(
		q{SELECT key, response_body::text FROM idem.idempotency_request WHERE scope = 'storm'},
		{ Columns => [ 1, 2 ] }) };
	%stored = (%stored, %s);
	$dbh->disconnect;
}
is($rows,      $keys, "$keys keys exist across the shards");
is($succeeded, $keys, 'every key succeeded');
is($effects,   $keys, 'exactly one effect per key in total');
is($doubled,   0,     'no key has two effects');
is($misplaced, 0,     'every key is on the shard its hash names');
is($matching,  $keys, "each key's effect is on its shard, the one its stored outcome names");
my $wrong = grep { ($stored{ $_->[0] } // '') ne $_->[1] } @{ $events->{A} };
is($wrong, 0, 'every answer equals the stored response');
my %acked;
$acked{ $_->[0] }++ for @{ $events->{S} };
my $lost = grep { !exists $stored{$_} } keys %acked;
is($lost, 0, 'no acknowledged outcome is missing');
my ($low, $high) = (sort { $a <=> $b } @spread)[ 0, -1 ];
cmp_ok($low, '>', 0.75 * $keys / $shard_count, 'the keys spread evenly (fullest and emptiest shard within 25% of the mean)');
cmp_ok($high, '<', 1.25 * $keys / $shard_count, '... on the high side too');
note("sharded storm: $clients clients, $keys keys, ${duration}s + final pass through PL/Proxy: "
	  . "$stats->{requests} requests; per-shard keys: @spread; effects $effects; duplicates $doubled; "
	  . 'takeovers ' . ($stats->{claim_processing_stale} // 0) . ', stale writes refused '
	  . ($stats->{stale_write_refused} // 0));

# ---- One split, 4 -> 8 partitions, with keys in every state -------------
my $pdb = DBI->connect($dsn, '', '', { RaiseError => 1, AutoCommit => 1 });
my $claim = $pdb->prepare(q{SELECT kind, fence, response_body::text, failure_code
	FROM idem.claim_idempotency_key($1, $2, 'h', 'split', $3::interval)});
# Keys of scope 'split' that shard 0 holds now and partition 4 takes.
my @moving;
for (my $n = 0; @moving < 4; $n++) {
	my ($p) = $pdb->selectrow_array(q{SELECT idem.shard_hash('split', $1) & 7}, undef, "m$n");
	push @moving, "m$n" if $p == 4;
}
my %fence;
for my $k (@moving) {
	$claim->execute('split', $k, '1 hour');
	$fence{$k} = ($claim->fetchrow_array)[1];
}
my ($processing, $retryable, $final, $done) = @moving;
$pdb->do(q{SELECT idem.mark_failed('split', $1, $2, true, 'upstream_timeout')}, undef, $retryable, $fence{$retryable});
$pdb->do(q{SELECT idem.mark_failed('split', $1, $2, false, 'card_declined', 'no', 402)}, undef, $final, $fence{$final});
$pdb->do(q{SELECT idem.mark_succeeded('split', $1, $2, 201, '{"done": true}')}, undef, $done, $fence{$done});

# The split, as docs/beyond-one-server.md describes it: a new shard,
# partition 4's rows (keys and business rows) copied from shard 0 with the
# fence sequence carried over, the proxy switched to 8 partitions, the
# copies removed from shard 0.
my ($shard4) = start_shards('newshard', 1, 4);
my $moving_rows = q{hashtext(scope || '/' || key) & 7 = 4};
for my $table ('idem.idempotency_request', 'effects') {
	my $data = $shards[0]->safe_psql('proof', "COPY (SELECT * FROM $table WHERE $moving_rows) TO STDOUT");
	$shard4->safe_psql('proof', "COPY $table FROM STDIN;\n$data\n\\.\n") if $data ne '';
}
my $last_fence = $shards[0]->safe_psql('proof', 'SELECT last_value FROM idem.fence_seq');
$shard4->safe_psql('proof', "SELECT setval('idem.fence_seq', $last_fence)");
IdemCluster::set_partitions($proxy, 'proof', @shards, $shard4, @shards[ 1 .. 3 ]);
$shards[0]->safe_psql('proof', "DELETE FROM idem.idempotency_request WHERE $moving_rows; DELETE FROM effects WHERE $moving_rows");

my %after;
for my $k (@moving) {
	$claim->execute('split', $k, '1 second');
	$after{$k} = [ $claim->fetchrow_array ];
}
is($after{$processing}[0], 'processing_active', 'after the split a processing key is still owned');
is($after{$retryable}[0], 'retryable_failure', 'a retryable failure is taken over');
cmp_ok($after{$retryable}[1], ">", $last_fence, '... with a fence above every fence of shard 0 before the split');
is($after{$final}[0], 'final_failure', 'a final failure replays');
is($after{$final}[3], 'card_declined', '... with its failure code');
is_deeply([ @{ $after{$done} }[ 0, 2 ] ], [ 'replay_success', '{"done": true}' ], 'a succeeded key replays its body');
$pdb->do(q{SELECT idem.mark_succeeded('split', $1, $2, 200)}, undef, $processing, $fence{$processing});
is(($pdb->selectrow_array(q{SELECT kind FROM idem.claim_idempotency_key('split', $1, 'h')}, undef, $processing))[0],
	'replay_success', "the processing key's owner completes it with its fence after the split");
my $left_on_0 = $shards[0]->safe_psql('proof', "SELECT count(*) FROM idem.idempotency_request WHERE $moving_rows");
my $on_4 = $shard4->safe_psql('proof', "SELECT count(*) FROM idem.idempotency_request WHERE NOT ($moving_rows)");
is($left_on_0 . '/' . $on_4, '0/0', 'each of the two shards holds only its own partition');
my $moved = $shard4->safe_psql('proof', "SELECT count(*) FROM idem.idempotency_request");
note("split: $moved keys moved from shard 0 to the new shard 4 (storm keys and the four split keys)");
my ($storm_replays) = $pdb->selectrow_array(q{
	SELECT count(*) FROM generate_series(0, $1 - 1) n,
	       idem.claim_idempotency_key('storm', 'k' || lpad(n::text, 4, '0'), 'sha-of-k' || lpad(n::text, 4, '0')) c
	 WHERE c.kind = 'replay_success'}, undef, $keys);
is($storm_replays, $keys, 'after the split every storm key still replays through the proxy');

$pdb->disconnect;
$_->stop for @shards, $shard4, $proxy;
done_testing();
