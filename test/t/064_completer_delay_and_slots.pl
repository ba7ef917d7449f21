# When a completer may not run yet (each case fails against code that
# ignores it):
# - completer_delay: an abandoned key of a scope with a long delay stays
#   untouched, round after round, while a scope with a short delay is
#   completed; a completer that ignored completer_delay fails here;
# - no background worker slot: each completer runs in a background worker
#   of its own; with none free the round logs it and leaves the key as it
#   was (unclaimed, its attempt not spent), and a later round with a free
#   slot completes it.
# Every wait has a deadline of its own (sql_true_within), shorter than the suite's.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemWorkerTest qw(wait_for_log_match sql_true_within);


sub rounds {
	my ($node) = @_;
	return $node->safe_psql('postgres',
		'SELECT worker_rounds FROM idem.stats WHERE datname = current_database()');
}

my $setup = q{
CREATE EXTENSION idem;
CREATE TABLE runs (scope text, key text, at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION finish(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.runs (scope, key) VALUES (scope, key);
  PERFORM idem.mark_succeeded(scope, key, fence, 201);
END $$;
};

# ---- completer_delay ----
my $node = PostgreSQL::Test::Cluster->new('completer_delay');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idem'\nidem.naptime = 1\n");
$node->start;
$node->safe_psql('postgres', $setup . q{
INSERT INTO idem.scope_policy (scope, completer, completer_delay) VALUES
  ('late', 'finish(text, text, bigint, text, integer)', '1 hour'),
  ('soon', 'finish(text, text, bigint, text, integer)', '1 second');
SELECT idem.claim_idempotency_key(s, 'k', 'h', 'client', '1 second') FROM unnest(ARRAY['late', 'soon']) s;
});

ok( sql_true_within($node, 'the soon key', q{
SELECT status = 'succeeded' FROM idem.idempotency_request WHERE scope = 'soon'}),
	'short completer_delay: the key is completed');
# Both keys were abandoned at the same moment; count rounds from here.
my $start = rounds($node);
ok( sql_true_within($node, 'three more rounds', qq{
SELECT worker_rounds >= $start + 3 FROM idem.stats WHERE datname = current_database()}, 30),
	'the worker ran three more rounds');
is( $node->safe_psql('postgres', q{
SELECT concat_ws(' ', r.status, r.failure_code, r.claimed_by, r.attempt_count,
                 (SELECT count(*) FROM runs WHERE scope = 'late'))
  FROM idem.idempotency_request r WHERE r.scope = 'late'}),
	'failed_retryable abandoned client 1 0',
	'long completer_delay: the abandoned key (swept by the sweeper) is untouched by the completer through those rounds');
is($node->safe_psql('postgres',
		'SELECT completer_runs FROM idem.stats WHERE datname = current_database()'),
	'1', 'idem.stats: one completer run (soon), none for late');

# The delay, shortened, lets the same key be completed: what held it back
# was the delay, not the completer.
$node->safe_psql('postgres',
	q{UPDATE idem.scope_policy SET completer_delay = '1 second' WHERE scope = 'late'});
ok( sql_true_within($node, 'the late key', q{
SELECT status = 'succeeded' FROM idem.idempotency_request WHERE scope = 'late'}),
	'with its delay shortened, the late key is completed');
$node->stop;

# ---- no free background worker slot ----
# Two slots: the idem launcher and the database's worker take both.
my $small = PostgreSQL::Test::Cluster->new('completer_slots');
$small->init;
$small->append_conf('postgresql.conf',
	"shared_preload_libraries = 'idem'\nidem.naptime = 1\n"
	  . "max_worker_processes = 2\nmax_logical_replication_workers = 0\n");
$small->start;
my $offset = -s $small->logfile;
$small->safe_psql('postgres', $setup . q{
INSERT INTO idem.scope_policy (scope, completer) VALUES ('slots', 'finish(text, text, bigint, text, integer)');
SELECT idem.claim_idempotency_key('slots', 'k', 'h', 'client', '1 second');
});
ok( wait_for_log_match($small,
		qr/LOG:  idem completer for scope "slots", key "k" must wait: no background worker slot is free/,
		$offset),
	'no slot: the round logs that the key must wait');
$start = rounds($small);
ok( sql_true_within($small, 'two more rounds', qq{
SELECT worker_rounds >= $start + 2 FROM idem.stats WHERE datname = current_database()}, 30),
	'no slot: the worker goes on with its rounds');
is( $small->safe_psql('postgres', q{
SELECT concat_ws(' ', r.status, r.failure_code, r.claimed_by, r.attempt_count)
  FROM idem.idempotency_request r WHERE r.scope = 'slots'}),
	'failed_retryable abandoned client 1',
	'no slot: the key is left as it was, unclaimed, no attempt spent');
is($small->safe_psql('postgres',
		'SELECT completer_runs FROM idem.stats WHERE datname = current_database()'),
	'0', 'no slot: no completer run counted');

# A slot more, and the next round completes it.
$small->append_conf('postgresql.conf', "max_worker_processes = 3\n");
$small->restart;
ok( sql_true_within($small, 'the slots key', q{
SELECT status = 'succeeded' FROM idem.idempotency_request WHERE scope = 'slots'}),
	'with a free slot the key is completed');
is( $small->safe_psql('postgres',
		q{SELECT attempt_count || ' ' || (SELECT count(*) FROM runs) FROM idem.idempotency_request WHERE scope = 'slots'}),
	'2 1', 'on the worker\'s first claim (attempt 2), once');
$small->stop;

done_testing();
