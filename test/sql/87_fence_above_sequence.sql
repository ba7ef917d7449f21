-- A fence issued for an existing row is above the row's fence even when
-- the node's sequence is behind it: on Citus each node draws from its own
-- sequence (INCREMENT BY 2048, values congruent to the node's group id g;
-- docs/contract.md "Beyond one server"), and a key whose shard came from a
-- node whose sequence ran ahead holds a fence above this node's next value.
-- The fence then "jumps": it comes from the node's jump lane,
-- idem.fence_jump_seq (INCREMENT BY 2048, values congruent to g + 1024),
-- moved up to its first value above the row's fence; idem.fence_seq is
-- never set by a jump, so it never goes back (test/specs/fence_jump_lane.spec
-- races two jumpers and a claim). Here one server plays node 5, as
-- idem.citus_node_setup() sets it: fence_seq from 5, the lane from 1029.
TRUNCATE idem.idempotency_request;
DELETE FROM idem.scope_policy;
SET idem.lock_timeout = '5min';
SELECT s.last_value AS before FROM idem.fence_seq s \gset
ALTER SEQUENCE idem.fence_seq INCREMENT BY 2048 RESTART WITH 5;
ALTER SEQUENCE idem.fence_jump_seq INCREMENT BY 2048 RESTART WITH 1029;
CREATE TEMP VIEW lanes AS
SELECT f.last_value AS fence_seq, f.is_called AS fence_seq_called,
       j.last_value AS jump_seq, j.is_called AS jump_seq_called
  FROM idem.fence_seq f, idem.fence_jump_seq j;

SELECT kind, fence FROM idem.claim_idempotency_key('fa', 'k', 'h');
-- The key's fence, as a node ahead of this one issued it.
UPDATE idem.idempotency_request SET fence = 1000003 WHERE scope = 'fa' AND key = 'k';
SELECT idem.mark_failed('fa', 'k', 1000003, true, 'try_again');

-- A takeover of the failed key: this node's next value (2053) is below the
-- key's fence, so the fence is the lane's first value above 1000003
-- (1029 + 488 * 2048).
SELECT kind, fence, fence % 2048 AS class FROM idem.claim_idempotency_key('fa', 'k', 'h');
-- The jump took the lane's value and left idem.fence_seq where the draw
-- that was not above the row left it (2053).
SELECT * FROM lanes;
-- The overtaken owner is refused as stale.
SELECT state_of($$SELECT idem.mark_succeeded('fa', 'k', 1000003, 200)$$) AS old_owner;
-- A new key draws from idem.fence_seq as before: a value of class 5.
SELECT kind, fence, fence % 2048 AS class FROM idem.claim_idempotency_key('fa', 'other', 'h');

-- A new generation of an expired key (its row is renewed in place) gets
-- a fence above the row's too, the lane's next value above it.
SELECT idem.mark_succeeded('fa', 'k', 1000453, 200);
UPDATE idem.idempotency_request SET fence = 5000000 WHERE scope = 'fa' AND key = 'k';
SELECT status FROM idem.force_expire('fa', 'k', false);
SELECT kind, fence, fence % 2048 AS class FROM idem.claim_idempotency_key('fa', 'k', 'h2');

-- A stale key taken over (its lock ran out) likewise.
UPDATE idem.idempotency_request
   SET fence = 9000000, locked_until = created_at + interval '1 microsecond'
 WHERE scope = 'fa' AND key = 'k';
SELECT kind, fence, fence % 2048 AS class FROM idem.claim_idempotency_key('fa', 'k', 'h2');

-- A row whose fence is below the lane's next value but above the node's:
-- the lane's next value, the lane not set (its values only rise, jump
-- after jump).
SELECT idem.mark_failed('fa', 'k', fence, true, 'try_again')
  FROM idem.idempotency_request WHERE scope = 'fa' AND key = 'k';
UPDATE idem.idempotency_request SET fence = 20000 WHERE scope = 'fa' AND key = 'k';
SELECT kind, fence, fence % 2048 AS class FROM idem.claim_idempotency_key('fa', 'k', 'h2');
SELECT * FROM lanes;

-- Where the node's sequence is ahead of the row, the takeover takes its
-- next value and the lane is left alone.
SELECT idem.mark_failed('fa', 'k', fence, true, 'try_again')
  FROM idem.idempotency_request WHERE scope = 'fa' AND key = 'k';
UPDATE idem.idempotency_request SET fence = 6 WHERE scope = 'fa' AND key = 'k';
SELECT kind, fence, fence % 2048 AS class FROM idem.claim_idempotency_key('fa', 'k', 'h2');
SELECT * FROM lanes;

-- Fence after purge: a key purged and claimed again on another node may
-- get a fence below its previous generation's (that node's sequence is
-- behind). Fences stay unique across nodes and lanes, so an owner of the
-- purged generation never holds the new owner's fence: its writes match
-- nothing and are refused as not owned (its fence is above the key's, so
-- not P4012 but each write's own code; docs/contract.md, "Fencing"). Here
-- the old generation's owner holds a lane fence; the key is deleted under
-- it, and the new claim takes a fence of idem.fence_seq, below it.
SELECT idem.mark_failed('fa', 'k', fence, true, 'try_again')
  FROM idem.idempotency_request WHERE scope = 'fa' AND key = 'k';
UPDATE idem.idempotency_request SET fence = 100000 WHERE scope = 'fa' AND key = 'k';
SELECT fence AS zombie, fence % 2048 AS zombie_class
  FROM idem.claim_idempotency_key('fa', 'k', 'h2') \gset
SELECT :zombie_class AS zombie_class;
SELECT (idem.evict('fa', 'k', true)).status;
SELECT kind, fence < :zombie AS below_the_old_generation, fence % 2048 AS class
  FROM idem.claim_idempotency_key('fa', 'k', 'h3');
SELECT state_of($$SELECT idem.mark_succeeded('fa', 'k', $$ || :zombie || $$, 200)$$) AS old_succeeds;
SELECT state_of($$SELECT idem.mark_failed('fa', 'k', $$ || :zombie || $$, true, 'x')$$) AS old_fails;
SELECT state_of($$SELECT idem.set_recovery_point('fa', 'k', $$ || :zombie || $$, 'step')$$) AS old_records;
SELECT state_of($$SELECT idem.extend_lock('fa', 'k', $$ || :zombie || $$, '1 minute')$$) AS old_extends;
SELECT state_of($$SELECT idem.release('fa', 'k', $$ || :zombie || $$)$$) AS old_releases;
-- The new owner's claim is untouched.
SELECT status, recovery_point, fence < :zombie AS below
  FROM idem.idempotency_request WHERE scope = 'fa' AND key = 'k';

TRUNCATE idem.idempotency_request;
ALTER SEQUENCE idem.fence_seq INCREMENT BY 1;
ALTER SEQUENCE idem.fence_jump_seq INCREMENT BY 1 RESTART WITH 1;
SELECT pg_catalog.setval('idem.fence_seq', GREATEST(:before, :zombie)) > 0 AS restored;

-- On one server the lane is unused (it steps by 1): a sequence set behind
-- the rows by hand jumps in idem.fence_seq itself, to the row's fence + 1,
-- and only upwards.
SELECT kind FROM idem.claim_idempotency_key('fa', 'one', 'h');
SELECT fence AS one_fence FROM idem.idempotency_request WHERE scope = 'fa' AND key = 'one' \gset
SELECT idem.mark_failed('fa', 'one', :one_fence, true, 'try_again');
UPDATE idem.idempotency_request SET fence = :one_fence + 1000 WHERE scope = 'fa' AND key = 'one';
SELECT kind, fence - :one_fence AS above FROM idem.claim_idempotency_key('fa', 'one', 'h');
SELECT last_value - :one_fence AS fence_seq_above, (SELECT last_value FROM idem.fence_jump_seq) AS lane
  FROM idem.fence_seq;
TRUNCATE idem.idempotency_request;
DROP VIEW lanes;
RESET idem.lock_timeout;
