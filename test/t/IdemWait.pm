# Helpers of the claim_or_wait TAP files (05x): a preloaded cluster, DBI
# handles, a claim_or_wait sent without waiting for its answer, its answer
# awaited with a deadline, and a deadline-bounded wait until given backends
# sleep in idem's wait.
#
# How these files prove "at once" without timing it: every wait they start
# may last an hour (NO_END_BEFORE_DEADLINE as max_wait, and as the owner's
# lock where the lock is not what is tested), far beyond the deadline of
# every wait of the test's own. An answer that arrives before that deadline
# was brought by the event under test (a commit's wakeup, a lock's end, a
# cancel, a session's end, a poll); without it the test dies at the
# deadline. How long the answer took is printed, and measured against a peer
# by bench/wait/latency.pl.
package IdemWait;
use strict;
use warnings;
use Exporter 'import';
use DBI;
use DBD::Pg qw(:async);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use IdemProof qw(poll_until);
use Scalar::Util qw(weaken);
use Time::HiRes qw(time);

our @EXPORT_OK = qw(start_waiting_node connect_db start_wait answer_of wait_until_waiting
  answered_before_deadline NO_END_BEFORE_DEADLINE);

# Longer than any test's deadline (PostgreSQL::Test::Utils's timeout_default,
# 180 s unless PG_TEST_TIMEOUT_DEFAULT says otherwise).
use constant NO_END_BEFORE_DEADLINE => '1 hour';

# The deadline, in seconds, of every wait of these helpers for something
# that should come at once (an answer, a backend going to sleep); the
# default deadline unless a test sets a shorter one of its own, so that a
# slip that stops the answer fails the test in seconds instead of minutes.
our $deadline_seconds;

# A cluster that preloads idem (worker off: nothing but the test changes
# keys), with idem created in "postgres". Extra configuration lines follow.
sub start_waiting_node {
	my ($name, $extra_conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(allows_streaming => 1);
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'idem'\nidem.worker_enabled = off\n" . ($extra_conf // ''));
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION idem');
	return $node;
}

sub connect_db {
	my ($node) = @_;
	return DBI->connect('dbi:Pg:dbname=postgres;host=' . $node->host . ';port=' . $node->port,
		'', '', { AutoCommit => 1, RaiseError => 1, PrintError => 0, AutoInactiveDestroy => 1 });
}

# Sends claim_or_wait(scope, key, 'h', max_wait) on $dbh without waiting for
# its answer; returns the statement, whose row is (kind, fence, attempt_count,
# response_code, response_body).
my @started_on;    # the handles start_wait sent a statement on

sub start_wait {
	my ($dbh, $scope, $key, $max_wait) = @_;
	push @started_on, $dbh;
	weaken($started_on[-1]);
	my $sth = $dbh->prepare(
		q{SELECT kind, fence, attempt_count, response_code, response_body
		    FROM idem.claim_or_wait(?, ?, 'h', ?::interval)},
		{ pg_async => PG_ASYNC });
	$sth->execute($scope, $key, $max_wait);
	return $sth;
}

# True once the statement start_wait sent on $dbh has its answer (or its
# error) ready; false if the deadline passed first.
sub answered_before_deadline {
	my ($dbh) = @_;
	# pg_ready is 0 while the statement runs; it is anything else (or it
	# raises) once the statement is answered or its backend is gone.
	return poll_until('a wait\'s answer', sub { (eval { $dbh->pg_ready } // 1) != 0 }, 0.001,
		$deadline_seconds) ? 1 : 0;
}

# The answer row of a statement start_wait sent; dies if it has not come by
# the deadline.
sub answer_of {
	my ($sth) = @_;
	unless (answered_before_deadline($sth->{Database})) {
		cancel_started_waits();
		die "no answer before the deadline\n";
	}
	$sth->pg_result;
	my $row = [ @{ $sth->fetchrow_arrayref } ];
	$sth->finish;    # one row: the handle is done with before its session ends
	return $row;
}

# Returns once every backend in @pids sleeps in idem's wait (wait event type
# Extension), or dies at the deadline.
sub wait_until_waiting {
	my ($monitor, @pids) = @_;
	my $list = join(',', @pids);
	my $deadline = time() + ($deadline_seconds // $PostgreSQL::Test::Utils::timeout_default);
	while (1) {
		my ($n) = $monitor->selectrow_array(
			"SELECT count(*) FROM pg_stat_activity WHERE pid IN ($list)
			   AND wait_event_type = 'Extension' AND state = 'active'");
		return if $n == @pids;
		die "only $n of " . scalar(@pids) . ' backends wait' if time() > $deadline;
		Time::HiRes::sleep(0.001);
	}
}

# Dropping the statement handle of a wait still running blocks until the
# wait answers, up to an hour away: a test that dies would hang there, as
# its handles are destroyed on the way out. Every wait still running is
# cancelled first (a cancel ends a wait at once), where the test dies.
sub cancel_started_waits {
	for my $dbh (grep { defined } @started_on) {
		eval { $dbh->pg_cancel if $dbh->{Active} && $dbh->pg_ready == 0 };
	}
}
$SIG{__DIE__} = sub { cancel_started_waits() unless $^S };

1;
