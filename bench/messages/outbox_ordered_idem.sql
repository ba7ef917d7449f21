-- A relay's shape: the put commits, the lease commits (so a relay that dies
-- while delivering loses only its lease), then the publish commits.
\set a random(1, 1000)
SELECT idem.outbox_put('bench', nextval('bench_event')::text, 'evt', '{"amount": 1}', 'agg', :a::text);
SELECT coalesce(max(id), 0) AS id, coalesce(max(lease_fence), 0) AS fence FROM idem.outbox_lease(1, '30 seconds') \gset
SELECT idem.outbox_published(:id, :fence) WHERE :id > 0;
