# Two real relays and a lease that runs out mid-delivery. Relay A leases
# the event (1-second lease) and stalls inside its delivery: the target's
# delivery function waits for an advisory lock the test holds. The lease
# runs out; relay B leases the event again (a new fence) and delivers it
# too: its consume_once on the same delivery key waits for A's target
# transaction. The test lets A go: A's delivery commits, A's published is
# refused (P4012: the lease is B's now), which A logs and survives; B's
# consume_once then answers false (a duplicate, no second effect) and B
# publishes under its fence. One effect, the event published, both relays
# alive. Every step is waited for in pg_stat_activity or the outbox.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use DBI;
use IdemProof qw(now start_node fork_child lines_matching poll_until stop_child);
use PostgreSQL::Test::Utils;
use Test::More;

my $node = start_node('lease_lost');
$node->safe_psql('postgres', 'CREATE DATABASE target');
$node->safe_psql('target', q{
CREATE EXTENSION idem;
CREATE TABLE received (delivery_key text, at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION deliver(event_type text, payload jsonb, headers jsonb, delivery_key text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(7601);    -- the test's brake
  INSERT INTO received (delivery_key) VALUES (delivery_key);
END $$;
});

# The brake, held by the test until A and B are both stuck.
my $dsn = 'dbi:Pg:host=' . $node->host . ';port=' . $node->port;
my $brake = DBI->connect("$dsn;dbname=target", '', '', { AutoCommit => 1, RaiseError => 1, PrintError => 0 });
$brake->do('SELECT pg_advisory_lock(7601)');

my $dir = PostgreSQL::Test::Utils::tempdir;
sub relay {
	my ($name) = @_;
	return fork_child("relay $name", sub {
		open STDERR, '>', "$dir/relay-$name.log" or die "$dir/relay-$name.log: $!";
		$ENV{PGAPPNAME} = "relay-$name";
		exec("$FindBin::RealBin/../../clients/relay/idem-relay", '--source', "$dsn;dbname=proof",
			'--target', "$dsn;dbname=target", '--consumer', 'lease-lost', '--deliver', 'public.deliver',
			'--lease', '1 second', '--batch', '1', '--poll', '0.1') or die "exec: $!";
	});
}

# Whether relay $name's target session waits for $wait_event.
sub waits_for {
	my ($name, $wait_event) = @_;
	return $node->poll_query_until('target', qq{SELECT count(*) = 1 FROM pg_stat_activity
		WHERE application_name = 'relay-$name' AND wait_event_type = 'Lock' AND wait_event = '$wait_event'});
}

my $a = relay('a');
my ($event) = $node->safe_psql('proof', q{SELECT idem.outbox_put('lease', 'k1', 'evt', '{}')});
ok(waits_for('a', 'advisory'), 'relay A leased the event and stalls inside its delivery');
ok($node->poll_query_until('proof', "SELECT leased_until < now() FROM idem.outbox_event WHERE id = $event"),
	"A's lease ran out");
my $b = relay('b');
ok(waits_for('b', 'transactionid'),
	"relay B leased it again and its consume_once waits for A's delivery transaction");
is($node->safe_psql('proof', "SELECT attempt_count FROM idem.outbox_event WHERE id = $event"), '2',
	'the event was leased twice');

$brake->do('SELECT pg_advisory_unlock(7601)');
ok($node->poll_query_until('proof', "SELECT status = 'published' FROM idem.outbox_event WHERE id = $event"),
	'the event is published');
my $lost = qr/lease on event $event lost/;
poll_until("relay A to log its lost lease", sub { lines_matching("$dir/relay-a.log", $lost) > 0 }, 0.05);
is(lines_matching("$dir/relay-a.log", $lost), 1, "A's published was refused (P4012), and A logged it");
ok(kill(0, $a) && kill(0, $b), 'both relays are still running');

is(stop_child($a, 'relay A'), 0, 'relay A stops cleanly on SIGTERM');
is(stop_child($b, 'relay B'), 0, 'relay B stops cleanly on SIGTERM');
my %counts;
for my $name (qw(a b)) {
	my ($line) = grep { /stopping:/ } do { open my $in, '<', "$dir/relay-$name.log" or die; <$in> };
	$counts{$name} = $line // '';
}
like($counts{a}, qr/published 0, duplicates 0, failed 0, leases lost 1/,
	'A: delivered, but its mark was refused: counted as a lost lease, not as published');
like($counts{b}, qr/published 0, duplicates 1, failed 0, leases lost 0/, 'B: its redelivery was a duplicate');
is($node->safe_psql('target', 'SELECT count(*) FROM received'), '1', 'one effect');
diag("relay lease-lost run: 1 event, 2 leases, 2 deliveries, "
	. $node->safe_psql('target', 'SELECT count(*) FROM received') . ' effect, 1 lease lost (P4012)');

$node->stop;
done_testing();
