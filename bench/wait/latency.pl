#!/usr/bin/perl
# How soon a twin that waits for a key's outcome answers once the owner's
# COMMIT has returned, against the floor PostgreSQL itself offers:
#   idem     idem.claim_or_wait: the waiter holds no lock and no transaction
#            id; the owner's commit broadcasts the key's condition variable
#            (src/waits/wait_slots.cpp) and the waiter claims again.
#   rowlock  a twin blocked on the owner's row lock (SELECT ... FOR SHARE):
#            the lock manager wakes it at the owner's commit and READ
#            COMMITTED re-reads the row's committed version. Its owner has to
#            keep a transaction open, holding the row lock, for the whole of
#            its work; idem's owner holds nothing between its calls.
# Each trial is a fresh key: the owner claims it, the twin starts waiting,
# the owner records the outcome once the twin waits (pg_stat_activity), and
# the time from the owner's COMMIT returning to the twin's answer is taken.
# The peers alternate round by round; each round's p50 and p99 per peer, and
# the medians over the rounds with their ratio (idem / rowlock: below 1,
# idem answers sooner), are printed as markdown. Every answer is checked:
# a wrong one, or one that does not come within a minute, ends the run
# with status 1.
#
# Usage: perl bench/wait/latency.pl [TRIALS_PER_ROUND [ROUNDS]]  (200, 5)
# on the cluster in PGHOST / PGPORT / PGDATABASE, where idem is installed
# and preloaded (bench/run's cluster; its "wait" cell runs this).
use strict;
use warnings;
use DBI;
use DBD::Pg qw(:async);
use IO::Select;
use Time::HiRes qw(time);

my $trials = shift // 200;
my $rounds = shift // 5;
my $answer_deadline = 60;    # seconds; far above any wake-up, far below a hang

sub connect_db {
	return DBI->connect('dbi:Pg:', '', '',
		{ AutoCommit => 1, RaiseError => 1, PrintError => 0, AutoInactiveDestroy => 1 });
}
my ($owner, $twin, $monitor) = map { connect_db() } 1 .. 3;
$owner->do('CREATE SCHEMA IF NOT EXISTS bench_wait');
$owner->do('DROP TABLE IF EXISTS bench_wait.request');
$owner->do('CREATE TABLE bench_wait.request (key text PRIMARY KEY, response_code int)');
my ($fallbacks_before) = $monitor->selectrow_array(
	'SELECT polling_fallbacks FROM idem.stats WHERE datname = current_database()');

# Returns once the twin's backend waits on the given wait event type.
sub until_twin_waits {
	my ($type) = @_;
	my $deadline = time() + $answer_deadline;
	until ($monitor->selectrow_array(
			'SELECT wait_event_type = ? FROM pg_stat_activity WHERE pid = ?',
			undef, $type, $twin->{pg_pid}))
	{
		die "the twin does not wait ($type)\n" if time() > $deadline;
	}
}

# Blocks until the twin's answer has arrived (its socket readable and the
# result complete); returns the moment it had.
my $twin_socket = IO::Select->new($twin->{pg_socket});
sub twin_answer_time {
	my $deadline = time() + $answer_deadline;
	until ($twin->pg_ready) {
		die "no answer within $answer_deadline s\n" if time() > $deadline;
		$twin_socket->can_read($deadline - time());
	}
	return time();
}

sub async_on_twin {
	my ($sql, @bind) = @_;
	my $sth = $twin->prepare($sql, { pg_async => PG_ASYNC });
	$sth->execute(@bind);
	return $sth;
}

# One trial of each peer; each returns milliseconds from the owner's COMMIT
# returning to the twin's answer.
my %trial = (
	idem => sub {
		my ($key) = @_;
		my ($fence) = $owner->selectrow_array(
			q{SELECT fence FROM idem.claim_idempotency_key('wait_bench', ?, 'h', NULL, '1 hour')},
			undef, $key);
		my $sth = async_on_twin(
			q{SELECT kind, response_code FROM idem.claim_or_wait('wait_bench', ?, 'h', '1 hour')}, $key);
		until_twin_waits('Extension');
		$owner->do(q{SELECT idem.mark_succeeded('wait_bench', ?, ?, 201)}, undef, $key, $fence);
		my $committed = time();
		my $answered = twin_answer_time();
		$sth->pg_result;
		my ($kind, $code) = $sth->fetchrow_array;
		$sth->finish;
		die "idem: $key answered $kind $code\n" unless $kind eq 'replay_success' && $code == 201;
		return 1000 * ($answered - $committed);
	},
	rowlock => sub {
		my ($key) = @_;
		$owner->do('INSERT INTO bench_wait.request (key) VALUES (?)', undef, $key);
		$owner->begin_work;
		$owner->do('SELECT 1 FROM bench_wait.request WHERE key = ? FOR UPDATE', undef, $key);
		my $sth = async_on_twin('SELECT response_code FROM bench_wait.request WHERE key = ? FOR SHARE', $key);
		until_twin_waits('Lock');
		$owner->do('UPDATE bench_wait.request SET response_code = 201 WHERE key = ?', undef, $key);
		$owner->commit;
		my $committed = time();
		my $answered = twin_answer_time();
		$sth->pg_result;
		my ($code) = $sth->fetchrow_array;
		$sth->finish;
		die "rowlock: $key answered " . ($code // 'NULL') . "\n" unless defined $code && $code == 201;
		return 1000 * ($answered - $committed);
	},
);

sub percentile {
	my ($sorted, $p) = @_;
	return $sorted->[ int($p * $#$sorted + 0.5) ];
}
sub median { my @s = sort { $a <=> $b } @_; return $s[ int($#s / 2) ]; }

my (%p50, %p99, %worst);
my @peers = qw(idem rowlock);
for my $round (1 .. $rounds) {
	for my $peer ($round % 2 ? @peers : reverse @peers) {
		my @ms = sort { $a <=> $b } map { $trial{$peer}->("$peer-$round-$_") } 1 .. $trials;
		push @{ $p50{$peer} }, percentile(\@ms, 0.50);
		push @{ $p99{$peer} }, percentile(\@ms, 0.99);
		$worst{$peer} = $ms[-1] if !defined $worst{$peer} || $ms[-1] > $worst{$peer};
	}
	printf STDERR "wait latency: round %d of %d done\n", $round, $rounds;
}
my ($fallbacks_after) = $monitor->selectrow_array(
	'SELECT polling_fallbacks FROM idem.stats WHERE datname = current_database()');
die "idem's waiters polled: no wake-up by commit here (is idem preloaded?)\n"
  if $fallbacks_after != $fallbacks_before;

print "| peer | p50 ms | p99 ms | worst ms |\n|---|---:|---:|---:|\n";
printf "| %s | %.3f | %.3f | %.3f |\n", $_, median(@{ $p50{$_} }), median(@{ $p99{$_} }), $worst{$_}
  for @peers;
printf "| idem / rowlock | %.2f | %.2f | |\n",
  median(@{ $p50{idem} }) / median(@{ $p50{rowlock} }), median(@{ $p99{idem} }) / median(@{ $p99{rowlock} });
printf "\n%d trials per peer and round, %d rounds alternating (medians of the rounds' percentiles); "
  . "every answer checked, no idem wait polled.\n", $trials, $rounds;
$owner->do('DROP SCHEMA bench_wait CASCADE');
$_->disconnect for $owner, $twin, $monitor;
