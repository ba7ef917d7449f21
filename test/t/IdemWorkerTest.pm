# Shared by the worker's TAP tests: expired outcomes to purge, changing a
# setting the way an operator would, and waits for the events the tests
# assert. The worker and the launcher act on their own schedule, so a test
# never sleeps for a fixed time: it waits, with a deadline, for the event
# itself (a log line, a completed round, a pass of a process's main loop).
#
# Every wait here works with the PostgreSQL::Test::Cluster of PostgreSQL 15,
# 17 and 18 (it uses only safe_psql, poll_query_until and logfile) and gives
# up after PostgreSQL::Test::Utils's timeout_default (180 s unless
# PG_TEST_TIMEOUT_DEFAULT says otherwise).
package IdemWorkerTest;

use strict;
use warnings;
use Exporter 'import';
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use IdemProof ();

our @EXPORT_OK = qw(expired_outcomes_sql set_and_reload reload_and_wait wait_for_log_match
  logged_round_ms round_count wait_for_round_ends wait_for_loop_passes sql_true_within);

# True once $sql returns 't' on the node, false (with a note of $what) when it
# has not within $seconds (60 by default: a deadline of the test's own, so a
# broken mechanism fails in a minute, not at the suite's limit).
sub sql_true_within {
	my ($node, $what, $sql, $seconds) = @_;
	return IdemProof::poll_until($what, sub { $node->safe_psql('postgres', $sql) eq 't' },
		0.1, $seconds // 60) ? 1 : 0;
}

# An INSERT of n succeeded keys '1'..'n' in scope, finished two days ago and
# expired one day ago: exactly what the purge must delete.
sub expired_outcomes_sql {
	my ($scope, $n) = @_;
	return qq{
INSERT INTO idem.idempotency_request (scope, key, request_hash, status, recovery_point, fence,
    claimed_at, created_at, updated_at, finished_at, expires_at, response_code)
SELECT '$scope', g::text, 'h', 'succeeded', 'finished', nextval('idem.fence_seq'),
    now() - interval '2 days', now() - interval '2 days', now() - interval '2 days',
    now() - interval '2 days', now() - interval '1 day', 200
FROM generate_series(1, $n) g;
};
}

# A reload (SIGHUP), returning once the postmaster has re-read the
# configuration: a session started after that sees a newer
# pg_conf_load_time(). The postmaster signals its children (the launcher and
# the workers) in the same step, before it forks that session, so when this
# returns the signal is on its way to every worker; the worker applies it at
# its next wake (see wait_for_round_ends for waiting until it has).
# pg_ctl reload alone returns as soon as the signal is sent to the postmaster.
sub reload_and_wait {
	my ($node) = @_;
	my $before = $node->safe_psql('postgres', 'SELECT pg_conf_load_time()');
	$node->reload;
	$node->poll_query_until('postgres', "SELECT pg_conf_load_time() > '$before'")
	  or die 'the server did not reload its configuration';
}

# ALTER SYSTEM and a reload, as an operator would change a setting.
sub set_and_reload {
	my ($node, $setting, $value) = @_;
	$node->safe_psql('postgres', "ALTER SYSTEM SET $setting = '$value'");
	reload_and_wait($node);
}

# Whether a line matching $regexp appears in the server log after byte
# $offset (taken before the action that should log it), waiting for it up to
# the deadline. Unlike the cluster's wait_for_log it returns false instead of
# dying, so the test that asserts the line fails under its own name.
sub wait_for_log_match {
	my ($node, $regexp, $offset) = @_;
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	while (1) {
		return 1 if slurp_file($node->logfile, $offset // 0) =~ $regexp;
		if (time > $deadline) {
			diag("no line matching $regexp in the server log after byte " . ($offset // 0));
			return 0;
		}
		usleep(100_000);
	}
}

# The duration in ms of the round of database $db's worker that swept
# $swept keys and purged $purged, from its log line after byte $offset
# (waiting for the line), or undef when no round logged that.
sub logged_round_ms {
	my ($node, $db, $swept, $purged, $offset) = @_;
	my $line = qr/idem worker for database "$db": swept $swept stale keys, purged $purged expired keys in ([0-9.]+) ms/;
	return undef unless wait_for_log_match($node, $line, $offset);
	my ($ms) = slurp_file($node->logfile, $offset) =~ $line;
	return $ms;
}

# How many rounds the worker of database $db has completed.
sub round_count {
	my ($node, $db) = @_;
	return $node->safe_psql('postgres',
		"SELECT total_rounds FROM idem.worker_status WHERE database = '$db'");
}

# Waits until the worker of $db has completed $n more rounds than it had when
# called; $n = 2 makes sure a round *began* after the call: the round under
# way at the call (if any) ends first, so the second one started later. By
# then every line of the earlier rounds is in the log (a round logs before
# the next one begins) and a reload signalled before the call has been
# applied (the worker reloads before it starts a round).
sub wait_for_round_ends {
	my ($node, $db, $n) = @_;
	my $target = round_count($node, $db) + $n;
	return $node->poll_query_until('postgres',
		"SELECT total_rounds >= $target FROM idem.worker_status WHERE database = '$db'");
}

# Waits until each process picked by the pg_stat_activity conditions in
# @where (one process each) has gone through its main loop $n more times.
# The launcher, and a worker that does not work (it waits for its database
# or the extension, or idles on a standby), report their activity exactly
# once per pass, and each report moves pg_stat_activity.state_change. (A
# working worker reports once per batch too, so this would overcount its
# rounds: use wait_for_round_ends for those.) For asserting that something
# does *not* happen while they keep looking, instead of sleeping.
sub wait_for_loop_passes {
	my ($node, $n, @where) = @_;
	my $query = join(' UNION ALL ',
		map { "(SELECT coalesce(max(state_change)::text, '-') FROM pg_stat_activity WHERE $_)" } @where);
	my @last = split /\n/, $node->safe_psql('postgres', $query), -1;
	my @passes = (0) x @where;
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	while (grep { $_ < $n } @passes) {
		if (time > $deadline) {
			diag("waited in vain for $n loop passes of: " . join('; ', @where));
			return 0;
		}
		usleep(100_000);
		my @now = split /\n/, $node->safe_psql('postgres', $query), -1;
		for my $i (0 .. $#where) {
			$passes[$i]++ if $now[$i] ne '-' && $now[$i] ne $last[$i];
			$last[$i] = $now[$i];
		}
	}
	return 1;
}

1;
