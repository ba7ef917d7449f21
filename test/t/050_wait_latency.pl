# idem.claim_or_wait with the preload, under numbers: 1,000 waiters in turn,
# each answered by its owner's COMMIT although its own max_wait and the
# owner's lock last an hour (so the commit's wakeup is what answered it: no
# poll, no timer; IdemWait.pm); 200 waiters on one key that cost next to no
# CPU over 10 s (from /proc) and all get the replay of the one outcome; and
# after a retryable failure exactly one of 32 waiters takes the key over
# while the others wait for its outcome. How soon a waiter answers is
# printed here and measured against a row-lock waiter by bench/wait/latency.pl.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemWait qw(start_waiting_node connect_db start_wait answer_of wait_until_waiting
  NO_END_BEFORE_DEADLINE);
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

# --- 1,000 waits in turn, each a fresh key, each woken by its owner's commit.
my $owner = connect_db($node);
my $waiter = connect_db($node);
my $waiter_pid = $waiter->{pg_pid};
my ($answered_before) = $monitor->selectrow_array(
	'SELECT waits_answered FROM idem.stats WHERE datname = current_database()');
my (@latency, %kinds);
for my $i (1 .. 1000) {
	my ($fence) = $owner->selectrow_array(
		q{SELECT fence FROM idem.claim_idempotency_key('lat', ?, 'h', NULL, ?::interval)},
		undef, "k$i", NO_END_BEFORE_DEADLINE);
	my $sth = start_wait($waiter, 'lat', "k$i", NO_END_BEFORE_DEADLINE);
	wait_until_waiting($monitor, $waiter_pid);
	$owner->do(q{SELECT idem.mark_succeeded('lat', ?, ?, 201)}, undef, "k$i", $fence);
	my $committed = time();
	my $row = answer_of($sth);
	push @latency, 1000 * (time() - $committed);
	$kinds{ $row->[0] }++;
}
is_deeply(\%kinds, { replay_success => 1000 },
	'1,000 waiters, each answered by its owner\'s commit before an hour\'s wait and lock ran out');
my ($answered_after) = $monitor->selectrow_array(
	'SELECT waits_answered FROM idem.stats WHERE datname = current_database()');
is($answered_after - $answered_before, 1000, 'each counted as a wait answered');
my @sorted = sort { $a <=> $b } @latency;
diag(sprintf('from the owner\'s COMMIT returning to the waiter\'s answer, 1000 waits: '
		. 'p50 %.2f ms, p99 %.2f ms, max %.2f ms (not asserted: bench/wait/latency.pl measures it)',
		percentile(\@sorted, 0.50), percentile(\@sorted, 0.99), $sorted[-1]));

# --- 200 waiters on one key for 10 s: CPU from /proc, then one outcome for all.
my ($fence) = $owner->selectrow_array(
	q{SELECT fence FROM idem.claim_idempotency_key('lat', 'crowd', 'h', NULL, ?::interval)},
	undef, NO_END_BEFORE_DEADLINE);
my @waiters = map { connect_db($node) } 1 .. 200;
my @waits = map { start_wait($_, 'lat', 'crowd', NO_END_BEFORE_DEADLINE) } @waiters;
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
%kinds = ();
$kinds{ answer_of($_)->[0] }++ for @waits;
is_deeply(\%kinds, { replay_success => 200 }, 'all 200 waiters get the replay of the one outcome');

# --- A retryable failure with 32 waiters: one takes over, 31 wait on.
($fence) = $owner->selectrow_array(
	q{SELECT fence FROM idem.claim_idempotency_key('lat', 'retry', 'h', NULL, ?::interval)},
	undef, NO_END_BEFORE_DEADLINE);
my @crowd = @waiters[0 .. 31];
my %wait_of = map { ($_ => start_wait($_, 'lat', 'retry', NO_END_BEFORE_DEADLINE)) } @crowd;
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
