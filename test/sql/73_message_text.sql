-- Huge and multibyte texts in every text argument of idem's functions, sent
-- to a UTF8 client and to a LATIN1 client: each call ends in its documented
-- SQLSTATE (or is accepted), never in 22021 (a message cut inside a
-- character, which the client's conversion refuses) or 54000 (an index
-- entry too large). Error texts quote a caller's text cut at a character
-- boundary (src/pg/message_text.hpp). A character LATIN1 cannot hold ('€') is
-- refused by the server's conversion (22P05) only when a message really
-- quotes it; quoted texts are cut first, so a '€' past the cut is never
-- sent. The file itself is ASCII: chr() builds the characters.
\set VERBOSITY sqlstate
\set SHOW_CONTEXT never

CREATE TABLE message_text_input (name text PRIMARY KEY, value text NOT NULL);
INSERT INTO message_text_input VALUES
  ('e', repeat(chr(233), 100000)),                              -- 100,000 e-acute, 2 bytes each
  ('odd', 'x' || repeat(chr(233), 100000)),                     -- the same at an odd byte offset
  ('euro_late', repeat(chr(233), 300) || repeat(chr(8364), 1000)),  -- a euro sign past any cut
  ('euro', repeat(chr(8364), 256)),                             -- a euro sign a message must quote
  ('euro255', repeat(chr(8364), 255)),
  -- 255 characters of four bytes each, varied so that compression cannot shrink them
  ('wide255', (SELECT string_agg(chr(128512 + get_byte(decode(md5(i::text), 'hex'), 0)), '' ORDER BY i)
                 FROM generate_series(1, 255) i)),
  ('hex', (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 100) i));  -- 3,200 incompressible
CREATE FUNCTION t(name text) RETURNS text LANGUAGE sql STABLE
  AS $$SELECT value FROM message_text_input WHERE name = $1$$;

-- State the calls below build on: a key and a message stored with huge hashes.
SELECT kind FROM idem.claim_idempotency_key('mt', 'stored', t('e'));
SELECT idem.consume_once('mt', 'stored', t('e')) AS consumed;

-- Each call; @pass makes the keys of the calls that write fresh per pass.
CREATE TABLE message_text_call (ord serial, call text NOT NULL);
INSERT INTO message_text_call (call) VALUES
  -- the key store: P4000, P4001, P4002, or accepted
  ($$SELECT idem.claim_idempotency_key(t('e'), 'k', 'h')$$),
  ($$SELECT idem.claim_idempotency_key('mt', t('e'), 'h')$$),
  ($$SELECT idem.claim_idempotency_key('mt', t('odd'), 'h')$$),
  ($$SELECT idem.claim_idempotency_key('mt', t('euro_late'), 'h')$$),
  ($$SELECT idem.claim_idempotency_key('mt', t('euro'), 'h')$$),
  ($$SELECT (idem.claim_idempotency_key('mt', 'hash-@pass', t('e'))).kind$$),
  ($$SELECT idem.claim_idempotency_key('mt', 'stored', t('odd'))$$),
  ($$SELECT (idem.claim_idempotency_key('mt', 'by-@pass', 'h', t('e'))).kind$$),
  ($$SELECT idem.claim_or_wait(t('odd'), 'k', 'h', '1 second')$$),
  ($$SELECT idem.claim_or_wait('mt', t('odd'), 'h', '1 second')$$),
  ($$SELECT idem.claim_or_wait('mt', 'stored', t('odd'), '1 second')$$),
  ($$SELECT (idem.claim_or_wait('mt', 'wait-@pass', 'h', '1 second', t('e'))).kind$$),
  ($$SELECT idem.mark_succeeded('mt', 'ok-@pass', (SELECT fence FROM idem.claim_idempotency_key('mt', 'ok-@pass', 'h')),
                                200, NULL, t('e'), t('odd'))$$),
  ($$SELECT idem.mark_failed('mt', 'fail-@pass', (SELECT fence FROM idem.claim_idempotency_key('mt', 'fail-@pass', 'h')),
                             false, t('e'), t('odd'))$$),
  ($$SELECT idem.set_recovery_point('mt', 'rp-@pass', (SELECT fence FROM idem.claim_idempotency_key('mt', 'rp-@pass', 'h')),
                                    t('odd'))$$),
  ($$SELECT idem.mark_succeeded('mt', t('odd'), 1, 200)$$),
  ($$SELECT idem.mark_failed(t('odd'), 'k', 1, true, 'c')$$),
  ($$SELECT idem.set_recovery_point('mt', t('odd'), 1, 'p')$$),
  ($$SELECT idem.extend_lock('mt', t('odd'), 1, '1 minute')$$),
  ($$SELECT idem.mark_succeeded_returning('mt', t('odd'), 1, 200)$$),
  ($$SELECT idem.mark_failed_returning(t('odd'), 'k', 1, true, 'c')$$),
  ($$SELECT idem.stored_answer('mt', t('odd')) IS NULL AS no_answer$$),
  ($$SELECT idem.lookup(t('odd'), 'k')$$),
  ($$SELECT idem.evict('mt', t('odd'))$$),
  ($$SELECT idem.force_expire('mt', t('odd'))$$),
  ($$SELECT idem.typical_duration(t('odd'))$$),
  ($$SELECT idem.request_hash(to_jsonb(t('odd'))) IS NOT NULL AS hashed$$),
  -- the inbox: P4000, P4001, P4050, or accepted
  ($$SELECT idem.consume_once(t('odd'), 'm', 'h')$$),
  ($$SELECT idem.consume_once('mt', t('odd'), 'h')$$),
  ($$SELECT idem.consume_once('mt', t('euro_late'), 'h')$$),
  ($$SELECT idem.consume_once('mt', 'hash-@pass', t('odd'))$$),
  ($$SELECT idem.consume_once('mt', 'stored', t('odd'))$$),
  ($$SELECT idem.consume_once('mt', 'stored', t('euro'))$$),
  ($$SELECT idem.set_consumed_result('mt', 'stored', t('e'), t('odd'))$$),
  ($$SELECT idem.set_consumed_result(t('odd'), 'm', 'r', 'i')$$),
  -- the outbox: P4000, P4001, P4004, or accepted (scope, key and event_type
  -- of 255 characters each fit the outbox's index up to three bytes a
  -- character; four-byte characters in all three do not, and are P4004)
  ($$SELECT idem.outbox_put(t('odd'), 'k', 'mt.put', '{}')$$),
  ($$SELECT idem.outbox_put('mt', t('odd'), 'mt.put', '{}')$$),
  ($$SELECT idem.outbox_put('mt', 'k', t('odd'), '{}')$$),
  ($$SELECT idem.outbox_put('mt', 'k', t('hex'), '{}')$$),
  ($$SELECT idem.outbox_put('mt', 'k', 'mt.put', '{}', t('odd'), 'a')$$),
  ($$SELECT idem.outbox_put('mt', 'k', 'mt.put', '{}', 'order', t('hex'))$$),
  ($$SELECT idem.outbox_put(t('euro255'), t('euro255'), 'mt.@pass.' || left(t('euro255'), 200), '{}') IS NOT NULL AS put$$),
  ($$SELECT idem.outbox_put(t('wide255'), t('wide255'), t('wide255'), '{}')$$),
  ($$SELECT idem.outbox_put('mt', 'ev-@pass', 'mt.@pass', to_jsonb(t('e')), t('euro255'),
                            left(t('euro255'), 200) || '@pass', jsonb_build_object('h', t('e'))) IS NOT NULL AS put$$),
  ($$SELECT idem.outbox_failed(l.id, l.lease_fence, t('odd')) FROM idem.outbox_lease(1, '1 hour', ARRAY['mt.@pass']) l$$);

SET client_encoding = 'UTF8';
SELECT replace(call, '@pass', 'utf8') FROM message_text_call ORDER BY ord \gexec
SET client_encoding = 'LATIN1';
SELECT replace(call, '@pass', 'latin1') FROM message_text_call ORDER BY ord \gexec
RESET client_encoding;

-- The cut: at a character boundary, marked, short; the SQLSTATE kept.
\set VERBOSITY default
SELECT left(error_of($$SELECT idem.consume_once('mt', 'stored', t('odd'))$$), 80) AS p4050;
SELECT length(error_of($$SELECT idem.consume_once('mt', 'stored', t('odd'))$$)) < 1000 AS short;
SELECT error_of($$SELECT idem.consume_once('mt', 'stored', t('odd'))$$) ~ (chr(233) || '\.\.\.') AS marked;
SELECT split_part(error_of($$SELECT idem.claim_idempotency_key('mt', t('euro_late'), 'h')$$), ':', 1) AS state,
       strpos(error_of($$SELECT idem.claim_idempotency_key('mt', t('euro_late'), 'h')$$), chr(8364)) = 0 AS euro_not_quoted;

DROP TABLE message_text_call;
DROP FUNCTION t(text);
DROP TABLE message_text_input;
