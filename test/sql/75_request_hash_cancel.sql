-- idem.request_hash(jsonb) on a large document stops at a cancel or
-- statement_timeout (57014) inside the call: the canonicalizer asks for
-- pending interrupts as it goes (src/pure/jcs.hpp) and the call serves them. The
-- proof needs no clock: the statement computes the hash and then draws
-- from a sequence, with no interrupt check between the two expressions, so
-- a hash that ran to its end despite the timeout would draw a value (a
-- sequence is not rolled back) before the executor noticed the timeout.
-- Hashing the document takes far longer than the 20 ms timeout (about
-- 16 MB of JSON), so the timeout fires inside the call.
\set VERBOSITY sqlstate
\set SHOW_CONTEXT never
CREATE TABLE large_document AS
SELECT jsonb_agg(jsonb_build_object('n', i, 'name', md5(i::text), 'amount', i * 0.5, 'tags', jsonb_build_array(i, 'x')))
         AS doc
  FROM generate_series(1, 200000) i;
CREATE SEQUENCE after_hash;

SET statement_timeout = '20ms';
SELECT idem.request_hash(doc), nextval('after_hash') FROM large_document;
RESET statement_timeout;
SELECT is_called AS drew_after_the_timeout FROM after_hash;

-- Uninterrupted, the same document hashes as before (and draws).
SELECT length(idem.request_hash(doc)) AS hex_length, nextval('after_hash') FROM large_document;

DROP SEQUENCE after_hash;
DROP TABLE large_document;
