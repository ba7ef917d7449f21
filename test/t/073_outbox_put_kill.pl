# An outbox event exists if and only if its transaction committed, under
# kill -9. 8 writers each record their orders one transaction an order:
# INSERT the order, idem.outbox_put its event, COMMIT, then acknowledge.
# Meanwhile, between a writer's outbox_put and its COMMIT, three faults
# land, each more than once: kill -9 of the writer's backend (the postmaster
# resets every backend), kill -9 of the writer (the client), and the server
# stopped -m immediate. Right after each fault the held order and its event
# are both absent; the writer (or its replacement) then retries the order,
# and an order whose COMMIT's answer was lost is found by its unique key.
# At the end every order has exactly one event and every event its order.
#
# The faults are made to land, not hoped for: the writer to hit is told so
# by a hold file, and stops inside its next transaction right after
# outbox_put (it writes the order's key to a file first); the test waits
# until that key is written and pg_stat_activity shows the writer's backend
# idle in that transaction, then strikes. No writer starts its last order
# before the faults are done, so every fault finds the stream running.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemProof qw(start_node connect_when_up poll_until fork_child ack_log);
use IdemWorkerTest qw(wait_for_log_match);
use PostgreSQL::Test::Utils;
use Test::More;

my $writers = 8;
my $orders_each = 250;
my @plan = qw(backend client server backend client server backend client);

my $node = start_node('outbox_kill', fsync => 1);
$node->safe_psql('proof', 'CREATE TABLE orders (key text PRIMARY KEY, writer int NOT NULL)');
my $dir = PostgreSQL::Test::Utils::tempdir;

# One writer, from its first unacknowledged order to its last. An ack is a
# line in its log, written after COMMIT returned (or after the order was
# found committed by an earlier attempt whose answer was lost).
sub write_orders {
	my ($i) = @_;
	my ($acked, $out) = ack_log("$dir/writer-$i.log");
	my $dbh;
	for (my $n = $acked; $n < $orders_each;) {
		my $key = "w$i-o$n";
		poll_until("the faults, before writer $i's last order",
			sub { -e "$dir/faults-done" || -e "$dir/hold-$i" }, 0.01)
		  if $n == $orders_each - 1;
		$dbh //= connect_when_up($node);
		my $ok = eval {
			$dbh->do("SET application_name = 'writer-$i'");
			$dbh->begin_work;
			$dbh->do('INSERT INTO orders (key, writer) VALUES (?, ?)', undef, $key, $i);
			$dbh->selectrow_array(q{SELECT idem.outbox_put('orders', ?, 'paid', jsonb_build_object('n', ?::int),
			                                               'order', ?)}, undef, $key, $n, $key);
			if (-e "$dir/hold-$i") {
				# Told to be struck here: say which order, then stay in the
				# open transaction until the test is done with it.
				open my $held, '>', "$dir/held-$i.tmp" or die;
				print $held $key;
				close $held;
				rename "$dir/held-$i.tmp", "$dir/held-$i" or die;
				poll_until("the test to strike writer $i", sub { !-e "$dir/hold-$i" }, 0.01);
			}
			$dbh->commit;
			1;
		};
		if ($ok) {
			print $out "$key\n";
			$n++;
			next;
		}
		my $state = $dbh ? ($dbh->state // '') : '';
		if ($state eq '23505') {
			# The order is there: an earlier COMMIT went through unanswered.
			print $out "$key in-doubt\n";
			eval { $dbh->rollback };
			$n++;
			next;
		}
		$dbh = undef;    # the server restarts: reconnect (connect_when_up), then retry the order
	}
}

sub spawn {
	my ($i) = @_;
	return fork_child("writer $i", sub { write_orders($i) });
}

my %pid_of = map { $_ => spawn($_) } 0 .. $writers - 1;

# Holds writer $i after its next outbox_put; returns its order's key and its
# backend's pid once the backend is idle in that transaction (or nothing
# after the default deadline).
sub hold_after_put {
	my ($i) = @_;
	open my $hold, '>', "$dir/hold-$i" or die "$dir/hold-$i: $!";
	close $hold;
	my $backend = poll_until("writer $i idle in its transaction after outbox_put", sub {
		-e "$dir/held-$i" && eval { $node->safe_psql('proof', qq{SELECT pid FROM pg_stat_activity
			WHERE application_name = 'writer-$i' AND state = 'idle in transaction'
			  AND query LIKE '%outbox_put%'}) };
	}) or return;
	open my $in, '<', "$dir/held-$i" or die;
	my $key = <$in>;
	close $in;
	return ($key, $backend);
}

# The held order and its event, once the server answers again.
sub held_rows {
	my ($key) = @_;
	$node->poll_query_until('proof', 'SELECT true') or return 'no server';
	return $node->safe_psql('proof', qq{SELECT (SELECT count(*) FROM orders WHERE key = '$key') || ' orders, '
		|| (SELECT count(*) FROM idem.outbox_event WHERE key = '$key') || ' events'});
}

my %struck = (backend => 0, client => 0, server => 0);
my (@held_keys, @not_rolled_back);
my $victim = 0;
for my $fault (@plan) {
	$victim = ($victim + 3) % $writers;    # a different writer each time
	my ($key, $backend) = hold_after_put($victim);
	if (!$key) {
		unlink "$dir/hold-$victim";
		diag("writer $victim was not seen between outbox_put and COMMIT");
		next;
	}
	if ($fault eq 'backend') {
		# The postmaster answers the kill by resetting every backend; a query
		# sent before it noticed would be cut off by that reset. So the
		# rows are read only once the log says the reset is over.
		my $log_offset = -s $node->logfile;
		my $reset_over = qr/all server processes terminated; reinitializing(?s:.*)ready to accept connections/;
		kill 'KILL', $backend or die "kill $backend: $!";
		wait_for_log_match($node, $reset_over, $log_offset)
		  or diag("the server did not finish its reset after the backend $backend was killed");
	} elsif ($fault eq 'client') {
		kill 'KILL', $pid_of{$victim};
		waitpid($pid_of{$victim}, 0);
		# Its backend sees the connection close and aborts the transaction.
		$node->poll_query_until('proof', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $backend")
		  or diag("the backend $backend of writer $victim is still there");
	} else {
		$node->stop('immediate');
		$node->start;
	}
	my $rows = held_rows($key);
	push @not_rolled_back, "$fault: $key has $rows" unless $rows eq '0 orders, 0 events';
	push @held_keys, $key;
	unlink "$dir/held-$victim";
	unlink "$dir/hold-$victim" or die "hold-$victim: $!";
	$pid_of{$victim} = spawn($victim) if $fault eq 'client';
	$struck{$fault}++;
}
open my $done, '>', "$dir/faults-done" or die "$dir/faults-done: $!";
close $done;
my %planned;
$planned{$_}++ for @plan;
is_deeply(\%struck, \%planned, 'every fault struck between outbox_put and COMMIT: '
	. join(', ', map { "$_ x$struck{$_}" } sort keys %struck));
is(scalar(@not_rolled_back), 0, 'right after each fault, the held order and its event are both absent');
diag("not rolled back: $_") for @not_rolled_back;

my $failed = 0;
for my $i (keys %pid_of) {
	waitpid($pid_of{$i}, 0);
	$failed++ if $? != 0;
}
is($failed, 0, 'every writer acknowledged all its orders');

my ($acks, $in_doubt) = (0, 0);
for my $file (glob("$dir/writer-*.log")) {
	open my $in, '<', $file or die;
	while (<$in>) { $acks++; $in_doubt++ if /in-doubt/ }
	close $in;
}
my $total = $writers * $orders_each;
is($acks, $total, 'every order was acknowledged once');
my ($orders, $events, $orphans, $doubled) = split /\|/, $node->safe_psql('proof', q{
SELECT (SELECT count(*) FROM orders),
       (SELECT count(*) FROM idem.outbox_event WHERE scope = 'orders'),
       (SELECT count(*) FROM orders o FULL JOIN idem.outbox_event e ON e.scope = 'orders' AND e.key = o.key
         WHERE o.key IS NULL OR e.id IS NULL),
       (SELECT count(*) FROM (SELECT key FROM idem.outbox_event GROUP BY key HAVING count(*) > 1) d)});
is($orders, $total, 'every order is there');
is($events, $total, 'one event per order');
is($orphans, 0, 'an event exists if and only if its order committed');
is($doubled, 0, 'no order has two events');
my $held_list = join(',', map { "'$_'" } @held_keys) || "''";
is($node->safe_psql('proof', "SELECT count(*) FROM idem.outbox_event WHERE key IN ($held_list)"),
	scalar(@held_keys), 'each struck order, retried, has its one event');
diag("outbox kill run: $total transactions, $events events, $orders orders, $orphans events without an order "
	. "or orders without one, $doubled duplicates; struck between put and COMMIT: backend kill -9 x$struck{backend}, "
	. "client kill -9 x$struck{client}, server -m immediate x$struck{server}; $in_doubt COMMITs went through unanswered");

$node->stop;
done_testing();
