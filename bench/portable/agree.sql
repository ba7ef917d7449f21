-- The inbox, outbox and hash steps of bench/portable/run's agreement check:
-- run in the C++ engine's database and in the portable engine's, each step
-- its own transaction; every line (step, answer or SQLSTATE) must be the
-- same in both. Answers that differ between engines by design (event ids,
-- fences, timestamps) are reduced to what the contract fixes: whether the
-- id is the same one, the status, the count. The scope and event type
-- 'agree' are used by nothing else in the benchmark.

CREATE OR REPLACE FUNCTION bench.agree_try(p_sql text) RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
    v_answer text;
BEGIN
    EXECUTE p_sql INTO v_answer;
    RETURN coalesce(v_answer, 'NULL');
EXCEPTION WHEN OTHERS THEN
    RETURN 'error ' || SQLSTATE;
END;
$$;

SELECT 1, bench.agree_try($$SELECT idem.consume_once('agree', 'm1', 'h1')$$);
SELECT 2, bench.agree_try($$SELECT idem.consume_once('agree', 'm1', 'h1')$$);
SELECT 3, bench.agree_try($$SELECT idem.consume_once('agree', 'm1', 'h2')$$);
SELECT 4, bench.agree_try($$SELECT idem.set_consumed_result('agree', 'm1', 'order', '42')$$);
SELECT 5, bench.agree_try($$SELECT idem.set_consumed_result('agree', 'm9', 'order', '42')$$);
SELECT 6, bench.agree_try($$SELECT idem.consume_once('agree', 'm2', 'h1', interval '-1 day')$$);
SELECT 7, bench.agree_try($$SELECT idem.consume_once('agree', '', 'h1')$$);
SELECT 8, bench.agree_try($$SELECT result_ref_type || '/' || result_ref_id FROM idem.consumed_message
                              WHERE consumer = 'agree' AND message_id = 'm1'$$);
SELECT 9, bench.agree_try($$SELECT idem.purge_consumed(0)$$);
SELECT 10, bench.agree_try($$SELECT idem.outbox_put('agree', 'e1', 'agree', '{"n": 1}', 'agg', '1') IS NOT NULL$$);
SELECT 11, bench.agree_try($$SELECT idem.outbox_put('agree', 'e1', 'agree', '{"n": 1}', 'agg', '1')
                                 = (SELECT id FROM idem.outbox_event WHERE scope = 'agree' AND key = 'e1')$$);
SELECT 12, bench.agree_try($$SELECT idem.outbox_put('agree', 'e2', 'agree', '{"n": 2}', 'agg', '1') IS NOT NULL$$);
SELECT 13, bench.agree_try($$SELECT idem.outbox_put('agree', 'e3', 'agree', NULL, 'agg', '1') IS NOT NULL$$);
SELECT 14, bench.agree_try($$SELECT string_agg(key, ',' ORDER BY key) FROM idem.outbox_lease(10, '30 seconds', ARRAY['agree'])$$);
SELECT 15, bench.agree_try($$SELECT idem.outbox_published(id, lease_fence + 1000) FROM idem.outbox_event
                              WHERE scope = 'agree' AND key = 'e1'$$);
SELECT 16, bench.agree_try($$SELECT idem.outbox_published(id, lease_fence) FROM idem.outbox_event
                              WHERE scope = 'agree' AND key = 'e1'$$);
SELECT 17, bench.agree_try($$SELECT idem.outbox_published(id, 1) FROM idem.outbox_event
                              WHERE scope = 'agree' AND key = 'e1'$$);
SELECT 18, bench.agree_try($$SELECT string_agg(key, ',' ORDER BY key) FROM idem.outbox_lease(10, '30 seconds', ARRAY['agree'])$$);
SELECT 19, bench.agree_try($$SELECT idem.outbox_failed(id, lease_fence, '') FROM idem.outbox_event
                              WHERE scope = 'agree' AND key = 'e2'$$);
SELECT 20, bench.agree_try($$SELECT idem.outbox_failed(id, lease_fence, 'boom', interval '0 seconds')
                              FROM idem.outbox_event WHERE scope = 'agree' AND key = 'e2'$$);
SELECT 21, bench.agree_try($$SELECT status || ' ' || attempt_count || ' ' || last_error FROM idem.outbox_event
                              WHERE scope = 'agree' AND key = 'e2'$$);
SELECT 22, bench.agree_try($$SELECT string_agg(key, ',' ORDER BY key) FROM idem.outbox_lease(10, '30 seconds', ARRAY['agree'])$$);
SELECT 23, bench.agree_try($$SELECT idem.outbox_lease(0)$$);
SELECT 24, bench.agree_try($$SELECT idem.request_hash('{"b": [1, 2.50, "x"], "a": {"z": null, "é": 1e3}}'::jsonb)$$);
SELECT 25, bench.agree_try($$SELECT idem.request_hash('[]'::jsonb)$$);
SELECT 26, bench.agree_try($$SELECT count(*) FROM idem.outbox_event WHERE scope = 'agree'$$);
