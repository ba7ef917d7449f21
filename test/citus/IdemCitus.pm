# Shared by the Citus proofs test/citus/*.pl: a Citus cluster on one
# machine (a coordinator and two workers, PostgreSQL::Test::Cluster nodes on
# fixed ports from IDEM_CITUS_PORT_BASE), database "proof" on every node
# with Citus, idem installed through either engine (IDEM_ENGINE, as
# test/t/IdemProof.pm reads it) and distributed by idem.citus_distribute(),
# and the proofs' business table "effects" distributed by key, colocated
# with idem's keys, so that an effect and its key's outcome commit on one
# node.
#
# The engines, installed as a deployment would:
#   c++       shared_preload_libraries = 'citus, idem' on every node (Citus
#             first, as it requires); CREATE EXTENSION idem on the
#             coordinator, which Citus propagates to every worker.
#   portable  no library of idem's: dist/idem-portable.sql, run on the
#             coordinator by "proof"'s owner idem_owner, a role that is not
#             superuser, once the workers are added: Citus copies its schema,
#             types and functions to the workers as it creates them
#             (citus_distribute() the tables, and citus_node_setup() the
#             sequences, which Citus does not copy). The role is created on
#             the coordinator after the workers joined, so Citus creates it
#             on them: a role it had to copy later, while idem_owner creates
#             the schema, would be altered there as idem_owner, which only a
#             superuser may. Run on every node instead, the file would make
#             each worker a table of its own, in the way of the one Citus
#             creates there when the coordinator's is distributed
#             ("relation already exists").
# Ports: port_of(n) is IDEM_CITUS_PORT_BASE + n (default IDEM_TEST_PORT +
# 1600); the files run one after another, so each uses port_of(0 .. 3).
package IdemCitus;

use strict;
use warnings;
use Cwd ();
use File::Basename ();
use IPC::Run ();
use IdemProof ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Exporter 'import';

our @EXPORT_OK = qw(port_of start_citus engine_name);

sub port_of {
	my ($n) = @_;
	my $base = $ENV{IDEM_CITUS_PORT_BASE} // (($ENV{IDEM_TEST_PORT} // 54000) + 1600);
	return $base + $n;
}

sub engine_name { return IdemProof::portable_engine() ? 'portable' : 'c++'; }

sub tree { return $ENV{IDEM_TREE} // Cwd::abs_path(File::Basename::dirname(__FILE__) . '/../..'); }

# The shards of each distributed table: few, so a rebalance moves every
# shard group within the test command's time.
sub shard_count { return $ENV{IDEM_CITUS_SHARDS} // 4; }

# The business table of the proofs (as test/t/IdemProof.pm's), with the
# distribution column in its primary key, and the application's function
# that writes an effect and its key's outcome in one transaction on the
# key's node (delegated like idem's calls).
my $effects_sql = <<'SQL';
CREATE TABLE effects (
    id     bigserial,
    scope  text NOT NULL,
    key    text NOT NULL,
    fence  bigint NOT NULL,
    client int NOT NULL,
    at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (key, id));
SELECT create_distributed_table('effects', 'key', colocate_with => 'idem.idempotency_request');
SQL
$effects_sql .= IdemProof::effect_function_sql() . <<'SQL';
SELECT create_distributed_function('proof_effect_and_succeed(text, text, bigint, int, jsonb)',
    distribution_arg_name => 'key', colocate_with => 'idem.idempotency_request');
SQL

# A node of the cluster: Citus (and idem's library on the C++ engine)
# preloaded, wal_level logical (shard moves use logical replication),
# prepared transactions for Citus's two-phase commits. The first node's
# data directory, made by initdb and configured, is copied (cold, before
# its first start) into each node after it: initdb is most of a node's
# start-up, and the test command's time is short.
sub new_node {
	my ($name, $port, %opt) = @_;
	my $portable = IdemProof::portable_engine();
	my @install = $portable && $ENV{IDEM_PORTABLE_BIN}
	  ? (install_path => File::Basename::dirname($ENV{IDEM_PORTABLE_BIN})) : ();
	my $node = PostgreSQL::Test::Cluster->new($name, port => $port, @install);
	if ($opt{template}) {
		$node->init_from_backup($opt{template}, 'template');
	} else {
		$node->init;
		my $preload = $portable ? 'citus' : 'citus, idem';
		my $shards = shard_count();
		my $fsync = $opt{fsync} ? 'on' : 'off';
		# The nodes listen on a socket directory only (no TCP port that other
		# runs on the machine could hold): Citus's connections to a node
		# itself (shard moves) go there too.
		my $host = $node->host;
		$node->append_conf('postgresql.conf', <<"CONF");
shared_preload_libraries = '$preload'
wal_level = logical
max_connections = 150
max_prepared_transactions = 150
max_worker_processes = 24
max_wal_senders = 16
max_replication_slots = 16
fsync = $fsync
restart_after_crash = on
log_statement = none
citus.shard_count = $shards
citus.local_hostname = '$host'
CONF
		$node->backup_fs_cold('template');
	}
	$node->start;
	$node->safe_psql('postgres', 'CREATE DATABASE proof');
	$node->safe_psql('proof', 'CREATE EXTENSION citus');
	return $node;
}

# start_citus(name, workers => 2, fsync => 0, delegate_calls => ...): the
# cluster, idem installed and distributed, "effects" made. Returns an
# IdemCitus object. delegate_calls is citus_distribute()'s argument ('true',
# 'false'; undef for its default). Unless given, the portable engine passes
# 'true': the proofs are about delegated calls, and its default leaves them
# to the coordinator (no library of idem's keeps a NULL key from being
# delegated there; docs/beyond-one-server.md, "A NULL key"); the C++
# engine's default delegates them, preloaded on every node.
sub start_citus {
	my ($name, %opt) = @_;
	my $workers = $opt{workers} // 2;
	my $self = bless { name => $name, workers => [], next_port => 1,
		delegate_calls => exists $opt{delegate_calls} ? $opt{delegate_calls}
		  : IdemProof::portable_engine() ? 'true' : undef }, __PACKAGE__;
	$self->{coordinator} = new_node("${name}_coordinator", port_of(0), fsync => $opt{fsync});
	my $c = $self->{coordinator};
	$c->safe_psql('proof', sprintf(q{SELECT citus_set_coordinator_host('%s', %d)}, $c->host, $c->port));
	$self->add_worker for 1 .. $workers;
	$self->install_idem;
	$self->distribute;
	# The portable engine's calls write as idem_owner: the application's
	# rows written in the same transaction block must be too (Citus refuses
	# a second role's writes to placements one role wrote in a block;
	# docs/beyond-one-server.md, "Known defects"), so its clients log in as
	# idem_owner and the business table is idem_owner's.
	$c->safe_psql('proof', (IdemProof::portable_engine() ? 'SET ROLE idem_owner; ' : '') . $effects_sql);
	return $self;
}

sub coordinator { return $_[0]{coordinator}; }
sub workers     { return @{ $_[0]{workers} }; }
sub nodes       { return ($_[0]{coordinator}, @{ $_[0]{workers} }); }

# The coordinator's "proof", for IdemProof::Client's dsn.
# With the portable engine, as idem_owner (above).
sub dsn {
	return 'dbi:Pg:dbname=proof;host=' . $_[0]{coordinator}->host . ';port=' . $_[0]{coordinator}->port
	  . (IdemProof::portable_engine() ? ';user=idem_owner' : '');
}

# A new worker on the next port, added to the cluster (citus_add_node);
# once idem is installed, idem.citus_node_setup() runs on it as the
# documentation says to after adding a node. Returns the node.
sub add_worker {
	my ($self) = @_;
	my $n = $self->{next_port}++;
	my $node = new_node("$self->{name}_worker$n", port_of($n), template => $self->{coordinator});
	$self->{coordinator}->safe_psql('proof',
		sprintf(q{SELECT citus_add_node('%s', %d)}, $node->host, $node->port));
	push @{ $self->{workers} }, $node;
	# As the owner of idem's objects: the sequences it makes there are the
	# portable engine's owner's, whose functions draw from them.
	my $as = IdemProof::portable_engine() ? 'SET ROLE idem_owner; ' : '';
	$node->safe_psql('proof', "${as}SELECT idem.citus_node_setup()") if $self->{distributed} && has_node_setup($node);
	return $node;
}

sub has_node_setup {
	my ($node) = @_;
	return $node->safe_psql('proof', q{SELECT to_regprocedure('idem.citus_node_setup()') IS NOT NULL}) eq 't';
}

# idem on every node, as the comment at the top says.
sub install_idem {
	my ($self) = @_;
	if (IdemProof::portable_engine()) {
		$self->{coordinator}->safe_psql('proof', 'CREATE ROLE idem_owner LOGIN; ALTER DATABASE proof OWNER TO idem_owner');
		install_portable($self->{coordinator});
	} else {
		$self->{coordinator}->safe_psql('proof', 'CREATE EXTENSION idem');
	}
	my $version = IdemProof::portable_engine() ? q{SELECT version FROM idem.installed_version}
	  : q{SELECT extversion FROM pg_extension WHERE extname = 'idem'};
	note('engine: ' . engine_name() . ', idem ' . $self->{coordinator}->safe_psql('proof', $version)
		  . ', Citus ' . $self->{coordinator}->safe_psql('proof', q{SELECT extversion FROM pg_extension WHERE extname = 'citus'})
		  . ' on ' . $self->{coordinator}->safe_psql('proof', 'SHOW server_version'));
	return;
}

# dist/idem-portable.sql, run by idem_owner (no superuser) in "proof".
sub install_portable {
	my ($node) = @_;
	my $file = tree() . '/dist/idem-portable.sql';
	die "$file is missing: run make portable\n" unless -f $file;
	my ($out, $err) = ('', '');
	IPC::Run::run([ $node->installed_command('psql'), '-XAtq', '-v', 'ON_ERROR_STOP=1',
			'-d', $node->connstr('proof') . ' user=idem_owner', '-f', $file ],
		'<', '/dev/null', '>', \$out, '2>', \$err)
	  or die 'installing ' . $file . ' on ' . $node->name . " as idem_owner failed:\n$err";
	return;
}

# idem.citus_distribute() on the coordinator, as the documentation says
# (delegate_calls as start_citus was given it). The portable engine's
# objects belong to idem_owner, who distributes them.
sub distribute {
	my ($self) = @_;
	my $c = $self->{coordinator};
	my $as = IdemProof::portable_engine() ? 'SET ROLE idem_owner; ' : '';
	my $delegate = defined $self->{delegate_calls} ? "delegate_calls => $self->{delegate_calls}" : '';
	$c->safe_psql('proof', "${as}SELECT idem.citus_distribute($delegate)");
	$self->{distributed} = 1;
	return;
}

# One statement on every node, "proof" database: the answers in node order.
sub on_every_node {
	my ($self, $sql) = @_;
	return map { $_->safe_psql('proof', $sql) } $self->nodes;
}

# The keys of $scope in the shards of each worker (read from the shard
# relations on the workers), in the order of the workers.
sub keys_per_worker {
	my ($self, $scope) = @_;
	my %on = split /[|\n]/, $self->{coordinator}->safe_psql('proof', qq{
		SELECT n.nodeport, sum(r.result::bigint)
		  FROM run_command_on_shards('idem.idempotency_request',
		         \$\$SELECT count(*) FROM %s WHERE scope = '$scope'\$\$) r
		  JOIN pg_dist_placement p USING (shardid) JOIN pg_dist_node n USING (groupid)
		 GROUP BY 1});
	return map { $on{ $_->port } // 0 } $self->workers;
}

sub stop {
	my ($self) = @_;
	$_->stop for reverse $self->nodes;
	return;
}

1;
