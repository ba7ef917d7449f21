# Twin storm: 32 clients hammer 1,000 keys for a fixed time, retrying like
# real API clients. A window of hot keys sweeps the key space so that many
# twins race for the same key at once; for the first 60% of the run some
# owners walk away (the key stays processing until its lock expires) or fail
# retryably, so takeovers happen too. Afterwards: exactly one effect per key,
# every key succeeded, and every answer any client got for a key is the one
# stored response.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemProof qw(now start_node run_clients read_logs total_stats connect_or_die storm_client check_storm);
use PostgreSQL::Test::Utils;
use Test::More;

my $clients  = $ENV{STORM_CLIENTS} // 32;
my $keys     = $ENV{STORM_KEYS} // 1000;
my $duration = $ENV{STORM_SECONDS} // 20;
my $window   = 40;      # hot keys at any moment of the sweep
my $chaos    = 0.03;    # chance to abandon, and to fail retryably, an owned key

my $node = start_node('storm');
my $dir  = PostgreSQL::Test::Utils::tempdir;
my $t0   = now() + 1;    # every client starts the sweep at the same moment
my $sweep_end = $t0 + 0.6 * $duration;

my $failed = run_clients($clients, sub {
	my ($id) = @_;
	srand(1000 + $id);
	my $c = IdemProof::Client->new($node, $id, $dir, lock_ms => 500, scope => 'storm');
	storm_client($c, t0 => $t0, duration => $duration, sweep_end => $sweep_end, keys => $keys,
		window => $window, chaos => $chaos, clients => $clients);
});
is($failed, 0, 'every client got an answer to every request');

my $events = read_logs($dir);
my $stats  = total_stats($events);
my $dbh    = connect_or_die($node);

my $verdict = check_storm($dbh, $events, $keys, 'storm');

my $claims = join ', ', map { my $k = $_; "$k " . ($stats->{"claim_$k"} // 0) }
  qw(new_claim replay_success processing_active processing_stale retryable_failure final_failure);
note("storm: $clients clients, $keys keys, ${duration}s + final pass: "
	  . "$stats->{requests} requests answered (" . scalar(@{ $events->{A} }) . " answers logged)");
note("storm: claims by kind: $claims");
note("storm: chaos: " . ($stats->{abandoned} // 0) . ' owners walked away, '
	  . ($stats->{failed_retryable} // 0) . ' failed retryably, '
	  . ($stats->{resumed_after_validated} // 0) . ' takeovers resumed after the checkpoint, '
	  . ($stats->{stale_write_refused} // 0) . ' stale writes refused (P4012)');
note("storm: effects committed $verdict->{effects} on $verdict->{keys_with_effects} keys; "
	  . "keys succeeded $verdict->{succeeded}; duplicates $verdict->{doubled}; wrong answers $verdict->{wrong}");

$node->stop;
done_testing();
