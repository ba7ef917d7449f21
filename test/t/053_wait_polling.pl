# idem.claim_or_wait where no commit can wake a waiter, so it polls (10 ms,
# doubling to 1 s): without shared_preload_libraries, and on a hot standby
# (where the outcome arrives by replication). Either way the waiter answers
# the owner's outcome although its own wait and the owner's lock last an
# hour: only its polls can have seen the outcome (IdemWait.pm). How soon
# after the outcome it answered is printed, not asserted.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemWait qw(start_waiting_node connect_db start_wait answer_of NO_END_BEFORE_DEADLINE);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

# Waits (with a deadline) until the backend $pid sleeps in idem's poll.
sub wait_until_polling {
	my ($node, $pid) = @_;
	$node->poll_query_until('postgres',
		"SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $pid")
	  or die "backend $pid does not poll";
}

# Claims on $primary, has a twin wait on $reader, completes on $primary
# once the twin polls; returns the twin's answer and how long after the
# owner's mark_succeeded was sent it came.
sub answer_after_outcome {
	my ($primary, $reader, $key, $visible) = @_;
	my ($fence) = split /\n/, $primary->safe_psql('postgres',
		qq{SELECT fence FROM idem.claim_idempotency_key('poll', '$key', 'h', NULL, '}
		  . NO_END_BEFORE_DEADLINE . q{')});
	$visible->() if $visible;
	my $twin = connect_db($reader);
	my $sth = start_wait($twin, 'poll', $key, NO_END_BEFORE_DEADLINE);
	wait_until_polling($reader, $twin->{pg_pid});
	my $sent = time();
	$primary->safe_psql('postgres',
		qq{SELECT idem.mark_succeeded('poll', '$key', $fence, 201, '{"polled": true}')});
	my $row = answer_of($sth);
	my $late = time() - $sent;
	$twin->disconnect;
	return ($row, $late);
}

# --- No preload.
my $plain = PostgreSQL::Test::Cluster->new('no_preload');
$plain->init;
$plain->start;
$plain->safe_psql('postgres', 'CREATE EXTENSION idem');
my ($row, $late) = answer_after_outcome($plain, $plain, 'plain');
is_deeply([ @$row[0, 3] ], [ 'replay_success', 201 ],
	'without the preload the waiter polls to the answer before its hour ran out');
diag(sprintf('no preload: answered %.3f s after mark_succeeded was sent', $late));
$plain->stop;

# --- A hot standby: the outcome arrives by replication.
my $primary = start_waiting_node('poll_primary');
$primary->backup('backup');
my $standby = PostgreSQL::Test::Cluster->new('poll_standby');
$standby->init_from_backup($primary, 'backup', has_streaming => 1);
$standby->start;
my $caught_up = sub { $primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert')) };
($row, $late) = answer_after_outcome($primary, $standby, 'standby', $caught_up);
is_deeply([ @$row[0, 3] ], [ 'replay_success', 201 ],
	'on a standby the waiter polls to the replicated answer before its hour ran out');
diag(sprintf('hot standby: answered %.3f s after mark_succeeded was sent on the primary', $late));
is($standby->safe_psql('postgres',
		'SELECT polling_fallbacks >= 1 FROM idem.stats WHERE datname = current_database()'),
	't', 'the standby counts the polling fallback');
$standby->stop;
$primary->stop;
done_testing();
