# The relay is woken by the commit's NOTIFY on idem_outbox, not by its poll:
# with a poll interval of an hour, an event put while the relay sleeps is
# delivered within the test's deadline. Its source then restarts (-m
# immediate) while the relay sleeps on the LISTEN socket: the relay notices
# the lost connection, reconnects, LISTENs again, and the next event put is
# delivered as promptly. One relay process throughout, never restarted.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemProof qw(now start_node fork_child lines_matching poll_until stop_child);
use PostgreSQL::Test::Utils;
use Test::More;

my $node = start_node('relay_listen');
$node->safe_psql('proof', q{
CREATE TABLE received (seq bigserial PRIMARY KEY, n int, delivery_key text);
CREATE FUNCTION deliver(event_type text, payload jsonb, headers jsonb, delivery_key text)
RETURNS void LANGUAGE sql AS $$
  INSERT INTO received (n, delivery_key) VALUES ((payload->>'n')::int, delivery_key) $$;
});

my $log = PostgreSQL::Test::Utils::tempdir . '/relay.log';
my $dsn = 'dbi:Pg:dbname=proof;host=' . $node->host . ';port=' . $node->port;
my $relay = fork_child('relay', sub {
	open STDERR, '>', $log or die "$log: $!";
	delete $ENV{PGAPPNAME};    # set by the test framework; the relay names its sessions
	exec("$FindBin::RealBin/../../clients/relay/idem-relay", '--source', $dsn, '--target', $dsn,
		'--consumer', 'listen-test', '--deliver', 'public.deliver', '--poll', '3600') or die "exec: $!";
});

# The relay's stderr lines so far that match $re.
sub relay_lines { return lines_matching($log, $_[0]) }

# Waits until the relay has connected $n times and sleeps on its LISTEN
# socket (its backend waits for a client message outside a transaction).
sub relay_sleeping {
	my ($n) = @_;
	poll_until("the relay's connection $n", sub { relay_lines(qr/listening on idem_outbox/) >= $n }, 0.05);
	return $node->poll_query_until('proof', q{SELECT count(*) = 1 FROM pg_stat_activity
		WHERE application_name = 'idem-relay' AND state = 'idle' AND query LIKE '%outbox_lease(%'});
}

sub put_and_wait {
	my ($n) = @_;
	my $t0 = now();
	$node->safe_psql('proof', qq{SELECT idem.outbox_put('listen', 'k$n', 'evt', '{"n": $n}')});
	my $ok = $node->poll_query_until('proof', "SELECT count(*) = 1 FROM received WHERE n = $n");
	return ($ok, now() - $t0);
}

ok(relay_sleeping(1), 'the relay found the outbox empty and sleeps (poll: 3600 s)');
my ($ok, $first) = put_and_wait(1);
ok($ok, 'an event put while it sleeps is delivered: the NOTIFY woke it');

$node->stop('immediate');
$node->start;
ok(relay_sleeping(2), 'after the source restarted, the relay reconnected and sleeps again');
my $second;
($ok, $second) = put_and_wait(2);
ok($ok, 'an event put after the restart is delivered: it LISTENs again');
ok(kill(0, $relay), 'the same relay process throughout');

is(stop_child($relay, 'the relay'), 0, 'the relay stops cleanly on SIGTERM');
is($node->safe_psql('proof', 'SELECT count(*) FROM received'), '2', 'each event delivered once');
diag(sprintf('relay LISTEN run: put to delivered %.2f s, after the source restart %.2f s (poll interval 3600 s)',
	$first, $second));

$node->stop;
done_testing();
