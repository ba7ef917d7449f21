-- The least work any inbox can do to answer a duplicate: one primary-key read
-- of the message's row (the ceiling of the replay cell, bench/README.md).
\set m random(1, 100000)
SELECT message_hash FROM plain_inbox WHERE consumer = 'replay' AND message_id = :m::text;
