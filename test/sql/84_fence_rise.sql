-- A fence never goes back for a key, even where idem.fence_seq is behind the
-- key's row. On Citus a jump above the row takes the node's jump lane
-- (87_fence_above_sequence); where the lane is unused (it steps by 1, as on
-- one server) the jump is made in idem.fence_seq itself, under the lane's
-- lock and only upwards (src/keys/fence.cpp): here a sequence stepping by
-- 1024, set behind a row by hand. A takeover or a new generation then takes
-- the smallest value above the row's fence congruent to the sequence modulo
-- its increment, and the sequence moves there so that the node never
-- issues it again.
ALTER SEQUENCE idem.fence_seq INCREMENT BY 1024 RESTART WITH 1027;
SELECT fence = 1027 AS from_the_sequence
  FROM idem.claim_idempotency_key('fence-rise', 'k', 'h');

-- The row as a node further ahead left it, its lock run out.
UPDATE idem.idempotency_request SET fence = 1000000
 WHERE scope = 'fence-rise' AND key = 'k';
SELECT age_key('fence-rise', 'k', lock_over => true, expired => false);
-- 1000451 = 977 * 1024 + 3: the first value above 1000000 congruent to 1027.
SELECT kind, fence FROM idem.claim_idempotency_key('fence-rise', 'k', 'h');
SELECT error_of($$SELECT idem.mark_succeeded('fence-rise', 'k', 1000000, 200)$$) LIKE 'P4012:%'
       AS old_owner_refused;
-- The node issues nothing at or below it again, to this key or any other.
SELECT kind, fence FROM idem.claim_idempotency_key('fence-rise', 'other', 'h');

-- A failed key taken over for a retry: the same rule.
SELECT idem.mark_failed('fence-rise', 'k', 1000451, true, 'boom');
UPDATE idem.idempotency_request SET fence = 3000000
 WHERE scope = 'fence-rise' AND key = 'k';
SELECT kind, fence, attempt_count FROM idem.claim_idempotency_key('fence-rise', 'k', 'h');

-- A new generation of an expired key: the same rule.
SELECT idem.mark_succeeded('fence-rise', 'k', fence, 200)
  FROM idem.idempotency_request WHERE scope = 'fence-rise' AND key = 'k';
UPDATE idem.idempotency_request SET fence = 5000000
 WHERE scope = 'fence-rise' AND key = 'k';
SELECT age_key('fence-rise', 'k', lock_over => false, expired => true);
SELECT kind, fence, attempt_count FROM idem.claim_idempotency_key('fence-rise', 'k', 'h2');

-- Where the sequence is ahead, its next value as before.
SELECT age_key('fence-rise', 'other', lock_over => true, expired => false);
SELECT kind, fence FROM idem.claim_idempotency_key('fence-rise', 'other', 'h');

-- One server's sequence again (the other files compare fences, never their values).
ALTER SEQUENCE idem.fence_seq INCREMENT BY 1;
SELECT idem.purge_expired() >= 0 AS purged;
DELETE FROM idem.idempotency_request WHERE scope = 'fence-rise';
