# idem.claim_or_wait with the preload, measured: how soon a waiter answers
# after its owner's COMMIT returns (1,000 trials, p50/p99/max printed), what
# 200 waiters on one key cost in CPU over 10 s (from /proc), that they all
# get the replay of the one outcome, and that after a retryable failure
# exactly one of 32 waiters takes the key over while the others wait for
# its outcome. Bounds leave room for a loaded 2-core machine and still catch
# polling: a poller's first look comes 10 ms after it began and its looks
# then space out to a second, so its p50 and p99 would be far above them.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemWait qw(start_waiting_node connect_db start_wait answer_of wait_until_waiting);
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use POSIX ();

my $node = start_waiting_node('wait_latency', "max_connections = 260\n");
my $monitor = connect_db($node);

sub percentile {
	my ($sorted, $p) = @_;
	return $sorted->[ int($p * $#$sorted + 0.5) ];
}

# --- Wake latency: 1,000 trials, each a fresh key.
my $owner = connect_db($node);
my $waiter = connect_db($node);
my $waiter_pid = $waiter->{pg_pid};
my (@latency, @round_trip);
for my $i (1 .. 1000) {
	my ($fence) = $owner->selectrow_array(
		q{SELECT fence FROM idem.claim_idempotency_key('lat', ?, 'h')}, undef, "k$i");
	my $sth = start_wait($waiter, 'lat', "k$i", '60 seconds');
	wait_until_waiting($monitor, $waiter_pid);
	my $sent = time();
	$owner->do(q{SELECT idem.mark_succeeded('lat', ?, ?, 201)}, undef, "k$i", $fence);
	my $committed = time();
	$sth->pg_result;
	my $answered = time();
	my $row = $sth->fetchrow_arrayref;
	die "trial $i: $row->[0]" unless $row->[0] eq 'replay_success';
	push @latency, 1000 * ($answered - $committed);
	push @round_trip, 1000 * ($answered - $sent);
}
my @sorted = sort { $a <=> $b } @latency;
my ($p50, $p99, $max) = (percentile(\@sorted, 0.50), percentile(\@sorted, 0.99), $sorted[-1]);
diag(sprintf('wake latency over 1000 trials: p50 %.2f ms, p99 %.2f ms, max %.2f ms', $p50, $p99, $max));
my @trips = sort { $a <=> $b } @round_trip;
diag(sprintf('from sending the owner\'s mark_succeeded (autocommit) to the waiter\'s answer: '
		. 'p50 %.2f ms, p99 %.2f ms, max %.2f ms',
		percentile(\@trips, 0.50), percentile(\@trips, 0.99), $trips[-1]));
cmp_ok(percentile(\@trips, 0.99), '<', 50, 'p99 from the owner\'s call to the answer under 50 ms');
cmp_ok($p50, '<', 5, 'p50 wake latency under 5 ms: woken by the commit, not by polling');
cmp_ok($p99, '<', 25, 'p99 wake latency under 25 ms (the target is 10 ms on an idle machine)');

# --- 200 waiters on one key for 10 s: CPU from /proc, then one outcome for all.
my ($fence) = $owner->selectrow_array(
	q{SELECT fence FROM idem.claim_idempotency_key('lat', 'crowd', 'h')});
my @waiters = map { connect_db($node) } 1 .. 200;
my @waits = map { start_wait($_, 'lat', 'crowd', '120 seconds') } @waiters;
my @pids = map { $_->{pg_pid} } @waiters;
wait_until_waiting($monitor, @pids);

my $ticks_per_second = POSIX::sysconf(POSIX::_SC_CLK_TCK());
sub cpu_ticks {
	my $total = 0;
	for my $pid (@_) {
		open(my $fh, '<', "/proc/$pid/stat") or die "cannot read /proc/$pid/stat: $!";
		my @f = split ' ', (split /\) /, scalar <$fh>)[1];
		close $fh;
		$total += $f[11] + $f[12];    # utime + stime
	}
	return $total;
}
my $cpu_before = cpu_ticks(@pids);
my $began = time();
# The measured window: check every second that all 200 still wait.
while (time() - $began < 10) {
	Time::HiRes::sleep(1);
	my ($n) = $monitor->selectrow_array(
		'SELECT count(*) FROM pg_stat_activity WHERE pid IN (' . join(',', @pids) . ")
		   AND wait_event_type = 'Extension'");
	die "only $n of 200 waiters still wait" unless $n == 200;
}
my $elapsed = time() - $began;
my $cpu_share = (cpu_ticks(@pids) - $cpu_before) / $ticks_per_second / $elapsed;
diag(sprintf('200 waiters over %.1f s used %.3f%% of one core in total', $elapsed, 100 * $cpu_share));
cmp_ok($cpu_share, '<', 0.01, '200 waiters cost less than 1% of a core');

$owner->do(q{SELECT idem.mark_succeeded('lat', 'crowd', ?, 201, '{"id": 7}')}, undef, $fence);
my %kinds;
$kinds{ answer_of($_)->[0] }++ for @waits;
is_deeply(\%kinds, { replay_success => 200 }, 'all 200 waiters get the replay of the one outcome');

# --- A retryable failure with 32 waiters: one takes over, 31 wait on.
($fence) = $owner->selectrow_array(
	q{SELECT fence FROM idem.claim_idempotency_key('lat', 'retry', 'h')});
my @crowd = @waiters[0 .. 31];
my %wait_of = map { ($_ => start_wait($_, 'lat', 'retry', '120 seconds')) } @crowd;
wait_until_waiting($monitor, map { $_->{pg_pid} } @crowd);
$owner->do(q{SELECT idem.mark_failed('lat', 'retry', ?, true, 'timeout')}, undef, $fence);
# The new owner answers; the others must still be waiting.
my ($new_owner, $new_fence);
my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
until (defined $new_owner) {
	for my $dbh (@crowd) {
		next unless $dbh->pg_ready;
		my $row = answer_of($wait_of{$dbh});
		is($row->[0], 'retryable_failure', 'the first waiter to answer took the key over');
		($new_owner, $new_fence) = ($dbh, $row->[1]);
		last;
	}
	die 'no waiter took the retryable key over' if time() > $deadline;
	Time::HiRes::sleep(0.001) unless defined $new_owner;
}
my @rest = grep { $_ != $new_owner } @crowd;
wait_until_waiting($monitor, map { $_->{pg_pid} } @rest);
pass('the 31 others still wait while the new owner works');
$new_owner->do(q{SELECT idem.mark_succeeded('lat', 'retry', ?, 200)}, undef, $new_fence);
%kinds = ();
$kinds{ answer_of($wait_of{$_})->[0] }++ for @rest;
is_deeply(\%kinds, { replay_success => 31 }, 'the others get the new owner\'s outcome');

my ($started, $answered, $fallbacks) = $monitor->selectrow_array(
	'SELECT waits_started, waits_answered, polling_fallbacks FROM idem.stats WHERE datname = current_database()');
cmp_ok($started, '>=', 1000 + 200 + 32, 'every wait counted as started');
is($fallbacks, 0, 'no wait fell back to polling');

$_->disconnect for @waiters, $owner, $waiter, $monitor;
$node->stop;
done_testing();
