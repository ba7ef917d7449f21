# A bound claim's commit (src/keys/bound_commit.hpp): a claim bound to its
# session that is its transaction's only write commits without waiting for
# its flush; a bound claim with another write before or after it in the
# same transaction, an unbound claim, two claims, a prepared transaction
# and a transaction already asynchronous keep their flush.
#
# Two observables, both deterministic. The decision is logged at DEBUG1
# ("a bound claim commits without waiting for its flush"), read here from
# psql's stderr. And on a server whose synchronous_standby_names names a
# standby that never connects, every commit that waits for its flush sits
# in wait event SyncRep until cancelled: a commit that keeps its flush is
# found there (polled with a deadline) and returns only once cancelled,
# with no decision logged; the bound claim alone is found there too, for
# its fence's WAL (fences must never repeat after a failover, so the fence
# is replicated before the commit stops waiting), and logs the decision
# only after that wait: its commit itself then waits for nothing.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemWait qw(start_waiting_node connect_db);
use IdemProof qw(poll_until);
use PostgreSQL::Test::Utils;
use Test::More;
use DBD::Pg qw(:async);

my $decision = qr/idem: a bound claim commits without waiting for its flush/;

my $node = start_waiting_node('bound_commit', "max_prepared_transactions = 2\n");
$node->safe_psql('postgres', 'CREATE TABLE other_write (i int)');

# Runs $sql in a new session at client_min_messages = debug1 and returns
# whether the decision was logged, and psql's stderr.
my $case = 0;
sub decided {
	my ($sql, %opts) = @_;
	my $bind = $opts{bind} // 'on';
	my ($rc, $out, $err) = $node->psql('postgres',
		"SET idem.bind_lock_to_session = $bind;\nSET client_min_messages = debug1;\n$sql",
		on_error_stop => 1);
	die "psql failed ($rc): $err" if $rc != 0;
	return ($err =~ $decision ? 1 : 0, $out);
}

sub key { return 'k' . ++$case; }

my $k;

$k = key();
ok((decided("SELECT kind FROM idem.claim_idempotency_key('bc', '$k', 'h');"))[0],
	'a bound new claim alone commits without waiting');

$k = key();
ok((decided("SELECT kind FROM idem.claim_or_wait('bc', '$k', 'h', '1 second');"))[0],
	'a bound claim_or_wait alone commits without waiting');

$k = key();
ok((decided("BEGIN; SELECT kind FROM idem.claim_idempotency_key('bc', '$k', 'h'); COMMIT;"))[0],
	'a bound claim alone in an explicit transaction commits without waiting');

# A takeover: the owner's session ended (its psql exited), so the next claim
# takes the key over as processing_stale, a claim of its own.
$k = key();
decided("SELECT kind FROM idem.claim_idempotency_key('bc', '$k', 'h');");
my ($took, $kind) = decided("SELECT kind FROM idem.claim_idempotency_key('bc', '$k', 'h');");
is($kind, 'processing_stale', 'the key of an ended session is taken over');
ok($took, 'a bound takeover alone commits without waiting');

$k = key();
ok(!(decided("BEGIN; INSERT INTO other_write VALUES (1);
  SELECT kind FROM idem.claim_idempotency_key('bc', '$k', 'h'); COMMIT;"))[0],
	'a bound claim after another write keeps its flush');

$k = key();
ok(!(decided("BEGIN; SELECT kind FROM idem.claim_idempotency_key('bc', '$k', 'h');
  INSERT INTO other_write VALUES (1); COMMIT;"))[0],
	'a bound claim before another write keeps its flush');

$k = key();
ok(!(decided("BEGIN; SELECT kind FROM idem.claim_idempotency_key('bc', '$k', 'h');
  SELECT idem.mark_succeeded('bc', '$k', r.fence, 200, '{}') FROM idem.idempotency_request r
   WHERE r.scope = 'bc' AND r.key = '$k'; COMMIT;"))[0],
	'a bound claim and its outcome in one transaction keep the flush');

$k = key();
ok(!(decided("BEGIN; SELECT kind FROM idem.claim_idempotency_key('bc', '$k', 'h');
  SELECT kind FROM idem.claim_idempotency_key('bc', '${k}b', 'h'); COMMIT;"))[0],
	'two bound claims in one transaction keep the flush');

$k = key();
ok(!(decided("SELECT kind FROM idem.claim_idempotency_key('bc', '$k', 'h');", bind => 'off'))[0],
	'an unbound claim keeps its flush');

$k = key();
ok(!(decided("SET synchronous_commit = off;
  SELECT kind FROM idem.claim_idempotency_key('bc', '$k', 'h');"))[0],
	'with synchronous_commit off there is nothing to decide');

$k = key();
ok(!(decided("BEGIN; SELECT kind FROM idem.claim_idempotency_key('bc', '$k', 'h');
  PREPARE TRANSACTION 'bc'; COMMIT PREPARED 'bc';"))[0],
	'a prepared bound claim keeps its flush');

# What one transaction decided ends with it: a rolled-back claim, then a
# claim with a write after it, then a claim alone, in one session; and the
# setting is the session's again after the commit.
$k = key();
my ($alone, $shown) = decided("BEGIN; SELECT kind FROM idem.claim_idempotency_key('bc', '$k', 'h'); ROLLBACK;
  BEGIN; SELECT kind FROM idem.claim_idempotency_key('bc', '${k}b', 'h');
  INSERT INTO other_write VALUES (1); COMMIT;
  SELECT kind FROM idem.claim_idempotency_key('bc', '${k}c', 'h');
  SHOW synchronous_commit;");
ok($alone, 'a later claim alone in the same session commits without waiting');
like($shown, qr/\bon$/m, 'synchronous_commit is on again after that commit');
is($node->safe_psql('postgres', "SELECT count(*) FROM idem.idempotency_request
  WHERE scope = 'bc' AND key IN ('$k', '${k}b', '${k}c')"), '2',
	'the rolled-back claim is gone, the others committed');

# A replay of a finished key writes nothing and decides nothing.
$k = key();
decided("BEGIN; SELECT kind FROM idem.claim_idempotency_key('bc', '$k', 'h');
  SELECT idem.mark_succeeded('bc', '$k', r.fence, 200, '{}') FROM idem.idempotency_request r
   WHERE r.scope = 'bc' AND r.key = '$k'; COMMIT;");
my ($replay_decided, $replay) = decided("SELECT kind FROM idem.claim_idempotency_key('bc', '$k', 'h');");
is($replay, 'replay_success', 'the finished key replays');
ok(!$replay_decided, 'a replay writes nothing, so there is nothing to decide');

# Where the flush is waited for: a standby that never connects.
$node->safe_psql('postgres', 'CREATE TABLE other_write_2 (i int)');
$node->append_conf('postgresql.conf', "synchronous_standby_names = 'nobody'\n");
$node->reload;
my $monitor = connect_db($node);
poll_until('synchronous_standby_names to apply',
	sub { $monitor->selectrow_array('SHOW synchronous_standby_names') eq 'nobody' }, 0.01, 30)
  or die 'the reload did not apply';

# Sends $sql on a new session, waits until it sits in SyncRep, cancels the
# wait, and returns the decision logged and the number of times it sat there.
sub syncrep_waits {
	my ($sql, $bind) = @_;
	my $dbh = connect_db($node);
	my @notices;
	$dbh->{PrintWarn} = 1;
	local $SIG{__WARN__} = sub { push @notices, $_[0] };
	$dbh->do("SET idem.bind_lock_to_session = $bind");
	$dbh->do('SET client_min_messages = debug1');
	my $pid = $dbh->{pg_pid};
	$dbh->do($sql, { pg_async => PG_ASYNC });
	my $waits = 0;
	while (1) {
		my $syncrep = poll_until('a SyncRep wait or the answer', sub {
			return 1 if $dbh->pg_ready;
			my ($event) = $monitor->selectrow_array(
				'SELECT wait_event FROM pg_stat_activity WHERE pid = ?', undef, $pid);
			return ($event // '') eq 'SyncRep';
		}, 0.001, 30) or die 'neither waited nor answered before the deadline';
		last if $dbh->pg_ready;
		$waits += 1;
		die 'waited more than twice' if $waits > 2;
		$monitor->do('SELECT pg_cancel_backend(?)', undef, $pid);
		poll_until('the cancelled wait to end', sub {
			return 1 if $dbh->pg_ready;
			my ($event) = $monitor->selectrow_array(
				'SELECT wait_event FROM pg_stat_activity WHERE pid = ?', undef, $pid);
			return ($event // '') ne 'SyncRep';
		}, 0.001, 30) or die 'the cancel did not end the wait';
	}
	$dbh->pg_result;
	$dbh->disconnect;
	my $logged = grep { $_ =~ $decision } @notices;
	return ($logged ? 1 : 0, $waits);
}

my ($logged, $waits);
$k = key();
($logged, $waits) = syncrep_waits("SELECT kind FROM idem.claim_idempotency_key('bc', '$k', 'h')", 'off');
is($waits, 1, 'an unbound claim waits for its commit to replicate');
ok(!$logged, '... and keeps its flush');

$k = key();
($logged, $waits) = syncrep_waits("BEGIN; INSERT INTO other_write_2 VALUES (1);
  SELECT kind FROM idem.claim_idempotency_key('bc', '$k', 'h'); COMMIT", 'on');
is($waits, 1, 'a bound claim after another write waits for its commit');
ok(!$logged, '... and keeps its flush');

$k = key();
($logged, $waits) = syncrep_waits("BEGIN; SELECT kind FROM idem.claim_idempotency_key('bc', '$k', 'h');
  INSERT INTO other_write_2 VALUES (1); COMMIT", 'on');
is($waits, 1, 'a bound claim before another write waits for its commit');
ok(!$logged, '... and keeps its flush');

$k = key();
($logged, $waits) = syncrep_waits("SELECT kind FROM idem.claim_idempotency_key('bc', '$k', 'h')", 'on');
is($waits, 1, 'a bound claim alone waits once: for its fence to replicate');
ok($logged, '... and then commits without waiting');

is($node->safe_psql('postgres', "SELECT count(*) FROM idem.idempotency_request
  WHERE scope = 'bc' AND key = '$k'"), '1', 'the claim committed');

done_testing();
