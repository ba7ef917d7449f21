# Failover with nothing lost: a three-node Patroni cluster (one etcd,
# synchronous_mode on, idem preloaded) on 127.0.0.1, a storm of retrying
# clients (libpq multi-host, target_session_attrs=read-write) claiming,
# checkpointing and completing keys, and twice: kill -9 of the primary's
# postmaster, Patroni promotes the synchronous standby, the clients go on.
# Then: every outcome a client saw acknowledged is on the new primary, no
# key's effect happened twice, every fence issued after a failover is
# greater than every fence acknowledged before it, a key bound to its
# session (idem.bind_lock_to_session) is stale on the new primary, the
# worker maintains the new primary and idles on the standbys, and the old
# primaries rejoin as standbys. Half the clients bind every claim to their
# session, which may commit without waiting for its flush or the
# synchronous standby: every fence any claim handed out (also one whose
# commit the failover lost, or that was never acknowledged) is logged, and
# none is handed out twice or below one handed out before it for the key;
# no key with an acknowledged outcome is claimed new; an owner cut off by a
# failover that writes again with its old fence is refused
# (check_fences_handed_out). Every process (etcd, three Patroni, their
# PostgreSQL) is the test's, in its own directory, and stopped by it.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin, "$FindBin::RealBin/../t";
use IdemProof qw(now run_clients read_logs total_stats storm_client check_storm check_fences_handed_out);
use IdemCluster qw(port_of);
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use DBI;

my $clients  = $ENV{FAILOVER_CLIENTS} // 12;
my $keys     = $ENV{FAILOVER_KEYS} // 600;
my $failovers = 2;
my $deadline = $PostgreSQL::Test::Utils::timeout_default;

my $dir = PostgreSQL::Test::Utils::tempdir;
my @pg_ports = map { port_of(45 + $_) } 0 .. 2;
my ($etcd_port, $peer_port) = (port_of(40), port_of(41));
my $bindir = `pg_config --bindir`;
chomp $bindir;

my (%procs, @harnesses);
# Stops everything this test started, on success and on failure alike:
# Patroni with SIGTERM (it stops its PostgreSQL), then any PostgreSQL left;
# etcd last: a Patroni that stops hands its leader key back through it.
sub stop_all {
	my @in_order = (@harnesses[ 1 .. $#harnesses ], $harnesses[0]);
	for my $h (@in_order) {
		next unless $h;
		$h->signal('TERM') if $h->pumpable;
		eval { $h->finish; 1 } or $h->kill_kill;
	}
	for my $n (0 .. 2) {
		my $data = "$dir/node$n/data";
		system("$bindir/pg_ctl", '-D', $data, '-m', 'immediate', 'stop') if -e "$data/postmaster.pid";
	}
	@harnesses = ();
}
END { stop_all() if @harnesses; }

sub start_process {
	my ($name, @cmd) = @_;
	my $h = IPC::Run::start(\@cmd, '<', '/dev/null', '>', "$dir/$name.log", '2>&1');
	push @harnesses, $h;
	return $h;
}

sub wait_for {
	my ($what, $check) = @_;
	my $give_up = now() + $deadline;
	until ($check->()) {
		die "timed out waiting for $what" if now() > $give_up;
		Time::HiRes::sleep(0.1);
	}
}

sub dbh_of {
	my ($port, $db) = @_;
	return DBI->connect("dbi:Pg:dbname=" . ($db // 'proof') . ";host=127.0.0.1;port=$port;connect_timeout=2",
		'postgres', '', { PrintError => 0, RaiseError => 0, AutoCommit => 1 });
}

# 't' / 'f' for pg_is_in_recovery() on node $n, or undef when it is down.
sub in_recovery {
	my ($n) = @_;
	my $dbh = dbh_of($pg_ports[$n], 'postgres') or return undef;
	my ($r) = $dbh->selectrow_array('SELECT pg_is_in_recovery()');
	$dbh->disconnect;
	return defined $r ? ($r ? 't' : 'f') : undef;
}

sub primary_node {
	for my $n (0 .. 2) { return $n if (in_recovery($n) // '') eq 'f'; }
	return undef;
}

# etcd, alone, on loopback.
start_process('etcd', 'etcd', '--name', 'e0', '--data-dir', "$dir/etcd",
	'--listen-client-urls', "http://127.0.0.1:$etcd_port", '--advertise-client-urls', "http://127.0.0.1:$etcd_port",
	'--listen-peer-urls', "http://127.0.0.1:$peer_port", '--initial-advertise-peer-urls', "http://127.0.0.1:$peer_port",
	'--initial-cluster', "e0=http://127.0.0.1:$peer_port");

for my $n (0 .. 2) {
	mkdir "$dir/node$n";
	my $rest = port_of(42 + $n);
	PostgreSQL::Test::Utils::append_to_file("$dir/node$n.yml", <<"YML");
scope: idem-proof
namespace: /idem-proof/
name: node$n
log: {level: INFO}
restapi: {listen: "127.0.0.1:$rest", connect_address: "127.0.0.1:$rest"}
etcd3: {host: "127.0.0.1:$etcd_port"}
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 5
    master_start_timeout: 0
    synchronous_mode: true
    maximum_lag_on_failover: 1048576
    postgresql:
      use_pg_rewind: true
      parameters:
        shared_preload_libraries: idem
        idem.database: proof
        idem.naptime: 1
        max_connections: 60
        wal_keep_size: 256MB
        fsync: "on"
  initdb: [{encoding: UTF8}, {auth: trust}]
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
postgresql:
  listen: "127.0.0.1:$pg_ports[$n]"
  connect_address: "127.0.0.1:$pg_ports[$n]"
  data_dir: $dir/node$n/data
  bin_dir: $bindir
  pgpass: $dir/node$n/pgpass
  authentication:
    superuser: {username: postgres}
    replication: {username: postgres}
    rewind: {username: postgres}
  parameters:
    unix_socket_directories: "$dir/node$n"
    logging_collector: "on"
    log_directory: $dir/node$n
    log_filename: postgresql.log
YML
	$procs{$n} = start_process("patroni$n", 'patroni', "$dir/node$n.yml");
	# The first node bootstraps alone, so that it is the first primary.
	wait_for('the first primary', sub { defined primary_node() }) if $n == 0;
}
my $first = primary_node();
wait_for('two streaming standbys', sub {
	my $dbh = dbh_of($pg_ports[$first], 'postgres') or return 0;
	my ($sync, $all) = $dbh->selectrow_array(q{SELECT count(*) FILTER (WHERE sync_state = 'sync'), count(*)
		FROM pg_stat_replication WHERE state = 'streaming'});
	return ($sync // 0) == 1 && $all == 2;
});
my $setup = dbh_of($pg_ports[$first], 'postgres');
$setup->do('CREATE DATABASE proof');
$setup = dbh_of($pg_ports[$first]);
$setup->do($_) for split /;\n/, IdemProof::proof_schema_sql();

# A key bound to its session, held open on the first primary until it dies.
my $bound = dbh_of($pg_ports[$first]);
$bound->do('SET idem.bind_lock_to_session = on');
my ($bound_kind, $bound_fence) = $bound->selectrow_array(
	q{SELECT kind, fence FROM idem.claim_idempotency_key('bound', 'b1', 'h', 'bound-owner', '1 hour')});
is($bound_kind, 'new_claim', 'a key bound to its session is claimed on the first primary');

my $hosts = join ',', ('127.0.0.1') x 3;
my $ports = join ',', @pg_ports;
my $dsn = "dbi:Pg:dbname=proof;host=$hosts;port=$ports;target_session_attrs=read-write;connect_timeout=2";
my $stop_file = "$dir/stop";
my $t0 = now() + 1;
my (@failover_log);    # [killed node, kill time, promoted node, writable at, rejoined at]

my $failed = run_clients($clients, sub {
	my ($id) = @_;
	srand(5000 + $id);
	my $bind = $id % 2;
	my $c = IdemProof::Client->new(undef, $id, $dir, lock_ms => 2000, scope => 'storm', dsn => $dsn,
		bind => $bind, claim_in_transaction => $bind ? 0.25 : 0, old_owners => $bind,
		# Bound owners hold their keys a little longer, so that more of them
		# are cut off by the kills and come back as old owners.
		effect_stall => $bind ? 0.03 : undef);
	$c->{dsn} = $dsn;
	storm_client($c, t0 => $t0, duration => 600, sweep_end => $t0 + 20, keys => $keys,
		window => 30, chaos => 0.02, clients => $clients, stop_file => $stop_file);
}, sub {
	for (1 .. $failovers) {
		Time::HiRes::sleep(3);    # load on the primary before each kill
		my $old = primary_node() // die 'no primary before the kill';
		my ($pid) = split /\n/, slurp_file("$dir/node$old/data/postmaster.pid");
		my $killed_at = now();
		kill 'KILL', $pid or die "kill -9 $pid: $!";
		my $new;
		wait_for('a new primary', sub {
			for my $n (grep { $_ != $old } 0 .. 2) {
				next unless (in_recovery($n) // '') eq 'f';
				my $dbh = dbh_of($pg_ports[$n]) or next;
				my $ok = $dbh->do('CREATE TEMP TABLE writable (x int)');
				$dbh->disconnect;
				if ($ok) { $new = $n; return 1; }
			}
			return 0;
		});
		my $writable_at = now();
		wait_for("node$old to rejoin as a standby", sub {
			return 0 unless (in_recovery($old) // '') eq 't';
			my $dbh = dbh_of($pg_ports[$new], 'postgres') or return 0;
			my ($all) = $dbh->selectrow_array(
				q{SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'});
			return ($all // 0) == 2;
		});
		push @failover_log, [ $old, $killed_at, $new, $writable_at, now() ];
	}
	Time::HiRes::sleep(3);    # load on the last primary too
	PostgreSQL::Test::Utils::append_to_file($stop_file, "stop\n");
});
is($failed, 0, 'every client got an answer to every request across the failovers');
is(scalar(@failover_log), $failovers, "$failovers failovers happened");
for my $f (@failover_log) {
	my ($old, $killed, $new, $writable, $rejoined) = @$f;
	note(sprintf('failover: node%d killed, node%d writable after %.1f s; node%d back as a standby after %.1f s',
		$old, $new, $writable - $killed, $old, $rejoined - $killed));
}

my $primary = primary_node();
my $dbh = dbh_of($pg_ports[$primary]);
my $events = read_logs($dir);
my $stats = total_stats($events);
my $verdict = check_storm($dbh, $events, $keys, 'storm');

# Every acknowledged outcome is there as acknowledged.
my %row = map { $_->[0] => $_ } @{ $dbh->selectall_arrayref(
	q{SELECT key, fence, result_ref_id, response_body::text FROM idem.idempotency_request WHERE scope = 'storm'}) };
my $lost = grep { my $r = $row{ $_->[0] };
	!$r || $r->[1] != $_->[1] || $r->[2] ne $_->[2] || $r->[3] ne $_->[4] } @{ $events->{S} };
is($lost, 0, 'every acknowledged outcome is on the new primary as acknowledged (' . scalar(@{ $events->{S} }) . ')');

# Fences never go back: a claim granted after a promotion gets a fence above
# every fence acknowledged (claims, checkpoints, outcomes) before the kill.
for my $f (@failover_log) {
	my ($old, $killed, $new, $writable) = @$f;
	my @before = map { $_->[1] } (grep { $_->[2] < $killed } @{ $events->{C} }, @{ $events->{R} }),
	  grep { $_->[3] < $killed } @{ $events->{S} };
	my @after = map { $_->[1] } grep { $_->[2] > $writable } @{ $events->{C} };
	my ($max_before) = sort { $b <=> $a } @before;
	my ($min_after) = sort { $a <=> $b } @after;
	ok(@before && @after && $min_after > $max_before,
		"failover of node$old: fences after ($min_after ...) above every fence acknowledged before (... "
		  . ($max_before // 'none') . ')');
}

# Every fence handed out, the bound claims' among them.
# The storm's old owners come only when a failover cuts one off while it
# owns a key: counted, each refused; the bound key below gives one for sure.
my $fences = check_fences_handed_out($events, min_old_owners => 0);
my $bound_claims = $stats->{owning_claims_bound} // 0;
cmp_ok($bound_claims, '>=', 0.3 * $fences->{fences},
	"a real share of the owning claims was bound ($bound_claims of $fences->{fences})");
note("failover storm: fences handed out $fences->{fences} over $fences->{keys} keys, $bound_claims by bound claims "
	  . "($fences->{uncommitted} from a COMMIT never acknowledged, of them handed out again "
	  . "$fences->{uncommitted_again}, to the same key $fences->{uncommitted_again_same_key}); keys claimed new again after a lost claim "
	  . "$fences->{new_claims_again} (after an acknowledged one $fences->{acknowledged_claims_lost}); "
	  . "old owners refused $fences->{old_owners}");

# The bound key: its session died with the first primary, so its hour-long
# lock ended there. Either this claim finds it stale, or the worker of a new
# primary swept it first (failed_retryable, as for any stale key): both
# hand it to the next owner with a higher fence.
my ($kind, $fence, $code) = $dbh->selectrow_array(
	q{SELECT kind, fence, failure_code FROM idem.claim_idempotency_key('bound', 'b1', 'h', 'next-owner')});
like($kind, qr/^(processing_stale|retryable_failure)$/,
	"the key bound to a session of the old primary is stale on the new primary ($kind"
	  . ($code ? ", swept: $code" : '') . ')');
cmp_ok($fence, '>', $bound_fence, '... and its next owner gets a higher fence');
# Its old owner, reconnected to the new primary with the fence it was given,
# is refused as a stale fence.
my $old_owner_write = defined($dbh->do(q{SELECT idem.mark_succeeded('bound', 'b1', ?, 200, '{}')}, undef, $bound_fence))
  ? 'accepted' : $dbh->state;
is($old_owner_write, 'P4012', "the bound key's old owner, writing with its old fence, is refused (P4012)");

# The worker maintains the primary and idles on the standbys.
my ($rounds) = $dbh->selectrow_array(q{SELECT total_rounds FROM idem.worker_status WHERE database = 'proof'});
wait_for('a worker round on the new primary', sub {
	my ($now) = $dbh->selectrow_array(q{SELECT total_rounds FROM idem.worker_status WHERE database = 'proof'});
	return $now > $rounds;
});
pass('the worker runs rounds on the new primary');
for my $n (grep { $_ != $primary } 0 .. 2) {
	my $s = dbh_of($pg_ports[$n]);
	my ($state) = $s->selectrow_array(q{SELECT state FROM idem.worker_status WHERE database = 'proof'});
	is($state, 'standby', "the worker idles on the standby node$n");
}
note(sprintf('failover storm: %d clients, %d keys: %d requests, %d effects, %d duplicates, %d outcomes acknowledged, '
	  . '%d connections lost, %d commits of unknown outcome (resolved by the retry)',
	$clients, $keys, $stats->{requests}, $verdict->{effects}, $verdict->{doubled}, scalar(@{ $events->{S} }),
	$stats->{connection_lost} // 0, $stats->{commit_unknown} // 0));

$dbh->disconnect;
stop_all();
done_testing();
