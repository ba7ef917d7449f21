\set a random(1, 1000)
INSERT INTO plain_queue (key, payload, aggregate_id) VALUES (nextval('bench_event')::text, '{"amount": 1}', :a::text) ON CONFLICT DO NOTHING;
WITH next AS (SELECT id FROM plain_queue WHERE status = 'pending' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE plain_queue q SET status = 'published', published_at = clock_timestamp() FROM next WHERE q.id = next.id;
