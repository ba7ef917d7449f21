SELECT idem.consume_once('new', nextval('bench_message')::text, 'h');
