# The counters need the preload, nothing else does: on a cluster without
# shared_preload_libraries = 'idem' every key-store function and the by-key
# tools work, idem.stats raises 55000 with a hint, and the server stays up.
# Then, preloaded: counters start at zero, the by-key tools log who used them,
# and the 64-database table overflows and recycles as documented.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('stats');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idem');

# Without the preload: the key store works.
my $fence = $node->safe_psql('postgres',
	q{SELECT fence FROM idem.claim_idempotency_key('s', 'k1', 'h')});
like($fence, qr/^\d+$/, 'claim works without the preload');
$node->safe_psql('postgres', "SELECT idem.set_recovery_point('s', 'k1', $fence, 'charged')");
$node->safe_psql('postgres', "SELECT idem.mark_succeeded('s', 'k1', $fence, 201)");
is($node->safe_psql('postgres', q{SELECT kind FROM idem.claim_idempotency_key('s', 'k1', 'h')}),
	'replay_success', 'replay works without the preload');
is($node->safe_psql('postgres', 'SELECT idem.sweep_stale() + idem.purge_expired()'),
	'0', 'maintenance works without the preload');
is($node->safe_psql('postgres', q{SELECT status FROM idem.lookup('s', 'k1')}),
	'succeeded', 'lookup works without the preload');
is($node->safe_psql('postgres', q{SELECT total FROM idem.key_summary WHERE scope = 's'}),
	'1', 'key_summary works without the preload');

# Reading the counters: a clear error, SQLSTATE 55000 and a hint; no crash.
my ($ret, $stdout, $stderr) = $node->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT * FROM idem.stats");
isnt($ret, 0, 'idem.stats fails without the preload');
like($stderr, qr/ERROR:  55000: idem\.stats needs idem in shared_preload_libraries/,
	'with SQLSTATE 55000 and a message that says why');
like($stderr, qr/HINT:  Add 'idem' to shared_preload_libraries in postgresql\.conf and restart the server/,
	'and a hint that says what to do');
($ret, $stdout, $stderr) = $node->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT idem.stats_reset()");
like($stderr, qr/ERROR:  55000: idem\.stats_reset\(\) needs idem in shared_preload_libraries/,
	'stats_reset raises 55000 too');
is($node->safe_psql('postgres', q{SELECT kind FROM idem.claim_idempotency_key('s', 'k2', 'h')}),
	'new_claim', 'the session and server carry on after the error');
ok(!$node->log_contains(qr/terminated by signal|server process .* was terminated/),
	'no backend crashed');

# The by-key tools log who used them: the login role, the role in effect
# (SECURITY DEFINER does not hide it) and application_name.
$node->safe_psql('postgres', q{
	CREATE ROLE support;
	GRANT EXECUTE ON FUNCTION idem.evict(text, text, boolean),
	                          idem.force_expire(text, text, boolean) TO support;});
$node->safe_psql('postgres', q{
	SET application_name = 'support-console';
	SET ROLE support;
	SELECT status FROM idem.evict('s', 'k2', force => true);});
ok($node->log_contains(
		qr/LOG:  idem\.evict by session user "[^"]+", role "support", application "support-console": scope "s", key "k2": deleted \(status processing, fence \d+, forced\)/),
	'evict is logged with session user, role, application and what it did');
$node->psql('postgres', q{SET application_name = 'support-console';
	SET ROLE support; SELECT idem.force_expire('s', 'nope')});
ok($node->log_contains(
		qr/LOG:  idem\.force_expire by session user "[^"]+", role "support", application "support-console": scope "s", key "nope": refused: no such key/),
	'a refused use is logged too');

# Preloaded: the counters exist, start at zero and count.
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idem'\n");
$node->restart;
is($node->safe_psql('postgres',
		q{SELECT new_claim + replay_success + marked_succeeded FROM idem.stats WHERE datname = 'postgres'}),
	'0', 'after a restart with the preload the counters start at zero');
$node->safe_psql('postgres', q{SELECT idem.claim_idempotency_key('s', 'k3', 'h')});
is($node->safe_psql('postgres', q{SELECT new_claim FROM idem.stats WHERE datname = 'postgres'}),
	'1', 'and count');

# 64 databases have a row each; further ones share the overflow row (datid
# NULL); a dropped database's row goes to the next new database.
$node->safe_psql('template1', 'CREATE EXTENSION idem');
$node->safe_psql('postgres', join("\n", map { "CREATE DATABASE d$_ STRATEGY = FILE_COPY;" } 1 .. 66));
for my $i (1 .. 66) {
	$node->safe_psql("d$i", q{SELECT idem.claim_idempotency_key('s', 'k', 'h')});
}
is($node->safe_psql('postgres', 'SELECT count(*) FROM idem.stats WHERE datid IS NOT NULL'),
	'64', '64 databases have a row of their own (postgres and d1..d63)');
is($node->safe_psql('postgres', 'SELECT new_claim FROM idem.stats WHERE datid IS NULL'),
	'3', 'the claims of d64..d66 are counted in the overflow row');
is($node->safe_psql('postgres', q{SELECT count(*) FROM idem.stats WHERE datname IN ('d64', 'd65', 'd66')}),
	'0', 'the databases past the limit have no row');
$node->safe_psql('postgres', 'DROP DATABASE d1; CREATE DATABASE d67 STRATEGY = FILE_COPY;');
is($node->safe_psql('postgres', 'SELECT count(*) FROM idem.stats WHERE datid IS NOT NULL'),
	'63', 'a dropped database leaves the view');
$node->safe_psql('d67', q{SELECT idem.claim_idempotency_key('s', 'k', 'h')});
is($node->safe_psql('postgres', q{SELECT new_claim FROM idem.stats WHERE datname = 'd67'}),
	'1', 'a new database takes the dropped database\'s row, from zero');
is($node->safe_psql('postgres', 'SELECT new_claim FROM idem.stats WHERE datid IS NULL'),
	'3', 'and the overflow row is unchanged');
$node->safe_psql('postgres', 'SELECT idem.stats_reset(all_databases => true)');
is($node->safe_psql('postgres', 'SELECT sum(new_claim) FROM idem.stats'),
	'0', 'stats_reset(all_databases => true) zeroes every row, the overflow row included');

$node->stop;
done_testing();
