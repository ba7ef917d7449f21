# A round that fails is shown and counted, and one scope's failure does not
# stop the round for the others (before 1.2 a failed round was
# invisible). A trigger on the key table, created by a superuser here,
# stands for tenant-caused failure: it raises on every UPDATE and DELETE of
# scope "evil"'s rows. The worker must still sweep and purge scope "good"
# within a deadline; idem.worker_status must say "failing" with the error,
# its SQLSTATE and scope, since when and how many rounds failed, while
# last_round_end and total_rounds stand still; idem.stats must count the
# failed rounds. Once the trigger is gone the state returns to idle and the
# count of failures is kept. Every wait polls with a deadline.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemWorkerTest qw(expired_outcomes_sql sql_true_within wait_for_log_match);

my $node = PostgreSQL::Test::Cluster->new('worker_failing_rounds');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'idem'\nidem.naptime = 1\nautovacuum = off\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idem');

# The worker does rounds before anything fails.
ok( sql_true_within(
		$node, 'a first round',
		q{SELECT total_rounds >= 1 FROM idem.worker_status WHERE database = 'postgres'}),
	'the worker does rounds');

$node->safe_psql(
	'postgres', q{
CREATE FUNCTION public.refuse_evil_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'tenant trigger refuses key %', OLD.key USING ERRCODE = 'TN001';
END $$;
CREATE TRIGGER refuse_evil BEFORE UPDATE OR DELETE ON idem.idempotency_request
  FOR EACH ROW WHEN (OLD.scope = 'evil') EXECUTE FUNCTION public.refuse_evil_rows();
});

# Zombies in both scopes (locks of 1 s) and an expired outcome in each.
my $offset = -s $node->logfile;
$node->safe_psql(
	'postgres', q{
SELECT idem.claim_idempotency_key(s, k, 'h', 'w', lock_timeout => '1 second')
FROM (VALUES ('evil', 'z1'), ('good', 'z1'), ('good', 'z2')) v(s, k);
});
$node->safe_psql('postgres', expired_outcomes_sql('good', 1));
$node->safe_psql('postgres', expired_outcomes_sql('evil', 1));

ok( sql_true_within(
		$node, "scope good's zombies swept",
		q{SELECT count(*) = 2 FROM idem.idempotency_request
		  WHERE scope = 'good' AND status = 'failed_retryable'}, 30),
	"scope good's zombies are swept although scope evil's batch fails");
my $delay = $node->safe_psql(
	'postgres', q{
SELECT round(extract(epoch FROM max(finished_at - locked_until_was))::numeric, 3)
FROM (SELECT finished_at, created_at + interval '1 second' AS locked_until_was
      FROM idem.idempotency_request WHERE scope = 'good' AND status = 'failed_retryable') s});
note "scope good's zombies swept $delay s after their locks ended (naptime 1 s)";
ok( sql_true_within(
		$node, "scope good's expired outcome purged",
		q{SELECT count(*) = 0 FROM idem.idempotency_request
		  WHERE scope = 'good' AND status = 'succeeded'}, 30),
	"and its expired outcome purged");
is( $node->safe_psql(
		'postgres', q{SELECT string_agg(key || ' ' || status, ', ' ORDER BY key)
		              FROM idem.idempotency_request WHERE scope = 'evil'}),
	'1 succeeded, z1 processing', "scope evil's rows are left as they were");

# The worker says so, between rounds. (An earlier round may have failed on
# scope evil's expired outcome "1" first, before the zombies' locks ran out:
# wait for a round that failed on the zombie.)
ok( sql_true_within(
		$node, 'the state failing',
		q{SELECT state = 'failing' AND last_error = 'tenant trigger refuses key z1'
		  FROM idem.worker_status WHERE database = 'postgres'}),
	'idem.worker_status shows the state failing');
is( $node->safe_psql(
		'postgres', q{
SELECT concat_ws(' | ', last_error, last_error_sqlstate, last_error_scope,
                 failed_rounds >= 1, failing_since IS NOT NULL,
                 failing_since <= last_round_start)
FROM idem.worker_status WHERE database = 'postgres'}),
	'tenant trigger refuses key z1 | TN001 | evil | t | t | t',
	'with the last error, its SQLSTATE and scope, since when, and how many rounds failed');
ok( wait_for_log_match(
		$node,
		qr/scope "evil" is skipped for the rest of the round: its batch failed with SQLSTATE TN001/,
		$offset),
	'the log names the scope skipped');
ok(wait_for_log_match($node, qr/the round failed \(1 scopes skipped\)/, $offset),
	'and the failed round');

# While the rounds fail, neither last_round_end nor total_rounds moves, and
# idem.stats counts the failures, not rounds done. (idem.stats counts a
# failed round just after idem.worker_status shows it: of the two rounds
# waited for, the first is in both.)
my ($failed, $total, $end, $since, $stats_rounds) = split /\|/, $node->safe_psql(
	'postgres', q{
SELECT w.failed_rounds, w.total_rounds, w.last_round_end, w.failing_since, s.worker_rounds
FROM idem.worker_status w, idem.stats s
WHERE w.database = 'postgres' AND s.datname = 'postgres'});
ok( sql_true_within(
		$node, 'two more failed rounds',
		qq{SELECT failed_rounds >= $failed + 2 FROM idem.worker_status WHERE database = 'postgres'}),
	'the rounds keep failing');
is( $node->safe_psql(
		'postgres', qq{
SELECT concat_ws(' ', w.total_rounds = $total, w.last_round_end = '$end',
                 s.worker_rounds = $stats_rounds, s.failed_rounds >= $failed + 1,
                 w.failing_since = '$since')
FROM idem.worker_status w, idem.stats s
WHERE w.database = 'postgres' AND s.datname = 'postgres'}),
	't t t t t',
	'last_round_end, total_rounds, worker_rounds and failing_since stand still; idem.stats counts failed_rounds');

# The tenant's trigger goes: the next round succeeds, scope evil is
# maintained, the state is idle again and the count of failures is kept.
$node->safe_psql('postgres', 'DROP TRIGGER refuse_evil ON idem.idempotency_request');
ok( sql_true_within(
		$node, 'the state idle again',
		q{SELECT state = 'idle' AND failing_since IS NULL AND total_rounds > 0
		  FROM idem.worker_status WHERE database = 'postgres'}),
	'after the trigger is dropped the worker is idle again');
is( $node->safe_psql(
		'postgres', qq{
SELECT concat_ws(' ', w.failed_rounds >= $failed + 2, w.total_rounds > $total,
                 w.last_round_end > '$end', w.last_error_sqlstate,
                 s.failed_rounds = w.failed_rounds)
FROM idem.worker_status w, idem.stats s
WHERE w.database = 'postgres' AND s.datname = 'postgres'}),
	't t t TN001 t',
	'rounds are done again; the failures stay counted and the last error stays shown');
ok( sql_true_within(
		$node, "scope evil maintained",
		q{SELECT count(*) = 1 AND bool_and(key = 'z1' AND status = 'failed_retryable')
		  FROM idem.idempotency_request WHERE scope = 'evil'}, 30),
	"scope evil's zombie is swept and its expired outcome purged");

$node->stop;
done_testing();
