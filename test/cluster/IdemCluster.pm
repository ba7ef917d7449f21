# Shared by the "beyond one server" runs test/cluster/*.pl: fixed ports from
# IDEM_CLUSTER_PORT_BASE (other test runs on the machine use other ranges),
# shard clusters made by IdemProof::start_node, and the PL/Proxy database
# of examples/sharding/proxy.sql in front of them.
package IdemCluster;

use strict;
use warnings;
use FindBin;
use IdemProof qw(start_node);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Exporter 'import';

our @EXPORT_OK = qw(port_of start_shards start_proxy proxy_dsn shard_conninfo);

# The n-th port of this run's range: each file uses its own slice.
sub port_of {
	my ($n) = @_;
	my $test_port = $ENV{IDEM_TEST_PORT} // 55432;
	my $base = $ENV{IDEM_CLUSTER_PORT_BASE} // ($test_port >= 31000 ? $test_port - 29500 : $test_port + 1500);
	return $base + $n;
}

# $count shard clusters named "$prefix$i" on ports port_of($first + $i).
sub start_shards {
	my ($prefix, $count, $first, %opt) = @_;
	my @shards;
	for my $i (0 .. $count - 1) {
		my $node = start_node("$prefix$i", %opt, port => port_of($first + $i));
		# The function the storm's owner calls on the key's shard (the proxy
		# calls it by name).
		$node->safe_psql('proof', IdemProof::effect_function_sql());
		push @shards, $node;
	}
	return @shards;
}

sub shard_conninfo {
	my ($node, $db) = @_;
	return 'dbname=' . ($db // 'proof') . ' host=' . $node->host . ' port=' . $node->port;
}

# The proxy cluster on port_of($n), database "proxy": examples/sharding/proxy.sql
# with a partition per shard given (in order: p0, p1, ...).
sub start_proxy {
	my ($n, @partitions) = @_;
	my $proxy = PostgreSQL::Test::Cluster->new('proxy', port => port_of($n));
	$proxy->init;
	$proxy->append_conf('postgresql.conf', "max_connections = 60\nfsync = off\n");
	$proxy->start;
	$proxy->safe_psql('postgres', 'CREATE DATABASE proxy');
	my $tree = $ENV{IDEM_TREE} // "$FindBin::RealBin/../..";
	$proxy->safe_psql('proxy', PostgreSQL::Test::Utils::slurp_file("$tree/examples/sharding/proxy.sql"));
	set_partitions($proxy, 'proof', @partitions);
	$proxy->safe_psql('proxy', q{SELECT idem.route_by_key('public.proof_effect_and_succeed(scope text, key text,
		fence bigint, client int, body jsonb) RETURNS bigint')});
	return $proxy;
}

# (Re)defines the partitions of the server idem_shards: database $db of
# one node each.
sub set_partitions {
	my ($proxy, $db, @partitions) = @_;
	my $options = join ', ', map { "p$_ '" . shard_conninfo($partitions[$_], $db) . "'" } 0 .. $#partitions;
	$proxy->safe_psql('proxy', <<"SQL");
DROP SERVER IF EXISTS idem_shards CASCADE;
CREATE SERVER idem_shards FOREIGN DATA WRAPPER plproxy OPTIONS (connection_lifetime '1800', $options);
CREATE USER MAPPING FOR PUBLIC SERVER idem_shards;
SQL
}

sub proxy_dsn {
	my ($proxy) = @_;
	return 'dbi:Pg:dbname=proxy;host=' . $proxy->host . ';port=' . $proxy->port;
}

1;
