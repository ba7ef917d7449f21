# Shards move under load. The twin storm (test/t/IdemProof.pm's clients)
# runs through the coordinator while every shard group of idem's tables
# moves to the other worker (citus_move_shard_placement, logical
# replication), one group moves back, and then a third worker joins and
# citus_rebalance_start spreads the groups over three. Keys are processing
# in every group while it moves: an owner whose lock still holds completes
# its key after the move with the fence it had; an owner whose lock ran out
# loses its key to a takeover on the key's new node, with a fence greater
# than the old one (fences never go back for a key, whichever node issues
# them), and its writes are refused with P4012. Afterwards: every
# acknowledged outcome kept, one effect per key, no fence issued twice.
# Each move's time is printed.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin, "$FindBin::RealBin/../t";
use IdemProof qw(now run_clients read_logs total_stats storm_client check_storm read_rows_and_effects
  check_acknowledged poll_until);
use IdemCitus qw(start_citus);
use PostgreSQL::Test::Utils;
use Test::More;
use DBI;

my $clients = $ENV{CITUS_REBALANCE_CLIENTS} // 6;
my $keys    = $ENV{CITUS_REBALANCE_KEYS} // 300;

my $cluster = start_citus('rebalance');
my $c   = $cluster->coordinator;
my $dsn = $cluster->dsn;
my $dir = PostgreSQL::Test::Utils::tempdir;
my $stop_file = "$dir/moves-done";
my $moves_done = 0;
my $t0  = now() + 1;

my $dbh = DBI->connect($dsn, '', '', { RaiseError => 0, PrintError => 0, AutoCommit => 1 });

# The shards of the key table (one a colocation group) and the worker each
# is on.
sub placements {
	return map { [ split /\|/ ] } split /\n/, $c->safe_psql('proof', q{
		SELECT s.shardid, n.nodename, n.nodeport FROM pg_dist_shard s
		  JOIN pg_dist_placement p USING (shardid) JOIN pg_dist_node n USING (groupid)
		 WHERE s.logicalrelid = 'idem.idempotency_request'::regclass ORDER BY s.shardid});
}
my @groups = placements();
is(scalar(@groups), IdemCitus::shard_count(), 'the key table has ' . IdemCitus::shard_count() . ' shards');

# Two keys of scope "moves" in each shard: one whose owner keeps its lock
# across the moves, one whose lock runs out so a twin takes it over.
my (%kept, %taken);
for (my $n = 0; keys(%kept) < @groups || keys(%taken) < @groups; $n++) {
	my ($shard) = $dbh->selectrow_array(
		q{SELECT get_shard_id_for_distribution_column('idem.idempotency_request', $1::text)}, undef, "m$n");
	die 'get_shard_id_for_distribution_column: ' . $dbh->errstr if $dbh->err;
	if (!$kept{$shard}) { $kept{$shard} = { key => "m$n" } }
	elsif (!$taken{$shard}) { $taken{$shard} = { key => "m$n" } }
}
sub claim {
	my ($key, $lock) = @_;
	my ($kind, $fence) = $dbh->selectrow_array(q{SELECT kind, fence
		FROM idem.claim_idempotency_key('moves', $1, 'h', 'owner', $2::interval)}, undef, $key, $lock);
	die "claim of $key: " . $dbh->errstr if $dbh->err;
	return ($kind, $fence);
}
# A write of an owner: undef when accepted, else its SQLSTATE.
sub owner_write {
	my ($sql, @binds) = @_;
	$dbh->do($sql, undef, @binds);
	return $dbh->err ? $dbh->state : undef;
}
$_->{fence} = (claim($_->{key}, '1 hour'))[1] for values %kept;
$_->{fence} = (claim($_->{key}, '1 second'))[1] for values %taken;

# A takeover of $t (a processing key whose lock ran out) on the node that
# holds it now: its new fence is above the old one, and the old owner's
# writes are refused with P4012. Leaves $t owned under the new fence (its
# lock again 1 second).
sub take_over {
	my ($t, $what) = @_;
	poll_until("the lock of $t->{key} to run out", sub {
		($dbh->selectrow_array(q{SELECT (idem.peek('moves', $1)).kind}, undef, $t->{key}) // '') eq 'processing_stale' });
	my ($kind, $fence) = claim($t->{key}, '1 second');
	is($kind, 'processing_stale', "$what: $t->{key}, its lock run out, is taken over");
	cmp_ok($fence, '>', $t->{fence}, "$what: ... with a fence above the old owner's ($fence > $t->{fence})");
	is(owner_write(q{SELECT idem.set_recovery_point('moves', $1, $2, 'charged')}, $t->{key}, $t->{fence}),
		'P4012', "$what: the old owner's checkpoint is refused with P4012");
	is(owner_write(q{SELECT idem.mark_succeeded('moves', $1, $2, 200)}, $t->{key}, $t->{fence}),
		'P4012', "$what: the old owner's outcome is refused with P4012");
	$t->{fence} = $fence;
}

# citus_move_shard_placement of $shard's group to $port; prints its time.
sub move {
	my ($shard, $from, $to, $why) = @_;
	my $started = now();
	$c->safe_psql('proof', "SELECT citus_move_shard_placement($shard, '$from->[1]', $from->[2], '$to->[1]', $to->[2])");
	note(sprintf('move of shard group %d (%s) from port %d to port %d: %.1f s', $shard, $why, $from->[2], $to->[2],
		now() - $started));
}

my @workers = map { [ undef, $_->host, $_->port ] } $cluster->workers;
my $moves_and_checks = sub {
	# The moves start once the storm holds keys in flight (what they must
	# carry across), not after a fixed pause.
	poll_until('keys processing under the storm', sub {
		$c->safe_psql('proof', q{SELECT count(*) > 0 FROM idem.idempotency_request
			WHERE scope = 'rebalance' AND status = 'processing'}) eq 't';
	}, 0.05) or die 'the storm put no key in flight';
	# Every group to the other worker.
	my $started = now();
	for my $g (@groups) {
		my ($to) = grep { $_->[2] != $g->[2] } @workers;
		move($g->[0], $g, $to, 'every group moves');
	}
	note(sprintf('every shard group moved in %.1f s', now() - $started));
	is(join(',', map { $_->[2] } placements()), join(',', map { my $g = $_; (grep { $_->[2] != $g->[2] } @workers)[0][2] } @groups),
		'every shard group is on the other worker');
	take_over($taken{ $_->[0] }, 'after the move of its group') for @groups;
	for my $g (@groups) {
		my $k = $kept{ $g->[0] };
		is(owner_write(q{SELECT idem.mark_succeeded('moves', $1, $2, 201, '{"kept": true}')}, $k->{key}, $k->{fence}),
			undef, "$k->{key}: its owner, whose lock held across the move, completes it with its fence");
	}
	# One group back where it was: its next takeover is issued there again.
	my ($back) = placements();
	my ($to) = grep { $_->[2] == $groups[0][2] } @workers;
	move($back->[0], $back, $to, 'back where it was');
	take_over($taken{ $back->[0] }, 'after its group moved back');
	# A third worker; the rebalancer spreads the groups over three.
	my $third = $cluster->add_worker;
	$started = now();
	$c->safe_psql('proof', 'SELECT citus_rebalance_start()');
	$c->safe_psql('proof', 'SELECT citus_rebalance_wait()');
	my @after = placements();
	my $on_third = grep { $_->[2] == $third->port } @after;
	note(sprintf('citus_rebalance_start with a third worker: %d shard group(s) moved to it in %.1f s',
		$on_third, now() - $started));
	cmp_ok($on_third, '>', 0, 'the rebalancer moved shard groups to the third worker');
	take_over($taken{ $_->[0] }, 'after the rebalance') for grep { $_->[2] == $third->port } @after;
};
# The storm ends when the moves are done, or failed.
my $moves = sub {
	my $ok = eval { $moves_and_checks->(); 1 };
	my $error = $@;
	open my $f, '>', $stop_file or die $!;
	close $f;
	die $error unless $ok;
	$moves_done = 1;
};

my $failed = run_clients($clients, sub {
	my ($id) = @_;
	srand(4000 + $id);
	my $cl = IdemProof::Client->new(undef, $id, $dir, lock_ms => 500, scope => 'rebalance', dsn => $dsn,
		$id % 2 ? (effect_call => 'SELECT proof_effect_and_succeed($1, $2, $3, $4, $5::jsonb)') : ());
	storm_client($cl, t0 => $t0, duration => 300, sweep_end => $t0 + 20, keys => $keys,
		window => 20, chaos => 0.02, clients => $clients, stop_file => $stop_file);
}, $moves);
is($failed, 0, 'every client got an answer to every request while the shards moved');
ok($moves_done, 'every move ran');

for my $t (values %taken) {
	is(owner_write(q{SELECT idem.mark_succeeded('moves', $1, $2, 200)}, $t->{key}, $t->{fence}), undef,
		"$t->{key}: its last owner completes it");
}
is($dbh->selectrow_array(q{SELECT count(*) FROM idem.idempotency_request WHERE scope = 'moves' AND status = 'succeeded'}),
	2 * @groups, 'every processing key of the moves ended succeeded, once');

my $events = read_logs($dir);
my $stats  = total_stats($events);
my $verdict = check_storm($dbh, $events, $keys, 'rebalance');
my ($row, $effect, $effects_of) = read_rows_and_effects($dbh, 'rebalance');
my $acked = check_acknowledged($row, $effect, $effects_of, $events, $keys);
note("citus rebalance: $clients clients, $keys keys through the coordinator while the shards moved: "
	  . "$stats->{requests} requests, " . scalar(@{ $events->{S} }) . ' acknowledged outcomes, lost '
	  . scalar(@{ $acked->{lost_outcomes} }) . ", fences reissued $acked->{reissued}; stale writes refused (P4012) "
	  . ($stats->{stale_write_refused} // 0) . "; duplicates $verdict->{doubled}; errors "
	  . join(' ', map { "$_=$stats->{$_}" } grep { /^error_/ } sort keys %$stats));

$dbh->disconnect;
$cluster->stop;
done_testing();
