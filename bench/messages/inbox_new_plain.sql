INSERT INTO plain_inbox VALUES ('new', nextval('bench_message')::text, 'h', now()) ON CONFLICT DO NOTHING;
