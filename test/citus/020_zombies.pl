# The zombie run of the proof suite (test/t/102_zombies.pl's owners and
# verdict, test/t/IdemProof.pm) through the Citus coordinator: owners stall
# past their 200 ms lock while twins take their keys over (delegated claims
# on the key's worker), then write anyway: a checkpoint, a retryable
# failure, or the effect with mark_succeeded in a transaction block through
# the coordinator. No write of a superseded owner may be accepted (each
# refusal a P4012), and no key may end with two effects.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin, "$FindBin::RealBin/../t";
use IdemProof qw(now run_clients read_logs total_stats check_zombies);
use IdemCitus qw(start_citus);
use PostgreSQL::Test::Utils;
use Test::More;
use DBI;

my $groups   = 6;
my $twins    = 3;
my $duration = $ENV{CITUS_ZOMBIE_SECONDS} // 6;
my $lock_ms  = 200;

my $cluster = start_citus('zombies');
my $dsn = $cluster->dsn;
my $dir = PostgreSQL::Test::Utils::tempdir;
my $t0  = now() + 1;

my $failed = run_clients($groups * $twins, sub {
	my ($id) = @_;
	srand(2000 + $id);
	my $group = $id % $groups;
	my $c = IdemProof::Client->new(undef, $id, $dir, lock_ms => $lock_ms, scope => 'zombie', dsn => $dsn,
		owner => \&IdemProof::stalling_owner);
	Time::HiRes::sleep($t0 - now()) if $t0 > now();
	my $index = 0;
	while (now() < $t0 + $duration) {
		$c->request(sprintf('g%d-k%03d', $group, $index++));
	}
	$c->count('requests', $index);
	$c->finish;
});
is($failed, 0, 'every client got an answer to every request through the coordinator');

my $events = read_logs($dir);
my $stats  = total_stats($events);
my $dbh    = DBI->connect($dsn, '', '', { RaiseError => 1, AutoCommit => 1 });
my $v = check_zombies($dbh, $events, 'zombie');
my %refusals = %{ $v->{refusals} };

note("citus zombies: $groups key sets x $twins clients, lock ${lock_ms} ms, stalls up to 450 ms, ${duration}s: "
	  . "$stats->{requests} requests on $v->{keys} keys; takeovers of stale "
	  . ($stats->{claim_processing_stale} // 0) . ', of failed ' . ($stats->{claim_retryable_failure} // 0));
note("citus zombies: owner writes accepted $v->{writes}, refused "
	  . join(', ', map { "$_ $refusals{$_}" } sort keys %refusals)
	  . "; stale writes accepted $v->{stale_accepted}; effects $v->{effects}, duplicates $v->{doubled}");

$dbh->disconnect;
$cluster->stop;
done_testing();
