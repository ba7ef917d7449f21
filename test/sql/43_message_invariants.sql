-- The inbox's and outbox's row rules (1.1: one CHECK per table calling
-- idem.consumed_message_invariants_hold / idem.outbox_event_invariants_hold,
-- src/messages/message_invariants.cpp). idem's functions never break them; a
-- hand-written write that does is refused with 23514 naming the rule.

-- One constraint a table, validated, over the columns the rules read.
SELECT conrelid::regclass AS table_name, conname, convalidated, pg_get_constraintdef(oid) AS definition
  FROM pg_constraint
 WHERE conrelid IN ('idem.consumed_message'::regclass, 'idem.outbox_event'::regclass) AND contype = 'c'
 ORDER BY 1, 2;

-- Rows written by idem's functions: a consumed message, and outbox events
-- leased, published and pending (put in that order: a lease takes the
-- oldest).
SELECT idem.consume_once('inv', 'm', 'h') AS consumed;
SELECT idem.outbox_put('inv', 'leased', 't', '{}') > 0 AS put,
       idem.outbox_put('inv', 'published', 't', '{}') > 0 AS put;
SELECT count(*) AS leased FROM idem.outbox_lease(2);
SELECT idem.outbox_published(id, lease_fence) FROM idem.outbox_event WHERE key = 'published';
SELECT idem.outbox_put('inv', 'pending', 't', '{}') > 0 AS put;
SELECT key, status FROM idem.outbox_event WHERE scope = 'inv' ORDER BY key;

-- Each rule of idem.consumed_message, broken by a superuser's hand-written write.
SELECT error_of($$UPDATE idem.consumed_message SET consumer = '' WHERE consumer = 'inv'$$);
SELECT error_of($$UPDATE idem.consumed_message SET message_id = repeat('é', 256) WHERE consumer = 'inv'$$);
SELECT error_of($$UPDATE idem.consumed_message SET message_hash = '' WHERE consumer = 'inv'$$);
SELECT error_of($$UPDATE idem.consumed_message SET expires_at = consumed_at WHERE consumer = 'inv'$$);
SELECT error_of($$INSERT INTO idem.consumed_message (consumer, message_id, message_hash, consumed_at, expires_at)
                  VALUES (repeat('c', 256), 'x', 'h', now(), now() + interval '1 day')$$);
-- NOT NULL stays on the columns (checked before the rules).
SELECT state_of($$UPDATE idem.consumed_message SET message_hash = NULL WHERE consumer = 'inv'$$);

-- The boundaries that hold: 255 multibyte characters, a message kept forever.
SELECT state_of($$UPDATE idem.consumed_message SET message_id = repeat('é', 255), expires_at = 'infinity'
                   WHERE consumer = 'inv'$$);

-- Each rule of idem.outbox_event.
SELECT error_of($$UPDATE idem.outbox_event SET scope = repeat('s', 256) WHERE key = 'pending'$$);
SELECT error_of($$UPDATE idem.outbox_event SET key = '' WHERE key = 'pending'$$);
SELECT error_of($$UPDATE idem.outbox_event SET event_type = '' WHERE key = 'pending'$$);
SELECT error_of($$UPDATE idem.outbox_event SET status = 'leased' WHERE key = 'pending'$$);
SELECT error_of($$UPDATE idem.outbox_event SET lease_fence = NULL WHERE key = 'leased'$$);
SELECT error_of($$UPDATE idem.outbox_event SET leased_until = now(), lease_fence = 1 WHERE key = 'published'$$);
SELECT error_of($$UPDATE idem.outbox_event SET status = 'published' WHERE key = 'pending'$$);
SELECT error_of($$UPDATE idem.outbox_event SET published_at = NULL WHERE key = 'published'$$);
SELECT error_of($$UPDATE idem.outbox_event SET published_at = now() WHERE key = 'pending'$$);
-- What holds: a dead event (no lease, no date), a lease given back.
SELECT state_of($$UPDATE idem.outbox_event SET status = 'dead' WHERE key = 'pending'$$);
SELECT state_of($$UPDATE idem.outbox_event SET status = 'pending', leased_until = NULL, lease_fence = NULL
                   WHERE key = 'leased'$$);

-- The functions judge only their arguments: NULL where a column is NOT NULL
-- is left to NOT NULL.
SELECT idem.consumed_message_invariants_hold(NULL, NULL, NULL, NULL, NULL) AS nulls_pass,
       idem.outbox_event_invariants_hold(NULL, NULL, NULL, NULL, NULL, NULL, NULL) AS nulls_pass;

TRUNCATE idem.consumed_message, idem.outbox_event;
