# Consume-once under fire: 32 consumers deliver every message of a stream 3
# times in random order (a broker's at-least-once redelivery), each in its
# own transaction: consume_once, then the effect, then COMMIT, then the ack.
# Meanwhile consumers are killed with SIGKILL while their transaction is
# open (their replacement redelivers the unacknowledged message), and the
# server is stopped with -m immediate (every backend killed, crash recovery
# at the start); consumers reconnect and redeliver. At the end every message
# has exactly one effect.
#
# The faults are made to land, not hoped for: a consumer to be killed is
# told so by a hold file, and stops inside its next transaction right after
# consume_once (uncommitted); the test waits until pg_stat_activity shows
# that backend idle in its transaction, then kills the consumer. And no
# consumer starts its last delivery before the faults are done, so the
# stream is still running for every one of them.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemProof qw(start_node connect_when_up poll_until fork_child ack_log);
use List::Util qw(shuffle);
use PostgreSQL::Test::Utils;
use Test::More;

my $consumers = $ENV{INBOX_CONSUMERS} // 32;
my $messages  = $ENV{INBOX_MESSAGES} // 3000;
my $copies    = 3;
my $client_kills = 8;
my $server_kills = 2;

my $node = start_node('inbox', fsync => 1);
my $dir  = PostgreSQL::Test::Utils::tempdir;
srand(7000);

# Every message 3 times, shuffled, dealt to the consumers.
my @deliveries = shuffle(map { my $m = $_; map { $m } 1 .. $copies } 1 .. $messages);
my @share;
push @{ $share[$_ % $consumers] }, $deliveries[$_] for 0 .. $#deliveries;

# One consumer: from its first unacknowledged delivery to the end. An ack
# is a line in its log, written after COMMIT returned. A lost connection
# (the server was killed) means: reconnect, deliver the same message again.
sub consume {
	my ($i) = @_;
	my ($acked, $out) = ack_log("$dir/consumer-$i.log");
	my $dbh;
	my $at = $acked;
	while ($at < @{ $share[$i] }) {
		my $m = $share[$i][$at];
		# The gate before the last delivery: until the faults are done (or
		# this consumer is the next one to be killed).
		poll_until("the faults, before consumer $i's last delivery",
			sub { -e "$dir/faults-done" || -e "$dir/hold-$i" }, 0.01)
		  if $at == $#{ $share[$i] };
		$dbh //= connect_when_up($node);
		my $ok = eval {
			$dbh->do("SET application_name = 'consumer-$i'");
			$dbh->begin_work;
			my ($new) = $dbh->selectrow_array(
				q{SELECT idem.consume_once('stream', ?, idem.request_hash(jsonb_build_object('m', ?::int)))},
				undef, "m$m", $m);
			# Told to die here: stay in the open transaction until killed.
			poll_until("the test to kill consumer $i", sub { !-e "$dir/hold-$i" }, 0.01);
			$dbh->do('INSERT INTO effects (scope, key, fence, client) VALUES (?, ?, 0, ?)',
				undef, 'stream', "m$m", $i) if $new;
			$dbh->commit;
			1;
		};
		if ($ok) {
			print $out "$m\n";
			$at++;
			next;
		}
		$dbh = undef;    # the server restarts: reconnect (connect_when_up), then redeliver
	}
}

sub spawn {
	my ($i) = @_;
	return fork_child("consumer $i", sub { consume($i) });
}

my %pid_of = map { $_ => spawn($_) } 0 .. $consumers - 1;

# Consumer $i, held inside its transaction after consume_once: waits (with
# the default deadline) until its backend is idle in that transaction.
sub hold_in_transaction {
	my ($i) = @_;
	open my $hold, '>', "$dir/hold-$i" or die "$dir/hold-$i: $!";
	close $hold;
	return $node->poll_query_until('proof', qq{SELECT count(*) = 1 FROM pg_stat_activity
		WHERE application_name = 'consumer-$i' AND state = 'idle in transaction'});
}

# The faults, interleaved so that both happen while the stream is running
# (the gate keeps every consumer in it until faults-done exists).
my @plan = (('server', ('client') x ($client_kills / 2)) x 2);
my ($killed_clients, $killed_servers) = (0, 0);
my $victim = 0;
for my $fault (@plan) {
	if ($fault eq 'server') {
		# The whole server, killed while the consumers are in their transactions.
		$node->stop('immediate');
		$node->start;
		$killed_servers++;
		next;
	}
	$victim = ($victim + 5) % $consumers;    # a different consumer each time
	if (!hold_in_transaction($victim)) {
		unlink "$dir/hold-$victim";
		diag("consumer $victim was not seen in its transaction");
		next;
	}
	kill 'KILL', $pid_of{$victim};
	waitpid($pid_of{$victim}, 0);
	unlink "$dir/hold-$victim" or die "hold-$victim: $!";
	$pid_of{$victim} = spawn($victim);
	$killed_clients++;
}
open my $done, '>', "$dir/faults-done" or die "$dir/faults-done: $!";
close $done;
is($killed_clients, $client_kills, "$client_kills consumers killed with SIGKILL inside a transaction");
is($killed_servers, $server_kills, "the server was stopped -m immediate and started $server_kills times");

my $failed = 0;
for my $i (keys %pid_of) {
	waitpid($pid_of{$i}, 0);
	$failed++ if $? != 0;
}
is($failed, 0, 'every consumer acknowledged its whole share');

my $acks = 0;
for my $file (glob("$dir/consumer-*.log")) { open my $in, '<', $file or die; $acks++ while <$in>; close $in }
is($acks, $messages * $copies, 'every delivery was acknowledged');
my ($effects, $distinct, $consumed) = split /\|/, $node->safe_psql('proof',
	q{SELECT count(*), count(DISTINCT key), (SELECT count(*) FROM idem.consumed_message WHERE consumer = 'stream')
	    FROM effects WHERE scope = 'stream'});
is($distinct, $messages, 'every message had its effect');
is($effects, $messages, 'exactly once: no message had two effects');
is($consumed, $messages, 'one consumed row per message');
diag("inbox kill run: $messages messages, " . ($messages * $copies) . " deliveries, $effects effects, "
	. ($effects - $distinct) . " duplicates; $killed_clients consumers killed, server killed $killed_servers times");

$node->stop;
done_testing();
