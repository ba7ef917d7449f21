# Zombie run: owners stall past their 200 ms lock while twins take their keys
# over, then try to write anyway: a checkpoint, a retryable failure, or the
# effect with mark_succeeded (stalling before or inside that transaction).
# No write of an owner whose key had already been taken over may be
# accepted (each refusal is a P4012), and no key may end with two effects.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemProof qw(now start_node run_clients read_logs total_stats connect_or_die);
use PostgreSQL::Test::Utils;
use Test::More;

my $groups   = 6;     # independent key sets
my $twins    = 3;     # clients working each key set in the same order
my $duration = $ENV{ZOMBIE_SECONDS} // 12;
my $lock_ms  = 200;

my $node = start_node('zombies');
my $dir  = PostgreSQL::Test::Utils::tempdir;
my $t0   = now() + 1;

# Owns a key like a client that may freeze (GC pause, slow upstream) for up
# to 450 ms, more than its lock, before it writes.
sub stalling_owner {
	my ($c, $key, $fence, $point, $kind) = @_;
	my $stall = rand() < 0.5 ? 0.25 + rand(0.2) : rand(0.15);
	my $write = rand();
	if ($write < 0.15) {
		Time::HiRes::sleep($stall);
		return undef unless $c->checkpoint($key, $fence, 'charged');
		return $c->effect_and_succeed($key, $fence);
	}
	if ($write < 0.30) {
		Time::HiRes::sleep($stall);
		$c->fail_retryably($key, $fence);
		return undef;
	}
	if ($write < 0.65) {
		Time::HiRes::sleep($stall);
		return $c->effect_and_succeed($key, $fence);
	}
	# The effect is already inserted, uncommitted, when the owner freezes.
	return $c->effect_and_succeed($key, $fence, $stall);
}

my $failed = run_clients($groups * $twins, sub {
	my ($id) = @_;
	srand(2000 + $id);
	my $group = $id % $groups;
	my $c = IdemProof::Client->new($node, $id, $dir, lock_ms => $lock_ms, scope => 'zombie',
		owner => \&stalling_owner);
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

# A write is stale when, before it was sent, a claim with a higher fence had
# already been acknowledged for the same key.
my %claims;
push @{ $claims{ $_->[0] } }, { fence => $_->[1], at => $_->[2] } for @{ $events->{C} };
my @writes = (
	(map { { key => $_->[0], fence => $_->[1], at => $_->[2], what => 'checkpoint' } } @{ $events->{R} }),
	(map { { key => $_->[0], fence => $_->[1], at => $_->[2], what => 'mark_failed' } } @{ $events->{F} }),
	(map { { key => $_->[0], fence => $_->[1], at => $_->[3], what => 'mark_succeeded' } } @{ $events->{S} }));
my @stale_accepted = grep {
	my $w = $_;
	grep { $_->{fence} > $w->{fence} && $_->{at} < $w->{at} } @{ $claims{ $w->{key} } };
} @writes;
is(scalar(@stale_accepted), 0, 'no write of a superseded owner was accepted');
diag("stale write accepted: $_->{what} on $_->{key} with fence $_->{fence}") for @stale_accepted;

my $refused_stale = grep { $_->[2] eq 'P4012' } @{ $events->{X} };
my %refusals;
$refusals{ $_->[2] }++ for @{ $events->{X} };
cmp_ok($refused_stale, '>', 0, 'zombies did try to write after a takeover, and were refused');
my $other_refusals = grep { $_->[2] !~ /^P401[0-3]$/ } @{ $events->{X} };
is($other_refusals, 0, 'every refused owner write carries a documented P401x SQLSTATE');

# The one accepted success of each key is the newest owner's.
my %max_fence;
for my $key (keys %claims) {
	for (@{ $claims{$key} }) { $max_fence{$key} = $_->{fence} if $_->{fence} > ($max_fence{$key} // 0); }
}
my %succeeded;
push @{ $succeeded{ $_->[0] } }, $_->[1] for @{ $events->{S} };
my $keys = scalar(keys %claims);
is(scalar(grep { @{ $succeeded{$_} // [] } != 1 } keys %claims), 0,
	'every key was acknowledged as succeeded exactly once');
is(scalar(grep { ($succeeded{$_}[0] // 0) != $max_fence{$_} } keys %claims), 0,
	'each success was written with the newest fence of its key');

my ($rows, $done, $effects, $doubled, $matching) = $dbh->selectrow_array(q{
	SELECT count(*), count(*) FILTER (WHERE status = 'succeeded'),
	       (SELECT count(*) FROM effects),
	       (SELECT count(*) FROM (SELECT key FROM effects GROUP BY key HAVING count(*) > 1) d),
	       (SELECT count(*) FROM effects e JOIN idem.idempotency_request r USING (scope, key)
	         WHERE r.fence = e.fence AND r.result_ref_id = e.id::text)
	  FROM idem.idempotency_request WHERE scope = 'zombie'});
is($rows, $keys, 'every key touched has a row');
is($done, $keys, 'every key succeeded');
is($effects, $keys, 'one effect per key in total');
is($doubled, 0, 'no key has two effects');
is($matching, $keys, "each key's effect carries the fence of its stored outcome");

note("zombies: $groups key sets x $twins clients, lock ${lock_ms} ms, stalls up to 450 ms, ${duration}s: "
	  . "$stats->{requests} requests on $keys keys");
note("zombies: claims: new " . ($stats->{claim_new_claim} // 0) . ', takeovers of stale '
	  . ($stats->{claim_processing_stale} // 0) . ', of failed ' . ($stats->{claim_retryable_failure} // 0)
	  . ', active ' . ($stats->{claim_processing_active} // 0) . ', replays ' . ($stats->{claim_replay_success} // 0));
note("zombies: owner writes accepted " . scalar(@writes) . ", refused "
	  . join(', ', map { "$_ $refusals{$_}" } sort keys %refusals)
	  . "; stale writes accepted " . scalar(@stale_accepted));
note("zombies: effects $effects on $keys keys, duplicates $doubled");

$node->stop;
done_testing();
