# The crash run of the proof suite (test/t/103_crash.pl's verdict,
# test/t/IdemProof.pm) on Citus with fsync on: the storm through the
# coordinator (delegated calls; half the clients' outcomes in a transaction
# block, half through the delegated application function) while backends
# are killed with kill -9 on the workers and on the coordinator (that node's
# postmaster restarts every backend, with crash recovery) and one worker is
# stopped with pg_ctl stop -m immediate and started again. A call that could
# not finish fails, and the client retries its request as after any error.
# Afterwards, read through the coordinator: every acknowledged claim,
# checkpoint and outcome is there as acknowledged, no fence issued twice
# (fences are unique across the nodes), no effect duplicated, no key left
# processing once each worker swept its shards.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin, "$FindBin::RealBin/../t";
use IdemProof qw(now run_clients read_logs total_stats storm_client read_rows_and_effects check_acknowledged);
use IdemCitus qw(start_citus);
use PostgreSQL::Test::Utils;
use Test::More;
use DBI;
use IPC::Run;

my $clients  = $ENV{CITUS_CRASH_CLIENTS} // 12;
my $keys     = $ENV{CITUS_CRASH_KEYS} // 400;
my $duration = $ENV{CITUS_CRASH_SECONDS} // 12;
my $backend_kills = 3;

my $cluster = start_citus('crash', fsync => 1);
my @nodes = $cluster->nodes;
my $dsn = $cluster->dsn;
my $dir = PostgreSQL::Test::Utils::tempdir;
my $t0  = now() + 1;
srand(3300);

# One query to a node's "proof" by psql: its output, or undef when psql
# failed (as test/t/103_crash.pl's, stdin /dev/null).
sub query_node {
	my ($node, $sql) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run([ $node->installed_command('psql'), '-XAtq', '-d', $node->connstr('proof'),
			'-c', $sql ], '<', '/dev/null', '>', \$out, '2>', \$err);
	chomp $out;
	return $ok ? $out : undef;
}

sub wait_until_up {
	my ($node) = @_;
	IdemProof::poll_until($node->name . ' to accept connections', sub { defined query_node($node, 'SELECT 1') }, 0.1)
	  // die $node->name . ' did not come back';
}

my (@killed, $stopped);
sub inject_faults {
	my @at = sort { $a <=> $b } map { $t0 + 1 + rand(0.5 * $duration) } 1 .. $backend_kills;
	for my $i (0 .. $#at) {
		Time::HiRes::sleep($at[$i] - now()) if $at[$i] > now();
		# The coordinator once, the workers otherwise.
		my $node = $i == 0 ? $nodes[0] : $nodes[ 1 + int(rand(@nodes - 1)) ];
		my $offset = -s $node->logfile;
		my $pid;
		for (1 .. 50) {
			$pid = query_node($node, q{SELECT pid FROM pg_stat_activity
				WHERE datname = 'proof' AND backend_type = 'client backend' AND pid <> pg_backend_pid()
				ORDER BY state = 'idle', random() LIMIT 1});
			last if $pid && kill('KILL', $pid);
			undef $pid;
			Time::HiRes::sleep(0.05);
		}
		die 'no backend could be killed on ' . $node->name unless $pid;
		push @killed, $node->name;
		$node->wait_for_log(qr/all server processes terminated; reinitializing/, $offset);
		wait_until_up($node);
	}
	my $at = $t0 + 0.7 * $duration;
	Time::HiRes::sleep($at - now()) if $at > now();
	$stopped = $nodes[ 1 + int(rand(@nodes - 1)) ];
	$stopped->stop('immediate');
	$stopped->start;
	wait_until_up($stopped);
}

my $failed = run_clients($clients, sub {
	my ($id) = @_;
	srand(3400 + $id);
	my $c = IdemProof::Client->new(undef, $id, $dir, lock_ms => 500, scope => 'crash', dsn => $dsn,
		$id % 2 ? (effect_call => 'SELECT proof_effect_and_succeed($1, $2, $3, $4, $5::jsonb)') : ());
	storm_client($c, t0 => $t0, duration => $duration, sweep_end => $t0 + 0.7 * $duration,
		keys => $keys, window => 30, chaos => 0.01, clients => $clients);
}, \&inject_faults);
is($failed, 0, 'every client got an answer to every request through the coordinator, through every crash');
is(scalar(@killed), $backend_kills, "$backend_kills backends killed with kill -9 (@killed)");
ok($stopped, 'a worker was stopped immediately and started again (' . ($stopped ? $stopped->name : 'none') . ')');

my $events = read_logs($dir);
my $stats  = total_stats($events);
my @swept = map { query_node($_, 'SELECT idem.sweep_stale()') } $cluster->workers;
is(scalar(grep { defined } @swept), scalar($cluster->workers), 'sweep_stale ran on each worker, over its shards');
my $dbh = DBI->connect($dsn, '', '', { RaiseError => 1, AutoCommit => 1 });
my ($rows, $processing) = $dbh->selectrow_array(q{SELECT count(*), count(*) FILTER (WHERE status = 'processing')
	FROM idem.idempotency_request WHERE scope = 'crash'});
is($rows, $keys, "$keys keys exist across the shards");
is($processing, 0, 'no key is left processing');
my ($row, $effect, $effects_of) = read_rows_and_effects($dbh, 'crash');
my $verdict = check_acknowledged($row, $effect, $effects_of, $events, $keys);
note("citus crash: $clients clients, $keys keys, fsync on, ${duration}s + final pass through the coordinator: "
	  . "$stats->{requests} requests; killed: @killed; stopped: " . ($stopped ? $stopped->name : 'none'));
note('citus crash: acknowledged ' . scalar(@{ $events->{C} }) . ' claims, ' . scalar(@{ $events->{R} })
	  . ' checkpoints, ' . scalar(@{ $events->{S} }) . ' outcomes; lost ' . scalar(@{ $verdict->{lost_outcomes} })
	  . ", fences reissued $verdict->{reissued}; effects $verdict->{effects}; calls cut by a fault "
	  . (($stats->{lost_while_owning} // 0) + scalar(@{ $events->{X} })) . '; errors '
	  . join(' ', map { "$_=$stats->{$_}" } grep { /^error_/ } sort keys %$stats));

$dbh->disconnect;
$cluster->stop;
done_testing();
