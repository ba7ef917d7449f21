# The orders demo sharded: 4 shard clusters each with the shop
# (examples/orders/shop.sql, charging at one provider through dblink), a
# PL/Proxy database with proxy.sql and orders_proxy.sql. Requests run their
# phases through the proxy; one dies after phase 2 and its retry resumes
# there. Each key, its order, audit rows and receipt event (idem's outbox) live on the shard
# its hash names and nowhere else; each card is charged once; a retry of a
# finished request replays its answer.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin, "$FindBin::RealBin/../t";
use IdemProof qw(now start_node);
use IdemCluster qw(port_of start_shards start_proxy proxy_dsn);
use PostgreSQL::Test::Utils;
use Test::More;
use DBI;

my $tree = $ENV{IDEM_TREE} // "$FindBin::RealBin/../..";
my $orders_count = 12;
my @shards = start_shards('ordershard', 4, 50);
my $provider = start_node('provider', port => port_of(55));
$provider->safe_psql('postgres', 'CREATE DATABASE provider');
$provider->safe_psql('provider', slurp_file("$tree/examples/orders/provider.sql"));
for my $shard (@shards) {
	$shard->safe_psql('postgres', 'CREATE DATABASE shop');
	$shard->safe_psql('shop', slurp_file("$tree/examples/orders/shop.sql"));
	$shard->safe_psql('shop', sprintf(q{
		CREATE SERVER payment_provider FOREIGN DATA WRAPPER dblink_fdw OPTIONS (host '%s', port '%s', dbname 'provider');
		CREATE USER MAPPING FOR CURRENT_USER SERVER payment_provider OPTIONS (user '%s')},
		$provider->host, $provider->port, scalar getpwuid($<)));
}
my $proxy = start_proxy(56, @shards);
$proxy->safe_psql('proxy', slurp_file("$tree/examples/sharding/orders_proxy.sql"));
IdemCluster::set_partitions($proxy, 'shop', @shards);
my $db = DBI->connect(proxy_dsn($proxy), '', '', { RaiseError => 1, AutoCommit => 1 });

sub request_of { my ($n) = @_; return qq({"customer": "cus_$n", "amount_cents": @{[ 1000 + $n ]}, "currency": "eur", "payment_method": "pm_card_visa"}); }

sub claim {
	my ($key, $n) = @_;
	return $db->selectrow_hashref(q{SELECT kind, fence, recovery_point, response_body::text AS body
		FROM shop.claim_order_request('orders', ?, ?::jsonb, '1 second')}, undef, $key, request_of($n));
}

# The phases after the claim, from the recovery point reached.
sub run_phases {
	my ($key, $n, $fence, $point, $stop_after_order) = @_;
	if ($point eq 'started') {
		$db->selectrow_array('SELECT shop.create_order(?, ?, ?, ?::jsonb)', undef, 'orders', $key, $fence, request_of($n));
		return undef if $stop_after_order;
	}
	my $charge = $db->selectrow_hashref(q{SELECT status_code, body->>'id' AS id FROM shop.charge_order(?, ?)},
		undef, 'orders', $key);
	die "charge for $key: $charge->{status_code}" unless $charge->{status_code} == 200;
	$db->do('SELECT shop.record_charge(?, ?, ?, ?)', undef, 'orders', $key, $fence, $charge->{id});
	my ($code, $body) = $db->selectrow_array(
		'SELECT status_code, body::text FROM shop.stage_receipt_and_finish(?, ?, ?)', undef, 'orders', $key, $fence);
	return $body;
}

my (%answer, $resumed);
for my $n (1 .. $orders_count) {
	my $key = "order-$n";
	my $c = claim($key, $n);
	is($c->{kind}, 'new_claim', "$key: claimed through the proxy");
	if ($n == 1) {
		# The API server dies after phase 2; the retry waits out the lock and resumes.
		run_phases($key, $n, $c->{fence}, $c->{recovery_point}, 1);
		my $give_up = now() + $PostgreSQL::Test::Utils::timeout_default;
		do { Time::HiRes::sleep(0.1); $c = claim($key, $n); }
		  while ($c->{kind} eq 'processing_active' && now() < $give_up);
		is("$c->{kind} $c->{recovery_point}", 'processing_stale order_created', "$key: the retry resumes after phase 2");
		$resumed = $key;
	}
	$answer{$key} = run_phases($key, $n, $c->{fence}, $c->{recovery_point});
}

my ($shard_of) = $db->selectcol_arrayref(q{SELECT idem.shard_hash('orders', 'order-' || n) & 3
	FROM generate_series(1, $1) n ORDER BY n}, undef, $orders_count);
my @per_shard = (0) x 4;
my $misplaced = 0;
for my $n (1 .. $orders_count) {
	my $home = $shard_of->[ $n - 1 ];
	$per_shard[$home]++;
	for my $i (0 .. 3) {
		my $found = $shards[$i]->safe_psql('shop', qq{
			SELECT (SELECT count(*) FROM idem.idempotency_request WHERE key = 'order-$n' AND status = 'succeeded')
			    || '/' || (SELECT count(*) FROM shop.orders WHERE idempotency_key = 'order-$n' AND status = 'paid')
			    || '/' || (SELECT count(*) FROM shop.audit_log a JOIN shop.orders o ON o.id = a.order_id
			                WHERE o.idempotency_key = 'order-$n')
			    || '/' || (SELECT count(*) FROM idem.outbox_event e
			                WHERE e.key = 'order-$n' AND e.event_type = 'receipt')});
		my $expected = $i == $home ? '1/1/1/1' : '0/0/0/0';
		$misplaced++ if $found ne $expected;
	}
}
is($misplaced, 0, 'each key, its order, audit row and receipt event are on its shard, and only there');
is($provider->safe_psql('provider', 'SELECT count(*) || \'/\' || count(DISTINCT idempotency_key) FROM psp.charges'),
	"$orders_count/$orders_count", 'each order was charged once (the resumed one too)');
my $replays = grep { my $c = claim($_, (/(\d+)$/)[0]); $c->{kind} eq 'replay_success' && $c->{body} eq $answer{$_} } keys %answer;
is($replays, $orders_count, 'a retry of each finished request replays its answer through the proxy');
note("sharded orders: $orders_count orders through PL/Proxy, per shard: @per_shard; $resumed resumed after phase 2");

$_->stop for @shards, $provider, $proxy;
done_testing();
