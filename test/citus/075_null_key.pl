# A NULL key through the Citus coordinator (docs/beyond-one-server.md, "A
# NULL key"). Citus hashes the distribution argument of a delegated call
# without checking it for NULL, which crashes the node (and the postmaster
# then restarts every session), so no call with a NULL key may be delegated.
# idem.citus_distribute() with its default: on the C++ engine (preloaded on
# every node) the calls are delegated and idem's planner hook keeps a call
# whose key is NULL on the coordinator; on the portable engine the calls are
# not delegated. Either way each call answers outside a transaction block
# exactly as inside one (where Citus never delegates): its own error (P4001
# for the key, P4000 when the scope is NULL too) or stored_answer's NULL;
# written as SELECT f(...) and SELECT * FROM f(...), with a key the planner
# folds to NULL, and as prepared statements with the key bound to NULL, also
# once the plan cache could use a generic plan. The coordinator never
# restarts: a session opened first still answers with the same backend, and
# no backend died in its log. Last (C++ engine), a worker restarted without
# idem preloaded: the default distribution of a new database leaves the
# calls to the coordinator with a NOTICE naming that node, and
# delegate_calls => true delegates them anyway.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin, "$FindBin::RealBin/../t";
use IdemCitus qw(start_citus engine_name);
use DBI;
use JSON::PP ();
use PostgreSQL::Test::Utils;
use Test::More;

my $cluster = start_citus('nullkey', delegate_calls => undef);
my $c = $cluster->coordinator;
my $portable = engine_name() eq 'portable';

sub delegated_calls {
	my ($db) = @_;
	return $c->safe_psql($db, q{SELECT count(*) FROM pg_dist_object o JOIN pg_proc p ON p.oid = o.objid
		WHERE o.classid = 'pg_proc'::regclass AND p.pronamespace = 'idem'::regnamespace
		  AND o.distribution_argument_index IS NOT NULL});
}

# ==== what the default distribution did ====
is(join(',', $cluster->on_every_node(q{SELECT coalesce(current_setting('idem.citus_null_key_guard', true), 'absent')})),
	$portable ? 'absent,absent,absent' : 'on,on,on',
	'idem.citus_null_key_guard: on on every node where idem is preloaded after citus; absent without its library');
if ($portable) {
	is(delegated_calls('proof'), '0', 'the portable engine: by default no call is delegated');
} else {
	cmp_ok(delegated_calls('proof'), '>', 0, 'the C++ engine: by default the calls are delegated');
}

# A session opened before any NULL key: a crash of any backend would end it.
my $watch = DBI->connect($cluster->dsn, '', '', { AutoCommit => 1, RaiseError => 1, PrintError => 0 });
my ($watch_pid) = $watch->selectrow_array('SELECT pg_backend_pid()');

# psql's answer to $sql on the coordinator: its output and its messages,
# verbose (the SQLSTATE), without the lines that name a source line.
sub answer {
	my ($sql) = @_;
	my ($rc, $out, $err) = $c->psql('proof', "\\set VERBOSITY verbose\n$sql");
	$err = join "\n", map { s/^psql:<stdin>:\d+: //r } grep { !/^LOCATION:/ } split /\n/, $err;
	return "$out\n$err";
}

my @calls = (
	[ claim_idempotency_key => q{'n75', NULL, 'h'}, qr/^ERROR:  P4001: the Idempotency-Key is required\nDETAIL:  scope "n75"; key is NULL/m ],
	[ consume_once => q{'n75', NULL, 'h'}, qr/^ERROR:  P4001: message_id must be 1 to 255 characters/m ],
	[ set_consumed_result => q{'n75', NULL, 'ref', '1'}, qr/^ERROR:  P4001: /m ],
	[ outbox_put => q{'n75', NULL, 'e', '{}'}, qr/^ERROR:  P4001: /m ],
	[ mark_succeeded => q{'n75', NULL, 1, 200, '{}'}, qr/^ERROR:  P4001: /m ],
	[ peek => q{'n75', NULL}, qr/^ERROR:  P4001: /m ],
	[ peek => q{'n75', lower(NULL)}, qr/^ERROR:  P4001: /m ],
	[ peek => q{'n75', NULL::varchar}, qr/^ERROR:  P4001: /m ],
	[ peek => q{NULL, NULL}, qr/^ERROR:  P4000: idempotency scope must not be NULL/m ],
	[ stored_answer => q{'n75', NULL}, qr/^\|*\n$/ ]);
for my $call (@calls) {
	my ($function, $args, $expected) = @$call;
	for my $form ("SELECT idem.$function($args)", "SELECT * FROM idem.$function($args)") {
		my $outside = answer("$form;");
		like($outside, $expected, "$form: outside a transaction block, the function's own answer");
		is($outside, answer("BEGIN; $form; ROLLBACK;"), "$form: the same as inside a block");
	}
}

# Prepared: psql's PREPARE, and the extended protocol's (DBD::Pg binds
# undef as NULL), each after six runs with a key, when the plan cache may
# choose a generic plan.
my $prepared = answer(q{PREPARE p(text, text) AS SELECT * FROM idem.peek($1, $2);
	EXECUTE p('n75', 'a'); EXECUTE p('n75', 'b'); EXECUTE p('n75', 'c');
	EXECUTE p('n75', 'd'); EXECUTE p('n75', 'e'); EXECUTE p('n75', 'f');
	EXECUTE p('n75', NULL);});
like($prepared, qr/^ERROR:  P4001: the Idempotency-Key is required$/m, 'PREPARE ... EXECUTE with the key NULL: P4001');
my $client = DBI->connect($cluster->dsn, '', '', { AutoCommit => 1, RaiseError => 0, PrintError => 0 });
for my $case (
	[ 'SELECT kind FROM idem.claim_idempotency_key(?, ?, ?)', sub { ('n75', $_[0], 'h') },
	  qr/the Idempotency-Key is required/ ],
	[ 'SELECT idem.consume_once(?, ?, ?)', sub { ('n75', $_[0], 'h') }, qr/message_id must be 1 to 255 characters/ ])
{
	my ($sql, $args, $message) = @$case;
	my $statement = $client->prepare($sql);
	my $ran = 0;
	for my $n (1 .. 6) { $ran++ if $statement->execute($args->("p$n")) }
	is($ran, 6, "$sql: six runs with a key");
	ok(!$statement->execute($args->(undef)), "$sql: bound to a NULL key, refused");
	is($client->state, 'P4001', "$sql: P4001");
	like($client->errstr, $message, "$sql: the function's own message");
}

# The calls with a key are as delegated as before.
my ($rc, $out, $err) = $c->psql('proof',
	q{SET client_min_messages = debug1; SELECT kind FROM idem.claim_idempotency_key('n75', 'after', 'h')});
is($out, 'new_claim', 'a claim with a key, afterwards: new_claim');
if ($portable) {
	unlike($err, qr/pushing down the function call/, '... run by the coordinator (the portable engine: not delegated)');
} else {
	like($err, qr/pushing down the function call/, '... delegated to the key\'s worker');
}

# ==== the coordinator never restarted ====
my ($pid_after) = eval { $watch->selectrow_array('SELECT pg_backend_pid()') };
is($pid_after, $watch_pid, 'the session opened first still answers, in the same backend');
unlike(slurp_file($c->logfile), qr/terminated by signal/, 'no backend of the coordinator died');
$client->disconnect;
$watch->disconnect;

# ==== a node without idem preloaded (C++ engine) ====
if (!$portable) {
	my ($unguarded) = $cluster->workers;
	$unguarded->append_conf('postgresql.conf', "shared_preload_libraries = 'citus'");
	$unguarded->restart;
	is($unguarded->safe_psql('proof', q{SELECT coalesce(current_setting('idem.citus_null_key_guard', true), 'absent')}),
		'absent', 'a worker restarted with citus alone preloaded has no guard');
	for my $node ($cluster->nodes) {
		$node->safe_psql('postgres', 'CREATE DATABASE unguarded');
		$node->safe_psql('unguarded', 'CREATE EXTENSION citus');
	}
	$c->safe_psql('unguarded', sprintf(q{SELECT citus_set_coordinator_host('%s', %d)}, $c->host, $c->port));
	$c->safe_psql('unguarded', sprintf(q{SELECT citus_add_node('%s', %d)}, $_->host, $_->port)) for $cluster->workers;
	$c->safe_psql('unguarded', 'CREATE EXTENSION idem');
	my $node_id = $c->safe_psql('unguarded', sprintf(q{SELECT nodeid FROM pg_dist_node WHERE nodeport = %d}, $unguarded->port));
	($rc, $out, $err) = $c->psql('unguarded', 'SELECT idem.citus_distribute()');
	is($rc, 0, 'the default distribution goes through');
	like($err, qr/NOTICE:  idem\.citus_distribute\(\) does not delegate idem's calls: node $node_id cannot keep a call with a NULL key from crashing it/,
		'... with a NOTICE naming the node without the guard');
	ok(!JSON::PP::decode_json($out)->{delegate_calls}, '... says it did not delegate');
	is(delegated_calls('unguarded'), '0', '... and delegated no call');
	is($c->safe_psql('unguarded', q{SELECT count(*) FROM pg_dist_partition WHERE logicalrelid::text LIKE 'idem.%'}),
		'5', '... but distributed the tables');
	$out = $c->safe_psql('unguarded', 'SELECT idem.citus_distribute(delegate_calls => true)');
	ok(JSON::PP::decode_json($out)->{delegate_calls}, 'delegate_calls => true delegates anyway');
	is(delegated_calls('unguarded'), delegated_calls('proof'), '... every call');
}

$cluster->stop;
done_testing();
