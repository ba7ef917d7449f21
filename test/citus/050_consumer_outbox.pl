# The consumer's inbox and the transactional outbox on Citus, through the
# coordinator. Inbox: twins race to consume the same messages (consume_once,
# delegated by message_id to the worker of its shard), each consumption
# writing its effect in the same transaction block (the effects table is
# colocated, keyed by the message's id): exactly one consumption and one
# effect per message, every repeat answered false. Outbox: events put in
# business transactions through the coordinator (outbox_put, delegated by
# key), leased and published by a relay on each worker (the lease, like
# maintenance, runs per shard on the node that holds it; the coordinator
# holds none and leases nothing): every event published exactly once,
# nothing left to lease, each relay having published what its node's
# shards hold; a relay whose lease ran out and was taken is refused with
# P4012. Purge: published events past idem.outbox_retention are purged by
# idem.run_maintenance() on the node that holds their shard, none by the
# coordinator.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin, "$FindBin::RealBin/../t";
use IdemProof qw(now run_clients poll_until);
use IdemCitus qw(start_citus);
use PostgreSQL::Test::Utils;
use Test::More;
use DBI;
use List::Util qw(shuffle);

my $messages = $ENV{CITUS_INBOX_MESSAGES} // 200;
my $twins    = 4;
my $events   = $ENV{CITUS_OUTBOX_EVENTS} // 200;

my $cluster = start_citus('inbox');
my $c   = $cluster->coordinator;
my $dsn = $cluster->dsn;
my $dir = PostgreSQL::Test::Utils::tempdir;
sub connect_db {
	my ($node) = @_;
	my $to = $node ? 'dbi:Pg:dbname=proof;host=' . $node->host . ';port=' . $node->port : $dsn;
	return DBI->connect($to, '', '', { RaiseError => 0, PrintError => 0, AutoCommit => 1 });
}

# The outbox's events in the shards of each worker, in the order of the workers.
sub events_per_worker {
	my %on = split /[|\n]/, $c->safe_psql('proof', q{
		SELECT n.nodeport, sum(r.result::bigint)
		  FROM run_command_on_shards('idem.outbox_event', $$SELECT count(*) FROM %s$$) r
		  JOIN pg_dist_placement p USING (shardid) JOIN pg_dist_node n USING (groupid)
		 GROUP BY 1});
	return map { $on{ $_->port } // 0 } $cluster->workers;
}

# ---- Inbox ----------------------------------------------------------------
my $failed = run_clients($twins, sub {
	my ($id) = @_;
	srand(5000 + $id);
	my $dbh = connect_db() or die $DBI::errstr;
	my ($consumed, $repeats, $errors) = (0, 0, 0);
	my @order = shuffle(0 .. $messages - 1);
	for my $n (@order) {
		my $message = sprintf('msg-%04d', $n);
		for (1 .. 50) {
			$dbh->begin_work;
			my ($first) = $dbh->selectrow_array(q{SELECT idem.consume_once('billing', $1, 'hash-of-' || $1)},
				undef, $message);
			if (!$dbh->err && $first) {
				$dbh->do(q{INSERT INTO effects (scope, key, fence, client) VALUES ('inbox', $1, 0, $2)},
					undef, $message, $id);
			}
			if (!$dbh->err && $dbh->commit) {
				$first ? $consumed++ : $repeats++;
				last;
			}
			$errors++;
			$dbh->rollback;
		}
	}
	open my $f, '>', "$dir/inbox-$id" or die $!;
	print $f "$consumed $repeats $errors\n";
	close $f;
});
is($failed, 0, 'every consumer went through every message');
my ($consumed, $repeats, $errors) = (0, 0, 0);
for my $id (0 .. $twins - 1) {
	open my $f, '<', "$dir/inbox-$id" or die $!;
	my @n = split ' ', scalar <$f>;
	$consumed += $n[0]; $repeats += $n[1]; $errors += $n[2];
}
is($consumed, $messages, 'each message was consumed once in all');
is($repeats, ($twins - 1) * $messages, 'every other attempt was answered false');
my $dbh = connect_db();
is($dbh->selectrow_array(q{SELECT count(*) FROM effects WHERE scope = 'inbox'}), $messages, 'one effect per message');
is($dbh->selectrow_array(q{SELECT count(*) FROM (SELECT key FROM effects WHERE scope = 'inbox' GROUP BY key HAVING count(*) > 1) d}),
	0, 'no message has two effects');
is($dbh->selectrow_array(q{SELECT count(*) FROM idem.consumed_message WHERE consumer = 'billing'}), $messages,
	'the inbox holds each message once');
note("citus inbox: $twins twins x $messages messages through the coordinator: consumed $consumed, "
	  . "repeats answered false $repeats, attempts retried after an error $errors");

# ---- Outbox ---------------------------------------------------------------
# Puts: each in a business transaction with its effect, by key.
for my $n (0 .. $events - 1) {
	my $key = sprintf('order-%04d', $n);
	$dbh->begin_work;
	$dbh->do(q{INSERT INTO effects (scope, key, fence, client) VALUES ('outbox', $1, 0, 0)}, undef, $key);
	$dbh->do(q{SELECT idem.outbox_put('orders', $1, 'order.created', jsonb_build_object('n', $2::int),
		'order', $1)}, undef, $key, $n);
	$dbh->commit or BAIL_OUT('outbox_put failed: ' . $dbh->errstr);
}
is($dbh->selectrow_array(q{SELECT count(*) FROM idem.outbox_event WHERE status = 'pending'}), $events,
	"$events events put, pending");

is_deeply($dbh->selectall_arrayref(q{SELECT id FROM idem.outbox_lease(20, '30 seconds')}), [],
	'the coordinator holds no shard of the outbox: it leases nothing');
my @workers = $cluster->workers;
$failed = run_clients(scalar(@workers), sub {
	my ($id) = @_;
	my $r = connect_db($workers[$id]) or die $DBI::errstr;
	open my $log, '>', "$dir/relay-$id" or die $!;
	# Every event was committed before the relays start and only this relay
	# leases this node's shards, so the first empty lease means none is left.
	while (1) {
		my $batch = $r->selectall_arrayref(q{SELECT id, lease_fence FROM idem.outbox_lease(20, '30 seconds')});
		die 'outbox_lease: ' . $r->errstr if $r->err;
		last if !@$batch;
		for my $e (@$batch) {
			$r->do(q{SELECT idem.outbox_published($1, $2)}, undef, @$e);
			print $log ($r->err ? "refused $e->[0] " . $r->state : "published $e->[0]"), "\n";
		}
	}
	close $log;
});
is($failed, 0, 'a relay on each worker ran until nothing was left to lease there');
my %published;
my $refused = 0;
for my $id (0 .. $#workers) {
	open my $f, '<', "$dir/relay-$id" or die $!;
	while (<$f>) { $published{$1}++ if /^published (\d+)/; $refused++ if /^refused/; }
}
is(scalar(keys %published), $events, 'every event was published');
is(scalar(grep { $_ > 1 } values %published), 0, 'no event was published twice');
is($refused, 0, 'no relay was refused a lease it held');
# Each relay leased on its own node's shards: what it published is what they hold.
my @held = events_per_worker();
for my $id (0 .. $#workers) {
	open my $f, '<', "$dir/relay-$id" or die $!;
	my $n = grep { /^published/ } <$f>;
	is($n, $held[$id], 'worker ' . ($id + 1) . "'s relay published the $held[$id] events its shards hold");
}
is($dbh->selectrow_array(q{SELECT count(*) FROM idem.outbox_event WHERE status = 'published'}), $events,
	'the outbox says every event is published');

# A lease that ran out and was taken: the first relay is refused.
$dbh->do(q{SELECT idem.outbox_put('orders', 'order-late', 'order.created', '{}')});
my $port = $c->safe_psql('proof', q{SELECT nodeport FROM pg_dist_placement JOIN pg_dist_node USING (groupid)
	WHERE shardid = get_shard_id_for_distribution_column('idem.outbox_event', 'order-late'::text)});
my ($holder) = grep { $_->port == $port } @workers;
my $w = connect_db($holder);
my ($event, $fence1) = $w->selectrow_array(q{SELECT id, lease_fence FROM idem.outbox_lease(1, '1 second')});
ok($event, 'a new event is leased');
my $again = poll_until('the lease to run out and the event to be leased again', sub {
	my @row = $w->selectrow_array(q{SELECT id, lease_fence FROM idem.outbox_lease(1, '30 seconds')});
	return @row ? \@row : undef;
}, 0.1);
is($again && $again->[0], $event, 'once its lease ran out, another relay leases it');
cmp_ok($again ? $again->[1] : 0, '>', $fence1, '... under a higher lease fence');
$w->do(q{SELECT idem.outbox_published($1, $2)}, undef, $event, $fence1);
is($w->state, 'P4012', "the first relay's published is refused with P4012");
$w->do(q{SELECT idem.outbox_published($1, $2)}, undef, @$again);
is($w->err, undef, "the second relay's published is accepted");
$w->disconnect;
note("citus outbox: $events events put by key through the coordinator, a relay on each worker: published "
	  . scalar(keys %published) . ', twice ' . scalar(grep { $_ > 1 } values %published));

# ---- Outbox purge ------------------------------------------------------------
# Published events past idem.outbox_retention are purged per shard on the
# node that holds it, by idem.run_maintenance() as by the worker's round:
# each worker purges what its shards hold, the coordinator nothing.
my $total = $events + 1;
@held = events_per_worker();
# A server setting of the C++ engine's library; the portable engine reads
# the session's.
my $retention = '';
if (IdemProof::portable_engine()) {
	$retention = q{SET idem.outbox_retention = '1s'; };
} else {
	$_->safe_psql('proof', q{ALTER SYSTEM SET idem.outbox_retention = '1s'; SELECT pg_reload_conf()})
	  for $cluster->nodes;
}
my %purged;
my $done = poll_until('every published event to be purged', sub {
	for my $node ($cluster->nodes) {
		my $report = $node->safe_psql('proof', $retention . q{SELECT idem.run_maintenance()->>'purged_events'});
		$purged{ $node->name } += $report;
	}
	return $dbh->selectrow_array(q{SELECT count(*) FROM idem.outbox_event}) == 0;
}, 0.2);
ok($done, 'every published event was purged');
is($purged{ $c->name } // 0, 0, 'the coordinator purged none');
for my $id (0 .. $#workers) {
	is($purged{ $workers[$id]->name }, $held[$id],
		'worker ' . ($id + 1) . " purged the $held[$id] events its shards held");
}
note("citus outbox purge: $total published events, purged per worker: "
	  . join(', ', map { $purged{ $_->name } // 0 } @workers));

$dbh->disconnect;
$cluster->stop;
done_testing();
