\set m random(1, 100000)
INSERT INTO plain_inbox VALUES ('replay', :m::text, 'h', now()) ON CONFLICT DO NOTHING;
