# Crash run with every claim bound to its session (idem.bind_lock_to_session):
# a storm of claims, checkpoints and outcomes (some claims inside BEGIN ...
# COMMIT) while the whole server dies several times at random moments: the
# postmaster and every child of it frozen, then killed with kill -9 together,
# so that WAL still in shared memory (a claim committed without waiting for
# its flush, the fence sequence's last record) is lost as by a power cut,
# while what reached the kernel stays. The walwriter is made lazy so that
# such WAL does stay in memory until a flush of someone else's commit.
# The locks last an hour and a request gives up after 120 s: a bound key
# whose session died in a crash must be taken over at once, not when its
# lock runs out. Every fence a claim returned is logged, also when its
# commit was lost or never acknowledged. After the last restart: no
# acknowledged outcome lost (check_acknowledged), no fence handed out twice
# or below one handed out before it for the key (a fence from a claim whose
# COMMIT never returned is counted apart: its transaction may never have
# committed, and PostgreSQL may hand out again a sequence value drawn in a
# transaction a crash lost), no new_claim for a key with
# an acknowledged outcome, and every owner cut off by a crash, writing again
# with its old fence once its retry has claimed, refused with P4012
# (check_fences_handed_out).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemProof qw(check_keys_finished now start_node run_clients read_logs total_stats connect_or_die storm_key
  read_rows_and_effects check_acknowledged check_fences_handed_out poll_until connect_when_up);
use PostgreSQL::Test::Utils;
use Test::More;

my $clients  = $ENV{CRASH_CLIENTS} // 24;
my $keys     = $ENV{CRASH_KEYS} // 800;
my $duration = $ENV{CRASH_SECONDS} // 24;
my $crashes  = $ENV{CRASH_KILLS} // 6;
my $window   = 40;
my $lock_ms  = 3_600_000;
my $patience = 120;
# Each crash lets the restarted server work under load this long first.
my $min_uptime = 1.5;

my $node = start_node('bound_crash', fsync => 1);
$node->append_conf('postgresql.conf', "wal_writer_delay = 10s\n");
$node->restart;
# The portable engine names a bound session by its backend_start, which
# pg_stat_activity shows its owner only with this role (docs/portable.md).
$node->safe_psql('proof', 'GRANT pg_read_all_stats TO idem_owner') if IdemProof::portable_engine();
my $dir  = PostgreSQL::Test::Utils::tempdir;
my $t0   = now() + 1;
my $sweep_end = $t0 + 0.7 * $duration;
srand(3600);

# The postmaster's children, from /proc.
sub children_of {
	my ($parent) = @_;
	my @children;
	for my $stat (glob '/proc/[0-9]*/stat') {
		open my $fh, '<', $stat or next;
		my $line = <$fh> // next;
		close $fh;
		# pid (comm) state ppid ...: comm may hold spaces, so from the last ')'.
		my ($pid, $ppid) = $line =~ /^(\d+) .*\) \S+ (\d+)/ or next;
		push @children, $pid if $ppid == $parent;
	}
	return @children;
}

# Reaped, not only dead: a new postmaster refuses to start while the pid in
# postmaster.pid exists, and a zombie's does.
sub gone {
	my ($pid) = @_;
	return !-e "/proc/$pid";
}

# The whole server dies at once: the postmaster is frozen (so it neither
# forks nor reacts), then its children, then all are killed with kill -9.
sub crash_server {
	my $postmaster = $node->{_pid} // die 'no postmaster pid';
	kill 'STOP', $postmaster or die "kill -STOP $postmaster: $!";
	my @children = children_of($postmaster);
	kill 'STOP', @children;
	kill 'KILL', @children, $postmaster;
	$node->{_pid} = undef;
	poll_until('the killed server processes to be gone', sub { !grep { !gone($_) } @children, $postmaster })
	  // die 'the killed server processes did not go';
	return scalar(@children);
}

my @crash_log;    # [time, children killed]
sub inject_crashes {
	my @at = sort { $a <=> $b } map { $t0 + 1 + rand(0.75 * $duration) } 1 .. $crashes;
	my $up_at = now();
	for my $at (@at) {
		$at = $up_at + $min_uptime if $at < $up_at + $min_uptime;
		Time::HiRes::sleep($at - now()) if $at > now();
		push @crash_log, [ now(), crash_server() ];
		$node->start;
		connect_when_up($node)->disconnect;
		$up_at = now();
	}
}

my $failed = run_clients($clients, sub {
	my ($id) = @_;
	srand(3700 + $id);
	my $c = IdemProof::Client->new($node, $id, $dir, lock_ms => $lock_ms, scope => 'crash', effect_stall => 0.03,
		bind => 1, claim_in_transaction => 0.25, old_owners => 1);
	Time::HiRes::sleep($t0 - now()) if $t0 > now();
	my $requests = 0;
	while (now() < $t0 + $duration) {
		my ($index, $hot) = storm_key($keys, $window, $t0, $sweep_end);
		$c->{chaos} = $hot ? 0.01 : 0;
		$c->request(sprintf('k%04d', $index), $patience);
		$requests++;
	}
	$c->{chaos} = 0;
	for (my $index = $id; $index < $keys; $index += $clients) {
		$c->request(sprintf('k%04d', $index), $patience);
		$requests++;
	}
	$c->count('requests', $requests);
	$c->finish;
}, \&inject_crashes);
is($failed, 0, "every client got an answer to every request within $patience s (locks of an hour), through every crash");
is(scalar(@crash_log), $crashes, "$crashes crashes of the whole server (kill -9 of the postmaster and its children)");

my $events = read_logs($dir);
my $stats  = total_stats($events);
my $dbh    = connect_or_die($node);
check_keys_finished($dbh, 'crash', $keys);

my ($row, $effect, $effects_of) = read_rows_and_effects($dbh, 'crash');
my $verdict = check_acknowledged($row, $effect, $effects_of, $events, $keys);
my $fences = check_fences_handed_out($events, min_old_owners => 1);
my ($last_fence) = $dbh->selectrow_array('SELECT last_value FROM idem.fence_seq');
cmp_ok($last_fence, '>=', $verdict->{max_fence}, 'the fence sequence is past every fence handed out');

note("bound crash: $clients clients, $keys keys, every claim bound, fsync on, ${duration}s + final pass: "
	  . "$stats->{requests} requests answered");
note('bound crash: ' . scalar(@crash_log) . ' crashes (postmaster and ' . join('/', map { $_->[1] } @crash_log)
	  . ' children killed with kill -9); client connections lost ' . ($stats->{connection_lost} // 0)
	  . ', of which while owning a key ' . ($stats->{lost_while_owning} // 0) . ', at COMMIT of an outcome '
	  . ($stats->{commit_unknown} // 0) . ', at COMMIT of a claim ' . ($stats->{claim_commit_unknown} // 0));
note("bound crash: fences handed out $fences->{fences} over $fences->{keys} keys ($fences->{uncommitted} "
	  . "from a COMMIT never acknowledged, of them handed out again $fences->{uncommitted_again} (to the same key "
	  . "$fences->{uncommitted_again_same_key}, a later claim of the key not above it $fences->{back_after_uncommitted}); "
	  . "claims in a transaction " . ($stats->{claims_in_transaction} // 0) . "); keys claimed new again after a lost claim $fences->{new_claims_again} (after an acknowledged one "
	  . "$fences->{acknowledged_claims_lost}); old owners refused "
	  . "$fences->{old_owners}; outcomes acknowledged " . scalar(@{ $events->{S} }) . ', lost '
	  . scalar(@{ $verdict->{lost_outcomes} }));
note('bound crash: claims: new ' . ($stats->{claim_new_claim} // 0) . ', stale takeovers '
	  . ($stats->{claim_processing_stale} // 0) . ', failed takeovers ' . ($stats->{claim_retryable_failure} // 0)
	  . ', active ' . ($stats->{claim_processing_active} // 0) . ', replays ' . ($stats->{claim_replay_success} // 0)
	  . ", effects $verdict->{effects}, wrong answers $verdict->{wrong}");

$node->stop;
done_testing();
