# What the regress files cannot show from one session.
# 1. The statement memo (src/keys/statement_memo.cpp) never hides a change: a
#    PL/pgSQL loop that claims a twin's key again and again, in one statement
#    with no write between its claims, sees the twin finish, and sees its lock
#    run out.
# 2. Without the preload, idem.retry_after still works, from the estimates of
#    the session's own completions (src/waits/request_durations.hpp).
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('clients');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idem'\n");
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION idem;
-- Claims until the answer is not processing_active (at most 3 minutes):
-- one statement, no write between its claims.
CREATE FUNCTION wait_for_twin(p_key text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  c idem.claim;
  polls integer := 0;
BEGIN
  LOOP
    c := idem.claim_idempotency_key('loop', p_key, 'h');
    polls := polls + 1;
    EXIT WHEN c.kind <> 'processing_active'
           OR clock_timestamp() > statement_timestamp() + interval '3 minutes';
    PERFORM pg_sleep(0.01);
  END LOOP;
  RETURN c.kind || CASE WHEN polls > 1 THEN ' after polling' ELSE ' at once' END;
END
$$;});

# Runs wait_for_twin in the background; returns the harness and its output.
sub start_waiter {
	my ($key) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-c', "SELECT wait_for_twin('$key')" ],
		'>', \$out, '2>', \$err);
	return ($h, \$out, \$err);
}

# The twin finishes while the loop polls.
my $fence = $node->safe_psql('postgres',
	q{SELECT fence FROM idem.claim_idempotency_key('loop', 'finished', 'h')});
my ($h, $out, $err) = start_waiter('finished');
ok($node->poll_query_until('postgres', q{
	SELECT count(*) > 0 FROM pg_stat_activity
	 WHERE wait_event = 'PgSleep' AND query LIKE '%wait_for_twin(''finished'')%'}),
	'the loop is polling the twin\'s key');
$node->safe_psql('postgres', "SELECT idem.mark_succeeded('loop', 'finished', $fence, 200)");
$h->finish;
is($$out, "replay_success after polling\n", 'the loop saw the twin finish') or diag($$err);

# The twin's lock runs out while the loop polls (2 s; no one completes it).
$node->safe_psql('postgres',
	q{SELECT idem.claim_idempotency_key('loop', 'abandoned', 'h', NULL, interval '2 seconds')});
($h, $out, $err) = start_waiter('abandoned');
$h->finish;
is($$out, "processing_stale after polling\n", 'the loop saw the lock run out and took the key over')
	or diag($$err);

# Without the preload: the session's own estimates.
$node->append_conf('postgresql.conf', "shared_preload_libraries = ''\n");
$node->restart;
my $answers = $node->safe_psql('postgres', q{
DO $$
DECLARE
  c idem.claim;
BEGIN
  FOR i IN 1..3 LOOP
    c := idem.claim_idempotency_key('slow', 'done-' || i, 'h');
    UPDATE idem.idempotency_request SET claimed_at = claimed_at - interval '2.5 s'
     WHERE scope = 'slow' AND key = 'done-' || i;
    PERFORM idem.mark_succeeded('slow', 'done-' || i, c.fence, 200);
  END LOOP;
END
$$;
SELECT kind FROM idem.claim_idempotency_key('slow', 'busy', 'h');
SELECT idem.retry_after('slow', c) FROM idem.claim_idempotency_key('slow', 'busy', 'h') c;});
is($answers, "new_claim\n3", 'without the preload: 3 s from this session\'s 2.5 s requests');
is($node->safe_psql('postgres',
		q{SELECT coalesce(idem.typical_duration('slow')::text, 'unknown') || ' ' || idem.retry_after('slow', c)
		    FROM idem.claim_idempotency_key('slow', 'busy', 'h') c}),
	'unknown 1', 'another session knows no estimate and suggests 1 s');

done_testing();
