-- A new message (kept): the plain inbox written with what consume_once
-- keeps, by a careful client: the message's hash stored and, when the id
-- was seen before, compared (a different body under a seen id is refused,
-- not swallowed), and an expiry column with its index for the purge.
WITH m AS (SELECT nextval('bench_message')::text AS id),
     ins AS (INSERT INTO kept_inbox (consumer, message_id, message_hash, consumed_at, expires_at)
             SELECT 'new', m.id, 'h', now(), now() + interval '7 days' FROM m
             ON CONFLICT DO NOTHING RETURNING message_id)
SELECT (SELECT id FROM m) AS id, count(*) AS fresh FROM ins \gset
\if :fresh = 0
SELECT message_hash = 'h' AS same_body FROM kept_inbox WHERE consumer = 'new' AND message_id = :id::text \gset
\endif
