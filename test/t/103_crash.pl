# Crash run: the twin-storm load on a cluster with fsync = on, while backends
# are killed with kill -9 at random moments (the postmaster then restarts
# every backend, with crash recovery), and separately the whole server is
# stopped with pg_ctl stop -m immediate and started again. Clients reconnect
# and retry their request; each logs every claim and outcome the server
# acknowledged. After recovery, every acknowledged claim and outcome must be
# there exactly as acknowledged, no effect duplicated, and no key left
# processing once sweep_stale and the retries have run.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemProof qw(check_keys_finished now start_node run_clients read_logs total_stats connect_or_die storm_key
  read_rows_and_effects check_acknowledged);
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $clients  = $ENV{CRASH_CLIENTS} // 32;
my $keys     = $ENV{CRASH_KEYS} // 1000;
my $duration = $ENV{CRASH_SECONDS} // 24;
my $backend_kills = 4;
my $server_stops  = 2;
my $window   = 40;

my $node = start_node('crash', fsync => 1);
my $log_start = -s $node->logfile;
my $dir  = PostgreSQL::Test::Utils::tempdir;
my $t0   = now() + 1;
my $sweep_end = $t0 + 0.7 * $duration;
srand(3000);

# One query to "proof" by psql: its output, or undef when psql failed (the
# server refused the connection while it recovers from the last fault, say).
# The query goes in with -c and stdin is /dev/null: psql() and
# poll_query_until() write the query to psql's stdin, and when psql is
# refused at connection it may exit before reading it, and IPC::Run then
# dies of the broken pipe instead of returning the failure.
sub query_proof {
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run([ $node->installed_command('psql'), '-XAtq', '-d', $node->connstr('proof'),
			'-c', $sql ], '<', '/dev/null', '>', \$out, '2>', \$err);
	chomp $out;
	return $ok ? $out : undef;
}

# Waits, with a deadline, until the server accepts connections again.
sub wait_until_up {
	my $give_up = now() + $PostgreSQL::Test::Utils::timeout_default;
	until (defined query_proof('SELECT true')) {
		die 'the server did not come back' if now() > $give_up;
		Time::HiRes::sleep(0.1);
	}
}

# A backend to kill, preferring one in the middle of something (a claim, or
# between the effect and COMMIT) over an idle one. A query refused because
# the server is still recovering from the previous fault is asked again.
sub pick_backend {
	for (1 .. 100) {
		my $pid = query_proof(q{
			SELECT pid FROM pg_stat_activity
			 WHERE datname = 'proof' AND backend_type = 'client backend'
			   AND pid <> pg_backend_pid()
			 ORDER BY state = 'idle', random() LIMIT 1});
		return $pid if defined $pid;
		Time::HiRes::sleep(0.2);
	}
	die 'could not look up a backend to kill';
}

# The injected faults, at random moments of the first 80% of the run.
my @killed;
my $stops_done = 0;
sub inject_faults {
	my @kill_at = sort { $a <=> $b } map { $t0 + 1 + rand(0.4 * $duration) } 1 .. $backend_kills;
	my @stop_at = map { $t0 + (0.5 + 0.3 * $_ / $server_stops) * $duration + rand(1) } 0 .. $server_stops - 1;
	for my $at (@kill_at) {
		Time::HiRes::sleep($at - now()) if $at > now();
		my $log_offset = -s $node->logfile;
		my $pid;
		# The backend picked may end (its client reconnecting) before the kill.
		for (1 .. 50) {
			$pid = pick_backend();
			last if $pid && kill('KILL', $pid);
			undef $pid;
			Time::HiRes::sleep(0.05);
		}
		die 'no backend could be killed' unless $pid;
		push @killed, $pid;
		# Wait for the postmaster to notice and restart every backend before
		# looking again: on a loaded machine a poll right after the kill can
		# still reach the old server and the next one land in recovery.
		$node->wait_for_log(qr/all server processes terminated; reinitializing/, $log_offset);
		wait_until_up();
	}
	for my $at (@stop_at) {
		Time::HiRes::sleep($at - now()) if $at > now();
		$node->stop('immediate');
		Time::HiRes::sleep(rand(0.5));
		$node->start;
		$stops_done++;
		wait_until_up();
	}
}

my $failed = run_clients($clients, sub {
	my ($id) = @_;
	srand(3100 + $id);
	my $c = IdemProof::Client->new($node, $id, $dir, lock_ms => 500, scope => 'crash',
		effect_stall => 0.03);
	Time::HiRes::sleep($t0 - now()) if $t0 > now();
	my $requests = 0;
	while (now() < $t0 + $duration) {
		my ($index, $hot) = storm_key($keys, $window, $t0, $sweep_end);
		$c->{chaos} = $hot ? 0.01 : 0;
		$c->request(sprintf('k%04d', $index), 90);
		$requests++;
	}
	$c->{chaos} = 0;
	for (my $index = $id; $index < $keys; $index += $clients) {
		$c->request(sprintf('k%04d', $index), 90);
		$requests++;
	}
	$c->count('requests', $requests);
	$c->finish;
}, \&inject_faults);
is($failed, 0, 'every client got an answer to every request, through every crash');
is(scalar(@killed), $backend_kills, "$backend_kills backends killed with kill -9");
is($stops_done, $server_stops, "$server_stops immediate server stops and restarts");

my $log = PostgreSQL::Test::Utils::slurp_file($node->logfile, $log_start);
my $signal_9 = () = $log =~ /was terminated by signal 9/g;
is($signal_9, scalar(@killed), 'the postmaster saw every kill');

my $events = read_logs($dir);
my $stats  = total_stats($events);
my $dbh    = connect_or_die($node);

my ($swept) = $dbh->selectrow_array('SELECT idem.sweep_stale()');
my ($rows, $succeeded, $processing) = check_keys_finished($dbh, 'crash', $keys);

my ($row, $effect, $effects_of) = read_rows_and_effects($dbh, 'crash');
my $verdict = check_acknowledged($row, $effect, $effects_of, $events, $keys);
my ($last_fence) = $dbh->selectrow_array('SELECT last_value FROM idem.fence_seq');
cmp_ok($last_fence, '>=', $verdict->{max_fence}, 'the fence sequence is past every acknowledged fence');
my ($effects, $wrong, $reissued) = @$verdict{qw(effects wrong reissued)};
my @lost_outcomes = @{ $verdict->{lost_outcomes} };

note("crash: $clients clients, $keys keys, fsync on, ${duration}s + final pass: "
	  . "$stats->{requests} requests answered");
note('crash: faults injected: ' . scalar(@killed) . " backends killed with kill -9 (postmaster logged $signal_9), "
	  . "$stops_done immediate stops + restarts; client connections lost "
	  . ($stats->{connection_lost} // 0) . ', of which while owning a key ' . ($stats->{lost_while_owning} // 0)
	  . ', at COMMIT (outcome unknown to the client) ' . ($stats->{commit_unknown} // 0));
note('crash: acknowledged: ' . scalar(@{ $events->{C} }) . ' owning claims, '
	  . scalar(@{ $events->{R} }) . ' checkpoints, ' . scalar(@{ $events->{S} }) . ' outcomes; lost '
	  . scalar(@lost_outcomes) . ", fences reissued " . ($reissued // 0));
note('crash: claims: new ' . ($stats->{claim_new_claim} // 0) . ', stale takeovers '
	  . ($stats->{claim_processing_stale} // 0) . ', failed takeovers ' . ($stats->{claim_retryable_failure} // 0)
	  . ', active ' . ($stats->{claim_processing_active} // 0) . ', replays ' . ($stats->{claim_replay_success} // 0));
note("crash: after recovery: sweep_stale changed $swept, processing $processing, succeeded $succeeded, "
	  . "effects $effects, wrong answers $wrong");

$node->stop;
done_testing();
