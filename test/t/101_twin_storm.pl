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
use IdemProof qw(now start_node run_clients read_logs total_stats connect_or_die storm_key);
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
	Time::HiRes::sleep($t0 - now()) if $t0 > now();
	my $requests = 0;
	while (now() < $t0 + $duration) {
		my ($index, $hot) = storm_key($keys, $window, $t0, $sweep_end);
		$c->{chaos} = $hot ? $chaos : 0;
		$c->request(sprintf('k%04d', $index));
		$requests++;
	}
	# A last pass, shared out, so that every key has been asked for after the chaos.
	$c->{chaos} = 0;
	for (my $index = $id; $index < $keys; $index += $clients) {
		$c->request(sprintf('k%04d', $index));
		$requests++;
	}
	$c->count('requests', $requests);
	$c->finish;
});
is($failed, 0, 'every client got an answer to every request');

my $events = read_logs($dir);
my $stats  = total_stats($events);
my $dbh    = connect_or_die($node);

my ($rows, $succeeded) = $dbh->selectrow_array(
	q{SELECT count(*), count(*) FILTER (WHERE status = 'succeeded')
	    FROM idem.idempotency_request WHERE scope = 'storm'});
is($rows,      $keys, "$keys keys exist");
is($succeeded, $keys, 'every key succeeded');

my ($effects, $keys_with_effects, $doubled) = $dbh->selectrow_array(
	q{SELECT count(*), count(DISTINCT key),
	         (SELECT count(*) FROM (SELECT key FROM effects GROUP BY key HAVING count(*) > 1) d)
	    FROM effects});
is($effects, $keys, 'exactly one effect per key in total');
is($doubled, 0,     'no key has two effects');

my ($matching) = $dbh->selectrow_array(
	q{SELECT count(*) FROM effects e JOIN idem.idempotency_request r
	     ON r.scope = e.scope AND r.key = e.key
	  WHERE r.fence = e.fence AND r.result_ref_id = e.id::text});
is($matching, $keys, "each key's effect is the one its stored outcome names");

# Every answer any client got equals the stored response.
my %stored = @{ $dbh->selectcol_arrayref(
	q{SELECT key, response_body::text FROM idem.idempotency_request WHERE scope = 'storm'},
	{ Columns => [ 1, 2 ] }) };
my $wrong = grep { ($stored{ $_->[0] } // '') ne $_->[1] } @{ $events->{A} };
my %answered = map { $_->[0] => 1 } @{ $events->{A} };
is($wrong, 0, 'every answer equals the stored response');
is(scalar(keys %answered), $keys, 'every key was answered');

my %acked = ();
$acked{ $_->[0] }++ for @{ $events->{S} };
is(scalar(grep { $_ > 1 } values %acked), 0, 'no key was acknowledged as succeeded twice');

my $claims = join ', ', map { my $k = $_; "$k " . ($stats->{"claim_$k"} // 0) }
  qw(new_claim replay_success processing_active processing_stale retryable_failure final_failure);
note("storm: $clients clients, $keys keys, ${duration}s + final pass: "
	  . "$stats->{requests} requests answered (" . scalar(@{ $events->{A} }) . " answers logged)");
note("storm: claims by kind: $claims");
note("storm: chaos: " . ($stats->{abandoned} // 0) . ' owners walked away, '
	  . ($stats->{failed_retryable} // 0) . ' failed retryably, '
	  . ($stats->{resumed_after_validated} // 0) . ' takeovers resumed after the checkpoint, '
	  . ($stats->{stale_write_refused} // 0) . ' stale writes refused (P4012)');
note("storm: effects committed $effects on $keys_with_effects keys; keys succeeded $succeeded; "
	  . "duplicates $doubled; wrong answers $wrong");

$node->stop;
done_testing();
