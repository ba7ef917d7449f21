# The twin storm of the proof suite (test/t/101_twin_storm.pl's clients,
# test/t/IdemProof.pm) through the Citus coordinator: claims, checkpoints
# and retryable failures are delegated calls (each runs on the worker that
# holds the key's shard); half the clients write the effect and the outcome
# in a transaction block through the coordinator (not delegated: the
# coordinator routes both statements to the key's worker, one transaction
# there), the other half through the application's function
# proof_effect_and_succeed, delegated like idem's calls. Afterwards, read
# through the coordinator: exactly one effect per key, every key succeeded,
# every answer the stored one, and the keys spread over both workers.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin, "$FindBin::RealBin/../t";
use IdemProof qw(now run_clients read_logs total_stats connect_or_die storm_client check_storm);
use IdemCitus qw(start_citus);
use PostgreSQL::Test::Utils;
use Test::More;
use DBI;

my $clients  = $ENV{CITUS_STORM_CLIENTS} // 12;
my $keys     = $ENV{CITUS_STORM_KEYS} // 400;
my $duration = $ENV{CITUS_STORM_SECONDS} // 8;
my $window   = 30;
my $chaos    = 0.03;

my $cluster = start_citus('storm');
my $dsn = $cluster->dsn;
my $dir = PostgreSQL::Test::Utils::tempdir;
my $t0  = now() + 1;
my $sweep_end = $t0 + 0.6 * $duration;

my $failed = run_clients($clients, sub {
	my ($id) = @_;
	srand(1000 + $id);
	my $c = IdemProof::Client->new(undef, $id, $dir, lock_ms => 500, scope => 'storm', dsn => $dsn,
		$id % 2 ? (effect_call => 'SELECT proof_effect_and_succeed($1, $2, $3, $4, $5::jsonb)') : ());
	storm_client($c, t0 => $t0, duration => $duration, sweep_end => $sweep_end, keys => $keys,
		window => $window, chaos => $chaos, clients => $clients);
});
is($failed, 0, 'every client got an answer to every request through the coordinator');

my $events = read_logs($dir);
my $stats  = total_stats($events);
my $dbh    = DBI->connect($dsn, '', '', { RaiseError => 1, AutoCommit => 1 });
my $verdict = check_storm($dbh, $events, $keys, 'storm');

my @spread = $cluster->keys_per_worker('storm');
is($spread[0] + $spread[1], $keys, "the workers' shards hold every key");
cmp_ok((sort { $a <=> $b } @spread)[0], '>', 0, 'both workers hold keys');

my $claims = join ', ', map { my $k = $_; "$k " . ($stats->{"claim_$k"} // 0) }
  qw(new_claim replay_success processing_active processing_stale retryable_failure final_failure);
note("citus storm: $clients clients, $keys keys, ${duration}s + final pass through the coordinator: "
	  . "$stats->{requests} requests; claims by kind: $claims");
note("citus storm: per-worker keys: @spread; takeovers resumed after the checkpoint "
	  . ($stats->{resumed_after_validated} // 0) . ', stale writes refused (P4012) '
	  . ($stats->{stale_write_refused} // 0) . ', errors '
	  . join(' ', map { "$_=$stats->{$_}" } grep { /^error_/ } sort keys %$stats));
note("citus storm: effects $verdict->{effects} on $verdict->{keys_with_effects} keys; "
	  . "keys succeeded $verdict->{succeeded}; duplicates $verdict->{doubled}; wrong answers $verdict->{wrong}");

$dbh->disconnect;
$cluster->stop;
done_testing();
