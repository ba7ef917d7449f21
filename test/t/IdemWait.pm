# Helpers of the claim_or_wait TAP files (05x): a preloaded cluster, DBI
# handles, a claim_or_wait sent without waiting for its answer, and a
# deadline-bounded wait until given backends sleep in idem's wait.
package IdemWait;
use strict;
use warnings;
use Exporter 'import';
use DBI;
use DBD::Pg qw(:async);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Time::HiRes qw(time);

our @EXPORT_OK = qw(start_waiting_node connect_db start_wait answer_of wait_until_waiting);

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
sub start_wait {
	my ($dbh, $scope, $key, $max_wait) = @_;
	my $sth = $dbh->prepare(
		q{SELECT kind, fence, attempt_count, response_code, response_body
		    FROM idem.claim_or_wait(?, ?, 'h', ?::interval)},
		{ pg_async => PG_ASYNC });
	$sth->execute($scope, $key, $max_wait);
	return $sth;
}

# The answer row of a statement start_wait sent (waits for it).
sub answer_of {
	my ($sth) = @_;
	$sth->pg_result;
	return $sth->fetchrow_arrayref;
}

# Returns once every backend in @pids sleeps in idem's wait (wait event type
# Extension), or dies at the default deadline.
sub wait_until_waiting {
	my ($monitor, @pids) = @_;
	my $list = join(',', @pids);
	my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
	while (1) {
		my ($n) = $monitor->selectrow_array(
			"SELECT count(*) FROM pg_stat_activity WHERE pid IN ($list)
			   AND wait_event_type = 'Extension' AND state = 'active'");
		return if $n == @pids;
		die "only $n of " . scalar(@pids) . ' backends wait' if time() > $deadline;
		Time::HiRes::sleep(0.001);
	}
}

1;
