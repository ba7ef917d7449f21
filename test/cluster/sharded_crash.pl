# The crash run of the proof suite (103_crash.pl) through PL/Proxy: the storm
# on 4 shards (fsync on) behind the proxy while backends of random shards are
# killed with kill -9 (that shard's postmaster restarts every backend, with
# crash recovery) and one shard is stopped with pg_ctl stop -m immediate and
# started again. A call the proxy could not finish on its shard fails, and
# the client retries its request as after any error. Afterwards, read from
# every shard: every acknowledged claim, checkpoint and outcome is there as
# acknowledged, no effect duplicated, no key left processing.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin, "$FindBin::RealBin/../t";
use IdemProof qw(now run_clients read_logs total_stats storm_client read_rows_and_effects check_acknowledged);
use IdemCluster qw(port_of start_shards start_proxy proxy_dsn shard_conninfo);
use PostgreSQL::Test::Utils;
use Test::More;
use DBI;

my $clients  = $ENV{STORM_CLIENTS} // 16;
my $keys     = $ENV{STORM_KEYS} // 1000;
my $duration = $ENV{STORM_SECONDS} // 12;
my $backend_kills = 3;

my @shards = start_shards('crashshard', 4, 60, fsync => 1);
my $proxy  = start_proxy(66, @shards);
my $dsn    = proxy_dsn($proxy);
my $dir    = PostgreSQL::Test::Utils::tempdir;
my $t0     = now() + 1;
srand(3300);

sub shard_dbh {
	my ($node) = @_;
	return DBI->connect('dbi:Pg:' . shard_conninfo($node) =~ s/ /;/gr, '', '',
		{ PrintError => 0, RaiseError => 0, AutoCommit => 1 });
}

sub wait_until_up {
	my ($node) = @_;
	my $give_up = now() + $PostgreSQL::Test::Utils::timeout_default;
	until (my $dbh = shard_dbh($node)) {
		die $node->name . ' did not come back' if now() > $give_up;
		Time::HiRes::sleep(0.1);
	}
}

my (@killed, $stopped);
sub inject_faults {
	for my $at (sort { $a <=> $b } map { $t0 + 1 + rand(0.5 * $duration) } 1 .. $backend_kills) {
		Time::HiRes::sleep($at - now()) if $at > now();
		my $node = $shards[ int(rand(@shards)) ];
		my $offset = -s $node->logfile;
		my $pid;
		for (1 .. 50) {
			my $dbh = shard_dbh($node);
			($pid) = $dbh ? $dbh->selectrow_array(q{SELECT pid FROM pg_stat_activity
				WHERE datname = 'proof' AND backend_type = 'client backend' AND pid <> pg_backend_pid()
				ORDER BY state = 'idle', random() LIMIT 1}) : ();
			last if $pid && kill('KILL', $pid);
			undef $pid;
			Time::HiRes::sleep(0.05);
		}
		die 'no backend could be killed on ' . $node->name unless $pid;
		push @killed, $node->name;
		$node->wait_for_log(qr/all server processes terminated; reinitializing/, $offset);
		wait_until_up($node);
	}
	my $at = $t0 + 0.7 * $duration;
	Time::HiRes::sleep($at - now()) if $at > now();
	$stopped = $shards[ int(rand(@shards)) ];
	$stopped->stop('immediate');
	$stopped->start;
	wait_until_up($stopped);
}

my $failed = run_clients($clients, sub {
	my ($id) = @_;
	srand(3400 + $id);
	my $c = IdemProof::Client->new(undef, $id, $dir, lock_ms => 500, scope => 'crash', dsn => $dsn,
		effect_call => 'SELECT proof_effect_and_succeed($1, $2, $3, $4, $5::jsonb)');
	storm_client($c, t0 => $t0, duration => $duration, sweep_end => $t0 + 0.7 * $duration,
		keys => $keys, window => 40, chaos => 0.01, clients => $clients);
}, \&inject_faults);
is($failed, 0, 'every client got an answer to every request through the proxy, through every crash');
is(scalar(@killed), $backend_kills, "$backend_kills shard backends killed with kill -9 (@killed)");
ok($stopped, 'a shard was stopped immediately and started again (' . ($stopped ? $stopped->name : 'none') . ')');

my $events = read_logs($dir);
my $stats  = total_stats($events);
my ($row, $effect, $effects_of) = ({}, {}, {});
my ($processing, @spread) = (0);
for my $node (@shards) {
	my $dbh = shard_dbh($node);
	$dbh->selectrow_array('SELECT idem.sweep_stale()');
	my ($n, $p) = $dbh->selectrow_array(q{SELECT count(*), count(*) FILTER (WHERE status = 'processing')
		FROM idem.idempotency_request WHERE scope = 'crash'});
	$processing += $p;
	push @spread, $n;
	read_rows_and_effects($dbh, 'crash', $row, $effect, $effects_of);
}
is(scalar(keys %$row), $keys, "$keys keys exist across the shards");
is($processing, 0, 'no key is left processing');
my %shard_of = map { split / / } split /\n/, $proxy->safe_psql('proxy',
	"SELECT k || ' ' || (idem.shard_hash('crash', k) & 3) FROM (SELECT 'k' || lpad(n::text, 4, '0') k FROM generate_series(0, $keys - 1) n) s");
my $verdict = check_acknowledged($row, $effect, $effects_of, $events, $keys,
	shard_of => sub { return $shard_of{ $_[0] } });
note("sharded crash: $clients clients, $keys keys, ${duration}s + final pass through PL/Proxy: $stats->{requests} requests; "
	  . "per-shard keys: @spread; acknowledged " . scalar(@{ $events->{C} }) . ' claims, ' . scalar(@{ $events->{R} })
	  . ' checkpoints, ' . scalar(@{ $events->{S} }) . ' outcomes; lost ' . scalar(@{ $verdict->{lost_outcomes} })
	  . "; effects $verdict->{effects}; calls cut by a fault " . (($stats->{lost_while_owning} // 0)
	  + scalar(@{ $events->{X} })));

$_->stop for @shards, $proxy;
done_testing();
