-- The same three transactions on ordered_queue (setup.sql), each one statement.
\set a random(1, 1000)
WITH aggregate_lock AS (SELECT pg_advisory_xact_lock(1, hashtext(:a::text))),
     put AS (INSERT INTO ordered_queue (key, payload, aggregate_id)
             SELECT nextval('bench_event')::text, '{"amount": 1}', :a::text FROM aggregate_lock
             ON CONFLICT (key) DO NOTHING RETURNING id)
SELECT pg_notify('ordered_queue', 'evt') FROM put;
WITH due AS (SELECT e.id FROM ordered_queue e
             WHERE e.status IN ('pending', 'leased')
               AND (e.status = 'pending' OR e.leased_until <= now())
               AND NOT EXISTS (SELECT FROM ordered_queue p
                               WHERE e.aggregate_id IS NOT NULL AND p.aggregate_id IS NOT NULL
                                 AND p.status IN ('pending', 'leased')
                                 AND p.aggregate_id = e.aggregate_id AND p.id < e.id)
             ORDER BY e.id LIMIT 1 FOR UPDATE OF e SKIP LOCKED),
     leased AS (UPDATE ordered_queue q SET status = 'leased', lease_fence = nextval('ordered_queue_fence'),
                    leased_until = now() + interval '30 seconds', attempt_count = q.attempt_count + 1
                FROM due WHERE q.id = due.id RETURNING q.id, q.lease_fence)
SELECT coalesce(max(id), 0) AS id, coalesce(max(lease_fence), 0) AS fence FROM leased \gset
UPDATE ordered_queue SET status = 'published', published_at = clock_timestamp(),
    lease_fence = NULL, leased_until = NULL
WHERE id = :id AND status = 'leased' AND lease_fence = :fence;
