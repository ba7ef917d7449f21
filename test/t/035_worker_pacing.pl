# idem.batch_delay paces a backlog: the worker pauses after a full batch
# (the first full batch in a row idem.batch_delay, each further one half as
# long, none from the fifth on; 036 covers the large backlog), so a round of
# n >= 4 full batches lasts at least the 4 pauses; a reload to 0 ends the
# pause under way and lets the rest go flat out, and SIGTERM ends a pause at once.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use FindBin;
use lib $FindBin::RealBin;
use IdemProof qw(poll_until);
use IdemWorkerTest qw(expired_outcomes_sql wait_for_log_match wait_for_round_ends);

my $node = PostgreSQL::Test::Cluster->new('worker_pacing');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'idem'\nidem.naptime = 1\nidem.worker_enabled = off\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idem');

is( $node->safe_psql(
		'postgres',
		q{SELECT format('%s %s %s %s', context, unit, boot_val, min_val) FROM pg_settings WHERE name = 'idem.batch_delay'}),
	'sighup ms 2000 0', 'idem.batch_delay: milliseconds, reload, 2000 (2 s) by default, 0 allowed');

sub set_and_reload { IdemWorkerTest::set_and_reload($node, @_); }

sub add_expired {  # n expired outcomes in scope s
	my ($s, $n) = @_;
	$node->safe_psql('postgres', expired_outcomes_sql($s, $n));
}

sub rows_left {
	my ($s) = @_;
	return $node->safe_psql('postgres', "SELECT count(*) FROM idem.idempotency_request WHERE scope = '$s'");
}

# --- 1,000 rows in batches of 100 with 300 ms: one sweep batch (empty),
# 11 purge batches (the last one empty) and one empty batch each for the
# inbox and outbox purges: 14 in all; pauses of 300, 150, 75 and 37 ms after
# the first 4 full ones, none after the 6 others.
add_expired('paced', 1000);
set_and_reload('idem.batch_size', 100);
set_and_reload('idem.batch_delay', '300ms');
my $log_offset = -s $node->logfile;
set_and_reload('idem.worker_enabled', 'on');
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM idem.idempotency_request WHERE scope = 'paced'}),
	'the paced worker purged the backlog');
ok( wait_for_log_match($node, qr/purged 1000 expired keys in [0-9.]+ ms \(14 batches, 4 pauses\)/, $log_offset),
	'in one round of 1 + 11 + 1 + 1 batches, with 4 pauses');
my ($round) = slurp_file($node->logfile, $log_offset) =~ /purged 1000 expired keys in ([0-9.]+) ms/;
note "round of 1,000 rows in batches of 100 at idem.batch_delay 300 ms: $round ms";
cmp_ok($round, '>=', 300 + 150 + 75 + 37, 'which lasted at least its 4 pauses');

# --- A reload to 0 in the middle of a pause of a minute (after the first
# full batch) ends it: the round's other full batches go without a pause.
# The backlog comes only once the worker has applied the new delay (it
# reloads before a round begins).
set_and_reload('idem.batch_delay', '1min');
ok(wait_for_round_ends($node, 'postgres', 2), 'a round began after the reload');
$log_offset = -s $node->logfile;
add_expired('reloaded', 1000);
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 900 FROM idem.idempotency_request WHERE scope = 'reloaded'}),
	'one batch purged, then a pause of a minute');
set_and_reload('idem.batch_delay', 0);
ok( wait_for_log_match($node, qr/purged 1000 expired keys in [0-9.]+ ms \(14 batches, 1 pauses\)/, $log_offset),
	'the reload ended that pause, and the round finished with no other');
is(rows_left('reloaded'), '0', 'nothing of it is left');

# --- SIGTERM in the middle of a long pause ends the worker at once. The
# backlog comes only once the worker has applied the new delay (it reloads
# before a round begins), so that its first full batch is followed by the
# minute's pause.
set_and_reload('idem.batch_delay', '1min');
ok(wait_for_round_ends($node, 'postgres', 2), 'a round began after the reload');
add_expired('term', 1000);
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 900 FROM idem.idempotency_request WHERE scope = 'term'}),
	'one batch purged, then a pause of a minute');
my $pid = $node->safe_psql('postgres',
	q{SELECT pid FROM idem.worker_status WHERE database = 'postgres'});
my $signalled = time;
kill 'TERM', $pid;
poll_until('the pausing worker to exit after SIGTERM', sub { !kill(0, $pid) }, 0.005);
my $exited = time - $signalled;
ok(!kill(0, $pid), 'SIGTERM ended the pausing worker');
# Its pause of a minute began before the 900 rows showed: waited out, it
# would end the worker close to a minute after the signal.
cmp_ok($exited, '<', 30, sprintf('without waiting out its pause (%.3f s)', $exited));
is(rows_left('term'), '900', 'and nothing more was purged in between');

$node->stop;
done_testing();
