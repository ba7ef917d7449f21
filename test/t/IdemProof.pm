# Shared by the proof runs test/t/1NN_*.pl: a private cluster with idem
# preloaded, forked client processes, and an API client that behaves like a
# careful real one (same key, same request hash; waits on processing_active;
# resumes a key it takes over; reconnects when the server goes away).
#
# Every client appends what the server acknowledged to its own log file, one
# line an event, written as soon as the acknowledgement arrived:
#   C key fence t kind sent   a claim that granted ownership, sent at sent,
#                             returned at t (in a transaction: before COMMIT)
#   U key fence t             a claim returned that fence in a transaction
#                             whose COMMIT was never acknowledged
#   Z key old new kind state  an owner that lost its connection (a crash, a
#                             failover) wrote again with its old fence after
#                             its retry's claim (kind, new fence or -): the
#                             SQLSTATE that refused it, or "accepted"
#   R key fence t point       set_recovery_point, sent at t, returned (autocommit)
#   F key fence t             mark_failed (retryable), sent at t, returned
#   S key fence effect t body COMMIT of effect + mark_succeeded (sent at t) returned OK
#   A key body                the request got its answer (own write or replay)
#   X key fence sqlstate      an owner's write was refused (P4012 ...)
#   T counters                the client's counters, last line
# Times are Time::HiRes::time() of one machine, so comparable across clients.
# The parent reads the logs back and compares them with the database.
package IdemProof;

use strict;
use warnings;
use DBI;
use POSIX ();
use Time::HiRes ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Cwd ();
use File::Basename ();
use IPC::Run ();
use Exporter 'import';

our @EXPORT_OK = qw(now start_node check_keys_finished run_clients read_logs total_stats connect_or_die storm_key
  storm_client check_storm read_rows_and_effects check_acknowledged fork_child
  check_relayed ack_log lines_matching poll_until connect_when_up wait_for_exit stop_child check_zombies
  stalling_owner check_fences_handed_out);

sub now { return Time::HiRes::time(); }

# The key a storm client asks for next. Until $sweep_end a window of $window
# hot keys moves across the key space, so many twins race for the same key
# at once; after it, any key. Returns the index and whether it was a hot pick.
sub storm_key {
	my ($keys, $window, $t0, $sweep_end) = @_;
	return (int(rand($keys)), 0) if now() >= $sweep_end;
	my $center = int($keys * (now() - $t0) / ($sweep_end - $t0));
	my $index = $center + int(rand($window)) - $window / 2;
	$index = 0 if $index < 0;
	$index = $keys - 1 if $index >= $keys;
	return ($index, 1);
}

# One storm client's run (101_twin_storm.pl; test/cluster): hot keys until
# $o{t0} + $o{duration}, chaos on hot picks, then a last pass over its share
# of the keys (index = id mod clients) so every key is asked for after it.
# With stop_file, the hot phase also ends as soon as that file exists.
sub storm_client {
	my ($c, %o) = @_;
	Time::HiRes::sleep($o{t0} - now()) if $o{t0} > now();
	my $requests = 0;
	while (now() < $o{t0} + $o{duration} && !($o{stop_file} && -e $o{stop_file})) {
		my ($index, $hot) = storm_key($o{keys}, $o{window}, $o{t0}, $o{sweep_end});
		$c->{chaos} = $hot ? $o{chaos} : 0;
		$c->request(sprintf('k%04d', $index));
		$requests++;
	}
	$c->{chaos} = 0;
	for (my $index = $c->{id}; $index < $o{keys}; $index += $o{clients}) {
		$c->request(sprintf('k%04d', $index));
		$requests++;
	}
	$c->count('requests', $requests);
	$c->finish;
}

# The storm's verdict on one database: exactly one effect per key, the
# effect the stored outcome names, every answer the stored response, no
# key acknowledged twice. Runs Test::More assertions; returns the counts.
sub check_storm {
	my ($dbh, $events, $keys, $scope) = @_;
	my ($rows, $succeeded) = $dbh->selectrow_array(
		q{SELECT count(*), count(*) FILTER (WHERE status = 'succeeded')
		    FROM idem.idempotency_request WHERE scope = $1}, undef, $scope);
	Test::More::is($rows,      $keys, "$keys keys exist");
	Test::More::is($succeeded, $keys, 'every key succeeded');
	# One statement a count, no subquery in a select list: Citus (test/citus)
	# cannot run those on distributed tables.
	my ($effects, $keys_with_effects) = $dbh->selectrow_array(q{SELECT count(*), count(DISTINCT key) FROM effects});
	my ($doubled) = $dbh->selectrow_array(
		q{SELECT count(*) FROM (SELECT key FROM effects GROUP BY key HAVING count(*) > 1) d});
	Test::More::is($effects, $keys, 'exactly one effect per key in total');
	Test::More::is($doubled, 0,     'no key has two effects');
	my ($matching) = $dbh->selectrow_array(
		q{SELECT count(*) FROM effects e JOIN idem.idempotency_request r
		     ON r.scope = e.scope AND r.key = e.key
		  WHERE r.fence = e.fence AND r.result_ref_id = e.id::text});
	Test::More::is($matching, $keys, "each key's effect is the one its stored outcome names");
	my %stored = @{ $dbh->selectcol_arrayref(
		q{SELECT key, response_body::text FROM idem.idempotency_request WHERE scope = $1},
		{ Columns => [ 1, 2 ] }, $scope) };
	my $wrong = grep { ($stored{ $_->[0] } // '') ne $_->[1] } @{ $events->{A} };
	my %answered = map { $_->[0] => 1 } @{ $events->{A} };
	Test::More::is($wrong, 0, 'every answer equals the stored response');
	Test::More::is(scalar(keys %answered), $keys, 'every key was answered');
	my %acked;
	$acked{ $_->[0] }++ for @{ $events->{S} };
	Test::More::is(scalar(grep { $_ > 1 } values %acked), 0, 'no key was acknowledged as succeeded twice');
	return { effects => $effects, keys_with_effects => $keys_with_effects, doubled => $doubled,
		succeeded => $succeeded, wrong => $wrong };
}

# The zombie run's verdict (102_zombies.pl; test/citus) on the clients'
# logs and the database: no write of a superseded owner accepted, each
# refusal a documented P401x, one success per key with its newest fence,
# one effect per key. Runs Test::More assertions; returns the counts.
sub check_zombies {
	my ($dbh, $events, $scope) = @_;
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
	Test::More::is(scalar(@stale_accepted), 0, 'no write of a superseded owner was accepted');
	Test::More::diag("stale write accepted: $_->{what} on $_->{key} with fence $_->{fence}") for @stale_accepted;

	my $refused_stale = grep { $_->[2] eq 'P4012' } @{ $events->{X} };
	my %refusals;
	$refusals{ $_->[2] }++ for @{ $events->{X} };
	Test::More::cmp_ok($refused_stale, '>', 0, 'zombies did try to write after a takeover, and were refused');
	my $other_refusals = grep { $_->[2] !~ /^P401[0-3]$/ } @{ $events->{X} };
	Test::More::is($other_refusals, 0, 'every refused owner write carries a documented P401x SQLSTATE');

	# The one accepted success of each key is the newest owner's.
	my %max_fence;
	for my $key (keys %claims) {
		for (@{ $claims{$key} }) { $max_fence{$key} = $_->{fence} if $_->{fence} > ($max_fence{$key} // 0); }
	}
	my %succeeded;
	push @{ $succeeded{ $_->[0] } }, $_->[1] for @{ $events->{S} };
	my $keys = scalar(keys %claims);
	Test::More::is(scalar(grep { @{ $succeeded{$_} // [] } != 1 } keys %claims), 0,
		'every key was acknowledged as succeeded exactly once');
	Test::More::is(scalar(grep { ($succeeded{$_}[0] // 0) != $max_fence{$_} } keys %claims), 0,
		'each success was written with the newest fence of its key');

	# One statement a count, as check_storm's.
	my ($rows, $done) = $dbh->selectrow_array(q{SELECT count(*), count(*) FILTER (WHERE status = 'succeeded')
		FROM idem.idempotency_request WHERE scope = $1}, undef, $scope);
	my ($effects) = $dbh->selectrow_array(q{SELECT count(*) FROM effects});
	my ($doubled) = $dbh->selectrow_array(
		q{SELECT count(*) FROM (SELECT key FROM effects GROUP BY key HAVING count(*) > 1) d});
	my ($matching) = $dbh->selectrow_array(q{SELECT count(*) FROM effects e JOIN idem.idempotency_request r
		USING (scope, key) WHERE r.fence = e.fence AND r.result_ref_id = e.id::text});
	Test::More::is($rows, $keys, 'every key touched has a row');
	Test::More::is($done, $keys, 'every key succeeded');
	Test::More::is($effects, $keys, 'one effect per key in total');
	Test::More::is($doubled, 0, 'no key has two effects');
	Test::More::is($matching, $keys, "each key's effect carries the fence of its stored outcome");
	return { keys => $keys, effects => $effects, doubled => $doubled, refusals => \%refusals,
		writes => scalar(@writes), stale_accepted => scalar(@stale_accepted) };
}

# The zombie run's owner (102_zombies.pl; test/citus): owns a key like a
# client that may freeze (GC pause, slow upstream) for up to 450 ms, more
# than its lock, before it writes.
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

# idem and the effects table, in database "proof".
sub proof_schema_sql {
	return <<'SQL';
CREATE EXTENSION idem;
-- The side effect a request performs. No UNIQUE constraint on purpose: a
-- duplicate must show up in the counts, not be refused by the table.
CREATE TABLE effects (
    id     bigserial PRIMARY KEY,
    scope  text NOT NULL,
    key    text NOT NULL,
    fence  bigint NOT NULL,
    client int NOT NULL,
    at     timestamptz NOT NULL DEFAULT clock_timestamp());
SQL
}

# The application's function that writes a request's effect and its key's
# outcome in one transaction, on the node that holds the key (a PL/Proxy
# shard: test/cluster/IdemCluster.pm; a Citus worker, delegated by key:
# test/citus/IdemCitus.pm). Returns the effect's id.
sub effect_function_sql {
	return <<'SQL';
CREATE FUNCTION proof_effect_and_succeed(scope text, key text, fence bigint, client int, body jsonb)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE effect bigint;
BEGIN
    INSERT INTO effects (scope, key, fence, client) VALUES (scope, key, fence, client)
        RETURNING id INTO effect;
    PERFORM idem.mark_succeeded(scope, key, fence, 200, body, 'effect', effect::text);
    RETURN effect;
END $$;
SQL
}

# The keys of $scope and the effects in one database, added to the hashes
# given (so a sharded run reads every shard into the same ones): row by key,
# effect by "key id" (ids are per database), effects count by key.
# The end state of a crash run's scope: every key exists, none is left
# processing, every one succeeded. Runs Test::More assertions; returns the
# counts.
sub check_keys_finished {
	my ($dbh, $scope, $keys) = @_;
	my ($rows, $succeeded, $processing) = $dbh->selectrow_array(q{
	SELECT count(*), count(*) FILTER (WHERE status = 'succeeded'),
	       count(*) FILTER (WHERE status = 'processing')
	  FROM idem.idempotency_request WHERE scope = $1}, undef, $scope);
	Test::More::is($rows, $keys, "$keys keys exist");
	Test::More::is($processing, 0, 'no key is left processing');
	Test::More::is($succeeded, $keys, 'every key succeeded');
	return ($rows, $succeeded, $processing);
}

sub read_rows_and_effects {
	my ($dbh, $scope, $row, $effect, $effects_of) = @_;
	($row, $effect, $effects_of) = ($row // {}, $effect // {}, $effects_of // {});
	my $sth = $dbh->prepare(q{SELECT key, fence, status::text, recovery_point, response_body::text,
	                                 result_ref_id FROM idem.idempotency_request WHERE scope = $1});
	$sth->execute($scope);
	while (my $r = $sth->fetchrow_hashref) { $row->{ $r->{key} } = $r; }
	$sth = $dbh->prepare(q{SELECT id, key, fence FROM effects WHERE scope = $1});
	$sth->execute($scope);
	while (my $e = $sth->fetchrow_hashref) { $effect->{"$e->{key} $e->{id}"} = $e; $effects_of->{ $e->{key} }++; }
	return ($row, $effect, $effects_of);
}

# The crash run's verdict (103_crash.pl; test/cluster/sharded_crash.pl) on
# what read_rows_and_effects read: every acknowledged outcome, claim and
# checkpoint is there as acknowledged, no fence issued twice, one effect per
# key, every answer the stored one. Runs Test::More assertions. Fences are
# unique per database: shard_of => sub { key -> shard } tells which.
sub check_acknowledged {
	my ($row, $effect, $effects_of, $events, $keys, %opt) = @_;
	my (%acked_success, @lost_outcomes);
	for my $s (@{ $events->{S} }) {
		my ($key, $fence, $effect_id, undef, $body) = @$s;
		$acked_success{$key}++;
		my $r = $row->{$key};
		my $e = $effect->{"$key $effect_id"};
		push @lost_outcomes, "$key/$fence"
		  unless $r && $r->{status} eq 'succeeded' && $r->{fence} == $fence
		  && $r->{response_body} eq $body && $r->{result_ref_id} eq $effect_id
		  && $e && $e->{fence} == $fence;
	}
	Test::More::is(scalar(@lost_outcomes), 0, 'every acknowledged outcome survived exactly as acknowledged');
	Test::More::diag("lost or changed outcome: $_") for @lost_outcomes[0 .. ($#lost_outcomes < 9 ? $#lost_outcomes : 9)];
	Test::More::is(scalar(grep { $_ > 1 } values %acked_success), 0, 'no key was acknowledged as succeeded twice');
	# Acknowledged claims: their fences were never issued again, and the row
	# has that fence or a newer one.
	# A claim whose COMMIT was never acknowledged (U) is no acknowledged claim:
	# check_fences_handed_out reports what became of its fence.
	my %unacknowledged = map { ("$_->[0] $_->[1]" => 1) } @{ $events->{U} // [] };
	my (%fence_seen, $reissued, $behind, $max_fence);
	for my $cl (@{ $events->{C} }) {
		my ($key, $fence) = @$cl;
		next if $unacknowledged{"$key $fence"};
		my $database = $opt{shard_of} ? $opt{shard_of}->($key) : 0;
		$reissued++ if $fence_seen{"$database $fence"}++;
		$behind++ unless $row->{$key} && $row->{$key}{fence} >= $fence;
		$max_fence = $fence if $fence > ($max_fence // 0);
	}
	Test::More::is($reissued // 0, 0, 'no acknowledged fence was ever issued twice');
	Test::More::is($behind // 0, 0, 'every acknowledged claim is present (the row holds its fence or a newer one)');
	my $checkpoints_lost = grep { my $r = $row->{ $_->[0] };
		!$r || ($r->{recovery_point} ne 'validated' && $r->{recovery_point} ne 'finished') } @{ $events->{R} };
	Test::More::is($checkpoints_lost, 0, 'every acknowledged checkpoint survived');
	my $effects = scalar(keys %$effect);
	Test::More::is($effects, $keys, 'one effect per key in total');
	Test::More::is(scalar(grep { $_ > 1 } values %$effects_of), 0, 'no effect duplicated');
	my $wrong = grep { ($row->{ $_->[0] }{response_body} // '') ne $_->[1] } @{ $events->{A} };
	Test::More::is($wrong, 0, 'every answer a client got equals the stored response');
	return { lost_outcomes => \@lost_outcomes, reissued => $reissued // 0, max_fence => $max_fence // 0,
		effects => $effects, wrong => $wrong };
}

# The verdict on every fence a claim handed out (C lines: also those of
# claims whose commit was lost in a crash or a failover after it was
# acknowledged; those whose COMMIT never was, U lines, are counted apart),
# for runs where the key table's claims may commit without
# waiting for their flush (idem.bind_lock_to_session): no fence handed out
# twice; per key, a claim sent after another returned has a greater fence
# (fences never go back, even past a lost claim); no new_claim for a key
# after its outcome was acknowledged; every old owner that wrote again with
# its fence after its retry's claim (Z lines) refused: with P4012 (stale
# fence) and below the retry's fence when the retry owns the key; when a
# twin did (processing_active), it may have finished the key before the
# write, which is then refused as not owned (P4010, P4013). Runs Test::More assertions; returns the counts.
sub check_fences_handed_out {
	my ($events, %opt) = @_;
	my %unacknowledged = map { ("$_->[0] $_->[1]" => 1) } @{ $events->{U} };
	my (%holders, %claims, $twice);
	for my $cl (@{ $events->{C} }) {
		my ($key, $fence, $at, $kind, $sent) = @$cl;
		my $acked = !$unacknowledged{"$key $fence"};
		push @{ $holders{$fence} }, { key => $key, acked => $acked };
		push @{ $claims{$key} }, { fence => $fence, at => $at, sent => $sent, kind => $kind, acked => $acked };
	}
	# A fence handed out twice where both claims committed, or whose commit a
	# crash lost after it was acknowledged.
	$twice = grep { (grep { $_->{acked} } @$_) > 1 } values %holders;
	my $handed = scalar(@{ $events->{C} });
	Test::More::is($twice, 0, "no fence handed out twice ($handed fences, " . scalar(keys %claims) . ' keys)');
	# A fence from a claim whose COMMIT never returned (its transaction may
	# never have committed): PostgreSQL may hand out a sequence value of a
	# transaction lost in a crash again. Counted, not asserted.
	my @again = grep { @$_ > 1 && grep { !$_->{acked} } @$_ } values %holders;
	my $again_same_key = grep { my %k; $k{ $_->{key} }++ for @$_; grep { $_ > 1 } values %k } @again;
	my (@back, $back_after_unacknowledged);
	for my $key (keys %claims) {
		my @by_return = sort { $a->{at} <=> $b->{at} } @{ $claims{$key} };
		for my $later (@by_return) {
			for (grep { $_->{at} < $later->{sent} && $later->{fence} <= $_->{fence} } @by_return) {
				if ($_->{acked}) { push @back, "$key: fence $later->{fence} sent after fence $_->{fence} returned"; }
				else { $back_after_unacknowledged++; }
			}
		}
	}
	Test::More::is(scalar(@back), 0, 'no fence of a key went back below one handed out before it');
	Test::More::diag($_) for @back[0 .. ($#back < 9 ? $#back : 9)];
	my %outcome_sent;
	for my $s (@{ $events->{S} }) {
		$outcome_sent{ $s->[0] } = $s->[3] if !defined $outcome_sent{ $s->[0] } || $s->[3] < $outcome_sent{ $s->[0] };
	}
	my @new_after = grep { $_->[3] eq 'new_claim' && defined $outcome_sent{ $_->[0] }
		  && $_->[4] > $outcome_sent{ $_->[0] } } @{ $events->{C} };
	Test::More::is(scalar(@new_after), 0, 'no new_claim for a key whose outcome was acknowledged');
	Test::More::diag("new_claim of $_->[0] (fence $_->[1]) after its outcome") for @new_after;
	# A key claimed new again lost its first claim: one whose COMMIT was
	# never acknowledged, or one acknowledged but committed without its flush.
	my ($new_claims_again, $acknowledged_claims_lost) = (0, 0);
	for my $key (keys %claims) {
		my @new = sort { $a->{at} <=> $b->{at} } grep { $_->{kind} eq 'new_claim' } @{ $claims{$key} };
		pop @new;
		$new_claims_again += @new;
		$acknowledged_claims_lost += grep { $_->{acked} } @new;
	}
	my @zombies = @{ $events->{Z} };
	my @not_refused = grep {
		$_->[2] eq '-' ? $_->[4] !~ /^P401[023]$/ : ($_->[4] ne 'P4012' || $_->[2] <= $_->[1])
	} @zombies;
	Test::More::cmp_ok(scalar(@zombies), '>=', $opt{min_old_owners} // 1,
		'owners cut off by the faults wrote again with their old fence after their retry claimed');
	Test::More::is(scalar(@not_refused), 0, 'every old owner was refused (P4012, stale fence, where its retry owns the key, with a greater fence)');
	Test::More::diag("old owner of $_->[0] (fence $_->[1], retry $_->[3] fence $_->[2]): $_->[4]") for @not_refused;
	return { fences => $handed, keys => scalar(keys %claims), uncommitted => scalar(@{ $events->{U} }),
		uncommitted_again => scalar(@again), uncommitted_again_same_key => $again_same_key,
		back_after_uncommitted => $back_after_unacknowledged // 0,
		old_owners => scalar(@zombies), new_claims_again => $new_claims_again,
		acknowledged_claims_lost => $acknowledged_claims_lost };
}

# The relay runs' verdict (071, 074) on the target's table received
# (seq bigserial, aggregate, n, delivery_key), one row an effect: every one
# of $events events arrived exactly once, each aggregate's in id order (n).
# Runs Test::More assertions; returns the rows and the distinct keys.
sub check_relayed {
	my ($node, $database, $events) = @_;
	my ($rows, $distinct) = split /\|/, $node->safe_psql($database,
		'SELECT count(*), count(DISTINCT delivery_key) FROM received');
	Test::More::is($distinct, $events, 'every event arrived');
	Test::More::is($rows, $events, 'exactly once in effect: no event arrived twice');
	Test::More::is($node->safe_psql($database, q{
SELECT count(*) FROM (SELECT n < lag(n) OVER (PARTITION BY aggregate ORDER BY seq) AS backwards
                        FROM received) r WHERE backwards}), '0', 'every aggregate arrived in id order');
	return ($rows, $distinct);
}

# A cluster of its own (fsync as asked: the crash run tests durability) with
# the database "proof", idem and the effects table. IDEM_ENGINE=portable
# runs the same proof on the portable engine: the server is the installation
# IDEM_PORTABLE_BIN names (its bindir; else the one on PATH), and "proof"'s
# owner, a role that is not superuser, installs the engine the way a managed
# service's customer does (files of IDEM_TREE, else this tree):
# IDEM_PORTABLE_VIA=file (the default) runs dist/idem-portable.sql on a
# server that preloads nothing; IDEM_PORTABLE_VIA=pgtle preloads pg_tle and
# the owner, granted pgtle_admin, runs dist/idem-pgtle.sql and CREATE
# EXTENSION idem. The clients connect as the bootstrap superuser on both
# engines, as they always did.
sub start_node {
	my ($name, %opt) = @_;
	my $portable = portable_engine();
	my @install = $portable && $ENV{IDEM_PORTABLE_BIN}
	  ? (install_path => File::Basename::dirname($ENV{IDEM_PORTABLE_BIN})) : ();
	my $node = PostgreSQL::Test::Cluster->new($name, $opt{port} ? (port => $opt{port}) : (), @install);
	$node->init($opt{allows_streaming} ? (allows_streaming => 1) : ());
	my $fsync = $opt{fsync} ? 'on' : 'off';
	my $preload = !$portable ? "shared_preload_libraries = 'idem'\n"
	  : portable_via() eq 'pgtle' ? "shared_preload_libraries = 'pg_tle'\n" : '';
	$node->append_conf('postgresql.conf', <<"CONF");
${preload}max_connections = 60
log_statement = none
fsync = $fsync
restart_after_crash = on
CONF
	$node->start;
	if ($portable) {
		install_portable($node);
	} else {
		$node->safe_psql('postgres', 'CREATE DATABASE proof');
		$node->safe_psql('proof', proof_schema_sql());
	}
	return $node;
}

# IDEM_ENGINE: unset or "c++" is the C++ engine, "portable" the other.
sub portable_engine {
	my $engine = $ENV{IDEM_ENGINE} // '';
	return 0 if $engine eq '' || $engine eq 'c++';
	return 1 if $engine eq 'portable';
	die "IDEM_ENGINE=$engine: expected portable or c++\n";
}

# IDEM_PORTABLE_VIA: "file" (unset) or "pgtle", the install start_node uses.
sub portable_via {
	my $via = $ENV{IDEM_PORTABLE_VIA} // 'file';
	die "IDEM_PORTABLE_VIA=$via: expected file or pgtle\n" unless $via =~ /^(file|pgtle)$/;
	return $via;
}

# "proof" owned by idem_owner (LOGIN, no other attribute), the engine
# installed by it (through the SQL file, or through pg_tle as pgtle_admin's
# member: a superuser creates pg_tle itself, once), then the effects table
# as before. The note names the install, so counts read by it.
sub install_portable {
	my ($node) = @_;
	my $tree = $ENV{IDEM_TREE} // Cwd::abs_path(File::Basename::dirname(__FILE__) . '/../..');
	my $pgtle = portable_via() eq 'pgtle';
	my $file = "$tree/dist/idem-" . ($pgtle ? 'pgtle' : 'portable') . '.sql';
	die "$file is missing: run make portable\n" unless -f $file;
	$node->safe_psql('postgres', 'CREATE ROLE idem_owner LOGIN');
	$node->safe_psql('postgres', 'CREATE DATABASE proof OWNER idem_owner');
	$node->safe_psql('proof', 'CREATE EXTENSION pg_tle; GRANT pgtle_admin TO idem_owner') if $pgtle;
	my ($out, $err) = ('', '');
	IPC::Run::run([ $node->installed_command('psql'), '-XAtq', '-v', 'ON_ERROR_STOP=1',
			'-d', $node->connstr('proof') . ' user=idem_owner', '-f', $file,
			$pgtle ? ('-c', 'CREATE EXTENSION idem') : () ],
		'<', '/dev/null', '>', \$out, '2>', \$err)
	  or die "installing $file as idem_owner failed:\n$err";
	(my $schema = proof_schema_sql()) =~ s/^CREATE EXTENSION idem;\n//m;
	$node->safe_psql('proof', $schema);
	my $how = $pgtle
	  ? 'through pg_tle (CREATE EXTENSION idem '
	  . $node->safe_psql('proof', "SELECT extversion FROM pg_extension WHERE extname = 'idem'")
	  . " after $file, by idem_owner, granted pgtle_admin"
	  : 'through the SQL file (' . $node->safe_psql('proof', 'SELECT version FROM idem.installed_version')
	  . ", $file run by idem_owner";
	Test::More::note("engine: portable $how, not superuser; "
		  . $node->safe_psql('proof', 'SHOW server_version') . ')');
	return;
}

sub dsn_of {
	my ($node) = @_;
	return 'dbi:Pg:dbname=proof;host=' . $node->host . ';port=' . $node->port;
}

# The one way the proof tests wait: polls $cond->() every $interval seconds
# (0.02 unless given) until it returns a true value, which it returns, or
# until the deadline passes ($seconds, else the default deadline), when it
# returns undef and says what it waited for.
sub poll_until {
	my ($what, $cond, $interval, $seconds) = @_;
	my $deadline = now() + ($seconds // $PostgreSQL::Test::Utils::timeout_default);
	while (1) {
		my $got = $cond->();
		return $got if $got;
		if (now() > $deadline) {
			print STDERR "timed out waiting for $what\n";
			return undef;
		}
		Time::HiRes::sleep($interval // 0.02);
	}
}

# A connection once the server accepts one again (it may be restarting
# after a crash or an immediate stop); dies when it never does.
sub connect_when_up {
	my ($node) = @_;
	return poll_until('the server to accept connections', sub { eval { connect_or_die($node) } }, 0.05)
	  // die "no connection within the deadline\n";
}

sub connect_or_die {
	my ($node) = @_;
	my $dbh = DBI->connect(dsn_of($node), '', '',
		{ AutoCommit => 1, RaiseError => 1, PrintError => 0, AutoInactiveDestroy => 1 })
	  or die "cannot connect: $DBI::errstr";
	return $dbh;
}

# A restartable client's acknowledgement log (070, 073), one line an
# acknowledged item: returns how many lines it has (where a replacement
# resumes) and the file, opened to append, flushed line by line.
sub ack_log {
	my ($file) = @_;
	my $acked = 0;
	if (open my $in, '<', $file) { $acked++ while <$in>; close $in }
	open my $out, '>>', $file or die "$file: $!";
	$out->autoflush(1);
	return ($acked, $out);
}

# How many lines of $file (0 while it does not exist) match $re: what a
# child process such as the relay has logged so far.
sub lines_matching {
	my ($file, $re) = @_;
	open my $in, '<', $file or return 0;
	my $n = grep { /$re/ } <$in>;
	close $in;
	return $n;
}

# Linux's prctl(PR_SET_PDEATHSIG, SIGKILL) in a child of $parent: the child
# is killed when its parent exits. A test that dies mid-run would otherwise
# leave its children writing forever, holding prove's pipe open, and the
# suite would hang instead of failing. The call's number is looked up once,
# here: compiling syscall.ph takes a child a noticeable time, in which a
# signal the test sends could find it before it runs its body.
my $sys_prctl = eval { require 'syscall.ph'; &SYS_prctl };
my $no_prctl = $@;

sub die_with_parent {
	my ($parent) = @_;
	if (!defined $sys_prctl || syscall($sys_prctl, 1, 9) != 0) {
		print STDERR "no PR_SET_PDEATHSIG (" . ($no_prctl || $!) . "); this child outlives a dead test\n";
	}
	# The parent may have exited before the call took effect.
	POSIX::_exit(1) if getppid() != $parent;
}

# Forks a child running $body->(); it ends with _exit (status 0, or 1 with
# "$name died: ..." on stderr when $body dies) so the parent's END blocks
# (which stop the cluster) never run in a child, and it dies with the parent
# (die_with_parent). Returns its pid.
sub fork_child {
	my ($name, $body) = @_;
	my $parent = $$;
	# The parent's handlers (PostgreSQL::Test::Cluster makes SIGTERM and
	# SIGINT die, to run its END blocks, which stop the nodes) are not the
	# child's: a signal must end the child, not unwind it into the test's
	# code. The two are blocked across the fork, so one sent to a child that
	# has not yet replaced the handlers waits, and then meets the default
	# action (a CI run saw a relay TERMed right after its fork stop the
	# test's node).
	my $blocked = POSIX::SigSet->new(POSIX::SIGTERM(), POSIX::SIGINT());
	my $mask = POSIX::SigSet->new;
	POSIX::sigprocmask(POSIX::SIG_BLOCK(), $blocked, $mask) or die "sigprocmask: $!";
	my $pid = fork();
	my $fork_error = $!;
	if (defined $pid && $pid == 0) {
		$SIG{TERM} = $SIG{INT} = 'DEFAULT';
		POSIX::sigprocmask(POSIX::SIG_SETMASK(), $mask);
		die_with_parent($parent);
		my $ok = eval { $body->(); 1 };
		print STDERR "$name died: $@" unless $ok;
		POSIX::_exit($ok ? 0 : 1);
	}
	POSIX::sigprocmask(POSIX::SIG_SETMASK(), $mask) or die "sigprocmask: $!";
	die "fork: $fork_error" unless defined $pid;
	return $pid;
}

# Waits (deadline) for the child $pid to exit and returns its wait status.
# When it does not exit in time it is killed (SIGKILL) and the answer is
# undef, so a stuck child fails the test instead of hanging it.
sub wait_for_exit {
	my ($pid, $what) = @_;
	my $status;
	my $gone = poll_until("$what to exit", sub {
		my $reaped = waitpid($pid, POSIX::WNOHANG());
		$status = $? if $reaped == $pid;
		return $reaped == $pid || $reaped == -1;
	}, 0.05);
	return $status if $gone;
	kill 'KILL', $pid;
	waitpid($pid, 0);
	return undef;
}

# SIGTERM, then wait_for_exit.
sub stop_child {
	my ($pid, $what) = @_;
	kill 'TERM', $pid;
	return wait_for_exit($pid, $what);
}

# Forks $count children running $body->($index) (fork_child). The parent
# runs $meanwhile->() (if given) while they work, then waits for them.
# Returns the number of children that failed.
sub run_clients {
	my ($count, $body, $meanwhile) = @_;
	my @pids = map { my $i = $_; fork_child("client $i", sub { $body->($i) }) } 0 .. $count - 1;
	my $failed = 0;
	if ($meanwhile && !eval { $meanwhile->(); 1 }) {
		print STDERR "while the clients ran: $@";
		$failed++;
	}
	for my $pid (@pids) {
		waitpid($pid, 0);
		$failed++ if $? != 0;
	}
	return $failed;
}

# Fields of each line kind; the last one may contain spaces.
my %fields_of = (C => 5, U => 3, Z => 5, R => 4, F => 3, S => 5, A => 2, X => 3, T => 1);

# Reads every client log in $dir: returns a hash of line kind => [fields...].
sub read_logs {
	my ($dir) = @_;
	my %events = map { $_ => [] } qw(C U Z R F S A X T);
	for my $file (glob("$dir/client-*.log")) {
		open my $fh, '<', $file or die "$file: $!";
		while (my $line = <$fh>) {
			chomp $line;
			my ($kind) = $line =~ /^(\S)/ or next;
			my (undef, @fields) = split / /, $line, $fields_of{$kind} + 1;
			push @{ $events{$kind} }, \@fields;
		}
		close $fh;
	}
	return \%events;
}

# Sums the counters of every client's last line.
sub total_stats {
	my ($events) = @_;
	my %total;
	for my $t (@{ $events->{T} }) {
		for my $pair (split / /, $t->[0]) {
			my ($k, $v) = split /=/, $pair;
			$total{$k} += $v;
		}
	}
	return \%total;
}

package IdemProof::Client;

use strict;
use warnings;
use DBI;
use IO::Handle;
use Time::HiRes ();

# new(node, id, log_dir, lock_ms => 500, scope => 'storm'); dsn => '...'
# replaces the node's (a PL/Proxy database, a pooler: test/cluster), and
# effect_call => 'SELECT f($1, $2, $3, $4, $5)' makes the effect and
# mark_succeeded one call (scope, key, fence, client, body) that commits on
# its own, for a proxy that cannot hold a transaction open across calls.
# bind => 1 sets idem.bind_lock_to_session on every session (and a client
# that walks away from a key then ends its session, as a dying one would);
# claim_in_transaction => p claims inside BEGIN ... COMMIT with probability
# p; old_owners => 1 makes an owner whose connection was lost write again
# with its old fence once its retry has claimed (Z lines).
sub new {
	my ($class, $node, $id, $log_dir, %opt) = @_;
	my $c = bless {
		dsn     => $opt{dsn} // IdemProof::dsn_of($node),
		effect_call => $opt{effect_call},
		id      => $id,
		lock_ms => $opt{lock_ms} // 500,
		scope   => $opt{scope} // 'storm',
		stats   => {},
		chaos   => 0,    # probability of abandoning / failing an owned key
		owner   => $opt{owner},    # replaces own() for a key this client owns
		# seconds between the effect and mark_succeeded, inside the transaction
		effect_stall => $opt{effect_stall},
		bind    => $opt{bind},
		claim_in_transaction => $opt{claim_in_transaction} // 0,
		old_owners => $opt{old_owners},
		orphan  => undef,    # [key, fence, what] of a key owned when the connection was lost
	}, $class;
	open $c->{log}, '>>', "$log_dir/client-$id.log" or die "log: $!";
	$c->{log}->autoflush(1);
	$c->connect_db;
	return $c;
}

sub count { my ($c, $what, $n) = @_; $c->{stats}{$what} += $n // 1; }

sub log_event { my ($c, @fields) = @_; print { $c->{log} } join(' ', @fields), "\n"; }

# Connects, retrying for up to a minute: the server may be restarting.
sub connect_db {
	my ($c) = @_;
	my $give_up = IdemProof::now() + 60;
	while (1) {
		my $dbh = DBI->connect($c->{dsn}, '', '',
			{ AutoCommit => 1, RaiseError => 0, PrintError => 0, AutoInactiveDestroy => 1 });
		if ($dbh && $c->{bind} && !$dbh->do('SET idem.bind_lock_to_session = on')) {
			$dbh->disconnect;
			undef $dbh;
		}
		if ($dbh) { $c->{dbh} = $dbh; return; }
		die "client $c->{id}: cannot connect for 60 s: $DBI::errstr"
		  if IdemProof::now() > $give_up;
		Time::HiRes::sleep(0.05 + rand(0.1));
	}
}

# After an error: the SQLSTATE, or 'lost' once the connection was re-made.
sub failure {
	my ($c) = @_;
	my $dbh = $c->{dbh};
	my $state = $dbh->state // '';
	if (($dbh->ping // 0) <= 0) {
		$c->count('connection_lost');
		$c->connect_db;
		return 'lost';
	}
	$dbh->rollback unless $dbh->{AutoCommit};
	$c->count("error_$state");
	return $state;
}

# One statement; returns (row or [], undef) or (undef, sqlstate).
sub run {
	my ($c, $sql, @binds) = @_;
	my $row = $c->{dbh}->selectrow_arrayref($sql, undef, @binds);
	return (undef, $c->failure) if $c->{dbh}->err;
	return ($row // [], undef);
}

my $claim_sql = <<'SQL';
SELECT kind, fence, recovery_point, response_body::text,
       extract(epoch FROM locked_until - clock_timestamp())
  FROM idem.claim_idempotency_key($1, $2, $3, $4, $5::interval)
SQL

sub request_hash_of { my ($key) = @_; return "sha-of-$key"; }

# The body is written in jsonb's output form (keys by length, then bytes),
# so the owner's own answer compares equal to what a replay returns.
sub body_of {
	my ($c, $key, $fence) = @_;
	return sprintf('{"key": "%s", "fence": %d, "client": %d}', $key, $fence, $c->{id});
}

# One API request for $key, carried to its answer: returns the response body
# the client would send back. Dies if it cannot get one within $patience s.
sub request {
	my ($c, $key, $patience) = @_;
	my $give_up = IdemProof::now() + ($patience // 60);
	while (1) {
		die "client $c->{id}: no answer for $key in time" if IdemProof::now() > $give_up;
		my ($row, $err, $sent, $at) = $c->claim($key);
		if ($err) {
			Time::HiRes::sleep(0.005) if $err eq '40001';
			next;
		}
		my ($kind, $fence, $point, $body, $lock_left) = @$row;
		$c->count("claim_$kind");
		$c->old_owner_writes($key, $kind, $fence) if $c->{orphan};
		if ($kind eq 'replay_success') {
			$c->log_event('A', $key, $body);
			return $body;
		}
		if ($kind eq 'processing_active') {
			# A twin owns it: wait a little (at most until its lock expires) and retry.
			my $wait = $lock_left // 0;
			$wait = 0.05 if $wait > 0.05;
			Time::HiRes::sleep($wait > 0.002 ? $wait : 0.002);
			next;
		}
		if ($kind eq 'final_failure') {
			die "client $c->{id}: final failure on $key (nothing here fails for good)";
		}
		# new_claim, processing_stale, retryable_failure: we own the key.
		$c->log_event('C', $key, $fence, $at, $kind, $sent);
		$c->count('owning_claims_bound') if $c->{bind};
		my $owner = $c->{owner} // \&own;
		my $answer = $owner->($c, $key, $fence, $point, $kind);
		return $answer if defined $answer;
	}
}

# One claim of $key, on its own or (claim_in_transaction) inside BEGIN ...
# COMMIT: (row, undef, sent, returned) or (undef, sqlstate or 'lost'). A
# claim that granted ownership in a transaction whose COMMIT was never
# acknowledged is logged (C and U) before the retry.
sub claim {
	my ($c, $key) = @_;
	my @call = ($claim_sql, $c->{scope}, $key, request_hash_of($key), "client-$c->{id}", "$c->{lock_ms} milliseconds");
	my $sent = IdemProof::now();
	if (!($c->{claim_in_transaction} && rand() < $c->{claim_in_transaction})) {
		my ($row, $err) = $c->run(@call);
		return ($row, $err, $sent, IdemProof::now());
	}
	my $dbh = $c->{dbh};
	$dbh->begin_work or return (undef, $c->failure);
	my ($row, $err) = $c->run(@call);
	return (undef, $err) if $err;
	my $at = IdemProof::now();
	$c->count('claims_in_transaction');
	my $committed = $dbh->commit;
	return ($row, undef, $sent, $at) if $committed && !$dbh->err;
	my ($kind, $fence) = @$row;
	if ($kind =~ /^(new_claim|processing_stale|retryable_failure)$/) {
		$c->log_event('C', $key, $fence, $at, $kind, $sent);
		$c->log_event('U', $key, $fence, $at);
		$c->count('owning_claims_bound') if $c->{bind};
		$c->{orphan} = [ $key, $fence, 'checkpoint' ] if $c->{old_owners};
	}
	$c->count('claim_commit_unknown');
	return (undef, $c->failure);
}

# An owner cut off (its connection lost while it owned $key) writes again
# with its old fence now that its retry's claim answered $kind: the key is
# someone's newer claim (granted: $fence, the retry's own; processing_active:
# a twin's), so the write must be refused. Logs a Z line; an outcome the
# retry finds stored ends the matter (the old owner's commit went through).
sub old_owner_writes {
	my ($c, $key, $kind, $fence) = @_;
	my ($orphan_key, $old, $what) = @{ $c->{orphan} };
	if ($orphan_key ne $key || $kind !~ /^(new_claim|processing_stale|retryable_failure|processing_active)$/) {
		undef $c->{orphan};
		return;
	}
	my (undef, $err) = $what eq 'checkpoint'
	  ? $c->run('SELECT idem.set_recovery_point($1, $2, $3, $4)', $c->{scope}, $key, $old, 'validated')
	  : $c->run('SELECT idem.mark_succeeded($1, $2, $3, 200, $4::jsonb)', $c->{scope}, $key, $old,
		$c->body_of($key, $old));
	return if ($err // '') eq 'lost';    # cut off again: the next claim tries again
	undef $c->{orphan};
	$c->count('old_owner_writes');
	$c->log_event('Z', $key, $old, $kind eq 'processing_active' ? '-' : $fence, $kind, $err // 'accepted');
}

# Works an owned key: phase 1 (checkpoint), then the effect and the outcome in
# one transaction. Returns the answer, or undef when the request must claim
# again (refused as stale, connection lost, or chaos made us walk away).
sub own {
	my ($c, $key, $fence, $point, $kind) = @_;
	if ($kind ne 'new_claim' && $point eq 'validated') {
		$c->count('resumed_after_validated');
	} else {
		return undef unless $c->checkpoint($key, $fence, 'validated');
	}
	if ($c->{chaos} > 0 && rand() < $c->{chaos}) {
		# A client that dies here leaves the key processing until its lock
		# expires, or, bound, until its session ends (which dying does).
		$c->count('abandoned');
		if ($c->{bind}) {
			$c->{dbh}->disconnect;
			$c->connect_db;
		}
		return undef;
	}
	if ($c->{chaos} > 0 && rand() < $c->{chaos}) {
		$c->fail_retryably($key, $fence);
		return undef;
	}
	return $c->effect_and_succeed($key, $fence);
}

# set_recovery_point in its own transaction; true when it was accepted.
sub checkpoint {
	my ($c, $key, $fence, $point) = @_;
	my $sent = IdemProof::now();
	my (undef, $err) = $c->run('SELECT idem.set_recovery_point($1, $2, $3, $4)',
		$c->{scope}, $key, $fence, $point);
	if ($err) { $c->refused($key, $fence, $err); return 0; }
	$c->log_event('R', $key, $fence, $sent, $point);
	return 1;
}

# mark_failed(retryable); true when it was accepted.
sub fail_retryably {
	my ($c, $key, $fence) = @_;
	my $sent = IdemProof::now();
	my (undef, $err) = $c->run('SELECT idem.mark_failed($1, $2, $3, true, $4, $5)',
		$c->{scope}, $key, $fence, 'upstream_timeout', 'chaos');
	if ($err) { $c->refused($key, $fence, $err); return 0; }
	$c->count('failed_retryable');
	$c->log_event('F', $key, $fence, $sent);
	return 1;
}

sub refused {
	my ($c, $key, $fence, $err, $what) = @_;
	if ($err eq 'lost') {
		# The server went away while we owned the key: the retry finds out.
		$c->count('lost_while_owning');
		$c->{orphan} = [ $key, $fence, $what // 'checkpoint' ] if $c->{old_owners};
		return;
	}
	$c->count('stale_write_refused') if $err eq 'P4012';
	$c->log_event('X', $key, $fence, $err);
}

# The effect and mark_succeeded commit together or not at all; the answer
# is acknowledged only once COMMIT returned.
sub effect_and_succeed {
	my ($c, $key, $fence, $stall) = @_;
	return $c->effect_and_succeed_in_one_call($key, $fence) if $c->{effect_call};
	my $dbh = $c->{dbh};
	my $body = $c->body_of($key, $fence);
	$dbh->begin_work or return $c->lost_or_refused($key, $fence);
	my $effect = $dbh->selectrow_array(
		'INSERT INTO effects (scope, key, fence, client) VALUES ($1, $2, $3, $4) RETURNING id',
		undef, $c->{scope}, $key, $fence, $c->{id});
	return $c->lost_or_refused($key, $fence) if $dbh->err;
	$stall //= $c->{effect_stall};
	Time::HiRes::sleep($stall) if $stall;
	my $sent = IdemProof::now();
	$dbh->selectrow_array('SELECT idem.mark_succeeded($1, $2, $3, 200, $4::jsonb, $5, $6)',
		undef, $c->{scope}, $key, $fence, $body, 'effect', $effect);
	return $c->lost_or_refused($key, $fence) if $dbh->err;
	# DBD::Pg's commit returns true even when the connection died under it
	# (seen in this very run), so only a clean err means "acknowledged".
	my $committed = $dbh->commit;
	if (!$committed || $dbh->err) {
		# The outcome is unknown: the retry's claim will tell.
		$c->count('commit_unknown');
		$c->count('lost_while_owning');
		$c->{orphan} = [ $key, $fence, 'outcome' ] if $c->{old_owners};
		$c->failure;
		return undef;
	}
	$c->count('effects_committed');
	$c->log_event('S', $key, $fence, $effect, $sent, $body);
	$c->log_event('A', $key, $body);
	return $body;
}

# The same through effect_call: acknowledged once the call returned.
sub effect_and_succeed_in_one_call {
	my ($c, $key, $fence) = @_;
	my $body = $c->body_of($key, $fence);
	my $sent = IdemProof::now();
	my ($row, $err) = $c->run($c->{effect_call}, $c->{scope}, $key, $fence, $c->{id}, $body);
	if ($err) { $c->refused($key, $fence, $err); return undef; }
	$c->count('effects_committed');
	$c->log_event('S', $key, $fence, $row->[0], $sent, $body);
	$c->log_event('A', $key, $body);
	return $body;
}

sub lost_or_refused {
	my ($c, $key, $fence) = @_;
	my $err = $c->failure;
	$c->refused($key, $fence, $err, 'outcome');
	return undef;
}

sub stats_line {
	my ($c) = @_;
	return join ' ', map { "$_=$c->{stats}{$_}" } sort keys %{ $c->{stats} };
}

# The last line of a client's log: its counters.
sub finish {
	my ($c) = @_;
	$c->log_event('T', $c->stats_line);
	close $c->{log};
	$c->{dbh}->disconnect if $c->{dbh};
}

1;
