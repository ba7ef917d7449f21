# Replays from a hot standby: a streaming standby of an idem primary answers
# the replay of a finished key read-only (no write, no error), refuses a
# claim that would write with 25006 and a hint (the application sends that
# one to the primary), and a key finished on the primary replays on the
# standby once replay caught up (replica lag: docs/beyond-one-server.md,
# "Replays from a hot standby"). Then pgbench measures replay throughput on
# each.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin, "$FindBin::RealBin/../t";
use IdemProof qw(start_node);
use IdemCluster qw(port_of);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $keys = 10000;
my $bench_seconds = $ENV{STANDBY_BENCH_SECONDS} // 5;

my $primary = start_node('primary', port => port_of(20), allows_streaming => 1);
$primary->safe_psql('proof', <<"SQL");
SELECT idem.mark_succeeded('replay', k::text, c.fence, 200, jsonb_build_object('key', k))
  FROM generate_series(1, $keys) k,
       idem.claim_idempotency_key('replay', k::text, 'h', 'setup', NULL, '1 day') c;
SQL
$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby', port => port_of(21));
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));

is($standby->safe_psql('proof', 'SELECT pg_is_in_recovery()'), 't', 'the standby is in recovery');
my $before = $standby->safe_psql('proof', 'SELECT pg_last_wal_replay_lsn()');
is($standby->safe_psql('proof',
	q{SELECT kind || ' ' || response_body::text FROM idem.claim_idempotency_key('replay', '42', 'h')}),
	'replay_success {"key": 42}', 'a finished key replays on the standby');
my ($st, $out, $err) = $standby->psql('proof',
	q{SELECT kind FROM idem.claim_idempotency_key('replay', 'brand-new', 'h')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
isnt($st, 0, 'a claim that would write fails on the standby');
like($err, qr/ERROR:\s+25006/, '... with SQLSTATE 25006');
like($err, qr/HINT:\s+\S/, '... and a hint');
is($standby->safe_psql('proof', q{SELECT count(*) FROM idem.idempotency_request WHERE key = 'brand-new'}),
	'0', '... and nothing of it exists');

# A key finished on the primary: the standby may not have it yet (the
# application's fallback covers that), and has it once replay caught up.
$primary->safe_psql('proof', q{
	SELECT idem.mark_succeeded('replay', 'late', fence, 201, '{"late": true}')
	  FROM idem.claim_idempotency_key('replay', 'late', 'h')});
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
is($standby->safe_psql('proof',
	q{SELECT kind || ' ' || response_body::text FROM idem.claim_idempotency_key('replay', 'late', 'h')}),
	'replay_success {"late": true}', 'a key finished on the primary replays on the standby after catch-up');
is($standby->safe_psql('proof', 'SELECT pg_last_wal_replay_lsn() > ' . "'$before'::pg_lsn"), 't',
	'(the standby replayed WAL written after its replays: it wrote none itself)');

# Replay throughput: the same pgbench script on each.
my $script = PostgreSQL::Test::Utils::tempdir . '/replay.sql';
PostgreSQL::Test::Utils::append_to_file($script, <<"SQL");
\\set k random(1, $keys)
SELECT kind, response_body FROM idem.claim_idempotency_key('replay', (:k)::text, 'h');
SQL
my %tps;
for my $node ($primary, $standby) {
	my ($out, $err) = run_command([ 'pgbench', '-n', '-c', 2, '-j', 2, '-T', $bench_seconds, '-f', $script,
		'-h', $node->host, '-p', $node->port, 'proof' ]);
	($tps{ $node->name }) = $out =~ /tps = ([0-9.]+)/;
	note("pgbench on " . $node->name . ": $out$err") unless $tps{ $node->name };
	like($out, qr/processed: [1-9][0-9]*\n.*failed transactions: 0 \(0\.0+%\)/s,
		$node->name . ': pgbench replays without a failure');
}
note(sprintf('replay throughput (pgbench, 2 clients, %ds): primary %.0f tps, standby %.0f tps (standby/primary %.2f)',
	$bench_seconds, $tps{primary}, $tps{standby}, $tps{standby} / $tps{primary}));
cmp_ok($tps{standby}, '>', 0, 'the standby serves replays');

$standby->stop;
$primary->stop;
done_testing();
