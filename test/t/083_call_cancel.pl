# pg_cancel_backend and pg_terminate_backend of a client's call in progress:
# a large purge and a claim_or_wait that waits. Each ends with the usual
# error (57014) or the end of the connection, leaves the tables as they
# were, and the next call works.
#
# The purge deletes up to a million rows in one loop of its own (no
# executor), so the cancel must be checked inside that loop. How the test
# knows it was: every row the loop reached carries the purge's transaction
# id as its xmax, and keeps it after the abort (a rolled-back delete leaves
# the raw xmax; autovacuum is off). The cancel is sent once the loop has
# begun (some rows carry it); a loop that ignored it would reach all of
# them before the error, an interrupted one stops short.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use DBD::Pg qw(:async);
use IdemProof qw(poll_until);
use IdemWait qw(start_waiting_node connect_db start_wait wait_until_waiting
  answered_before_deadline NO_END_BEFORE_DEADLINE);
use IdemWorkerTest qw(expired_outcomes_sql wait_for_log_match);
use PostgreSQL::Test::Utils;
use Test::More;

my $rows = 200000;
my $node = start_waiting_node('call_cancel', "autovacuum = off\n");
$node->safe_psql('postgres', expired_outcomes_sql('cc', $rows));
my $monitor = connect_db($node);

sub start_purge {
	my ($dbh) = @_;
	my $sth = $dbh->prepare('SELECT idem.purge_expired(1000000)', { pg_async => PG_ASYNC });
	$sth->execute;
	return $sth;
}

# The purge's transaction id, once its delete loop has begun: the first
# delete assigns it (the purge writes nothing before). Read without scanning
# the table, so the signal that follows finds the loop early.
sub wait_until_deleting {
	my ($pid) = @_;
	return poll_until(
		'the purge\'s delete loop to begin',
		sub {
			my ($xid) = $monitor->selectrow_array(
				q{SELECT backend_xid FROM pg_stat_activity WHERE pid = ?}, undef, $pid);
			return $xid;
		},
		0.001);
}

# After a purge was cancelled or terminated: its transaction either ended
# in the loop (every row still there, the loop stopped short of the last)
# or, when the signal came after its commit, had already deleted them all
# (then they are put back for the next case). Anything in between would be
# a purge half done.
sub interrupted_purge_left_nothing_half_done {
	my ($xid, $signal) = @_;
	my $left = $monitor->selectrow_array(
		q{SELECT count(*) FROM idem.idempotency_request WHERE scope = 'cc'});
	if ($left == 0) {
		note "the purge had committed before the $signal arrived";
		$node->safe_psql('postgres', expired_outcomes_sql('cc', $rows));
		return 0;
	}
	my $marked = marked_by($xid);
	note "the loop reached $marked of $rows rows";
	cmp_ok($marked, '<', $rows, "the $signal stopped the delete loop itself");
	ok(all_rows_there(), 'every row is still there, unchanged');
	return 1;
}

sub marked_by {
	my ($xid) = @_;
	return $monitor->selectrow_array(
		'SELECT count(*) FROM idem.idempotency_request WHERE xmax = ?::xid', undef, $xid);
}

sub all_rows_there {
	return $monitor->selectrow_array(
		q{SELECT count(*) = ? AND bool_and(status = 'succeeded') FROM idem.idempotency_request
		   WHERE scope = 'cc'}, undef, $rows);
}

# The server's error is the fact (IdemWait.pm: a DBD::Pg may return from
# pg_result of a cancelled statement without raising): the client's error
# or the server log's line for that backend.
sub ended_with {
	my ($sth, $pid, $regexp, $log_offset) = @_;
	my $ended = eval { $sth->pg_result; 1 } ? ($sth->errstr // '') : $@;
	return $ended =~ $regexp
	  || wait_for_log_match($node, qr/\[$pid\] [^\n]*ERROR:  $regexp/, $log_offset);
}

# --- pg_cancel_backend in the middle of the purge's delete loop.
{
	my $purger = connect_db($node);
	my $pid = $purger->{pg_pid};
	my $log_offset = -s $node->logfile;
	my $sth = start_purge($purger);
	my $xid = wait_until_deleting($pid);
	ok(defined $xid, 'the purge is deleting');
	$monitor->do('SELECT pg_cancel_backend(?)', undef, $pid);
	ok(answered_before_deadline($purger), 'the cancelled purge returned');
	if (interrupted_purge_left_nothing_half_done($xid, 'cancel')) {
		ok(ended_with($sth, $pid, qr/canceling statement due to user request/, $log_offset),
			'with 57014');
	}
	else {
		eval { $sth->pg_result };
	}
	my ($kind) = $purger->selectrow_array(
		q{SELECT kind FROM idem.claim_idempotency_key('cc-next', 'after-cancel', 'h')});
	is($kind, 'new_claim', 'the session goes on');
	$purger->disconnect;
}

# --- pg_terminate_backend in the middle of the loop.
{
	my $victim = connect_db($node);
	my $pid = $victim->{pg_pid};
	my $sth = start_purge($victim);
	my $xid = wait_until_deleting($pid);
	ok(defined $xid, 'the purge is deleting');
	$monitor->do('SELECT pg_terminate_backend(?)', undef, $pid);
	ok(answered_before_deadline($victim), 'the terminated purge returned');
	ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid"),
		'the backend is gone');
	interrupted_purge_left_nothing_half_done($xid, 'terminate');
}

# --- A claim_or_wait waiting on another session's key (test/t/051 times
# these; here: what is left after them).
{
	my $owner = connect_db($node);
	my ($fence) = $owner->selectrow_array(
		q{SELECT fence FROM idem.claim_idempotency_key('cw', 'waited', 'h', NULL, ?::interval)},
		undef, NO_END_BEFORE_DEADLINE);
	my $row_sql = q{SELECT status, fence, attempt_count FROM idem.idempotency_request
	                 WHERE scope = 'cw' AND key = 'waited'};
	my $before = join('|', $monitor->selectrow_array($row_sql));

	my $twin = connect_db($node);
	my $log_offset = -s $node->logfile;
	my $sth = start_wait($twin, 'cw', 'waited', NO_END_BEFORE_DEADLINE);
	wait_until_waiting($monitor, $twin->{pg_pid});
	$monitor->do('SELECT pg_cancel_backend(?)', undef, $twin->{pg_pid});
	ok(answered_before_deadline($twin), 'the cancelled wait returned');
	ok(ended_with($sth, $twin->{pg_pid}, qr/canceling statement due to user request/, $log_offset),
		'with 57014');
	is(join('|', $monitor->selectrow_array($row_sql)), $before, 'the waited key is unchanged');
	my ($kind) = $twin->selectrow_array(q{SELECT kind FROM idem.claim_idempotency_key('cw', 'waited', 'h')});
	is($kind, 'processing_active', 'the next call answers');

	my $victim = connect_db($node);
	my $pid = $victim->{pg_pid};
	$sth = start_wait($victim, 'cw', 'waited', NO_END_BEFORE_DEADLINE);
	wait_until_waiting($monitor, $pid);
	$monitor->do('SELECT pg_terminate_backend(?)', undef, $pid);
	ok(answered_before_deadline($victim), 'the terminated wait returned');
	eval { $sth->pg_result };
	ok($@, 'its connection ended');
	is(join('|', $monitor->selectrow_array($row_sql)), $before, 'the waited key is unchanged');
	$owner->do(q{SELECT idem.mark_succeeded('cw', 'waited', ?, 200)}, undef, $fence);
	($kind) = $twin->selectrow_array(q{SELECT kind FROM idem.claim_or_wait('cw', 'waited', 'h', '1 second')});
	is($kind, 'replay_success', 'a later wait gets the outcome');
	$owner->disconnect;
	$twin->disconnect;
}

# --- Nothing was lost: the next purge deletes every expired row.
is($monitor->selectrow_array('SELECT idem.purge_expired(1000000)'), $rows, 'the next purge deletes them all');

$monitor->disconnect;
$node->stop;
done_testing();
