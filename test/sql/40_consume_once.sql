-- idem.consume_once and idem.set_consumed_result: one true per (consumer,
-- message_id) ever committed, replays write nothing, a different body is
-- P4050, bad input gets the keys' SQLSTATEs, expiry makes a message new.
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE TABLE inbox_effect (message_id text PRIMARY KEY, amount int);

-- The consumer's transaction: consume, then apply the effect, together.
CREATE FUNCTION handle(m text, amount int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  IF NOT idem.consume_once('billing', m, idem.request_hash(jsonb_build_object('amount', amount))) THEN
    RETURN false;
  END IF;
  INSERT INTO inbox_effect VALUES (m, amount);
  PERFORM idem.set_consumed_result('billing', m, 'inbox_effect', m);
  RETURN true;
END $$;

SELECT handle('m1', 10) AS first, handle('m1', 10) AS again;
SELECT handle('m2', 20) AS first;
SELECT * FROM inbox_effect ORDER BY message_id;
SELECT consumer, message_id, result_ref_type, result_ref_id,
       expires_at - consumed_at AS retention
  FROM idem.consumed_message ORDER BY message_id;

-- A rolled-back consumption never happened: the message is new again.
BEGIN;
SELECT handle('m3', 30) AS inside;
ROLLBACK;
SELECT handle('m3', 30) AS after_rollback;
SELECT count(*) AS m3_effects FROM inbox_effect WHERE message_id = 'm3';

-- The same id with another body: P4050, and nothing changes.
SELECT handle('m1', 11);
SELECT amount FROM inbox_effect WHERE message_id = 'm1';

-- Consumers are separate namespaces.
SELECT idem.consume_once('shipping', 'm1', 'h') AS other_consumer;

-- A replay takes no transaction id and writes no WAL (this backend's own:
-- wal_records_of, test/sql/00_install.sql). The first read of the row after its
-- insert committed may set hint bits, which with data checksums (initdb's
-- default from PostgreSQL 18) log a full page image: that is any reader's
-- cost, not the replay's, so it comes first.
SELECT idem.consume_once('shipping', 'm1', 'h') AS first_read;
BEGIN;
SELECT wal_records_of($$SELECT idem.consume_once('shipping', 'm1', 'h')$$) AS replay_wal_records;
SELECT pg_current_xact_id_if_assigned() IS NULL AS no_xid;
COMMIT;
-- The measurement sees WAL when there is some: a new message writes it.
SELECT wal_records_of($$SELECT idem.consume_once('shipping', 'm-wal', 'h')$$) > 0 AS new_message_writes_wal;
BEGIN READ ONLY;
SELECT idem.consume_once('shipping', 'm1', 'h') AS replay_read_only;
COMMIT;
-- The key probe reads in the transaction's snapshot under REPEATABLE READ,
-- after the transaction's own earlier commands: its own new message is a
-- replay at once.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT idem.consume_once('shipping', 'm1', 'h') AS replay_repeatable_read;
SELECT idem.consume_once('shipping', 'm-rr', 'h') AS new_repeatable_read,
       idem.consume_once('shipping', 'm-rr', 'h') AS same_statement_replay;
SELECT idem.consume_once('shipping', 'm-rr', 'h') AS next_statement_replay;
COMMIT;

-- Retention: the argument, else idem.inbox_retention; -1 is forever.
SELECT idem.consume_once('ttl', 'a', 'h', '1 hour') AS arg;
SET idem.inbox_retention = '2d';
SELECT idem.consume_once('ttl', 'b', 'h') AS setting;
SET idem.inbox_retention = -1;
SELECT idem.consume_once('ttl', 'c', 'h') AS forever;
RESET idem.inbox_retention;
SELECT message_id, CASE WHEN expires_at = 'infinity' THEN 'forever'
                        ELSE (expires_at - consumed_at)::text END AS retention
  FROM idem.consumed_message WHERE consumer = 'ttl' ORDER BY message_id;
SET idem.inbox_retention = 0;

-- An expired message is absent: consumed afresh (another hash is fine), its
-- old result forgotten.
SELECT idem.set_consumed_result('ttl', 'a', 'order', '7');
UPDATE idem.consumed_message SET consumed_at = consumed_at - interval '2 hours',
                                 expires_at = expires_at - interval '2 hours'
 WHERE consumer = 'ttl' AND message_id = 'a';
SELECT idem.set_consumed_result('ttl', 'a', 'order', '8');
SELECT idem.consume_once('ttl', 'a', 'other hash', '1 hour') AS expired_is_new;
SELECT message_hash, result_ref_type, expires_at > now() AS live
  FROM idem.consumed_message WHERE consumer = 'ttl' AND message_id = 'a';

-- The purge takes expired rows only, oldest first, at most batch_limit.
UPDATE idem.consumed_message SET consumed_at = consumed_at - interval '3 days',
                                 expires_at = consumed_at - interval '3 days' + interval '1 hour'
 WHERE consumer = 'ttl';
SELECT idem.purge_consumed(1) AS first_batch, idem.purge_consumed() AS rest;
SELECT message_id FROM idem.consumed_message WHERE consumer = 'ttl';

-- Bad input.
SELECT idem.consume_once(NULL, 'm', 'h');
SELECT idem.consume_once('', 'm', 'h');
SELECT idem.consume_once(repeat('c', 256), 'm', 'h');
SELECT idem.consume_once('c', NULL, 'h');
SELECT idem.consume_once('c', '', 'h');
SELECT idem.consume_once('c', repeat('m', 256), 'h');
SELECT idem.consume_once('c', 'm', NULL);
SELECT idem.consume_once('c', 'm', '');
SELECT idem.consume_once('c', 'm', 'h', '0');
SELECT idem.consume_once('c', 'm', 'h', '-1 day');
SELECT idem.set_consumed_result('c', 'never consumed', 't', '1');
SELECT idem.set_consumed_result('', 'm', 't', '1');
SELECT idem.purge_consumed(0);
SELECT count(*) AS nothing_stored FROM idem.consumed_message WHERE consumer = 'c';

DROP FUNCTION handle(text, int);
DROP TABLE inbox_effect;
