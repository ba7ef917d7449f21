# The worker purges both message tables in its rounds: consumed messages
# past their expires_at and events published longer ago than
# idem.outbox_retention, in bounded batches; live rows and dead events stay.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('purge_messages');
$node->init;
$node->append_conf('postgresql.conf', <<'CONF');
shared_preload_libraries = 'idem'
idem.naptime = 1
idem.batch_size = 7
idem.batch_delay = 0
idem.outbox_retention = '1h'
CONF
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION idem;
SELECT count(idem.consume_once('c', 'old' || g, 'h', '1 hour')) FROM generate_series(1, 30) g;
SELECT count(idem.consume_once('c', 'live' || g, 'h', '1 day')) FROM generate_series(1, 5) g;
SELECT count(idem.outbox_put('s', 'k' || g, 'evt', '{}')) FROM generate_series(1, 25) g;
SELECT count(idem.outbox_published(id, lease_fence)) FROM idem.outbox_lease(20);
SELECT count(idem.outbox_put('s', 'dead' || g, 'evt', '{}')) FROM generate_series(1, 3) g;
});
# Age the rows by hand, in one transaction (the worker sees them all at once).
$node->safe_psql('postgres', q{
BEGIN;
UPDATE idem.consumed_message SET consumed_at = consumed_at - interval '2 hours',
       expires_at = expires_at - interval '2 hours' WHERE message_id LIKE 'old%';
UPDATE idem.outbox_event SET published_at = published_at - interval '2 hours' WHERE status = 'published';
UPDATE idem.outbox_event SET status = 'dead' WHERE key LIKE 'dead%';
COMMIT;
});
ok($node->poll_query_until('postgres', q{
SELECT (SELECT count(*) FROM idem.consumed_message) = 5
   AND (SELECT count(*) FROM idem.outbox_event WHERE status = 'published') = 0}),
	'the worker purged the expired consumed messages and the old published events');
is($node->safe_psql('postgres', q{SELECT string_agg(message_id, ',' ORDER BY message_id) FROM idem.consumed_message}),
	'live1,live2,live3,live4,live5', 'live consumed messages stay');
is($node->safe_psql('postgres', q{SELECT string_agg(status || ' ' || n, ', ' ORDER BY status)
	FROM (SELECT status, count(*) AS n FROM idem.outbox_event GROUP BY status) s}),
	'pending 5, dead 3', 'dead events stay for an operator; the 5 never leased are pending');
ok($node->log_contains(qr/purged \d+ consumed messages and published outbox events/),
	'the worker logs what it purged');
$node->stop;
done_testing();
