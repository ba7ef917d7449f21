# The worker's pace follows the backlog (src/pure/batch_pace.hpp): after the
# first full batch of a stage it pauses idem.batch_delay, after each further
# full batch in a row half as long, and from the fifth on not at all, so a
# large backlog is worked off flat out and a small one still in paced slices;
# the same for the inbox's and the outbox's purges. And a round shows its
# progress batch by batch: idem.stats.rows_purged and
# idem.worker_status.last_round_purged move while the round is under way.
# Everything is read from what the worker reports (its counters, its status,
# the pauses its round line counts), never from a clock.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemWorkerTest qw(expired_outcomes_sql set_and_reload wait_for_log_match wait_for_round_ends);

my $node = PostgreSQL::Test::Cluster->new('worker_keeps_up');
$node->init;
$node->append_conf('postgresql.conf', <<'CONF');
shared_preload_libraries = 'idem'
idem.naptime = 1
idem.worker_enabled = off
idem.batch_size = 1000
idem.outbox_retention = '1h'
CONF
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idem');

sub set_and_reload { IdemWorkerTest::set_and_reload($node, @_); }

my $status_sql = q{
SELECT w.state || ' ' || w.total_rounds || ' ' || coalesce(w.last_round_purged::text, '-') || ' '
       || s.rows_purged
  FROM idem.worker_status w, idem.stats s
 WHERE w.database = 'postgres'
   AND s.datid = (SELECT oid FROM pg_database WHERE datname = 'postgres')};

# Stops the worker, prepares a backlog with $sql, starts the worker and
# returns the captures of the first line matching $line that its round logs.
sub round_over_backlog {
	my ($sql, $line) = @_;
	set_and_reload('idem.worker_enabled', 'off');
	$node->poll_query_until('postgres',
		q{SELECT state = 'disabled' FROM idem.worker_status WHERE database = 'postgres'})
	  or die 'the worker did not go idle';
	$node->safe_psql('postgres', $sql);
	my $offset = -s $node->logfile;
	set_and_reload('idem.worker_enabled', 'on');
	return () unless wait_for_log_match($node, $line, $offset);
	return slurp_file($node->logfile, $offset) =~ $line;
}

# --- Progress during a round. A pause of a minute after the first full
# batch holds the round open: the counters must already show that batch.
set_and_reload('idem.batch_delay', '1min');
$node->safe_psql('postgres', expired_outcomes_sql('progress', 5000));
my $offset = -s $node->logfile;
set_and_reload('idem.worker_enabled', 'on');
ok( $node->poll_query_until(
		'postgres', "SELECT ($status_sql) = 'working 0 1000 1000'"),
	'mid-round, with no round ended yet, worker_status and idem.stats show the first batch');
is($node->safe_psql('postgres', q{SELECT count(*) FROM idem.idempotency_request WHERE scope = 'progress'}),
	'4000', 'and the backlog left is visible beside them');
# Back to the default: the pause under way is then already over, and the
# three further full batches are paced 1 s, 0.5 s and 0.25 s.
set_and_reload('idem.batch_delay', '2s');
ok( wait_for_log_match(
		$node, qr/purged 5000 expired keys in [0-9.]+ ms \(9 batches, 4 pauses\)/, $offset),
	'the round ended: 1 sweep + 6 purge + 2 message batches, a pause after each of the 4 first full ones');
# The next rounds (naptime 1 s) find nothing; the count stays.
is( $node->safe_psql('postgres',
		q{SELECT rows_purged FROM idem.stats WHERE datid = (SELECT oid FROM pg_database WHERE datname = 'postgres')}),
	'5000', 'idem.stats counted each row once, batch by batch');

# --- A large backlog: 50 batches at the default batch_delay (2 s). Paced
# at 2 s a batch it would take 49 pauses; it takes 4, then goes flat out.
my ($batches, $pauses) = round_over_backlog(expired_outcomes_sql('large', 50_000),
	qr/purged 50000 expired keys in [0-9.]+ ms \((\d+) batches, (\d+) pauses\)/);
is($batches, 54, 'a backlog of 50 batches was purged in one round (1 + 51 + 2 batches)');
is($pauses, 4, 'with a pause after the first 4 full batches only');
cmp_ok($pauses, '<', $batches, 'fewer pauses than batches');
is($node->safe_psql('postgres', q{SELECT count(*) FROM idem.idempotency_request WHERE scope = 'large'}),
	'0', 'nothing of it is left');

# --- A small backlog still gets every pause: 3 full batches, 3 pauses.
($batches, $pauses) = round_over_backlog(expired_outcomes_sql('small', 3000),
	qr/purged 3000 expired keys in [0-9.]+ ms \((\d+) batches, (\d+) pauses\)/);
is("$batches $pauses", '7 3', 'a backlog of 3 batches: a pause after each of its full batches');

# --- The inbox's and the outbox's purges follow the same rule: 20 full
# batches of 100 each, 4 pauses each.
set_and_reload('idem.batch_size', 100);
my ($messages);
($messages, $batches, $pauses) = round_over_backlog(q{
SELECT count(idem.consume_once('c', 'old' || g, 'h', '1 hour')) FROM generate_series(1, 2000) g;
SELECT count(idem.outbox_put('s', 'k' || g, 'evt', '{}')) FROM generate_series(1, 2000) g;
SELECT count(idem.outbox_published(id, lease_fence)) FROM idem.outbox_lease(1000);
SELECT count(idem.outbox_published(id, lease_fence)) FROM idem.outbox_lease(1000);
BEGIN;
UPDATE idem.consumed_message SET consumed_at = consumed_at - interval '2 hours',
       expires_at = expires_at - interval '2 hours';
UPDATE idem.outbox_event SET published_at = published_at - interval '2 hours';
COMMIT;
}, qr/purged (\d+) consumed messages and published outbox events \((\d+) batches, (\d+) pauses in the round\)/);
is($messages, 4000, 'the worker purged 2,000 consumed messages and 2,000 published events in one round');
is("$batches $pauses", '44 8',
	'in 1 + 1 + 21 + 21 batches, with 4 pauses in each message purge');
is($node->safe_psql('postgres',
	q{SELECT (SELECT count(*) FROM idem.consumed_message) + (SELECT count(*) FROM idem.outbox_event)}),
	'0', 'both tables are empty');

$node->stop;
done_testing();
