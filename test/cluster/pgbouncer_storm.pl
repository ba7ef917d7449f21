# The twin storm through PgBouncer in transaction pooling mode: each
# transaction may run on another server connection, so nothing may rest on
# session state (DBD::Pg's named server-side prepared statements are turned
# off, as for any client of a transaction pooler). Same verdict as
# 101_twin_storm.pl. idem.bind_lock_to_session is unsafe here
# (docs/beyond-one-server.md, "Poolers (PgBouncer)"): the session it binds a
# key to is the pooler's server connection, which outlives the client and
# serves others.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin, "$FindBin::RealBin/../t";
use IdemProof qw(now start_node run_clients read_logs total_stats connect_or_die storm_client check_storm);
use IdemCluster qw(port_of);
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use DBI;

my $clients  = $ENV{STORM_CLIENTS} // 24;
my $keys     = $ENV{STORM_KEYS} // 1000;
my $duration = $ENV{STORM_SECONDS} // 10;
my $pool_size = 6;

my $node = start_node('pooled', port => port_of(30));
my $dir  = PostgreSQL::Test::Utils::tempdir;
my $bouncer_port = port_of(31);
PostgreSQL::Test::Utils::append_to_file("$dir/users.txt", qq{"postgres" ""\n});
PostgreSQL::Test::Utils::append_to_file("$dir/pgbouncer.ini", <<"INI");
[databases]
proof = host=@{[ $node->host ]} port=@{[ $node->port ]} dbname=proof
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bouncer_port
unix_socket_dir =
auth_type = trust
auth_file = $dir/users.txt
pool_mode = transaction
default_pool_size = $pool_size
max_client_conn = 100
logfile = $dir/pgbouncer.log
INI
# Runs in the foreground as the test's child: stopped at the end, or by
# IPC::Run when the test dies.
my $bouncer = IPC::Run::start([ 'pgbouncer', "$dir/pgbouncer.ini" ], '<', '/dev/null', '>', "$dir/pgbouncer.out", '2>&1');
END { $bouncer->kill_kill if $bouncer && $bouncer->pumpable; }
my $dsn = "dbi:Pg(pg_server_prepare=>0):dbname=proof;host=127.0.0.1;port=$bouncer_port";
my $give_up = now() + $PostgreSQL::Test::Utils::timeout_default;
until (DBI->connect($dsn, 'postgres', '', { PrintError => 0 })) {
	BAIL_OUT('pgbouncer did not start: ' . slurp_file("$dir/pgbouncer.out")) if now() > $give_up;
	Time::HiRes::sleep(0.1);
}

my $t0 = now() + 1;
my $failed = run_clients($clients, sub {
	my ($id) = @_;
	srand(2000 + $id);
	my $c = IdemProof::Client->new($node, $id, $dir, lock_ms => 500, scope => 'storm', dsn => $dsn);
	storm_client($c, t0 => $t0, duration => $duration, sweep_end => $t0 + 0.6 * $duration,
		keys => $keys, window => 40, chaos => 0.03, clients => $clients);
});
is($failed, 0, 'every client got an answer to every request through PgBouncer');
my $events = read_logs($dir);
my $stats  = total_stats($events);
my $verdict = check_storm(connect_or_die($node), $events, $keys, 'storm');
my ($backends) = connect_or_die($node)->selectrow_array(
	q{SELECT count(*) FROM pg_stat_activity WHERE datname = 'proof' AND application_name <> 'psql'});
cmp_ok($backends, '<=', $pool_size + 1, "$clients clients shared at most $pool_size server connections (+ this one)");
note("pgbouncer storm: $clients clients over $pool_size server connections, $keys keys, ${duration}s + final pass: "
	  . "$stats->{requests} requests; effects $verdict->{effects}; duplicates $verdict->{doubled}; "
	  . 'takeovers ' . ($stats->{claim_processing_stale} // 0));

# Why idem.bind_lock_to_session is unsafe behind this pooler: the key is
# bound to PgBouncer's server connection, which the client's exit does not
# end, so the key is not stale when its client is gone (docs/waiting.md).
my $pooled = DBI->connect($dsn, 'postgres', '', { RaiseError => 1, AutoCommit => 1 });
$pooled->begin_work;    # one transaction: one server connection
$pooled->do('SET LOCAL idem.bind_lock_to_session = on');
$pooled->selectrow_array(q{SELECT kind FROM idem.claim_idempotency_key('pooled', 'bound', 'h', 'gone', '1 hour')});
$pooled->commit;
$pooled->disconnect;
my $direct = connect_or_die($node);
my ($bound) = $direct->selectrow_array(
	q{SELECT bound_session IS NOT NULL FROM idem.idempotency_request WHERE scope = 'pooled' AND key = 'bound'});
ok($bound, 'a claim through the pooler bound its key to a session');
my ($kind) = $direct->selectrow_array(q{SELECT kind FROM idem.claim_idempotency_key('pooled', 'bound', 'h')});
is($kind, 'processing_active', 'the client is gone but the key is not stale: its session is the pooler\'s (hence: unsafe there)');

$bouncer->kill_kill;
$node->stop;
done_testing();
