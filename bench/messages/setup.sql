-- The peers of bench/messages/run: plain tables written by hand, the least
-- a careful user would write without idem (bench/README.md, "1.1: inbox and outbox").
SET client_min_messages = warning;
DROP TABLE IF EXISTS plain_inbox, plain_queue;
DROP SEQUENCE IF EXISTS bench_message, bench_event;
CREATE SEQUENCE bench_message;
CREATE SEQUENCE bench_event;
CREATE TABLE plain_inbox (
    consumer text NOT NULL, message_id text NOT NULL, message_hash text NOT NULL,
    consumed_at timestamptz NOT NULL, PRIMARY KEY (consumer, message_id));
CREATE TABLE plain_queue (
    id bigserial PRIMARY KEY, key text NOT NULL UNIQUE, payload jsonb NOT NULL,
    aggregate_id text, status text NOT NULL DEFAULT 'pending', published_at timestamptz);
CREATE INDEX plain_queue_pending ON plain_queue (id) WHERE status = 'pending';
TRUNCATE idem.consumed_message, idem.outbox_event;
-- The replay cells' messages: 100000 consumed by each peer.
SELECT count(idem.consume_once('replay', g::text, 'h')) FROM generate_series(1, 100000) g;
INSERT INTO plain_inbox SELECT 'replay', g::text, 'h', now() FROM generate_series(1, 100000) g;
VACUUM ANALYZE;
