# Keys in every state and the checks that they survived a move between
# engines, shared by test/t/089_engine_move.pl (a data-only copy between
# databases of one cluster) and test/portable/t/011_engine_move_pgtle.pl (a
# plain pg_dump between a pg_tle install and the C++ extension). Every
# function takes the cluster (a PostgreSQL::Test::Cluster) the database is
# in and connects to it as the cluster's superuser.
package IdemEngineMove;

use strict;
use warnings;
use DBI;
use Exporter 'import';
use Test::More;

our @EXPORT = qw(make_keys check_keys);

sub connect_db {
	my ($node, $name) = @_;
	my $dbh = DBI->connect('dbi:Pg:dbname=' . $name . ';host=' . $node->host . ';port=' . $node->port,
		'', '', { AutoCommit => 1, RaiseError => 1, PrintError => 0, pg_enable_utf8 => 1 })
	  or die "connect $name: $DBI::errstr";
	$dbh->do(q{SET TimeZone = 'UTC'});
	return $dbh;
}

sub claim_json {
	my ($dbh, $scope, $key, $hash, $extra) = @_;
	return $dbh->selectrow_array(
		'SELECT pg_catalog.to_jsonb(c)::text FROM idem.claim_idempotency_key(?, ?, ?' . ($extra // '') . ') c',
		undef, $scope, $key, $hash);
}

sub claim_of {
	my ($dbh, $scope, $key, $hash, $extra) = @_;
	return $dbh->selectrow_hashref(
		'SELECT * FROM idem.claim_idempotency_key(?, ?, ?' . ($extra // '') . ')', undef, $scope, $key, $hash);
}

# The SQLSTATE $sql fails with ('' when it does not fail).
sub sqlstate_of {
	my ($dbh, $sql, @bind) = @_;
	local $dbh->{RaiseError} = 0;
	return defined $dbh->do($sql, undef, @bind) ? '' : $dbh->state;
}

# Keys in every state, scope policies, a scope owner, a consumed message and
# outbox events, made in the source database. Returns what the checks compare.
sub make_keys {
	my ($node, $name) = @_;
	my $dbh = connect_db($node, $name);
	my %k;
	my $owner = sub {    # a claim that must grant ownership; its fence
		my ($key, $extra) = @_;
		my $c = claim_of($dbh, 'mv', $key, "h-$key", $extra);
		die "mv/$key: $c->{kind}" unless $c->{kind} eq 'new_claim';
		return $c->{fence};
	};

	my $f = $owner->('succeeded');
	$dbh->do(q{SELECT idem.mark_succeeded('mv', 'succeeded', ?, 201, '{"charge": "ch_1"}', 'charge', 'ch_1')},
		undef, $f);
	$f = $owner->('final');
	$dbh->do(q{SELECT idem.mark_failed('mv', 'final', ?, false, 'card_declined', 'the bank said no', 402,
		'{"error": "declined"}')}, undef, $f);
	$k{retry_fence} = $owner->('retry');
	$dbh->do(q{SELECT idem.set_recovery_point('mv', 'retry', ?, 'charged')}, undef, $k{retry_fence});
	$dbh->do(q{SELECT idem.mark_failed('mv', 'retry', ?, true, 'timeout')}, undef, $k{retry_fence});
	$k{live_fence} = $owner->('live', q{, lock_timeout => '1 hour'});
	$dbh->do(q{SELECT idem.set_recovery_point('mv', 'live', ?, 'charged')}, undef, $k{live_fence});
	# Swept as abandoned (its lock ran out), not claimed since: its owner
	# may still complete it, in the new database too.
	$k{swept_fence} = $owner->('swept', q{, lock_timeout => '1 microsecond'});
	$dbh->do(q{SELECT idem.set_recovery_point('mv', 'swept', ?, 'charged')}, undef, $k{swept_fence});
	my ($swept) = $dbh->selectrow_array(q{SELECT idem.sweep_stale()});
	die "swept $swept keys" unless $swept == 1;
	$k{stale_fence} = $owner->('stale', q{, lock_timeout => '1 microsecond'});
	$dbh->do(q{SELECT idem.set_recovery_point('mv', 'stale', ?, 'shipped')}, undef, $k{stale_fence});
	$f = $owner->('expired', q{, retention => '1 microsecond'});
	$dbh->do(q{SELECT idem.mark_succeeded('mv', 'expired', ?, 200)}, undef, $f);

	# Bound to a session that then ends: stale wherever the key goes.
	my $bound = connect_db($node, $name);
	$bound->do('SET idem.bind_lock_to_session = on');
	my $c = claim_of($bound, 'mv', 'bound', 'h-bound', q{, lock_timeout => '1 hour'});
	die "mv/bound: $c->{kind}" unless $c->{kind} eq 'new_claim';
	$k{bound_fence} = $c->{fence};
	$bound->disconnect;

	# A scope with a policy: an hour's lock, two attempts at most; its key
	# "poison" has had both.
	$dbh->do(q{INSERT INTO idem.scope_policy (scope, lock_timeout, max_attempts) VALUES ('pol', '1 hour', 2)});
	for my $attempt (1, 2) {
		$c = claim_of($dbh, 'pol', 'poison', 'h', q{, lock_timeout => '1 microsecond'});
		die "pol/poison attempt $attempt: $c->{kind}" unless $c->{kind} eq ($attempt == 1 ? 'new_claim' : 'processing_stale');
	}

	# A scope owned by a role: pg_monitor, which every cluster has, so the
	# row restores wherever the keys go (the owning roles must exist there
	# before the restore).
	$f = claim_of($dbh, 'mv_owned:x', 'k', 'h-k')->{fence};
	$dbh->do(q{SELECT idem.mark_succeeded('mv_owned:x', 'k', ?, 200, '{"owned": true}')}, undef, $f);
	$dbh->do(q{INSERT INTO idem.scope_policy (scope, lock_timeout) VALUES ('mv_owned:x', '2 hours')});
	$dbh->do(q{INSERT INTO idem.scope_owner (scope_prefix, owner) VALUES ('mv_owned:', 'pg_monitor')});

	$dbh->do(q{SELECT idem.consume_once('billing', 'm1', 'h-m1')});
	$dbh->do(q{SELECT idem.set_consumed_result('billing', 'm1', 'invoice', 'inv-1')});
	($k{event_id}) = $dbh->selectrow_array(q{SELECT idem.outbox_put('mv', 'succeeded', 'charged', '{"n": 1}')});
	my ($leased_id, $lease_fence) = $dbh->selectrow_array(
		q{SELECT id, lease_fence FROM idem.outbox_lease(1, '1 microsecond')});
	die "leased $leased_id, put $k{event_id}" unless $leased_id == $k{event_id};
	$k{lease_fence} = $lease_fence;

	# What the finished keys answer before the move, and the highest fence.
	$k{answer}{$_} = claim_json($dbh, 'mv', $_, "h-$_") for qw(succeeded final);
	($k{max_fence}) = $dbh->selectrow_array(
		q{SELECT greatest((SELECT max(fence) FROM idem.idempotency_request), (SELECT last_value FROM idem.fence_seq))});
	($k{live_until}) = $dbh->selectrow_array(
		q{SELECT locked_until::text FROM idem.idempotency_request WHERE scope = 'mv' AND key = 'live'});
	# Whether pg_dump carries the inbox and the outbox from here: an extension
	# marks them from 1.2 on; a SQL-file install's tables are always dumped.
	($k{messages_dumped}) = $dbh->selectrow_array(q{
		SELECT coalesce((SELECT 'idem.outbox_event'::regclass = ANY (extconfig)
		                   AND 'idem.consumed_message'::regclass = ANY (extconfig)
		                   FROM pg_extension WHERE extname = 'idem'), true)});
	$dbh->disconnect;
	return \%k;
}

# In database $name of $node, where the keys make_keys made ($k) arrived:
# every check of a move, each test named after $what.
sub check_keys {
	my ($node, $name, $k, $what) = @_;
	my $dbh = connect_db($node, $name);
	for my $key (qw(succeeded final)) {
		is(claim_json($dbh, 'mv', $key, "h-$key"), $k->{answer}{$key}, "$what: mv/$key replays the same answer");
	}
	is(sqlstate_of($dbh, q{SELECT idem.claim_idempotency_key('mv', 'succeeded', 'other')}), 'P4002',
		"$what: mv/succeeded still refuses another request");

	my $c = claim_of($dbh, 'mv', 'retry', 'h-retry');
	is("$c->{kind} $c->{recovery_point} $c->{attempt_count}", 'retryable_failure charged 2',
		"$what: mv/retry is taken over from its recovery point");
	cmp_ok($c->{fence}, '>', $k->{max_fence}, "$what: the new fence is greater than every old one");
	is(sqlstate_of($dbh, q{SELECT idem.mark_succeeded('mv', 'retry', ?, 200)}, $k->{retry_fence}), 'P4012',
		"$what: the old owner's fence of mv/retry is stale");

	$c = claim_of($dbh, 'mv', 'stale', 'h-stale');
	is("$c->{kind} $c->{recovery_point} $c->{attempt_count}", 'processing_stale shipped 2',
		"$what: mv/stale, its lock run out, is taken over from its recovery point");
	cmp_ok($c->{fence}, '>', $k->{max_fence}, "$what: its new fence is greater than every old one");
	is(sqlstate_of($dbh, q{SELECT idem.set_recovery_point('mv', 'stale', ?, 'x')}, $k->{stale_fence}), 'P4012',
		"$what: the zombie's fence of mv/stale is refused");

	$c = claim_of($dbh, 'mv', 'live', 'h-live');
	is($c->{kind}, 'processing_active', "$what: mv/live is still locked");
	my ($until) = $dbh->selectrow_array(q{SELECT ?::timestamptz = ?::timestamptz}, undef, $c->{locked_until},
		$k->{live_until});
	ok($until, "$what: until the same moment");
	is(sqlstate_of($dbh, q{SELECT idem.mark_succeeded('mv', 'live', ?, 200, '{"done": true}')}, $k->{live_fence}), '',
		"$what: mv/live's owner completes it with its old fence");
	is(claim_of($dbh, 'mv', 'live', 'h-live')->{kind}, 'replay_success', "$what: and mv/live replays");

	is(sqlstate_of($dbh, q{SELECT idem.mark_succeeded('mv', 'swept', ?, 200)}, $k->{swept_fence}), '',
		"$what: mv/swept, abandoned and not claimed since, is completed by its owner");
	is(claim_of($dbh, 'mv', 'swept', 'h-swept')->{kind}, 'replay_success', "$what: and mv/swept replays");

	$c = claim_of($dbh, 'mv', 'bound', 'h-bound');
	is($c->{kind}, 'processing_stale', "$what: mv/bound, its session gone, is stale although its lock is not over");
	cmp_ok($c->{fence}, '>', $k->{max_fence}, "$what: with a new fence");

	is(claim_of($dbh, 'mv', 'expired', 'another request')->{kind}, 'new_claim',
		"$what: mv/expired starts afresh");

	$c = claim_of($dbh, 'pol', 'poison', 'h');
	is("$c->{kind} $c->{failure_code}", 'final_failure too_many_attempts',
		"$what: pol's max_attempts stops the third attempt of pol/poison");
	$c = claim_of($dbh, 'pol', 'new', 'h');
	my ($hour) = $dbh->selectrow_array(q{SELECT ?::timestamptz > now() + interval '50 minutes'}, undef,
		$c->{locked_until});
	ok($hour, "$what: pol's lock_timeout of an hour is in force");

	# The owner row came along and is in force: a role that is no member of
	# pg_monitor is refused the scope, a member replays its key.
	is(join(', ', @{ $dbh->selectcol_arrayref(q{SELECT scope_prefix || ' ' || owner::text FROM idem.scope_owner ORDER BY 1}) }),
		'mv_owned: pg_monitor', "$what: idem.scope_owner's row came along");
	is($dbh->selectrow_array(q{SELECT lock_timeout::text FROM idem.scope_policy WHERE scope = 'mv_owned:x'}),
		'02:00:00', "$what: the owned scope's policy came along");
	$dbh->do(q{
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'mv_outsider') THEN CREATE ROLE mv_outsider; END IF;
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'mv_monitor') THEN CREATE ROLE mv_monitor IN ROLE pg_monitor; END IF;
END $$;
GRANT EXECUTE ON FUNCTION idem.claim_idempotency_key(text, text, text, text, interval, interval) TO mv_outsider, mv_monitor});
	$dbh->do('SET ROLE mv_outsider');
	is(sqlstate_of($dbh, q{SELECT idem.claim_idempotency_key('mv_owned:x', 'k', 'h-k')}), '42501',
		"$what: mv_owned:x is refused to a role that is no member of its owner");
	$dbh->do('SET ROLE mv_monitor');
	is(claim_of($dbh, 'mv_owned:x', 'k', 'h-k')->{kind}, 'replay_success', "$what: and replays to a member");
	$dbh->do('RESET ROLE');

	{
		ok($k->{messages_dumped}, "$what: the source marks the inbox and the outbox for pg_dump (1.2)");
		my ($first_id) = $dbh->selectrow_array(q{SELECT idem.outbox_put('mv', 'new', 'charged', '{"n": 2}')});
		cmp_ok($first_id, '>', $k->{event_id}, "$what: a new outbox event's id is greater than the old ones");
		is($dbh->selectrow_array(q{SELECT idem.consume_once('billing', 'm1', 'h-m1')}) ? 'consumed again' : 'false',
			'false', "$what: a consumed message is not consumed again");
		is($dbh->selectrow_array(q{SELECT idem.outbox_put('mv', 'succeeded', 'charged', '{"n": 1}')}),
			$k->{event_id}, "$what: the same outbox event keeps its id");
		my ($id, $lease_fence) = $dbh->selectrow_array(q{SELECT id, lease_fence FROM idem.outbox_lease(1)});
		is($id, $k->{event_id}, "$what: the event whose lease ran out is leased again");
		cmp_ok($lease_fence // 0, '>', $k->{lease_fence}, "$what: under a greater lease fence");
		is(sqlstate_of($dbh, q{SELECT idem.outbox_published(?, ?)}, $k->{event_id}, $k->{lease_fence}), 'P4012',
			"$what: the old lease is lost");
	}
	$dbh->disconnect;
}

1;
