# Errors say where they were raised: with VERBOSITY verbose, the LOCATION of
# an error idem raises names the source file and function that raised it
# (the place in the key store, the inbox, the outbox, or the pure C++ JSON
# canonicalizer that threw), never the error boundary that reports C++ exceptions
# (guard.cpp's report_captured_error). The messages and SQLSTATEs are the
# ones the regression tests show. Line numbers are not compared: they move
# with every edit.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('error_location');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idem'\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idem');

# Runs $sql, which must fail, under VERBOSITY verbose; returns the SQLSTATE,
# the message, and the LOCATION's function and file.
sub error_of {
	my ($sql) = @_;
	my ($ret, $stdout, $stderr) =
	  $node->psql('postgres', "\\set VERBOSITY verbose\n$sql", on_error_stop => 1);
	isnt($ret, 0, "fails: $sql");
	my ($sqlstate, $message) = $stderr =~ /ERROR:  (\w{5}): (.*)/;
	my ($function, $file) = $stderr =~ /LOCATION:  (\S+), ([\w.]+):\d+/;
	unlike($stderr, qr/guard\.cpp|report_captured_error/,
		"the LOCATION is not the error boundary's: $sql");
	return ($sqlstate // '', $message // '', $function // '', $file // '');
}

sub check {
	my ($what, $sql, $want_sqlstate, $want_message, $want_file, $want_function) = @_;
	my ($sqlstate, $message, $function, $file) = error_of($sql);
	is($sqlstate, $want_sqlstate, "$what: SQLSTATE");
	is($message, $want_message, "$what: message");
	is($file, $want_file, "$what: LOCATION names the file that raised it");
	like($function, $want_function, "$what: LOCATION names the function that raised it");
}

check('a bad key', q{SELECT idem.claim_idempotency_key('loc', '', 'h')},
	'P4001', 'the Idempotency-Key must not be empty',
	'arguments.cpp', qr/^require_scope_and_key$/);

$node->safe_psql('postgres', q{SELECT idem.claim_idempotency_key('loc', 'k', 'h1')});
check('a request mismatch', q{SELECT idem.claim_idempotency_key('loc', 'k', 'h2')},
	'P4002', 'idempotency key was already used for a different request',
	'claim.cpp', qr/^claim_once$/);

# A lock of a millisecond, taken over once it has run out: the first owner's
# fence is stale.
my $old_fence = $node->safe_psql('postgres',
	q{SELECT fence FROM idem.claim_idempotency_key('loc', 'stale', 'h', lock_timeout => '1 millisecond')});
ok( $node->poll_query_until(
		'postgres', q{
SELECT locked_until < pg_catalog.clock_timestamp() FROM idem.idempotency_request
WHERE scope = 'loc' AND key = 'stale'}),
	'the first owner\'s lock ran out');
$node->safe_psql('postgres',
	q{SELECT fence FROM idem.claim_idempotency_key('loc', 'stale', 'h')});
check('a stale fence', "SELECT idem.mark_succeeded('loc', 'stale', $old_fence, 200)",
	'P4012', 'mark_succeeded: stale fence, a newer claim owns the idempotency key',
	'outcome.cpp', qr/^\w+$/);

# Thrown by the pure C++ canonicalizer (jcs.cpp), reported by the guard at
# the throw site. (Invalid JSON cannot reach it from SQL: the jsonb input
# function refuses it first.)
check('an inexact number', q{SELECT idem.request_hash('{"amount": 12345678901234567890}'::jsonb)},
	'P4005', 'number 12345678901234567890 cannot be represented exactly as an IEEE 754 double',
	'jcs.cpp', qr/^\w+$/);

$node->safe_psql('postgres', q{SELECT idem.consume_once('loc', 'm1', 'h1')});
check('a consume_once mismatch', q{SELECT idem.consume_once('loc', 'm1', 'h2')},
	'P4050', q{message 'm1' of consumer 'loc' was consumed with a different message_hash},
	'inbox.cpp', qr/^\w+$/);

$node->safe_psql('postgres', q{SELECT idem.outbox_put('loc', 'k', 'receipt', '{"n": 1}')});
check('an outbox payload mismatch',
	q{SELECT idem.outbox_put('loc', 'k', 'receipt', '{"n": 2}')},
	'P4051', q{outbox event 'receipt' of key 'k' was put with a different payload},
	'outbox.cpp', qr/^outbox_put$/);
check('an outbox lease lost', q{SELECT idem.outbox_published(1, 1)},
	'P4012', 'the lease on this outbox event was lost',
	'outbox.cpp', qr/^outbox_published$/);

$node->stop;
done_testing();
