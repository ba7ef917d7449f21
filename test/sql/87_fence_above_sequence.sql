-- A fence issued for an existing row is above the row's fence even when
-- the sequence is behind it: on Citus each node draws from its own
-- sequence (INCREMENT BY 1024, values congruent to the node's group id;
-- docs/contract.md "Beyond one server"), and a key whose shard came from a node
-- whose sequence ran ahead holds a fence above this node's next value.
-- The fence is then the smallest value above the row's of this node's
-- class, and the sequence moves up so it never issues that value again.
-- Here one server plays such a node: its sequence steps by 1024 from 5,
-- and a row's fence is set above it by hand.
TRUNCATE idem.idempotency_request;
DELETE FROM idem.scope_policy;
SET idem.lock_timeout = '5min';
SELECT s.last_value AS before FROM idem.fence_seq s \gset
ALTER SEQUENCE idem.fence_seq INCREMENT BY 1024 RESTART WITH 5;

SELECT kind, fence FROM idem.claim_idempotency_key('fa', 'k', 'h');
-- The key's fence, as a node ahead of this one issued it.
UPDATE idem.idempotency_request SET fence = 1000003 WHERE scope = 'fa' AND key = 'k';
SELECT idem.mark_failed('fa', 'k', 1000003, true, 'try_again');

-- A takeover of the failed key: this node's next value (1029) is below the
-- key's fence, so the fence is the smallest value of class 5 above 1000003.
SELECT kind, fence, fence % 1024 AS class FROM idem.claim_idempotency_key('fa', 'k', 'h');
-- The overtaken owner is refused as stale.
SELECT state_of($$SELECT idem.mark_succeeded('fa', 'k', 1000003, 200)$$) AS old_owner;
-- The sequence moved past the fence it gave: a new key gets the next value.
SELECT kind, fence FROM idem.claim_idempotency_key('fa', 'other', 'h');

-- A new generation of an expired key (its row is renewed in place) gets
-- a fence above the row's too.
SELECT idem.mark_succeeded('fa', 'k', 1000453, 200);
UPDATE idem.idempotency_request SET fence = 5000000 WHERE scope = 'fa' AND key = 'k';
SELECT status FROM idem.force_expire('fa', 'k', false);
SELECT kind, fence, fence % 1024 AS class FROM idem.claim_idempotency_key('fa', 'k', 'h2');

-- A stale key taken over (its lock ran out) likewise.
UPDATE idem.idempotency_request
   SET fence = 9000000, locked_until = created_at + interval '1 microsecond'
 WHERE scope = 'fa' AND key = 'k';
SELECT kind, fence, fence % 1024 AS class FROM idem.claim_idempotency_key('fa', 'k', 'h2');

-- Where the sequence is ahead of the row, the takeover takes its next value.
SELECT idem.mark_failed('fa', 'k', 9000965, true, 'try_again');
UPDATE idem.idempotency_request SET fence = 6 WHERE scope = 'fa' AND key = 'k';
SELECT kind, fence FROM idem.claim_idempotency_key('fa', 'k', 'h2');

TRUNCATE idem.idempotency_request;
ALTER SEQUENCE idem.fence_seq INCREMENT BY 1;
SELECT pg_catalog.setval('idem.fence_seq', GREATEST(:before, 9001989)) > 0 AS restored;
RESET idem.lock_timeout;
