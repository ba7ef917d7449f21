# The relay under fire: 4 relays drain an outbox of 400 events over 20
# aggregates into a target database, while relays are killed with SIGKILL
# (replaced at once) and the server is stopped with -m immediate and started
# again (the relays reconnect). The target receives each event exactly once
# in effect (the relay's consume_once on the delivery key drops
# redeliveries), and each aggregate's events arrive in id order.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemProof qw(start_node check_relayed poll_until fork_child wait_for_exit stop_child);
use PostgreSQL::Test::Utils;
use Test::More;

my $events = 400;
my $aggregates = 20;
my $relays = 4;
my $relay_kills = 6;

my $node = start_node('relay', fsync => 1);
$node->safe_psql('postgres', 'CREATE DATABASE target');
$node->safe_psql('target', q{
CREATE EXTENSION idem;
CREATE TABLE received (seq bigserial PRIMARY KEY, aggregate text, n int, delivery_key text);
CREATE FUNCTION deliver(event_type text, payload jsonb, headers jsonb, delivery_key text)
RETURNS void LANGUAGE sql AS $$
  INSERT INTO received (aggregate, n, delivery_key)
  VALUES (payload->>'aggregate', (payload->>'n')::int, delivery_key) $$;
});
$node->safe_psql('proof', qq{
SELECT count(idem.outbox_put('relay', 'k' || g, 'evt',
                             jsonb_build_object('aggregate', (g % $aggregates)::text, 'n', g),
                             'agg', (g % $aggregates)::text))
  FROM generate_series(1, $events) g});

my $relay = "$FindBin::RealBin/../../clients/relay/idem-relay";
my $dsn = 'dbi:Pg:host=' . $node->host . ';port=' . $node->port;
my @cmd = ($relay, '--source', "$dsn;dbname=proof", '--target', "$dsn;dbname=target",
	'--consumer', 'relay-test', '--deliver', 'public.deliver', '--lease', '1 second',
	'--batch', '5', '--poll', '0.2', '--quiet');

# A relay dies with the test (fork_child), so a test that dies cannot leave
# relays holding prove's pipe open.
sub spawn {
	my @args = @_;
	return fork_child('relay', sub { exec(@cmd, @args) or die "exec $relay: $!\n" });
}

sub received { return $node->safe_psql('target', 'SELECT count(*) FROM received') }

my @pids = map { spawn() } 1 .. $relays;
my ($kills, $restarted) = (0, 0);
# Kill a relay each time another slice of the events has arrived; restart
# the server once halfway.
for my $slice (1 .. $relay_kills) {
	my $due = $slice * $events / ($relay_kills + 2);
	poll_until("$due events received", sub { (eval { received() } // 0) >= $due }, 0.05) or last;
	my $victim = int(rand(@pids));
	kill 'KILL', $pids[$victim];
	waitpid($pids[$victim], 0);
	$pids[$victim] = spawn();
	$kills++;
	if ($kills == $relay_kills / 2 && !$restarted) {
		$node->stop('immediate');
		$node->start;
		$restarted = 1;
	}
}
is($kills, $relay_kills, "$relay_kills relays killed with SIGKILL");
ok($restarted, 'the server was stopped -m immediate and started again');

# A last relay drains whatever is left and exits once the outbox is empty.
is(scalar(grep { defined stop_child($_, "relay $_") } @pids), $relays,
	'the relays stop on SIGTERM');
is(wait_for_exit(spawn('--until-empty'), 'the draining relay'), 0, 'a relay drains the rest');

my ($rows, $distinct) = check_relayed($node, 'target', $events);
is($node->safe_psql('proof', q{SELECT string_agg(status || ' ' || n, ', ') FROM
	(SELECT status, count(*) AS n FROM idem.outbox_event GROUP BY status) s}), "published $events",
	'every event is published');
diag("relay kill run: $events events, $rows effects, " . ($rows - $distinct) . " duplicates, "
	. "$kills relays killed, server restarted once");

$node->stop;
done_testing();
