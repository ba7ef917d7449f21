# One relay, started once and never restarted, drains the outbox of one
# cluster (the source) into another (the target) while each side goes away:
#
# 1. The target is stopped -m immediate while events flow, and more events
#    are put during the outage. The relay waits for the target without
#    leasing (a lease is a delivery attempt: leasing through an outage would
#    spend the events' attempts and make them dead): the events put during
#    the outage stay pending with no attempt, no attempt count grows while
#    the relay retries, none is dead. The target comes back: all delivered.
# 2. The target refuses one aggregate's events (its delivery function
#    raises): that event fails again and again with a growing backoff, the
#    aggregate's later events wait behind it with no attempt, the other
#    aggregates are delivered. The refusal lifted, all are delivered.
# 3. The source is stopped -m immediate with events pending and started
#    again: the relay reconnects and delivers those and the ones put after.
#
# At the end the target holds every event exactly once (consume_once on the
# delivery key drops redeliveries), each aggregate's events in id order.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IdemProof qw(now start_node check_relayed lines_matching fork_child poll_until stop_child);
use PostgreSQL::Test::Utils;
use Test::More;

my $aggregates = 10;
my $per_batch = 100;
my $refused_aggregate = 3;

my $source = start_node('relay_source', fsync => 1);
my $target = start_node('relay_target', fsync => 1);
# Short backoffs so that the refusal phase sees several attempts; a generous
# attempt budget so that it cannot make the refused event dead.
$source->append_conf('postgresql.conf', <<'CONF');
idem.outbox_backoff_base = '50ms'
idem.outbox_backoff_max = '400ms'
idem.outbox_max_attempts = 1000
CONF
$source->reload;
$target->safe_psql('proof', q{
CREATE TABLE received (seq bigserial PRIMARY KEY, aggregate text, n int, delivery_key text);
CREATE TABLE refused_aggregate (aggregate text PRIMARY KEY);
CREATE FUNCTION deliver(event_type text, payload jsonb, headers jsonb, delivery_key text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT FROM refused_aggregate WHERE aggregate = payload->>'aggregate') THEN
    RAISE EXCEPTION 'the target refuses aggregate %', payload->>'aggregate';
  END IF;
  INSERT INTO received (aggregate, n, delivery_key)
  VALUES (payload->>'aggregate', (payload->>'n')::int, delivery_key);
END $$;
});

my $put = 0;
# Puts the next $count events, spread over the aggregates, in one
# transaction: event n (key kn, payload n) of aggregate n mod $aggregates.
sub put_events {
	my ($count) = @_;
	my ($from, $to) = ($put + 1, $put + $count);
	$source->safe_psql('proof', qq{
SELECT count(idem.outbox_put('relay', 'k' || g, 'evt',
                             jsonb_build_object('aggregate', (g % $aggregates)::text, 'n', g),
                             'agg', (g % $aggregates)::text))
  FROM generate_series($from, $to) g});
	$put = $to;
	return ($from, $to);
}

sub source_row { return split /\|/, $source->safe_psql('proof', $_[0]) }

sub all_published {
	my ($what) = @_;
	return ok($source->poll_query_until('proof',
			qq{SELECT count(*) = $put AND bool_and(status = 'published') FROM idem.outbox_event}),
		"every event is published: $what");
}

my $log = PostgreSQL::Test::Utils::tempdir . '/relay.log';
my $relay = "$FindBin::RealBin/../../clients/relay/idem-relay";
my $dsn_of = sub { 'dbi:Pg:dbname=proof;host=' . $_[0]->host . ';port=' . $_[0]->port };
my $relay_pid = fork_child('relay', sub {
	open STDERR, '>', $log or die "$log: $!";
	exec($relay, '--source', $dsn_of->($source), '--target', $dsn_of->($target),
		'--consumer', 'relay-test', '--deliver', 'public.deliver', '--lease', '2 seconds',
		'--batch', '10', '--poll', '0.2') or die "exec: $!";
});

# The relay's stderr lines so far that match $re.
sub relay_lines { return lines_matching($log, $_[0]) }

# Waits (with the default deadline) until the relay has written $n lines
# matching $re.
sub wait_for_relay_lines {
	my ($re, $n) = @_;
	poll_until("$n relay lines matching $re", sub { relay_lines($re) >= $n || !kill(0, $relay_pid) }, 0.05);
	return relay_lines($re) >= $n;
}

# 1. The target goes away while events flow.
put_events($per_batch);
ok($target->poll_query_until('proof', 'SELECT count(*) > 0 FROM received'), 'the relay delivers');
$target->stop('immediate');
my ($from, $to) = put_events($per_batch);
my $waiting = qr/target unreachable, nothing leased/;
ok(wait_for_relay_lines($waiting, 3), 'the relay notices the target is down and waits for it');
my ($attempts_before) = source_row('SELECT sum(attempt_count) FROM idem.outbox_event');
my $waits_before = relay_lines($waiting);
ok(wait_for_relay_lines($waiting, $waits_before + 3), 'the relay keeps retrying the target');
my ($attempts_after, $outage_pending, $outage_attempts, $dead) = source_row(qq{
SELECT sum(attempt_count),
       count(*) FILTER (WHERE (payload->>'n')::int BETWEEN $from AND $to AND status = 'pending'),
       coalesce(sum(attempt_count) FILTER (WHERE (payload->>'n')::int BETWEEN $from AND $to), 0),
       count(*) FILTER (WHERE status = 'dead')
  FROM idem.outbox_event});
is($attempts_after, $attempts_before, 'no attempt is spent while the target is down');
is($outage_pending, $per_batch, 'the events put during the outage are all pending');
is($outage_attempts, 0, '... and none was ever leased');
is($dead, 0, 'no event is dead');
my ($failed_in_flight) = source_row(q{SELECT count(*) FROM idem.outbox_event WHERE last_error IS NOT NULL});
$target->start;
all_published('the target came back');

# 2. The target refuses one aggregate.
$target->safe_psql('proof', "INSERT INTO refused_aggregate VALUES ('$refused_aggregate')");
($from, $to) = put_events($per_batch);
my $first_refused = $from + ($refused_aggregate - $from % $aggregates + $aggregates) % $aggregates;
ok($source->poll_query_until('proof', qq{
SELECT e.status = 'pending' AND e.attempt_count >= 3 AND e.available_at > now()
       AND e.last_error LIKE '%refuses aggregate $refused_aggregate%'
  FROM idem.outbox_event e WHERE e.key = 'k$first_refused'}),
	'the refused event fails again and again, each time backed off');
ok($source->poll_query_until('proof', qq{
SELECT count(*) = 0 FROM idem.outbox_event
 WHERE (payload->>'n')::int BETWEEN $from AND $to AND aggregate_id <> '$refused_aggregate' AND status <> 'published'}),
	'the other aggregates are delivered meanwhile');
my ($held, $held_attempts, $refused_attempts) = source_row(qq{
SELECT count(*) FILTER (WHERE (payload->>'n')::int > $first_refused AND status = 'pending'),
       coalesce(sum(attempt_count) FILTER (WHERE (payload->>'n')::int > $first_refused), 0),
       max(attempt_count) FILTER (WHERE key = 'k$first_refused')
  FROM idem.outbox_event WHERE (payload->>'n')::int BETWEEN $from AND $to AND aggregate_id = '$refused_aggregate'});
is($held, $per_batch / $aggregates - 1, "the refused aggregate's later events wait behind it");
is($held_attempts, 0, '... never leased');
$target->safe_psql('proof', 'DELETE FROM refused_aggregate');
all_published('the refusal was lifted');

# 3. The source goes away with events pending, and comes back.
put_events($per_batch);
$source->stop('immediate');
$source->start;
put_events($per_batch);
all_published('the source restarted');
ok(kill(0, $relay_pid), 'the relay was never restarted');

is(stop_child($relay_pid, 'the relay'), 0, 'the relay stops cleanly on SIGTERM');
my ($relay_published, $relay_duplicates, $relay_failed) =
	(`cat $log` =~ /stopping: published (\d+), duplicates (\d+), failed (\d+)/);
ok(defined $relay_published, 'the relay reports its counts');

my ($rows, $distinct) = check_relayed($target, 'proof', $put);
is($source->safe_psql('proof', q{SELECT count(*) FROM idem.outbox_event WHERE status = 'dead'}),
	'0', 'no event is dead');
diag("relay target-down run: $put events, $rows deliveries, " . ($rows - $distinct) . ' duplicates; '
	. "$failed_in_flight events failed in flight when the target stopped; the refused event took "
	. "$refused_attempts attempts; relay: published " . ($relay_published // '?') . ', redeliveries dropped '
	. ($relay_duplicates // '?') . ', failed ' . ($relay_failed // '?'));

$source->stop;
$target->stop;
done_testing();
