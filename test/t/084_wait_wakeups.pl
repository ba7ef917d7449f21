# What wakes a waiting idem.claim_or_wait, counted: an outcome committed
# through two-phase commit wakes its waiters at COMMIT PREPARED, run from
# another session (nothing at PREPARE, nothing at ROLLBACK PREPARED); an
# outcome rolled back wakes no one. idem.stats counts the commits that woke
# waiters (wakeups_sent, read right after the owner's statement returns: the
# broadcast is made before it returns) and the claims waiting calls made
# (wait_attempts): a waiter woken by a rollback would claim once more. Every
# wait may last an hour (IdemWait.pm), so an answer before the deadline was
# brought by the event under test.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemWait qw(start_waiting_node connect_db start_wait answer_of wait_until_waiting
  NO_END_BEFORE_DEADLINE);
use PostgreSQL::Test::Utils;
use Test::More;

# Answers here come at once or not at all.
$IdemWait::deadline_seconds = 30;

my $node = start_waiting_node('wait_wakeups', "max_prepared_transactions = 4\n");
my $monitor = connect_db($node);
my $owner = connect_db($node);
my $twin = connect_db($node);
my $committer = connect_db($node);

sub counters {
	my $row = $monitor->selectrow_hashref(
		'SELECT wakeups_sent, wait_attempts, waits_started FROM idem.stats
		  WHERE datname = current_database()');
	return $row;
}

sub claim_as_owner {
	my ($key) = @_;
	my ($kind, $fence) = $owner->selectrow_array(
		q{SELECT kind, fence FROM idem.claim_idempotency_key('wake', ?, 'h', NULL, ?::interval)},
		undef, $key, NO_END_BEFORE_DEADLINE);
	die "owner of $key got $kind" unless $kind eq 'new_claim';
	return $fence;
}

# Starts the twin's wait on $key and returns once it sleeps.
# The owner's outcome, prepared for two-phase commit under $gid. One
# message, as DBD::Pg knows no PREPARE TRANSACTION: the session is left with
# no transaction open, as the server leaves it.
sub prepare_outcome {
	my ($key, $fence, $code, $gid, $body) = @_;
	$owner->do("BEGIN; SELECT idem.mark_succeeded('wake', '$key', $fence, $code"
		  . (defined $body ? ", '$body'" : '') . "); PREPARE TRANSACTION '$gid'");
}

sub waiting_twin {
	my ($key) = @_;
	my $sth = start_wait($twin, 'wake', $key, NO_END_BEFORE_DEADLINE);
	wait_until_waiting($monitor, $twin->{pg_pid});
	return $sth;
}

# A rollback of the owner's outcome wakes no one.
{
	my $fence = claim_as_owner('rollback');
	my $sth = waiting_twin('rollback');
	# Read while the twin sleeps: it has claimed once, and found the key in flight.
	my $before = counters();
	$owner->begin_work;
	$owner->do(q{SELECT idem.mark_succeeded('wake', 'rollback', ?, 201)}, undef, $fence);
	$owner->rollback;
	is(counters()->{wakeups_sent} - $before->{wakeups_sent}, 0, 'a rolled-back outcome sends no wakeup');
	$owner->do(q{SELECT idem.mark_succeeded('wake', 'rollback', ?, 201)}, undef, $fence);
	is(counters()->{wakeups_sent} - $before->{wakeups_sent}, 1, 'its commit sends one');
	my $row = answer_of($sth);
	is($row->[0], 'replay_success', 'the committed outcome is the answer');
	my $after = counters();
	is($after->{wait_attempts} - $before->{wait_attempts}, 1,
		'one claim since it slept: after the commit (none after the rollback)');
}

# An outcome prepared with PREPARE TRANSACTION and committed by COMMIT
# PREPARED from another session: the waiter answers at once.
{
	my $fence = claim_as_owner('prepared');
	my $sth = waiting_twin('prepared');
	my $before = counters();
	prepare_outcome('prepared', $fence, 201, 'idem_wake_prepared', '{"order": 1}');
	is(counters()->{wakeups_sent} - $before->{wakeups_sent}, 0, 'PREPARE wakes no one: nothing is visible yet');
	ok(!$sth->pg_ready, 'the twin waits while the outcome is prepared');
	$committer->do(q{COMMIT PREPARED 'idem_wake_prepared'});
	is(counters()->{wakeups_sent} - $before->{wakeups_sent}, 1, 'COMMIT PREPARED sends a wakeup');
	my $row = answer_of($sth);
	is_deeply([ @$row[0, 3, 4] ], [ 'replay_success', 201, '{"order": 1}' ],
		'the waiter answers the outcome committed by COMMIT PREPARED in another session');
}

# ROLLBACK PREPARED wakes no one; the outcome committed later answers.
{
	my $fence = claim_as_owner('rolled-back-prepared');
	my $sth = waiting_twin('rolled-back-prepared');
	my $before = counters();
	prepare_outcome('rolled-back-prepared', $fence, 201, 'idem_wake_rolled_back');
	$committer->do(q{ROLLBACK PREPARED 'idem_wake_rolled_back'});
	is(counters()->{wakeups_sent} - $before->{wakeups_sent}, 0, 'ROLLBACK PREPARED sends no wakeup');
	$owner->do(q{SELECT idem.mark_succeeded('wake', 'rolled-back-prepared', ?, 202)}, undef, $fence);
	my $row = answer_of($sth);
	is_deeply([ @$row[0, 3] ], [ 'replay_success', 202 ], 'the outcome that committed is the answer');
	is(counters()->{wait_attempts} - $before->{wait_attempts}, 1,
		'the waiter claimed once since it slept: after the commit, not after ROLLBACK PREPARED');
}

# A prepared outcome committed after the server restarted (the session that
# prepared it, and everything it knew, gone): its waiters still wake.
{
	my $fence = claim_as_owner('restart');
	prepare_outcome('restart', $fence, 203, 'idem_wake_restart');
	$_->disconnect for ($monitor, $owner, $twin, $committer);
	$node->restart;
	$monitor = connect_db($node);
	$twin = connect_db($node);
	$committer = connect_db($node);
	my $sth = waiting_twin('restart');
	$committer->do(q{COMMIT PREPARED 'idem_wake_restart'});
	my $row = answer_of($sth);
	is_deeply([ @$row[0, 3] ], [ 'replay_success', 203 ], 'a transaction prepared before a restart wakes at its COMMIT PREPARED');
}

$_->disconnect for ($monitor, $twin, $committer);
$node->stop;
done_testing();
