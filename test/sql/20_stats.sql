-- idem.stats: every counter moves by exactly the right amount for each
-- operation, and nothing else moves; stats_reset zeroes them.
-- stats_moved() reports what changed in this database's row since its last
-- call ("nothing" when nothing did), so each step below shows its own effect.
CREATE TABLE stats_seen (seen jsonb);
INSERT INTO stats_seen VALUES (NULL);
CREATE FUNCTION stats_moved() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  current jsonb;
  previous jsonb;
  moved text;
BEGIN
  SELECT to_jsonb(s) - 'datid' - 'datname' - 'last_worker_round' - 'stats_reset' INTO current
    FROM idem.stats s WHERE s.datname = current_database();
  SELECT seen INTO previous FROM stats_seen;
  SELECT string_agg(format('%s %s', c.key,
                           to_char(c.value::bigint - coalesce((previous ->> c.key)::bigint, 0), 'SG999999')),
                    ', ' ORDER BY c.key)
    INTO moved
    FROM jsonb_each_text(current) c
   WHERE c.value::bigint <> coalesce((previous ->> c.key)::bigint, 0);
  UPDATE stats_seen SET seen = current;
  RETURN coalesce(moved, 'nothing');
END $$;

-- The view: one row for this database, the documented columns.
SELECT array_agg(attname ORDER BY attnum) AS columns
  FROM pg_attribute WHERE attrelid = 'idem.stats'::regclass AND attnum > 0;
SELECT count(*) AS rows_for_this_database, bool_and(datid = (SELECT oid FROM pg_database WHERE datname = current_database())) AS datid_matches
  FROM idem.stats WHERE datname = current_database();

-- Reset: every counter is zero, stats_reset is the time of the reset.
SELECT clock_timestamp() AS before_reset \gset
SELECT idem.stats_reset();
SELECT stats_reset >= :'before_reset' AND stats_reset <= clock_timestamp() AS reset_time_is_now,
       last_worker_round IS NULL AS no_worker_round
  FROM idem.stats WHERE datname = current_database();
SELECT stats_moved() AS after_reset;  -- lists every nonzero counter: none

-- A new key's lifecycle.
SELECT fence AS f1 FROM idem.claim_idempotency_key('st', 'k1', 'h') \gset
SELECT stats_moved() AS new_claim;
SELECT idem.set_recovery_point('st', 'k1', :f1, 'charged');
SELECT stats_moved() AS set_recovery_point;
SELECT kind FROM idem.claim_idempotency_key('st', 'k1', 'h');
SELECT stats_moved() AS twin_while_in_flight;
SELECT idem.mark_succeeded('st', 'k1', :f1, 201);
SELECT stats_moved() AS mark_succeeded;
SELECT kind FROM idem.claim_idempotency_key('st', 'k1', 'h');
SELECT kind FROM idem.claim_idempotency_key('st', 'k1', 'h');
SELECT stats_moved() AS two_replays;
SELECT state_of($$SELECT idem.claim_idempotency_key('st', 'k1', 'other')$$);
SELECT stats_moved() AS request_mismatch;

-- Takeover of a stale key, and the zombie's stale writes.
SELECT fence AS z FROM idem.claim_idempotency_key('st', 'k2', 'h') \gset
SELECT age_key('st', 'k2', lock_over => true, expired => false);
SELECT kind, fence AS f2 FROM idem.claim_idempotency_key('st', 'k2', 'h') \gset
SELECT :'kind' AS kind, stats_moved() AS new_claim_then_stale_takeover;
SELECT state_of(format('SELECT idem.mark_succeeded(%L, %L, %s, 200)', 'st', 'k2', :z));
SELECT state_of(format('SELECT idem.set_recovery_point(%L, %L, %s, %L)', 'st', 'k2', :z, 'x'));
SELECT state_of(format('SELECT idem.mark_failed(%L, %L, %s, false, %L)', 'st', 'k2', :z, 'x'));
SELECT stats_moved() AS three_stale_fences;

-- Failures, retryable and final, and the claims that meet them.
SELECT idem.mark_failed('st', 'k2', :f2, true, 'upstream_down');
SELECT stats_moved() AS mark_failed_retryable;
SELECT kind, fence AS f2 FROM idem.claim_idempotency_key('st', 'k2', 'h') \gset
SELECT :'kind' AS kind, stats_moved() AS retry;
SELECT idem.mark_failed('st', 'k2', :f2, false, 'card_declined', response_code => 402);
SELECT stats_moved() AS mark_failed_final;
SELECT kind FROM idem.claim_idempotency_key('st', 'k2', 'h');
SELECT stats_moved() AS final_failure_replayed;

-- Refusals that are not P4002/P4012 count nothing; neither do bad arguments.
SELECT state_of($$SELECT idem.mark_succeeded('st', 'missing', 1, 200)$$);
SELECT state_of(format('SELECT idem.mark_succeeded(%L, %L, %s, 200)', 'st', 'k1', :f1));  -- finished: not owned
SELECT state_of($$SELECT idem.claim_idempotency_key('', 'k', 'h')$$);
SELECT state_of($$SELECT idem.purge_expired(0)$$);
SELECT stats_moved() AS refusals;

-- Counted at call time: a claim whose transaction rolls back stays counted.
BEGIN;
SELECT kind FROM idem.claim_idempotency_key('st', 'rolled-back', 'h');
ROLLBACK;
SELECT stats_moved() AS rolled_back_claim;
-- A replay in a READ ONLY transaction counts too.
BEGIN READ ONLY;
SELECT kind FROM idem.claim_idempotency_key('st', 'k1', 'h');
COMMIT;
SELECT stats_moved() AS read_only_replay;
-- An expired finished key claimed afresh is a new claim.
SELECT age_key('st', 'k1', lock_over => false, expired => true);
SELECT kind FROM idem.claim_idempotency_key('st', 'k1', 'another request');
SELECT stats_moved() AS regenerated;

-- Maintenance counts rows, not calls.
SELECT count(*) AS claimed FROM generate_series(1, 3) g,
       LATERAL idem.claim_idempotency_key('st-sweep', 'k' || g, 'h');
SELECT age_key('st-sweep', 'k' || g, lock_over => true, expired => false) FROM generate_series(1, 3) g;
SELECT stats_moved() AS three_claims;
SELECT idem.sweep_stale(2) AS swept, idem.sweep_stale() AS swept_rest, idem.sweep_stale() AS none_left;
SELECT stats_moved() AS sweep;
SELECT age_key('st-sweep', 'k' || g, lock_over => false, expired => true) FROM generate_series(1, 3) g;
SELECT idem.purge_expired(1000) >= 3 AS purged_ours;  -- and any expired row earlier tests left
SELECT stats_moved() ~ '^rows_purged \+ *[0-9]+$' AS only_rows_purged_moved;
SELECT idem.purge_expired() AS nothing_left;
SELECT stats_moved() AS empty_purge;

-- The inbox's and the outbox's purges (1.2): counted by idem.run_maintenance()
-- (and the worker), one row each here; a direct purge_consumed() or
-- purge_published() is an SQL function and counts nothing.
TRUNCATE idem.consumed_message, idem.outbox_event;
SELECT idem.consume_once('st-inbox', 'm' || g, 'h', interval '1 hour') FROM generate_series(1, 3) g;
UPDATE idem.consumed_message SET consumed_at = now() - interval '2 hours',
       expires_at = now() - interval '1 hour';
SELECT idem.outbox_put('st-outbox', 'k', 'shipped', '{}') IS NOT NULL AS put;
SELECT idem.outbox_published(l.id, l.lease_fence) FROM idem.outbox_lease() l;
UPDATE idem.outbox_event SET published_at = now() - interval '30 days';
SELECT stats_moved() AS consumed_and_published;
SELECT idem.purge_consumed(1) AS purged_by_hand;
SELECT stats_moved() AS direct_purge_counts_nothing;
SELECT r->'purged_messages' AS purged_messages, r->'purged_events' AS purged_events
  FROM idem.run_maintenance() r;
SELECT stats_moved() AS run_maintenance_purges;
-- The outbox's ids and fences as they were, for the tests that follow.
TRUNCATE idem.outbox_event RESTART IDENTITY;
ALTER SEQUENCE idem.outbox_lease_fence_seq RESTART;

-- The by-key tools and the views count nothing.
SELECT count(*) AS found FROM idem.lookup('st', 'k2');
SELECT status FROM idem.force_expire('st', 'k2');
SELECT status FROM idem.evict('st', 'k2');
SELECT count(*) > 0 AS summarised FROM idem.key_summary;
SELECT stats_moved() AS tools_and_views;

-- Reset this database, then all of them; NULL is refused.
SELECT stats_reset AS reset_before FROM idem.stats WHERE datname = current_database() \gset
SELECT idem.stats_reset();
SELECT stats_moved() NOT LIKE '%+%' AS counters_only_went_down;
SELECT stats_reset > :'reset_before' AS reset_time_moved,
       new_claim + replay_success + processing_active + processing_stale + retryable_failure
       + final_failure + request_mismatches + stale_fences + marked_succeeded
       + marked_failed_retryable + marked_failed_final + recovery_points_set + rows_swept
       + rows_purged + worker_rounds + messages_purged + events_purged + failed_rounds AS sum_of_counters
  FROM idem.stats WHERE datname = current_database();
SELECT kind FROM idem.claim_idempotency_key('st', 'after-reset', 'h');
SELECT stats_moved() AS counting_resumes;
SELECT idem.stats_reset(all_databases => true);
SELECT bool_and(new_claim = 0) AS every_row_zero FROM idem.stats;
SELECT stats_moved() AS after_reset_all;
SELECT state_of($$SELECT idem.stats_reset(NULL)$$);

-- Who may read and reset: nobody by default, pg_monitor may read.
CREATE ROLE stats_nobody;
CREATE ROLE stats_monitor IN ROLE pg_monitor;
SET ROLE stats_nobody;
SELECT state_of($$SELECT * FROM idem.stats$$);
SELECT state_of($$SELECT * FROM idem.key_health$$);
SELECT state_of($$SELECT idem.stats_reset()$$);
SELECT state_of($$SELECT * FROM idem.lookup('st', 'k1')$$);
RESET ROLE;
SET ROLE stats_monitor;
SELECT count(*) > 0 AS monitor_reads_stats FROM idem.stats;
SELECT count(*) >= 0 AS monitor_reads_key_health FROM idem.key_health;
SELECT count(*) >= 0 AS monitor_reads_key_summary FROM idem.key_summary;
SELECT state_of($$SELECT idem.stats_reset()$$);
SELECT state_of($$SELECT idem.evict('st', 'k1')$$);
SELECT state_of($$SELECT * FROM idem.idempotency_request$$);
RESET ROLE;
DROP ROLE stats_nobody;
DROP ROLE stats_monitor;

DROP FUNCTION stats_moved();
DROP TABLE stats_seen;
