\set a random(1, 1000)
SELECT idem.outbox_put('bench', nextval('bench_event')::text, 'evt', '{"amount": 1}', 'agg', :a::text);
SELECT count(idem.outbox_published(id, lease_fence)) FROM idem.outbox_lease(1, '30 seconds');
