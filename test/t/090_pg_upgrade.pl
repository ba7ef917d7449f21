# pg_upgrade of a cluster with idem (docs/contract.md "Version 1.1": every database
# with idem can move to a newer major with pg_upgrade). The old cluster holds
# keys in every state, a scope policy with a completer (and one whose
# completer was dropped), inbox messages and outbox events pending, leased
# and published, and a scope owned by a role (idem.scope_owner, whose regrole
# column pg_upgrade allows: it keeps role OIDs). pg_upgrade --check, then
# pg_upgrade; on the new cluster: every row is as it was (the owner row
# in force), every finished key replays its stored answer, new
# fences (keys and outbox leases) exceed every earlier one, an in-flight key's
# owner completes it and a stale one is taken over, the policy's completer
# resolves and the worker runs it in its rounds, and the worker purges what
# expired.
#
# Within this installation's major always (pg_upgrade's checks, its reg*
# check among them, run on any upgrade); across majors too when
# IDEM_UPGRADE_FROM names the installation of an older major with idem
# installed (test/suites.sh sets it in a root that has one: 15 beside 17 in
# its chroot; scripts/chroot.sh says why 18's has no 17 yet).
use strict;
use warnings;
use Cwd;
use IPC::Run ();
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IdemWorkerTest qw(set_and_reload wait_for_log_match wait_for_round_ends);

my @upgrades = ([ 'within', undef ]);
if (my $from = $ENV{IDEM_UPGRADE_FROM}) {
	-x "$from/bin/postgres"
	  or BAIL_OUT("IDEM_UPGRADE_FROM=$from holds no PostgreSQL (no $from/bin/postgres)");
	push @upgrades, [ 'across', $from ];
}

# Checksums on both sides (18's initdb turns them on by default, earlier
# majors do not; pg_upgrade wants both the same).
my @initdb = (extra => ['--data-checksums']);
my $conf = <<'CONF';
shared_preload_libraries = 'idem'
idem.naptime = 1
idem.worker_enabled = off
idem.lock_timeout = '1h'
CONF

for my $upgrade (@upgrades) {
	my ($label, $from) = @$upgrade;
	my $old = PostgreSQL::Test::Cluster->new("old_$label", $from ? (install_path => $from) : ());
	my $new = PostgreSQL::Test::Cluster->new("new_$label");
	my ($old_version, $new_version) = map { $_->config_data('--version') } $old, $new;
	note("$label: $old_version -> $new_version");
	$old->init(@initdb);
	$old->append_conf('postgresql.conf', $conf);
	$old->start;
	my %before = fill($old, $label);
	$old->stop;

	$new->init(@initdb);
	$new->append_conf('postgresql.conf', $conf);
	my $work = PostgreSQL::Test::Utils::tempdir;
	my $cwd = getcwd();
	chdir $work or die "chdir $work: $!";  # pg_upgrade writes beside it
	my @pg_upgrade = ('pg_upgrade', '--no-sync',
		'--old-datadir' => $old->data_dir, '--new-datadir' => $new->data_dir,
		'--old-bindir' => $old->config_data('--bindir'), '--new-bindir' => $new->config_data('--bindir'),
		'--old-port' => $old->port, '--new-port' => $new->port, '--socketdir' => $new->host);
	my ($ok, $stdout, $stderr) = run_log_capture([ @pg_upgrade, '--check' ]);
	ok($ok, "$label: pg_upgrade --check passes") or diag("$stdout\n$stderr");
	unlike($stdout, qr/reg\* data types.*fatal/is, "$label: no reg* column stops pg_upgrade");
	($ok, $stdout, $stderr) = run_log_capture(\@pg_upgrade);
	ok($ok, "$label: pg_upgrade upgrades the cluster") or diag("$stdout\n$stderr");
	chdir $cwd;
	BAIL_OUT("$label: pg_upgrade failed; nothing to check") unless $ok;

	$new->start;
	check_upgraded($new, $label, \%before);
	$new->stop;
}

done_testing();

# Runs a command, its output kept for the failure's diagnostics.
sub run_log_capture {
	my ($cmd) = @_;
	my ($stdout, $stderr) = ('', '');
	my $ok = IPC::Run::run($cmd, '>', \$stdout, '2>', \$stderr);
	return ($ok, $stdout, $stderr);
}

# The old cluster's data, in database postgres (idem's worker's database);
# returns what the new cluster must show.
sub fill {
	my ($node, $label) = @_;
	my $sql = sub { $node->safe_psql('postgres', $_[0]) };
	$sql->(q{
CREATE EXTENSION idem;
CREATE ROLE shop_ops LOGIN;  -- on PostgreSQL 15 a completer's owner needs LOGIN (docs/security.md)
CREATE TABLE done (scope text, key text, attempt integer, by_role text);
GRANT INSERT ON done TO shop_ops;
GRANT EXECUTE ON FUNCTION idem.mark_succeeded(text, text, bigint, integer, jsonb, text, text) TO shop_ops;
CREATE FUNCTION finish(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.done VALUES (scope, key, attempt_count, current_user);
  PERFORM idem.mark_succeeded(scope, key, fence, 201, jsonb_build_object('resumed_from', recovery_point));
END $$;
ALTER FUNCTION finish(text, text, bigint, text, integer) OWNER TO shop_ops;
CREATE FUNCTION gone(scope text, key text, fence bigint, recovery_point text, attempt_count integer)
RETURNS void LANGUAGE plpgsql AS $$ BEGIN END $$;
INSERT INTO idem.scope_policy (scope, lock_timeout, max_attempts, completer, completer_delay) VALUES
  ('orders', '1 minute', 5, 'finish(text, text, bigint, text, integer)', '1 second'),
  ('gone', '1 minute', 5, 'gone(text, text, bigint, text, integer)', '1 second');
DROP FUNCTION gone(text, text, bigint, text, integer);
-- Scopes owned by roles: shop_ops owns "tenant:", shop_stranger owns nothing.
CREATE ROLE shop_stranger;
GRANT EXECUTE ON FUNCTION idem.claim_idempotency_key(text, text, text, text, interval, interval) TO shop_ops, shop_stranger;
INSERT INTO idem.scope_owner (scope_prefix, owner) VALUES ('tenant:', 'shop_ops');
});
	my %fence;
	my $claim = sub {
		my ($scope, $key, $lock, $retention) = @_;
		$fence{"$scope/$key"} = $sql->(qq{SELECT fence FROM idem.claim_idempotency_key('$scope', '$key', 'h', 'client', }
			  . ($lock ? "'$lock'" : 'NULL') . ', ' . ($retention ? "'$retention'" : 'NULL') . ')');
		return $fence{"$scope/$key"};
	};
	my $f = $claim->('up', 'succeeded');
	$sql->(qq{SELECT idem.mark_succeeded('up', 'succeeded', $f, 201,
  '{"order": {"id": 42, "note": "na\\u00efve \\u2603"}, "items": [1, 2.50, null]}', 'order', '42')});
	$f = $claim->('up', 'final');
	$sql->(qq{SELECT idem.mark_failed('up', 'final', $f, false, 'card_declined', 'The card was declined', 402, '{"error": "declined"}')});
	$f = $claim->('up', 'retryable');
	$sql->(qq{SELECT idem.mark_failed('up', 'retryable', $f, true, 'timeout', 'upstream timed out')});
	$f = $claim->('tenant:shop', 'paid');
	$sql->(qq{SELECT idem.mark_succeeded('tenant:shop', 'paid', $f, 201, '{"tenant": "shop"}')});
	$f = $claim->('up', 'processing', '1 day');
	$sql->(qq{SELECT idem.set_recovery_point('up', 'processing', $f, 'charged')});
	# Locks and a retention that run out at once: a stale key, one the sweeper
	# marks abandoned, keys for the completers, an expired outcome.
	for my $key (qw(stale abandoned)) {
		$f = $claim->('up', $key, '1 millisecond');
		$sql->(qq{SELECT idem.set_recovery_point('up', '$key', $f, 'reserved')});
	}
	for my $scope (qw(orders gone)) {
		$f = $claim->($scope, 'k', '1 millisecond');
		$sql->(qq{SELECT idem.set_recovery_point('$scope', 'k', $f, 'charged')});
	}
	for my $key (qw(expired expired_purged)) {
		$f = $claim->('up', $key, undef, '1 millisecond');
		$sql->(qq{SELECT idem.mark_succeeded('up', '$key', $f, 200)});
	}
	$node->poll_query_until('postgres', q{
SELECT bool_and(CASE WHEN key LIKE 'expired%' THEN expires_at < clock_timestamp() ELSE locked_until < clock_timestamp() END)
  FROM idem.idempotency_request WHERE key IN ('stale', 'abandoned', 'expired', 'expired_purged') OR scope IN ('orders', 'gone')})
	  or die 'the short locks and the retention did not run out';
	# The sweep, as the worker does it, of the abandoned key only.
	$sql->(q{UPDATE idem.idempotency_request SET locked_until = now() + interval '1 day'
	          WHERE key = 'stale' OR scope IN ('orders', 'gone')});
	is($sql->('SELECT idem.sweep_stale()'), '1', "$label, old: the sweeper abandons one key");
	$sql->(q{UPDATE idem.idempotency_request SET locked_until = now() - interval '1 second'
	          WHERE key = 'stale' OR scope IN ('orders', 'gone')});
	is($sql->(q{SELECT string_agg(key || ' ' || status || ' ' || coalesce(failure_code, '-'), ', ' ORDER BY key)
	              FROM idem.idempotency_request WHERE scope = 'up'}),
		'abandoned failed_retryable abandoned, expired succeeded -, expired_purged succeeded -, final failed_final card_declined, '
		  . 'processing processing -, retryable failed_retryable timeout, stale processing -, succeeded succeeded -',
		"$label, old: a key in every state");

	# The inbox and the outbox.
	$sql->(q{SELECT idem.consume_once('payments', 'm1', 'h1'), idem.consume_once('payments', 'm2', 'h2');
	         SELECT idem.set_consumed_result('payments', 'm2', 'refund', 'r-7')});
	$sql->(qq{SELECT idem.outbox_put('up', 'succeeded', '$_', '{"e": "$_"}', 'order', '$_')}) for qw(published leased pending);
	my ($pub_id, $pub_fence) = split /\|/, $sql->(q{SELECT id, lease_fence FROM idem.outbox_lease(1, '1 day', ARRAY['published'])});
	$sql->("SELECT idem.outbox_published($pub_id, $pub_fence)");
	my ($lease_id, $lease_fence) = split /\|/, $sql->(q{SELECT id, lease_fence FROM idem.outbox_lease(1, '1 day', ARRAY['leased'])});
	is($sql->(q{SELECT string_agg(event_type || ' ' || status, ', ' ORDER BY id) FROM idem.outbox_event}),
		'published published, leased leased, pending pending', "$label, old: outbox events pending, leased and published");

	return (
		rows => rows($node),
		replays => replays($node),
		fence => $sql->('SELECT max(fence) FROM idem.idempotency_request'),
		fence_seq => $sql->('SELECT last_value FROM idem.fence_seq'),
		lease_fence_seq => $sql->('SELECT last_value FROM idem.outbox_lease_fence_seq'),
		lease => [ $lease_id, $lease_fence ],
		fences => \%fence,
		completer => $sql->(q{SELECT completer FROM idem.scope_policy WHERE scope = 'orders'}));
}

# Every row of idem's tables, in a stable order.
sub rows {
	my ($node) = @_;
	return $node->safe_psql('postgres', q{
SELECT string_agg(t, E'\n' ORDER BY t) FROM (
  SELECT 'request ' || to_jsonb(r)::text AS t FROM idem.idempotency_request r
  UNION ALL SELECT 'consumed ' || to_jsonb(c)::text FROM idem.consumed_message c
  UNION ALL SELECT 'outbox ' || to_jsonb(o)::text FROM idem.outbox_event o
  UNION ALL SELECT 'policy ' || to_jsonb(p)::text FROM idem.scope_policy p
  UNION ALL SELECT 'owner ' || to_jsonb(o)::text FROM idem.scope_owner o) rows});
}

# What the finished keys answer (the stored bytes) and the in-flight one.
sub replays {
	my ($node) = @_;
	return $node->safe_psql('postgres', q{
SELECT string_agg(k || ' ' || (idem.claim_idempotency_key('up', k, 'h'))::text, E'\n' ORDER BY k)
  FROM unnest(ARRAY['succeeded', 'final', 'processing']) k});
}

sub check_upgraded {
	my ($node, $label, $before) = @_;
	my $sql = sub { $node->safe_psql('postgres', $_[0]) };
	is($sql->(q{SELECT extversion FROM pg_extension WHERE extname = 'idem'}),
		$sql->(q{SELECT default_version FROM pg_available_extensions WHERE name = 'idem'}),
		"$label: idem at the current version on the new cluster");
	is(rows($node), $before->{rows}, "$label: every row of idem's tables is as it was");
	my $replays = replays($node);
	is($replays, $before->{replays}, "$label: every finished key replays its stored answer, the in-flight one is active");
	like($replays, qr/^final \(final_failure,.*402.*\nprocessing \(processing_active,.*\nsucceeded \(replay_success,.*""order"": \{""id"": 42/s,
		"$label: the answers are the kinds expected");
	is($sql->('SELECT last_value FROM idem.fence_seq'), $before->{fence_seq}, "$label: the fence sequence survived");
	like($before->{rows}, qr/^owner \{"owner": "shop_ops", "scope_prefix": "tenant:"\}$/m,
		"$label: the owner row was there before (and is as it was)");
	# The owner row is in force: its owner's member replays, another role is refused.
	my $tenant_claim = q{SELECT kind FROM idem.claim_idempotency_key('tenant:shop', 'paid', 'h')};
	is($sql->("SET ROLE shop_ops; $tenant_claim"), 'replay_success', "$label: the owner of tenant: replays its key");
	my ($rc, undef, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\nSET ROLE shop_stranger;\n$tenant_claim");
	like($err, qr/ERROR:  42501: permission denied for idempotency scope "tenant:shop"/,
		"$label: another role is refused (42501)");

	# New ownership: fences above every earlier one.
	my %claimed;
	for my $case ([ 'brand_new', 'new_claim' ], [ 'stale', 'processing_stale' ], [ 'abandoned', 'retryable_failure' ],
		[ 'retryable', 'retryable_failure' ], [ 'expired', 'new_claim' ])
	{
		my ($key, $kind) = @$case;
		my ($got, $fence, $point) = split /\|/,
		  $sql->(qq{SELECT kind, fence, recovery_point FROM idem.claim_idempotency_key('up', '$key', 'h')});
		is($got, $kind, "$label: $key claims as $kind");
		ok($fence > $before->{fence_seq} && $fence > $before->{fence},
			"$label: ${key}'s new fence $fence exceeds every fence before ($before->{fence_seq})");
		$claimed{$key} = $fence;
		is($point, 'reserved', "$label: ${key}'s new owner resumes from its checkpoint") if $key =~ /^(stale|abandoned)$/;
	}
	my $stale_err = ($node->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT idem.mark_succeeded('up', 'stale', $before->{fences}{'up/stale'}, 200)"))[2];
	like($stale_err, qr/ERROR:  P4012:/, "$label: the old owner of the key taken over is fenced off (P4012)");
	# The in-flight key's owner completes it with the fence it got before.
	$sql->("SELECT idem.mark_succeeded('up', 'processing', $before->{fences}{'up/processing'}, 200, '{\"charged\": true}')");
	is($sql->(q{SELECT kind || ' ' || response_body::text FROM idem.claim_idempotency_key('up', 'processing', 'h')}),
		'replay_success {"charged": true}', "$label: the in-flight key's owner completes it after the upgrade");
	$sql->("SELECT idem.mark_succeeded('up', 'stale', $claimed{stale}, 200)");

	# The inbox remembers; the outbox goes on, its lease fences rising too.
	is($sql->(q{SELECT idem.consume_once('payments', 'm1', 'h1')::text || ' ' || idem.consume_once('payments', 'm3', 'h3')::text}),
		'false true', "$label: a consumed message is not consumed again, a new one is");
	my ($lease_id, $lease_fence) = @{ $before->{lease} };
	$sql->("SELECT idem.outbox_published($lease_id, $lease_fence)");
	my ($event, $fence) = split /\|/, $sql->(q{SELECT event_type, lease_fence FROM idem.outbox_lease(10)});
	is($event, 'pending', "$label: the pending event is leased, the published ones are not");
	ok($fence > $before->{lease_fence_seq}, "$label: the new lease fence $fence exceeds every one before");

	# The completer: its name resolves on the new cluster, and the worker runs it.
	is($sql->(q{SELECT completer FROM idem.scope_policy WHERE scope = 'orders'}), $before->{completer},
		"$label: the policy names its completer as before");
	is($sql->(q{SELECT to_regprocedure(completer) = 'public.finish(text, text, bigint, text, integer)'::regprocedure
	              FROM idem.scope_policy WHERE scope = 'orders'}), 't', "$label: the completer's name resolves to the function");
	my $offset = -s $node->logfile;
	set_and_reload($node, 'idem.worker_enabled', 'on');
	ok(wait_for_round_ends($node, 'postgres', 2), "$label: the worker completes rounds (idem.worker_status)");
	ok($node->poll_query_until('postgres', q{
SELECT status = 'succeeded' AND claimed_by = 'idem completer' FROM idem.idempotency_request WHERE scope = 'orders'}),
		"$label: the worker ran the scope's completer on its abandoned key");
	is($sql->(q{SELECT scope || ' ' || key || ' ' || attempt || ' ' || by_role FROM done}), 'orders k 2 shop_ops',
		"$label: the completer ran once, as its owner");
	ok(wait_for_log_match($node, qr/scope "gone"/, $offset) && wait_for_log_match($node, qr/no longer exists/, $offset),
		"$label: a completer that no longer exists is logged, not run");
	ok($node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM idem.idempotency_request WHERE key = 'expired_purged'}),
		"$label: the worker purged the expired outcome");
	is($sql->(q{SELECT count(*) FROM idem.idempotency_request WHERE scope = 'up' AND status = 'processing'}), '4',
		"$label: the worker leaves the live keys alone");
}
