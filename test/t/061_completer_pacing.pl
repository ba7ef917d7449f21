# The completer's bounded work per round (docs/policy.md, "Bounded work per
# round"): no round runs more than idem.batch_size completers, and after a
# full batch the worker pauses idem.batch_delay, as it does after a full
# batch of the purge. And the sweeper respects max_attempts: an abandoned key
# of a scope without a completer that used up its attempts is ended by the
# worker, not left for a claim to find.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemWorkerTest qw(set_and_reload wait_for_log_match);

my $node = PostgreSQL::Test::Cluster->new('completer_pacing');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'idem'\nidem.naptime = 1\nidem.worker_enabled = off\n"
	  . "idem.batch_size = 2\nidem.batch_delay = 5s\n"
	  # The five keys' completer has one owner: let it run a batch at once.
	  . "idem.completer_max_per_owner = 2\n");
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION idem;
CREATE TABLE runs (key text, at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION finish(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.runs (key) VALUES (key);
  PERFORM idem.mark_succeeded(scope, key, fence, 201);
END $$;
INSERT INTO idem.scope_policy (scope, max_attempts, completer) VALUES
  ('paced', 3, 'finish(text, text, bigint, text, integer)'),
  ('swept', 1, NULL);
});

# Five abandoned keys with a completer, one without that used its only attempt.
$node->safe_psql('postgres', q{
SELECT idem.claim_idempotency_key('paced', 'k' || i, 'h', 'client', '1 second')
  FROM generate_series(1, 5) i;
SELECT idem.claim_idempotency_key('swept', 'k', 'h', 'client', '1 second');
});
$node->poll_query_until('postgres',
	q{SELECT bool_and(locked_until <= now()) FROM idem.idempotency_request})
  or die 'the clients\' locks did not run out';

my $offset = -s $node->logfile;
set_and_reload($node, 'idem.worker_enabled', 'on');
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 5 FROM idem.idempotency_request WHERE scope = 'paced' AND status = 'succeeded'}),
	'the completers finished the five keys');
is($node->safe_psql('postgres', 'SELECT count(*), count(DISTINCT key) FROM runs'),
	'5|5', 'each key was completed once');

# The rounds' log lines: at most batch_size (2) completers started each.
ok(wait_for_log_match($node, qr/started 1 completers/, $offset),
	'the round that started the fifth completer logged');
my $log = slurp_file($node->logfile, $offset);
my $per_round = join(' ', $log =~ /started (\d+) completers/g);
note "completers per round: $per_round";
is($per_round, '2 2 1', 'batch_size 2: rounds of 2, 2 and 1 completers, oldest first');

# The pace: after each full batch the worker paused batch_delay (5 s) before
# the next round could begin (with naptime 1 s the gap is about 6 s; without
# the pause it would be about 1 s).
my $gaps = $node->safe_psql('postgres', q{
SELECT string_agg(to_char(extract(epoch FROM at - previous), 'FM990.00'), ' ' ORDER BY at)
  FROM (SELECT at, lag(at) OVER (ORDER BY at) AS previous FROM runs) r
 WHERE previous IS NOT NULL});
note "seconds between consecutive completer runs: $gaps";
my @gap = split ' ', $gaps;
cmp_ok($gap[1], '>=', 5, 'the third completer ran at least batch_delay after the second');
cmp_ok($gap[3], '>=', 5, 'the fifth completer ran at least batch_delay after the fourth');

ok( $node->poll_query_until('postgres', q{
SELECT completer_runs = 5 AND completer_successes = 5 AND completer_failures = 0
  FROM idem.stats WHERE datname = current_database()}),
	'idem.stats: 5 completer runs, 5 successes, no failure');

# The sweeper respects max_attempts: 'swept' has no completer; its key used
# its one attempt, so the worker ends it rather than leaving it abandoned.
ok( $node->poll_query_until('postgres',
		q{SELECT status = 'failed_final' FROM idem.idempotency_request WHERE scope = 'swept'}),
	'swept: the worker ended the key');
is( $node->safe_psql('postgres',
		q{SELECT failure_code, attempt_count, claimed_by FROM idem.idempotency_request WHERE scope = 'swept'}),
	'too_many_attempts|1|client', 'swept: as too_many_attempts, after its one attempt, never claimed again');
like($log, qr/ended 1 keys past max_attempts/,
	'the round logged the key it ended');

$node->stop;
done_testing();
