-- The peers of bench/messages/run: plain tables written by hand, the least
-- a careful user would write without idem (bench/README.md, "1.1: inbox and outbox").
SET client_min_messages = warning;
DROP TABLE IF EXISTS plain_inbox, kept_inbox, plain_queue;
DROP SEQUENCE IF EXISTS bench_message, bench_event;
CREATE SEQUENCE bench_message;
CREATE SEQUENCE bench_event;
CREATE TABLE plain_inbox (
    consumer text NOT NULL, message_id text NOT NULL, message_hash text NOT NULL,
    consumed_at timestamptz NOT NULL, PRIMARY KEY (consumer, message_id));
-- The plain inbox with consume_once's invariants (inbox_new_kept.sql): the
-- hash is compared on a seen id, and rows expire through an index.
CREATE TABLE kept_inbox (
    consumer text NOT NULL, message_id text NOT NULL, message_hash text NOT NULL,
    consumed_at timestamptz NOT NULL, expires_at timestamptz NOT NULL,
    PRIMARY KEY (consumer, message_id));
CREATE INDEX kept_inbox_expiry ON kept_inbox (expires_at);
CREATE TABLE plain_queue (
    id bigserial PRIMARY KEY, key text NOT NULL UNIQUE, payload jsonb NOT NULL,
    aggregate_id text, status text NOT NULL DEFAULT 'pending', published_at timestamptz);
CREATE INDEX plain_queue_pending ON plain_queue (id) WHERE status = 'pending';
TRUNCATE idem.consumed_message, idem.outbox_event;
-- The replay cells' messages: 100000 consumed by each peer.
SELECT count(idem.consume_once('replay', g::text, 'h')) FROM generate_series(1, 100000) g;
INSERT INTO plain_inbox SELECT 'replay', g::text, 'h', now() FROM generate_series(1, 100000) g;

-- The same-invariants queue: what a careful user writes by hand to get what
-- idem's outbox guarantees (bench/README.md, "1.1: the outbox against a queue
-- with its guarantees"): one event per key, a put that takes a per-aggregate
-- transaction lock so an aggregate's events commit in id order, a NOTIFY,
-- leases that expire and carry a fence from a sequence, an aggregate's
-- events leased one at a time in id order, a publish that checks the fence,
-- and an index for the purge of published events.
DROP TABLE IF EXISTS ordered_queue;
DROP SEQUENCE IF EXISTS ordered_queue_fence;
CREATE SEQUENCE ordered_queue_fence;
CREATE TABLE ordered_queue (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, key text NOT NULL UNIQUE,
    payload jsonb NOT NULL, aggregate_id text,
    status text NOT NULL DEFAULT 'pending', lease_fence bigint, leased_until timestamptz,
    attempt_count integer NOT NULL DEFAULT 0, published_at timestamptz);
CREATE INDEX ordered_queue_open ON ordered_queue (id) WHERE status IN ('pending', 'leased');
CREATE INDEX ordered_queue_open_aggregate ON ordered_queue (aggregate_id, id)
    WHERE status IN ('pending', 'leased') AND aggregate_id IS NOT NULL;
CREATE INDEX ordered_queue_published ON ordered_queue (published_at) WHERE status = 'published';

-- Every outbox starts as a live one looks: 10,000 events already published
-- (kept for their retention), with statistics that say so. An outbox
-- truncated and analyzed while empty gives the planner "no rows": a relay's
-- kept lease plan is then a sequential scan until autovacuum analyzes the
-- table again, a minute or more into the cell (docs/operating.md, "Outbox statistics after a TRUNCATE").
INSERT INTO idem.outbox_event (scope, key, event_type, payload, aggregate_type, aggregate_id,
    delivery_key, status, available_at, created_at, published_at)
SELECT 'old', g::text, 'evt', '{"amount": 1}', 'agg', (g % 1000)::text,
       idem.request_hash(jsonb_build_array('old', g::text, 'evt')), 'published', now(), now(), now()
  FROM generate_series(1, 10000) g;
INSERT INTO plain_queue (key, payload, aggregate_id, status, published_at)
SELECT 'old' || g, '{"amount": 1}', (g % 1000)::text, 'published', now() FROM generate_series(1, 10000) g;
INSERT INTO ordered_queue (key, payload, aggregate_id, status, published_at)
SELECT 'old' || g, '{"amount": 1}', (g % 1000)::text, 'published', now() FROM generate_series(1, 10000) g;
VACUUM ANALYZE;
