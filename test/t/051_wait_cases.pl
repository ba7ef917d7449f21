# idem.claim_or_wait between sessions (isolationtester cannot see a wait on
# a condition variable as "blocked", so these cases are here): woken by the
# owner's COMMIT, not by its mark_succeeded; a rolled-back outcome wakes no
# one into a wrong answer; a final failure is replayed; a lock that runs out
# during the wait is taken over at its end; pg_cancel_backend and
# pg_terminate_backend end a wait at once. Every wait may last an hour, so
# an answer before the test's deadline was brought by the event under test
# (IdemWait.pm says why that proves "at once").
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemWait qw(start_waiting_node connect_db start_wait answer_of wait_until_waiting
  answered_before_deadline NO_END_BEFORE_DEADLINE);
use IdemWorkerTest qw(wait_for_log_match);
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

# Every answer here should come at once: 30 s is plenty on a loaded machine,
# and a slip that stops one (a lost lock-end timer, a lost wakeup) fails in
# seconds, not at the default deadline.
$IdemWait::deadline_seconds = 30;

my $node = start_waiting_node('wait_cases');
my $monitor = connect_db($node);
my $owner = connect_db($node);
my $twin = connect_db($node);

sub claim_as_owner {
	my ($key, $lock) = @_;
	my ($kind, $fence) = $owner->selectrow_array(
		q{SELECT kind, fence FROM idem.claim_idempotency_key('cases', ?, 'h', NULL, ?::interval)},
		undef, $key, $lock // NO_END_BEFORE_DEADLINE);
	die "owner of $key got $kind" unless $kind eq 'new_claim';
	return $fence;
}

sub still_waiting { return !$twin->pg_ready; }

# Woken at COMMIT, not at mark_succeeded.
{
	my $fence = claim_as_owner('commit');
	my $sth = start_wait($twin, 'cases', 'commit', NO_END_BEFORE_DEADLINE);
	wait_until_waiting($monitor, $twin->{pg_pid});
	$owner->begin_work;
	$owner->do(q{SELECT idem.mark_succeeded('cases', 'commit', ?, 201, '{"order": 1}')}, undef, $fence);
	wait_until_waiting($monitor, $twin->{pg_pid});
	ok(still_waiting(), 'an uncommitted outcome does not end the wait');
	$owner->commit;
	my $row = answer_of($sth);
	is_deeply([ @$row[0, 3, 4] ], [ 'replay_success', 201, '{"order": 1}' ],
		'the committed outcome is the answer');
}

# A rollback wakes no one; the outcome committed later is the answer.
{
	my $fence = claim_as_owner('rollback');
	my $sth = start_wait($twin, 'cases', 'rollback', NO_END_BEFORE_DEADLINE);
	wait_until_waiting($monitor, $twin->{pg_pid});
	$owner->begin_work;
	$owner->do(q{SELECT idem.mark_succeeded('cases', 'rollback', ?, 201, '{"order": 1}')}, undef, $fence);
	$owner->rollback;
	wait_until_waiting($monitor, $twin->{pg_pid});
	ok(still_waiting(), 'a rolled-back outcome leaves the twin waiting');
	$owner->do(q{SELECT idem.mark_succeeded('cases', 'rollback', ?, 201, '{"order": 2}')}, undef, $fence);
	my $row = answer_of($sth);
	is_deeply([ @$row[0, 4] ], [ 'replay_success', '{"order": 2}' ], 'the outcome that committed is the answer');
}

# A final failure is replayed to the waiter.
{
	my $fence = claim_as_owner('final');
	my $sth = start_wait($twin, 'cases', 'final', NO_END_BEFORE_DEADLINE);
	wait_until_waiting($monitor, $twin->{pg_pid});
	$owner->do(q{SELECT idem.mark_failed('cases', 'final', ?, false, 'declined', NULL, 402)}, undef, $fence);
	my $row = answer_of($sth);
	is_deeply([ @$row[0, 3] ], [ 'final_failure', 402 ], 'a final failure is replayed');
}

# A released key (1.2): the waiter is woken at the release's commit and
# claims the key afresh, with a fence above the released one.
{
	my $fence = claim_as_owner('release');
	my $sth = start_wait($twin, 'cases', 'release', NO_END_BEFORE_DEADLINE);
	wait_until_waiting($monitor, $twin->{pg_pid});
	$owner->begin_work;
	$owner->do(q{SELECT idem.release('cases', 'release', ?)}, undef, $fence);
	wait_until_waiting($monitor, $twin->{pg_pid});
	ok(still_waiting(), 'an uncommitted release does not end the wait');
	$owner->commit;
	my $row = answer_of($sth);
	is($row->[0], 'new_claim', 'the committed release lets the waiter claim the key afresh');
	cmp_ok($row->[1], '>', $fence, 'with a fence above the released one');
}

# The owner's lock runs out during the wait: taken over at its end, by the
# waiter's own timer (no one commits anything), not at its hour's end.
{
	claim_as_owner('expiry', '2 seconds');
	my ($locked_until) = $owner->selectrow_array(
		q{SELECT extract(epoch FROM locked_until) FROM idem.idempotency_request
		   WHERE scope = 'cases' AND key = 'expiry'});
	my $sth = start_wait($twin, 'cases', 'expiry', NO_END_BEFORE_DEADLINE);
	my $row = answer_of($sth);
	my $late = time() - $locked_until;
	is_deeply([ @$row[0, 2] ], [ 'processing_stale', 2 ],
		'the expired lock is taken over before the wait\'s hour ran out');
	diag(sprintf('taken over %.3f s after the lock ran out', $late));
	cmp_ok($late, '>=', 0, 'not before the lock ran out');
}

# pg_cancel_backend and pg_terminate_backend end a wait at once; nothing is
# left waiting behind.
{
	claim_as_owner('interrupted');
	my $sth = start_wait($twin, 'cases', 'interrupted', NO_END_BEFORE_DEADLINE);
	wait_until_waiting($monitor, $twin->{pg_pid});
	my $log_offset = -s $node->logfile;
	$monitor->do('SELECT pg_cancel_backend(?)', undef, $twin->{pg_pid});
	ok(answered_before_deadline($twin), 'at once: the cancel, not the wait\'s hour, ended it');
	# The server's error is the fact; the client's view of it is not: the
	# DBD::Pg of Debian sid returns from pg_result of a cancelled async
	# statement without raising, so the server log (the pid in brackets,
	# log_line_prefix) decides when the client says nothing.
	my $ended = eval { $sth->pg_result; 1 } ? ($sth->errstr // '') : $@;
	ok( $ended =~ /canceling statement due to user request/
		  || wait_for_log_match($node,
			qr/\[$twin->{pg_pid}\] [^\n]*ERROR:  canceling statement due to user request/, $log_offset),
		'pg_cancel_backend ends the wait with the usual error');
	my ($kind) = $twin->selectrow_array(q{SELECT kind FROM idem.claim_idempotency_key('cases', 'interrupted', 'h')});
	is($kind, 'processing_active', 'the session goes on');

	my $victim = connect_db($node);
	$sth = start_wait($victim, 'cases', 'interrupted', NO_END_BEFORE_DEADLINE);
	wait_until_waiting($monitor, $victim->{pg_pid});
	my $pid = $victim->{pg_pid};
	$monitor->do('SELECT pg_terminate_backend(?)', undef, $pid);
	ok(answered_before_deadline($victim), 'at once: the terminate, not the wait\'s hour, ended it');
	eval { $sth->pg_result };
	ok($@, 'pg_terminate_backend ends the wait');
	ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid"),
		'the terminated waiter is gone');
}

$monitor->disconnect;
$owner->disconnect;
$node->stop;
done_testing();
