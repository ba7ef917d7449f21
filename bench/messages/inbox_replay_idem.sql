\set m random(1, 100000)
SELECT idem.consume_once('replay', :m::text, 'h');
