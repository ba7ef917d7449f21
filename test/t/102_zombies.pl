# Zombie run: owners stall past their 200 ms lock while twins take their keys
# over, then try to write anyway: a checkpoint, a retryable failure, or the
# effect with mark_succeeded (stalling before or inside that transaction).
# No write of an owner whose key had already been taken over may be
# accepted (each refusal is a P4012), and no key may end with two effects.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemProof qw(now start_node run_clients read_logs total_stats connect_or_die check_zombies);
use PostgreSQL::Test::Utils;
use Test::More;

my $groups   = 6;     # independent key sets
my $twins    = 3;     # clients working each key set in the same order
my $duration = $ENV{ZOMBIE_SECONDS} // 12;
my $lock_ms  = 200;

my $node = start_node('zombies');
my $dir  = PostgreSQL::Test::Utils::tempdir;
my $t0   = now() + 1;

my $failed = run_clients($groups * $twins, sub {
	my ($id) = @_;
	srand(2000 + $id);
	my $group = $id % $groups;
	my $c = IdemProof::Client->new($node, $id, $dir, lock_ms => $lock_ms, scope => 'zombie',
		owner => \&IdemProof::stalling_owner);
	Time::HiRes::sleep($t0 - now()) if $t0 > now();
	my $index = 0;
	while (now() < $t0 + $duration) {
		$c->request(sprintf('g%d-k%03d', $group, $index++));
	}
	$c->count('requests', $index);
	$c->finish;
});
is($failed, 0, 'every client got an answer to every request');

my $events = read_logs($dir);
my $stats  = total_stats($events);
my $dbh    = connect_or_die($node);

my $v = check_zombies($dbh, $events, 'zombie');
my ($keys, $effects, $doubled) = @$v{qw(keys effects doubled)};
my %refusals = %{ $v->{refusals} };

note("zombies: $groups key sets x $twins clients, lock ${lock_ms} ms, stalls up to 450 ms, ${duration}s: "
	  . "$stats->{requests} requests on $keys keys");
note("zombies: claims: new " . ($stats->{claim_new_claim} // 0) . ', takeovers of stale '
	  . ($stats->{claim_processing_stale} // 0) . ', of failed ' . ($stats->{claim_retryable_failure} // 0)
	  . ', active ' . ($stats->{claim_processing_active} // 0) . ', replays ' . ($stats->{claim_replay_success} // 0));
note("zombies: owner writes accepted $v->{writes}, refused "
	  . join(', ', map { "$_ $refusals{$_}" } sort keys %refusals)
	  . "; stale writes accepted $v->{stale_accepted}");
note("zombies: effects $effects on $keys keys, duplicates $doubled");

$node->stop;
done_testing();
