# idem.citus_distribute(), idem.citus_node_setup() and idem.local_relations()
# on a coordinator and two workers (docs/beyond-one-server.md, "Sharding
# with Citus"): what the distribution made (the tables, their colocation
# and CHECK constraints, the reference tables, the delegated calls), that a
# second call changes nothing, each node's fence residue and the fences a
# storm of keys draws, the relations each node maintains, and the refusals:
# on a worker, and with rows in the coordinator's tables (in a second
# database, where nothing is distributed yet); there, rows of the policies
# are copied to every node and the coordinator's old copy emptied.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin, "$FindBin::RealBin/../t";
use IdemCitus qw(start_citus engine_name);
use IPC::Run ();
use JSON::PP ();
use PostgreSQL::Test::Utils;
use Test::More;

my $cluster = start_citus('distribute');
my $c = $cluster->coordinator;
my @workers = $cluster->workers;
my $portable = engine_name() eq 'portable';
# The portable engine's objects are idem_owner's; the C++ extension's the
# superuser's: each runs the functions as the owner.
my $as = $portable ? 'SET ROLE idem_owner; ' : '';

sub on_c { return $c->safe_psql('proof', $_[0]); }

# $sql on $node as the owner: "ok" or "ERROR <SQLSTATE> <message>".
sub outcome {
	my ($node, $db, $sql, $prefix) = @_;
	$prefix //= $as;
	my ($rc, $out, $err) = $node->psql($db, "\\set VERBOSITY verbose\n$prefix$sql");
	return 'ok' if $rc == 0;
	return $err =~ /ERROR:  (\w{5}): ([^\n]*)/ ? "ERROR $1 $2" : "failed: $err";
}

# ==== what the distribution made ====
is(on_c(q{SELECT string_agg(logicalrelid::text || ' ' || partmethod::text || ' '
                            || coalesce(column_to_column_name(logicalrelid, partkey), '-'), ', '
                            ORDER BY logicalrelid::text)
            FROM pg_dist_partition WHERE logicalrelid::text LIKE 'idem.%'}),
	'idem.consumed_message h message_id, idem.idempotency_request h key, idem.outbox_event h key, '
	  . 'idem.scope_owner n -, idem.scope_policy n -',
	'the key table and the outbox by key, the inbox by message_id, the policies as reference tables');
is(on_c(q{SELECT count(DISTINCT colocationid) FROM pg_dist_partition
           WHERE logicalrelid IN ('idem.idempotency_request'::regclass, 'idem.outbox_event'::regclass,
                                  'idem.consumed_message'::regclass)}),
	'1', 'the key table, the outbox and the inbox are colocated');
my $delegated_calls = 'claim_idempotency_key:key claim_or_wait:key consume_once:message_id evict:key extend_lock:key '
  . 'force_expire:key lookup:key mark_failed:key mark_failed_returning:key mark_succeeded:key '
  . 'mark_succeeded_returning:key outbox_put:key peek:key release:key set_consumed_result:message_id '
  . 'set_recovery_point:key stored_answer:key';
is(on_c(q{SELECT string_agg(p.proname || ':' || (p.proargnames)[o.distribution_argument_index + 1]
                            || CASE WHEN o.colocationid = k.colocationid THEN '' ELSE ' (not colocated)' END,
                            ' ' ORDER BY p.proname)
            FROM pg_dist_object o
            JOIN pg_proc p ON o.classid = 'pg_proc'::regclass AND o.objid = p.oid
            JOIN pg_dist_partition k ON k.logicalrelid = 'idem.idempotency_request'::regclass
           WHERE p.pronamespace = 'idem'::regnamespace AND o.distribution_argument_index IS NOT NULL}),
	$delegated_calls,
	'every call that takes a key is delegated by it, colocated with the key table');

# The row rules on the shards: the column-argument form, the same names.
my ($key_shard, $worker_port) = split /\|/, on_c(q{
	SELECT s.shardid, p.nodeport FROM pg_dist_shard s JOIN pg_dist_shard_placement p USING (shardid)
	 WHERE s.logicalrelid = 'idem.idempotency_request'::regclass ORDER BY s.shardid LIMIT 1});
my ($holder) = grep { $_->port == $worker_port } @workers;
like($holder->safe_psql('proof', qq{SELECT pg_get_constraintdef(oid) FROM pg_constraint
                                     WHERE conrelid = 'idem.idempotency_request_$key_shard'::regclass
                                       AND conname = 'idempotency_request_invariants'}),
	qr/^CHECK \(idem\.request_invariants_hold\(scope, key, request_hash, status, /,
	'a shard of the key table checks its rows with the column-argument form');
# A row that breaks a rule, written through the coordinator: the same 23514
# naming the same rule as on one server.
for my $case (
	[ 'idempotency_request', q{INSERT INTO idem.idempotency_request (scope, key, request_hash, status,
	      recovery_point, fence, claimed_at, locked_until, created_at, updated_at, expires_at)
	    VALUES ('d70', 'bad', 'h', 'processing', 'finished', 1, now(), now() + interval '1 hour',
	            now(), now(), now() + interval '1 day')}, 'finished_means_succeeded' ],
	[ 'consumed_message', q{INSERT INTO idem.consumed_message (consumer, message_id, message_hash,
	      consumed_at, expires_at) VALUES ('d70', 'bad', '', now(), now() + interval '1 day')},
	  'message_hash_present' ],
	[ 'outbox_event', q{INSERT INTO idem.outbox_event (scope, key, event_type, payload, delivery_key,
	      available_at, created_at, status) VALUES ('d70', 'bad', 'e', '{}', 'd', now(), now(), 'leased')},
	  'outbox_leased_has_lease' ])
{
	my ($table, $sql, $rule) = @$case;
	like(outcome($c, 'proof', $sql), qr/^ERROR 23514 new row violates idem invariant "$rule"/,
		"$table: a row breaking $rule is refused with 23514 through the coordinator");
}

# ==== a second call changes nothing ====
my $again = JSON::PP::decode_json((split /\n/, on_c("${as}SELECT idem.citus_distribute()"))[-1]);
is(join(' ', sort map { $_->{done} } @{ $again->{tables} }), 'already already already already already',
	'a second call leaves every table as it is');
is(scalar(grep { $_->{done} ne 'already' } @{ $again->{delegated} }), 0, 'and every delegated call');
# Called with its default: it delegates where every node keeps a NULL key
# from being delegated (idem preloaded: the C++ engine), not otherwise; the
# calls delegated before stay so.
is(($again->{delegate_calls} ? 'delegates' : 'does not delegate'), ($portable ? 'does not delegate' : 'delegates'),
	'by default it delegates the calls only where every node has idem\'s NULL-key guard');
is(scalar(@{ $again->{delegated} }), scalar(split / /, $delegated_calls), '... and names every call delegated before');
is(scalar(@{ $again->{nodes} }), 3, 'it sets up all three nodes');
is(join(' ', map { $_->{setup}{sequences}{'idem.fence_seq'}{changed} ? 'changed' : 'kept' } @{ $again->{nodes} }),
	'kept kept kept', 'and each node keeps its fence sequence');

# ==== fences: each node in its own residues ====
# fence_seq by 2048 in residue g, its jump lane by 2048 in g + 1024, the
# lease fences by 1024 in g (idem.citus_node_setup).
my @residues = $cluster->on_every_node(q{
	SELECT g.groupid || ' ' || string_agg(s.seqincrement || '/' || CASE s.seqrelid
	         WHEN 'idem.fence_seq'::regclass THEN (SELECT mod(last_value, 2048) FROM idem.fence_seq)
	         WHEN 'idem.fence_jump_seq'::regclass THEN (SELECT mod(last_value, 2048) FROM idem.fence_jump_seq)
	         ELSE (SELECT mod(last_value, 1024) FROM idem.outbox_lease_fence_seq) END, ' ' ORDER BY s.seqrelid::regclass::text)
	  FROM pg_dist_local_group g, pg_sequence s
	 WHERE s.seqrelid IN ('idem.fence_seq'::regclass, 'idem.fence_jump_seq'::regclass,
	                      'idem.outbox_lease_fence_seq'::regclass)
	 GROUP BY g.groupid});
for my $line (@residues) {
	my ($group, @seqs) = split / /, $line;
	my $lane = $group + 1024;
	is("@seqs", "2048/$lane 2048/$group 1024/$group",
		"group $group: the jump lane, fence_seq and the lease fences (by name) step in residues $lane, $group, $group");
}
# Keys claimed through the coordinator, one statement each (delegated):
# each fence is drawn by
# the node holding the key's shard, so it is congruent to that node's
# group; no two are equal.
on_c(join '', map { "SELECT fence FROM idem.claim_idempotency_key('d70', 'k$_', 'h');\n" } 1 .. 40);
is(on_c(q{
	SELECT count(*) || ' ' || count(DISTINCT r.fence) || ' '
	       || count(*) FILTER (WHERE mod(r.fence, 2048) = p.groupid)
	  FROM idem.idempotency_request r
	  JOIN pg_dist_placement p
	    ON p.shardid = get_shard_id_for_distribution_column('idem.idempotency_request', r.key)
	 WHERE r.scope = 'd70'}),
	'40 40 40', "40 keys' fences: distinct, each in the residue of the node that holds the key");
is(join(' ', map { $_ > 0 ? 'some' : 'none' } $cluster->keys_per_worker('d70')), 'some some',
	'the keys are spread over both workers');

# ==== local_relations: what each node maintains ====
is(on_c(q{SELECT count(*) FROM idem.local_relations('idem.idempotency_request')}), '0',
	'the coordinator holds no shard of the key table');
for my $w (@workers) {
	my $group = $w->safe_psql('proof', 'SELECT groupid FROM pg_dist_local_group');
	my $placed = on_c(qq{
		SELECT string_agg(shard_name(s.logicalrelid, s.shardid), ' ' ORDER BY s.shardid)
		  FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
		 WHERE s.logicalrelid = 'idem.outbox_event'::regclass AND p.groupid = $group});
	is($w->safe_psql('proof', q{SELECT string_agg(r::text, ' ') FROM idem.local_relations('idem.outbox_event') r}),
		$placed, "worker of group $group: the outbox's shards placed on it, by name");
}
on_c(q{INSERT INTO idem.scope_policy (scope, max_attempts) VALUES ('d70', 3)});
my @copies = $cluster->on_every_node(q{SELECT string_agg(r::text, ' ') FROM idem.local_relations('idem.scope_policy') r});
is(scalar(keys %{ { map { $_ => 1 } @copies } }), 1, 'every node names the same copy of the policies');
like($copies[0], qr/^idem\.scope_policy_\d+$/, '... the reference table\'s one shard');
is(join(' ', map { $_->safe_psql('proof', "SELECT max_attempts FROM $copies[0] WHERE scope = 'd70'") } $cluster->nodes),
	'3 3 3', 'a policy written through the coordinator is in every node\'s copy');

# ==== refusals ====
like(outcome($workers[0], 'proof', 'SELECT idem.citus_distribute()'),
	qr/^ERROR 55000 idem\.citus_distribute\(\) runs on the coordinator/, 'on a worker: 55000');

# A second database where nothing is distributed yet, with a key and a
# policy written on the coordinator before the distribution. The portable
# engine's owner there is a role made in that database once the workers
# joined (Citus creates it on them), as the documentation says.
for my $node ($cluster->nodes) {
	$node->safe_psql('postgres', 'CREATE DATABASE fresh');
	$node->safe_psql('fresh', 'CREATE EXTENSION citus');
}
$c->safe_psql('fresh', sprintf(q{SELECT citus_set_coordinator_host('%s', %d)}, $c->host, $c->port));
$c->safe_psql('fresh', sprintf(q{SELECT citus_add_node('%s', %d)}, $_->host, $_->port)) for @workers;
my $fresh_as = $portable ? 'SET ROLE fresh_owner; ' : '';
if ($portable) {
	$c->safe_psql('fresh', 'CREATE ROLE fresh_owner LOGIN; GRANT CREATE ON DATABASE fresh TO fresh_owner');
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run([ $c->installed_command('psql'), '-XAtq', '-v', 'ON_ERROR_STOP=1',
			'-d', $c->connstr('fresh') . ' user=fresh_owner', '-f', IdemCitus::tree() . '/dist/idem-portable.sql' ],
		'<', '/dev/null', '>', \$out, '2>', \$err);
	ok($ok, 'fresh: the portable engine installed on the coordinator') or diag($err);
} else {
	$c->safe_psql('fresh', 'CREATE EXTENSION idem');
}
$c->safe_psql('fresh', qq{${fresh_as}SELECT kind FROM idem.claim_idempotency_key('fresh', 'k', 'h');
	INSERT INTO idem.scope_policy (scope, max_attempts) VALUES ('fresh', 2)});
like(outcome($c, 'fresh', 'SELECT idem.citus_distribute()', $fresh_as),
	qr/^ERROR 55000 idem's tables to distribute hold rows on the coordinator: idem\.idempotency_request$/,
	'fresh: a key in the coordinator\'s table refuses the distribution (55000, naming the table)');
is($c->safe_psql('fresh', q{SELECT (SELECT count(*) FROM pg_dist_partition) || ' '
	|| (SELECT seqincrement FROM pg_sequence WHERE seqrelid = 'idem.fence_seq'::regclass)}),
	'0 1', 'fresh: nothing was distributed and no fence sequence changed');
$c->safe_psql('fresh', "${fresh_as}DELETE FROM idem.idempotency_request");
is(outcome($c, 'fresh', 'SELECT idem.citus_distribute()', $fresh_as), 'ok', 'fresh: once the key is moved out, it distributes');
is($c->safe_psql('fresh', q{SELECT count(*) FROM pg_dist_object WHERE distribution_argument_index IS NOT NULL}),
	$portable ? '0' : scalar(split / /, $delegated_calls),
	'fresh: with its default, the calls are delegated on the C++ engine (preloaded on every node), not on the portable one');
is($c->safe_psql('fresh', q{SELECT max_attempts || ' ' || pg_relation_size('idem.scope_policy')
	FROM idem.scope_policy WHERE scope = 'fresh'}), '2 0',
	'fresh: the policy is in the reference table, and the coordinator\'s old copy is emptied');
is(join(' ', map {
	my $copy = $_->safe_psql('fresh', q{SELECT string_agg(r::text, ' ') FROM idem.local_relations('idem.scope_policy') r});
	$_->safe_psql('fresh', "SELECT count(*) FROM $copy WHERE scope = 'fresh'") } $cluster->nodes),
	'1 1 1', 'fresh: every node has the policy in its copy');
is(join(' ', map { $_->safe_psql('fresh', q{SELECT seqincrement FROM pg_sequence WHERE seqrelid = 'idem.fence_seq'::regclass}) }
		$cluster->nodes), '2048 2048 2048', 'fresh: every node\'s fence sequence was set up');

# A third worker: idem.citus_node_setup() there (IdemCitus::add_worker runs
# it, as the documentation says) gives it its own residue.
my $third = $cluster->add_worker;
my ($group3, $inc3, $mod3) = split /\|/, $third->safe_psql('proof', q{
	SELECT g.groupid, s.seqincrement, mod(f.last_value, 2048)
	  FROM pg_dist_local_group g, pg_sequence s, idem.fence_seq f
	 WHERE s.seqrelid = 'idem.fence_seq'::regclass});
is("$inc3 $mod3", "2048 $group3", "a worker added later steps in its own residue ($group3)");

$cluster->stop;
done_testing();
