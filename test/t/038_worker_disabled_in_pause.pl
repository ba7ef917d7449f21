# idem.worker_enabled = off and a reload reach a worker that sits in a long
# pause at once (worker.cpp's comment says disabling ends a pause
# at once, and no test checked it). Two pauses: the naptime between rounds
# (idem.naptime = 1 hour here) and the pause after a full batch
# (idem.batch_delay = 1 minute). In both the worker must show
# state = 'disabled' within a deadline far shorter than the pause, and stay
# the same, connected process (docs/worker.md: off keeps the workers
# connected but idle). On again, a round starts at once, not after the
# naptime. Every wait polls with a deadline.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use FindBin;
use lib $FindBin::RealBin;
use IdemWorkerTest qw(expired_outcomes_sql set_and_reload sql_true_within);

# Far shorter than either pause: a worker that waits its pause out fails.
my $deadline_s = 20;

# The extension exists before the worker first looks (created before idem
# is preloaded): a worker that found no extension would wait a naptime too.
my $node = PostgreSQL::Test::Cluster->new('worker_disabled_in_pause');
$node->init;
$node->append_conf('postgresql.conf', "autovacuum = off\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idem');
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idem'\nidem.naptime = 3600\n");
$node->restart;

# --- The naptime. The first round runs at once, then the worker waits an hour.
ok( sql_true_within(
		$node, 'the first round',
		q{SELECT total_rounds = 1 AND state = 'idle' FROM idem.worker_status
		  WHERE database = 'postgres'}),
	'the worker did its first round');
my $pid = $node->safe_psql('postgres',
	q{SELECT pid FROM idem.worker_status WHERE database = 'postgres'});
ok( sql_true_within(
		$node, 'the worker in its naptime',
		qq{SELECT wait_event_type = 'Extension' AND query = 'idem: waiting for the next round'
		   FROM pg_stat_activity WHERE pid = $pid}),
	'the worker sits in its naptime of an hour');

my $start = time;
set_and_reload($node, 'idem.worker_enabled', 'off');
my $disabled = sql_true_within(
	$node, 'the state disabled',
	q{SELECT state = 'disabled' FROM idem.worker_status WHERE database = 'postgres'},
	$deadline_s);
my $took = time - $start;
ok($disabled, "off and a reload: disabled within $deadline_s s of a naptime of an hour");
note sprintf('disabled %.2f s after the reload, in the naptime', $took);
is( $node->safe_psql(
		'postgres', q{SELECT concat_ws(' ', pid, total_rounds) FROM idem.worker_status
		              WHERE database = 'postgres'}),
	"$pid 1", 'the same process, no round run');

# --- The pause after a full batch: six expired outcomes, batches of one,
# a pause of a minute after the first.
$node->safe_psql('postgres', expired_outcomes_sql('p', 6));
$node->safe_psql('postgres', 'ALTER SYSTEM SET idem.batch_size = 1');
$node->safe_psql('postgres', q{ALTER SYSTEM SET idem.batch_delay = '1min'});
$start = time;
set_and_reload($node, 'idem.worker_enabled', 'on');
ok( sql_true_within(
		$node, 'the worker in the pause after a full batch',
		qq{SELECT w.state = 'working' AND a.wait_event_type = 'Extension'
		          AND a.query = 'idem: purging expired keys'
		          AND (SELECT count(*) FROM idem.idempotency_request) = 5
		   FROM idem.worker_status w, pg_stat_activity a
		   WHERE w.database = 'postgres' AND a.pid = w.pid}, $deadline_s),
	'on again: a round starts at once (not after the naptime) and pauses after its first batch');
note sprintf('in the pause %.2f s after the reload that turned the worker on', time - $start);

$start = time;
set_and_reload($node, 'idem.worker_enabled', 'off');
$disabled = sql_true_within(
	$node, 'the state disabled',
	q{SELECT state = 'disabled' FROM idem.worker_status WHERE database = 'postgres'},
	$deadline_s);
$took = time - $start;
ok($disabled, "off and a reload: disabled within $deadline_s s of a pause of a minute");
note sprintf('disabled %.2f s after the reload, in the pause after a batch', $took);
is( $node->safe_psql(
		'postgres', q{SELECT concat_ws(' ', w.pid, (SELECT count(*) FROM idem.idempotency_request))
		              FROM idem.worker_status w WHERE w.database = 'postgres'}),
	"$pid 5", 'the same process; the round stopped after its batch');

$node->stop;
done_testing();
