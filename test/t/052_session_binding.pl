# idem.bind_lock_to_session = on: when the owning session ends — its client
# killed with kill -9, its connection closed, its backend terminated, or the
# whole server crashed — a twin's claim_or_wait takes the key over as
# processing_stale at once (after a crash the claim may instead be lost with
# its unflushed commit, and the key is claimed anew), although the owner's
# lock (idem.lock_timeout, here an hour) is far from over and the twin would wait an hour: an answer
# before the test's deadline was brought by the session's end (IdemWait.pm).
# The times are printed, not asserted.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemWait qw(start_waiting_node connect_db start_wait answer_of wait_until_waiting
  NO_END_BEFORE_DEADLINE);
use IdemProof qw(fork_child);
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

# Every answer here should come at once: 30 s is plenty on a loaded machine,
# and a slip that stops one (a live session read as ended, or the reverse)
# fails in seconds, not at the default deadline.
$IdemWait::deadline_seconds = 30;

my $node = start_waiting_node('session_binding',
	"restart_after_crash = on\nidem.lock_timeout = '" . NO_END_BEFORE_DEADLINE . "'\n");

# A bound owner of the key: its handle (the fence it got in %fence_of).
my %fence_of;
sub bound_owner {
	my ($key) = @_;
	my $dbh = connect_db($node);
	$dbh->do('SET idem.bind_lock_to_session = on');
	my ($kind, $fence) = $dbh->selectrow_array(
		q{SELECT kind, fence FROM idem.claim_idempotency_key('bind', ?, 'h')}, undef, $key);
	die "owner of $key got $kind" unless $kind eq 'new_claim';
	$fence_of{$key} = $fence;
	return $dbh;
}

my $monitor = connect_db($node);

# Starts a twin's claim_or_wait and returns once it waits.
sub waiting_twin {
	my ($key) = @_;
	my $dbh = connect_db($node);
	my $sth = start_wait($dbh, 'bind', $key, NO_END_BEFORE_DEADLINE);
	wait_until_waiting($monitor, $dbh->{pg_pid});
	return ($dbh, $sth);
}

# Ends the owner with $end->(), then times the twin's answer.
sub takeover_time {
	my ($key, $end) = @_;
	my ($twin, $sth) = waiting_twin($key);
	my $ended = time();
	$end->();
	my $row = answer_of($sth);
	my $seconds = time() - $ended;
	is($row->[0], 'processing_stale', "$key: the twin takes the key over at once, not after an hour");
	$twin->disconnect;
	return $seconds;
}

my %times;

# The client process dies (kill -9): the backend sees its socket close.
{
	pipe(my $reader, my $writer) or die "pipe: $!";
	# fork_child: the child dies with the test, should the test die first.
	my $child = fork_child('the owner', sub {
		close $reader;
		my $dbh = bound_owner('killed-client');
		print {$writer} "claimed\n";
		close $writer;
		sleep 3600;    # killed by the parent long before
	});
	close $writer;
	my $line = <$reader>;
	die 'the child did not claim' unless defined $line && $line eq "claimed\n";
	$times{'kill -9 of the client'} = takeover_time('killed-client', sub { kill 'KILL', $child });
	waitpid($child, 0);
}

# The client closes its connection.
{
	my $owner = bound_owner('closed');
	$times{'connection closed'} = takeover_time('closed', sub { $owner->disconnect });
}

# An operator terminates the owner's backend.
{
	my $owner = bound_owner('terminated');
	my $pid = $owner->{pg_pid};
	$times{'pg_terminate_backend'} =
	  takeover_time('terminated', sub { $monitor->do('SELECT pg_terminate_backend(?)', undef, $pid) });
}

# Without the binding nothing of the kind happens: the twin keeps waiting.
{
	my $owner = connect_db($node);
	$owner->selectrow_array(q{SELECT idem.claim_idempotency_key('bind', 'unbound', 'h')});
	my ($twin, $sth) = waiting_twin('unbound');
	$owner->disconnect;
	# The owner's backend is gone once pg_stat_activity stops showing it.
	$node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $owner->{pg_pid}")
	  or die 'the unbound owner did not go away';
	ok(!$sth->pg_ready, 'an unbound key stays locked when its owner disconnects');
	$twin->pg_cancel;
	$twin->disconnect;
}

my ($takeovers) = $monitor->selectrow_array(
	'SELECT session_bound_takeovers FROM idem.stats WHERE datname = current_database()');
is($takeovers, 3, 'session-bound takeovers are counted');

# The server crashes (a backend killed with kill -9): every session ends,
# the postmaster reinitialises shared memory, and no token is live. The
# owner's claim was its transaction's only write, so it committed without
# waiting for its flush (src/keys/bound_commit.hpp): it may have been lost
# with the crash. Either way the next claim owns the key at once, with a
# fence above the old owner's, whose writes are refused.
{
	my $owner = bound_owner('crash');
	my $pid = $owner->{pg_pid};
	$monitor->disconnect;
	my $killed = time();
	kill 'KILL', $pid;
	# A connection made before the postmaster began its crash reset is
	# ended by it: such a try is made again, within the deadline.
	my ($row, $up);
	my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
	until ($row) {
		die 'the server did not come back' if time() > $deadline;
		my $dbh = eval { connect_db($node) };
		if (!$dbh) { Time::HiRes::sleep(0.01); next; }
		$up //= time();
		$row = eval { answer_of(start_wait($dbh, 'bind', 'crash', NO_END_BEFORE_DEADLINE)) };
		$dbh->disconnect;
	}
	my $answered = time();
	like($row->[0], qr/^(processing_stale|new_claim)$/,
		"after a crash restart the bound key is owned again at once ($row->[0])");
	cmp_ok($row->[1], '>', $fence_of{crash}, 'with a fence above the old owner\'s');
	my $late = connect_db($node);
	ok(!eval {
			$late->do(q{SELECT idem.mark_succeeded('bind', 'crash', ?, 200)}, undef, $fence_of{crash});
			1;
		}, 'the old owner\'s fence is refused');
	like($late->state, qr/^P4012$/, '... as a stale fence');
	$late->disconnect;
	$times{'server crash (from accepting connections again)'} = $answered - $up;
	diag(sprintf('server crash: %.3f s from kill -9 to the answer, of which restart %.3f s',
			$answered - $killed, $up - $killed));
	$monitor = connect_db($node);
}

diag(sprintf('takeover after %s: %.3f s', $_, $times{$_})) for sort keys %times;

$monitor->disconnect;
$node->stop;
done_testing();
