# Completers on Citus: each node runs the completers of the keys its shards
# hold, the coordinator (which holds none) runs none, and a completer runs
# once per due key across the cluster. Keys of a scope with a completer
# are claimed through the coordinator (delegated by key, so they land on
# the shards of both workers), checkpointed and abandoned; their 1 s locks
# run out. Then idem.run_maintenance() is called on every node, the
# coordinator first, until every key is completed: each worker's calls ran
# exactly as many completers as its shards hold keys, the coordinator's
# none, and every key has exactly one effect, written by its completer with
# the completer's fence, and ended succeeded by it. On the C++ engine the
# same again through the background worker (idem.database = 'proof' on
# every node): its rounds complete a second scope's keys, counted per node
# in idem.stats.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin, "$FindBin::RealBin/../t";
use IdemProof qw(poll_until);
use IdemCitus qw(start_citus);
use PostgreSQL::Test::Utils;
use Test::More;
use DBI;

my $keys = $ENV{CITUS_COMPLETER_KEYS} // 40;
my $portable = IdemProof::portable_engine();

my $cluster = start_citus('completers');
my $c = $cluster->coordinator;
my @workers = $cluster->workers;
# The portable engine's run_maintenance runs the completers idem's owner
# owns (docs/portable.md): the function is idem_owner's there.
my $as = $portable ? 'SET ROLE idem_owner; ' : '';
$c->safe_psql('proof', $as . q{
CREATE FUNCTION public.complete_key(scope text, key text, fence bigint, recovery_point text,
                                    attempt_count integer)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.effects (scope, key, fence, client) VALUES (scope, key, fence, attempt_count);
    PERFORM idem.mark_succeeded(scope, key, fence, 201, jsonb_build_object('resumed_from', recovery_point));
END $$});
# INSERT ... VALUES: Citus writes an INSERT ... SELECT into the reference
# table by COPY, under which the policy trigger's subtransaction fails
# (docs/beyond-one-server.md, "Known defects").
my $policies = join(', ', map { "('$_', 'public.complete_key(text, text, bigint, text, integer)')" }
	  $portable ? ('run') : ('run', 'bg'));
$c->safe_psql('proof', $as . "INSERT INTO idem.scope_policy (scope, completer) VALUES $policies");

my $dbh = DBI->connect($cluster->dsn, '', '', { RaiseError => 1, PrintError => 0, AutoCommit => 1 });

# $keys keys of $scope, each claimed with a 1 s lock and a recovery point
# through the coordinator, then left; returns once every lock ran out.
sub abandon_keys {
	my ($scope) = @_;
	for my $n (1 .. $keys) {
		my $key = sprintf('%s-%03d', $scope, $n);
		my ($fence) = $dbh->selectrow_array(
			q{SELECT fence FROM idem.claim_idempotency_key($1, $2, 'h', 'client', '1 second')}, undef, $scope, $key);
		$dbh->do(q{SELECT idem.set_recovery_point($1, $2, $3, 'charged')}, undef, $scope, $key, $fence);
	}
	ok(poll_until("the locks of $scope to run out", sub {
		$dbh->selectrow_array(q{SELECT bool_and(locked_until <= now()) FROM idem.idempotency_request
			WHERE scope = $1}, undef, $scope);
	}, 0.1), "$keys keys of scope $scope abandoned, their locks run out");
	my @held = $cluster->keys_per_worker($scope);
	ok(!grep({ $_ == 0 } @held), "... on the shards of every worker (@held)");
	return @held;
}

# The keys of $scope completed: one effect each, the completer's.
sub check_completed {
	my ($scope) = @_;
	is($dbh->selectrow_array(q{SELECT count(*) FROM idem.idempotency_request
		WHERE scope = $1 AND status = 'succeeded' AND claimed_by = 'idem completer'
		  AND response_body->>'resumed_from' = 'charged'}, undef, $scope),
		$keys, "$scope: every key was ended succeeded by its completer, from its recovery point");
	is($dbh->selectrow_array(q{SELECT count(*) FROM effects WHERE scope = $1}, undef, $scope), $keys,
		"$scope: one effect per key");
	is($dbh->selectrow_array(q{SELECT count(*) FROM (SELECT key FROM effects WHERE scope = $1
		GROUP BY key HAVING count(*) > 1) d}, undef, $scope), 0, "$scope: no key's completer ran twice");
	is($dbh->selectrow_array(q{SELECT count(*) FROM effects e JOIN idem.idempotency_request r USING (scope, key)
		WHERE e.scope = $1 AND e.fence = r.fence}, undef, $scope), $keys,
		"$scope: each effect was written under the fence that ended its key");
	return;
}

# The completer runs idem.stats counted on $node (the C++ engine).
sub runs_counted {
	my ($node) = @_;
	return $node->safe_psql('proof',
		q{SELECT coalesce(sum(completer_runs), 0) FROM idem.stats WHERE datname = current_database()});
}

# ---- idem.run_maintenance() on every node ------------------------------------
my @held = abandon_keys('run');
my %runs;
my $report = $c->safe_psql('proof', q{SELECT idem.run_maintenance()->>'completer_runs'});
is($report, 0, 'the coordinator, which holds no shard, runs no completer while keys are due');
$runs{ $c->name } += $report;
ok(poll_until('every key of scope run to be completed', sub {
	for my $node ($cluster->nodes) {
		$runs{ $node->name } += $node->safe_psql('proof', q{SELECT idem.run_maintenance()->>'completer_runs'});
	}
	return $dbh->selectrow_array(q{SELECT count(*) FROM idem.idempotency_request
		WHERE scope = 'run' AND status = 'succeeded'}) == $keys;
}, 0.2), 'run_maintenance on the workers completed every key');
is($runs{ $c->name }, 0, 'the coordinator ran none');
for my $id (0 .. $#workers) {
	is($runs{ $workers[$id]->name }, $held[$id],
		'worker ' . ($id + 1) . " ran the completers of the $held[$id] keys its shards hold, once each");
}
check_completed('run');
note('citus completers (run_maintenance): ' . join(', ', map { $_->name . ' ' . ($runs{ $_->name } // 0) } $cluster->nodes));

# ---- The C++ engine's background worker ----------------------------------------
SKIP: {
	skip 'the portable engine has no background worker (run_maintenance above is its round)', 10 if $portable;
	for my $node ($cluster->nodes) {
		$node->append_conf('postgresql.conf', "idem.database = 'proof'\nidem.naptime = 1\n");
		$node->restart;
	}
	$dbh = DBI->connect($cluster->dsn, '', '', { RaiseError => 1, PrintError => 0, AutoCommit => 1 });
	my %before = map { $_->name => runs_counted($_) } $cluster->nodes;
	@held = abandon_keys('bg');
	ok(poll_until('every key of scope bg to be completed by the workers', sub {
		$dbh->selectrow_array(q{SELECT count(*) FROM idem.idempotency_request
			WHERE scope = 'bg' AND status = 'succeeded'}) == $keys;
	}, 0.2), 'the background workers completed every key');
	my %ran = map { $_->name => runs_counted($_) - $before{ $_->name } } $cluster->nodes;
	is($ran{ $c->name }, 0, "the coordinator's worker ran none");
	for my $id (0 .. $#workers) {
		is($ran{ $workers[$id]->name }, $held[$id],
			'worker ' . ($id + 1) . "'s background worker ran the completers of the $held[$id] keys its shards hold");
	}
	check_completed('bg');
	note('citus completers (background worker): ' . join(', ', map { $_->name . ' ' . $ran{ $_->name } } $cluster->nodes));
}

$dbh->disconnect;
$cluster->stop;
done_testing();
