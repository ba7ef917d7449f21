# On a hot standby of a primary with idem: every idem function that writes
# raises 25006 (read_only_sql_transaction) and leaves nothing behind, a
# replay and the other reads answer as on the primary (docs/contract.md, "Beyond
# one server": a hot standby answers replays read-only), and the worker
# idles there. Every function of schema idem is classified below, so a new
# one cannot be added without saying what a standby does with it.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use IdemWorkerTest qw(expired_outcomes_sql);

my $primary = PostgreSQL::Test::Cluster->new('standby_primary');
$primary->init(allows_streaming => 1);
# The primary's worker is off: nothing on it changes behind the test's back.
$primary->append_conf('postgresql.conf',
	"shared_preload_libraries = 'idem'\nidem.naptime = 1\nidem.worker_enabled = off\n");
$primary->start;

# Keys in every state (three of them expired: what a purge would delete), a
# consumed message, and outbox events (one leased).
$primary->safe_psql('postgres', 'CREATE EXTENSION idem; ' . expired_outcomes_sql('old', 3) . q{
SELECT idem.claim_idempotency_key('s', 'done', 'h');
SELECT idem.mark_succeeded('s', 'done', (SELECT fence FROM idem.idempotency_request WHERE key = 'done'),
    201, '{"id": 7}');
SELECT idem.claim_idempotency_key('s', 'final', 'h');
SELECT idem.mark_failed('s', 'final', (SELECT fence FROM idem.idempotency_request WHERE key = 'final'),
    false, 'declined', 'card declined', 402, '{"error": "declined"}');
SELECT idem.claim_idempotency_key('s', 'retry', 'h');
SELECT idem.mark_failed('s', 'retry', (SELECT fence FROM idem.idempotency_request WHERE key = 'retry'),
    true, 'down', 'provider down');
SELECT idem.claim_idempotency_key('s', 'busy', 'h', lock_timeout => interval '1 day');
SELECT idem.claim_idempotency_key('s', 'stale', 'h', lock_timeout => interval '1 day');
UPDATE idem.idempotency_request SET locked_until = now() - interval '1 minute' WHERE key = 'stale';
SELECT idem.consume_once('c', 'm1', 'mh');
SELECT idem.outbox_put('s', 'done', 'receipt', '{"n": 1}');
SELECT idem.outbox_put('s', 'final', 'receipt', '{"n": 2}');
});
my $lease = $primary->safe_psql('postgres',
	q{SELECT id || ',' || lease_fence FROM idem.outbox_lease(1, interval '1 day')});
my ($event_id, $lease_fence) = split /,/, $lease;
my $busy_fence = $primary->safe_psql('postgres',
	q{SELECT fence FROM idem.idempotency_request WHERE key = 'busy'});

$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby_standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->append_conf('postgresql.conf', "idem.worker_enabled = on\n");
$standby->start;
$primary->wait_for_catchup($standby);

# Everything the standby holds, to show that no call changed it.
my $tables = q{
SELECT (SELECT string_agg(concat_ws(':', scope, key, status, fence, attempt_count, locked_until,
                                    recovery_point, response_code), ' ' ORDER BY scope, key)
          FROM idem.idempotency_request)
    || ' | ' || (SELECT string_agg(consumer || ':' || message_id, ' ') FROM idem.consumed_message)
    || ' | ' || (SELECT string_agg(concat_ws(':', id, status, lease_fence, attempt_count), ' ' ORDER BY id)
                   FROM idem.outbox_event)};
my $before = $standby->safe_psql('postgres', $tables);
is($before, $primary->safe_psql('postgres', $tables), 'the standby holds what the primary wrote');

# The SQLSTATE a statement raises on the standby, or 'ok' and its output.
sub on_standby
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $standby->psql('postgres', "\\set VERBOSITY sqlstate\n$sql");
	return $ret == 0 ? "ok $out" : ($err =~ /ERROR:\s+([0-9A-Z]{5})/ ? $1 : "error: $err");
}

# Every function of schema idem that writes (with arguments that would
# write on the primary) raises 25006 on the standby.
my %writes = (
	claim_idempotency_key => [
		q{SELECT idem.claim_idempotency_key('s', 'new', 'h')},
		q{SELECT idem.claim_idempotency_key('s', 'stale', 'h')},
		q{SELECT idem.claim_idempotency_key('s', 'retry', 'h')},
	],
	claim_or_wait => [
		q{SELECT idem.claim_or_wait('s', 'new', 'h', interval '1 second')},
		q{SELECT idem.claim_or_wait('s', 'stale', 'h', interval '1 second')},
	],
	mark_succeeded => [qq{SELECT idem.mark_succeeded('s', 'busy', $busy_fence, 200)}],
	mark_failed => [qq{SELECT idem.mark_failed('s', 'busy', $busy_fence, true, 'x')}],
	mark_succeeded_returning => [qq{SELECT idem.mark_succeeded_returning('s', 'busy', $busy_fence, 200)}],
	mark_failed_returning => [qq{SELECT idem.mark_failed_returning('s', 'busy', $busy_fence, false, 'x')}],
	set_recovery_point => [qq{SELECT idem.set_recovery_point('s', 'busy', $busy_fence, 'step')}],
	extend_lock => [qq{SELECT idem.extend_lock('s', 'busy', $busy_fence, interval '1 minute')}],
	release => [qq{SELECT idem.release('s', 'busy', $busy_fence)}],
	purge_expired => [q{SELECT idem.purge_expired()}],
	sweep_stale => [q{SELECT idem.sweep_stale()}],
	evict => [q{SELECT idem.evict('s', 'done')}],
	force_expire => [q{SELECT idem.force_expire('s', 'done')}],
	consume_once => [q{SELECT idem.consume_once('c', 'm2', 'mh')}],
	set_consumed_result => [q{SELECT idem.set_consumed_result('c', 'm1', 'order', '1')}],
	purge_consumed => [q{SELECT idem.purge_consumed()}],
	outbox_put => [q{SELECT idem.outbox_put('s', 'done', 'receipt', '{"n": 3}')}],
	outbox_lease => [q{SELECT * FROM idem.outbox_lease(10)}],
	outbox_published => [qq{SELECT idem.outbox_published($event_id, $lease_fence)}],
	outbox_failed => [qq{SELECT idem.outbox_failed($event_id, $lease_fence, 'boom')}],
	purge_published => [q{SELECT idem.purge_published()}],
	run_maintenance => [q{SELECT idem.run_maintenance()}],
);
for my $function (sort keys %writes)
{
	for my $sql (@{ $writes{$function} })
	{
		is(on_standby($sql), '25006', "$function raises 25006 on the standby: $sql");
	}
}

# What reads answers there as on the primary: replays of finished keys with
# the stored hash, a key in flight, and the other reads.
my %reads = (
	claim_idempotency_key => [
		[   q{SELECT kind, fence IS NULL, response_code, response_body FROM idem.claim_idempotency_key('s', 'done', 'h')},
			'replay_success|t|201|{"id": 7}'
		],
		[   q{SELECT kind, response_code, failure_code FROM idem.claim_idempotency_key('s', 'final', 'h')},
			'final_failure|402|declined'
		],
		[   q{SELECT kind, fence IS NULL FROM idem.claim_idempotency_key('s', 'busy', 'h')},
			'processing_active|t'
		],
	],
	claim_or_wait => [
		[   q{SELECT kind, response_code FROM idem.claim_or_wait('s', 'done', 'h', interval '1 second')},
			'replay_success|201'
		],
	],
	stored_answer => [
		[ q{SELECT kind, response_code FROM idem.stored_answer('s', 'done')}, 'replay_success|201' ]
	],
	peek => [
		[ q{SELECT kind, fence IS NULL, response_code FROM idem.peek('s', 'done')}, 'replay_success|t|201' ],
		[ q{SELECT kind, fence IS NULL FROM idem.peek('s', 'busy')}, 'processing_active|t' ],
		[ q{SELECT kind, fence IS NULL FROM idem.peek('s', 'stale')}, 'processing_stale|t' ],
		[ q{SELECT idem.peek('s', 'missing') IS NULL}, 't' ],
	],
	lookup => [ [ q{SELECT status FROM idem.lookup('s', 'final')}, 'failed_final' ] ],
	retry_after => [
		[   q{SELECT idem.retry_after('s', idem.claim_idempotency_key('s', 'busy', 'h')) > 0},
			't'
		]
	],
	typical_duration => [ [ q{SELECT pg_typeof(idem.typical_duration('s'))}, 'interval' ] ],
	request_hash => [
		[ q{SELECT idem.request_hash('{"b": 1, "a": 2}'::jsonb) = idem.request_hash('{"a": 2, "b": 1}'::jsonb)}, 't' ],
		[ q{SELECT length(idem.request_hash('\x00'::bytea))}, '64' ],
	],
	request_invariants_hold => [
		[ q{SELECT bool_and(idem.request_invariants_hold(r)) FROM idem.idempotency_request r}, 't' ]
	],
	consumed_message_invariants_hold => [
		[ q{SELECT bool_and(idem.consumed_message_invariants_hold(m)) FROM idem.consumed_message m}, 't' ]
	],
	outbox_event_invariants_hold => [
		[ q{SELECT bool_and(idem.outbox_event_invariants_hold(e)) FROM idem.outbox_event e}, 't' ]
	],
	stats_counters => [ [ q{SELECT count(*) > 0 FROM idem.stats_counters()}, 't' ] ],
	worker_status => [
		[ q{SELECT count(*) FROM idem.worker_status() WHERE database = 'postgres'}, '1' ]
	],
	check_batch_limit => [ [ q{SELECT idem.check_batch_limit(10)}, '' ] ],
	local_relations => [
		[ q{SELECT string_agg(r::text, ' ') FROM idem.local_relations('idem.idempotency_request') r},
			'idem.idempotency_request' ]
	],
	check_scope_owner => [ [ q{SELECT idem.check_scope_owner('s')}, '' ] ],
	may_use_scope => [ [ q{SELECT idem.may_use_scope('s'), idem.may_use_scope(NULL)}, 't|f' ] ],
	interval_is_positive => [
		[ q{SELECT idem.interval_is_positive(interval '1 hour', false), idem.interval_is_positive(interval '-1 mon 31 days', false)}, 't|f' ]
	],
	# Parses statement texts and reads pg_proc: as on the primary.
	search_path_proof => [
		[ q{SELECT count(*) > 0, count(*) FILTER (WHERE verdict = 'refused') FROM idem.search_path_proof()}, 't|0' ],
		[ q{SELECT idem.search_path_proof('SELECT r.key FROM idem.idempotency_request r') IS NULL}, 't' ],
		[ q{SELECT idem.search_path_proof('SELECT key FROM idempotency_request') IS NOT NULL}, 't' ],
	],
);
for my $function (sort keys %reads)
{
	for my $case (@{ $reads{$function} })
	{
		my ($sql, $want) = @$case;
		is(on_standby($sql), "ok $want", "$function answers on the standby: $sql");
	}
}

# A replay with another request hash is the mismatch it is on the primary.
is(on_standby(q{SELECT idem.claim_idempotency_key('s', 'done', 'other')}),
	'P4002', 'a claim with another hash is P4002 on the standby, as on the primary');

# Functions with no call that stands alone: trigger functions run only on a
# write to idem.scope_policy or idem.scope_owner, which the standby refuses
# before them; the
# lease-lost reporter only raises the error it is given; stats_reset clears
# this server's shared-memory counters, which a standby has of its own.
my %not_called = (
	scope_policy_check_completer => 'trigger',
	scope_policy_changed => 'trigger',
	scope_policy_check_owner => 'trigger',
	scope_owner_changed => 'trigger',
	scope_owner_audit => 'trigger',
	outbox_lease_lost => 'raises the error it reports',
	stats_reset => 'shared memory of this server',
	citus_distribute => 'Citus only (below: 0A000 without it, before any write)',
	citus_node_setup => 'Citus only (below: 0A000 without it, before any write)',
);
for my $function (qw(citus_distribute citus_node_setup))
{
	is(on_standby("SELECT idem.$function()"), '0A000', "$function refuses with 0A000 without Citus, on the standby too");
}
is( on_standby(q{INSERT INTO idem.scope_policy (scope, lock_timeout) VALUES ('p', interval '1 minute')}),
	'25006', 'a scope policy cannot be written on the standby');

# The classification covers every function of schema idem.
my @unclassified = grep { !exists $writes{$_} && !exists $reads{$_} && !exists $not_called{$_} }
  split /\n/, $standby->safe_psql('postgres', q{
SELECT DISTINCT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = 'idem' ORDER BY 1});
is(join(' ', @unclassified), '', 'every function of schema idem is classified for the standby');

is($standby->safe_psql('postgres', $tables), $before, 'no call changed anything on the standby');

# The worker idles there (test/t/033_worker_standby.pl shows it in detail).
ok( $standby->poll_query_until(
		'postgres', q{SELECT state = 'standby' FROM idem.worker_status WHERE database = 'postgres'}),
	'the worker idles on the standby');
is( $standby->safe_psql(
		'postgres', q{SELECT total_rounds FROM idem.worker_status WHERE database = 'postgres'}),
	'0', 'and ran no round');

$standby->stop;
$primary->stop;
done_testing();
