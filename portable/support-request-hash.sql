-- The portable engine's helpers for idem.request_hash: RFC 8785 (JCS)
-- canonical JSON.
--
-- idem.request_hash is granted to PUBLIC and runs as its caller (it is not
-- SECURITY DEFINER, as the C function is not), so its helpers below are
-- granted to PUBLIC too: like request_hash they are pure functions of their
-- arguments that read no table and reveal nothing.

-- ---- RFC 8785 canonical JSON (src/pure/jcs.cpp, src/pure/jcs_number.cpp) ----
-- The C++ engine canonicalizes the document's text (jsonb's output) with a
-- parser of its own. jsonb has already done most of a parser's work:
-- duplicate names are gone, strings are valid, and jsonb writes a string
-- with exactly RFC 8785's escapes (\" \\ \b \f \n \r \t, \u00xx in lowercase
-- for the other controls, every other character as itself), so a string's
-- text is its canonical form. What is left: numbers (ECMAScript's form of
-- the double, or {{sqlstate::inexact_number}}), member order (UTF-16 code units, not jsonb's
-- length-first order), no whitespace, and the C++ parser's depth limit.

-- The significant digits of a decimal text ("-0.00120", "1.5e-07", "1e+21")
-- without leading or trailing zeros, and the power of ten of the first
-- (point); digits NULL for zero.
CREATE FUNCTION idem.portable_jcs_digits(written text, OUT digits text, OUT point integer)
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT NULLIF(pg_catalog.rtrim(s.stripped, '0'), ''),
         pg_catalog.length(s.integer_part) - 1
           - (pg_catalog.length(s.all_digits) - pg_catalog.length(s.stripped)) + s.exponent
    FROM (SELECT m.integer_part, m.all_digits, pg_catalog.ltrim(m.all_digits, '0') AS stripped, m.exponent
            FROM (SELECT pg_catalog.split_part(b.mantissa, '.', 1) AS integer_part,
                         pg_catalog.replace(b.mantissa, '.', '') AS all_digits, b.exponent
                    FROM (SELECT pg_catalog.split_part(pg_catalog.ltrim(lower($1), '-'), 'e', 1) AS mantissa,
                                 COALESCE(NULLIF(pg_catalog.split_part(lower($1), 'e', 2), '')::integer, 0) AS exponent) b) m) s
$$;
GRANT EXECUTE ON FUNCTION idem.portable_jcs_digits(text) TO PUBLIC;

-- ECMAScript's Number::toString (ECMA-262 7.1.12.1) of
-- (-1)^negative * 0.digits * 10^(point + 1), as append_ecmascript writes it.
CREATE FUNCTION idem.portable_jcs_ecmascript(negative boolean, digits text, point integer)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN $1 THEN '-' ELSE '' END ||
         CASE WHEN k.k OPERATOR(pg_catalog.<=) k.n AND k.n OPERATOR(pg_catalog.<=) 21
                THEN $2 || pg_catalog.repeat('0', k.n OPERATOR(pg_catalog.-) k.k)
              WHEN 0 OPERATOR(pg_catalog.<) k.n AND k.n OPERATOR(pg_catalog.<=) 21
                THEN pg_catalog.left($2, k.n) || '.' || pg_catalog.substr($2, k.n OPERATOR(pg_catalog.+) 1)
              WHEN -6 OPERATOR(pg_catalog.<) k.n AND k.n OPERATOR(pg_catalog.<=) 0
                THEN '0.' || pg_catalog.repeat('0', OPERATOR(pg_catalog.-) k.n) || $2
              ELSE pg_catalog.left($2, 1)
                   || CASE WHEN k.k OPERATOR(pg_catalog.>) 1 THEN '.' || pg_catalog.substr($2, 2) ELSE '' END
                   || 'e' || CASE WHEN k.n OPERATOR(pg_catalog.<=) 0 THEN '-' ELSE '+' END
                   || pg_catalog.abs(k.n OPERATOR(pg_catalog.-) 1)::text
         END
    FROM (SELECT pg_catalog.length($2) AS k, $3 OPERATOR(pg_catalog.+) 1 AS n) k
$$;
GRANT EXECUTE ON FUNCTION idem.portable_jcs_ecmascript(boolean, text, integer) TO PUBLIC;

-- The canonical form of one JSON number as jsonb writes it (plain decimal:
-- numeric never writes an exponent), or {{sqlstate::inexact_number}} with the C++ engine's words
-- when that form is not numerically equal to it (append_canonical_number).
-- float8's output with extra_float_digits > 0 is the shortest text that
-- reads back as the same double (Ryu), the digits ECMAScript prints; the
-- input is accepted exactly when its own digits are those digits.
CREATE FUNCTION idem.portable_jcs_number(written text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
SET extra_float_digits = 1
AS $$
DECLARE
    negative boolean := pg_catalog.left(written, 1) OPERATOR(pg_catalog.=) '-';
    sent record;
    nearest record;
    magnitude float8;
    why text;
    shown text;
BEGIN
    sent := idem.portable_jcs_digits(written);
    IF sent.digits IS NULL THEN
        RETURN '0';  -- zero, whatever its sign
    END IF;
    IF sent.point OPERATOR(pg_catalog.>) 308 THEN
        why := 'its magnitude is too large for an IEEE 754 double';
    ELSIF sent.point OPERATOR(pg_catalog.<) -324 THEN
        why := 'its magnitude is too small for an IEEE 754 double (it would become 0)';
    ELSIF pg_catalog.length(sent.digits) OPERATOR(pg_catalog.>) 17 THEN
        why := pg_catalog.format('it has %s significant digits, more than an IEEE 754 double keeps (17 at most)',
                                 pg_catalog.length(sent.digits));
    ELSE
        -- Past the ends of the range the nearest double is infinite or 0,
        -- which float8in refuses (22003); an exception block cannot catch
        -- that in a parallel worker (request_hash is PARALLEL SAFE), so the
        -- bounds are compared exactly first: from 2^1024 - 2^970 up a
        -- number rounds to infinity, up to 2^-1075 to 0 (ties to even).
        IF sent.point OPERATOR(pg_catalog.>=) 308
           AND (sent.digits || 'e' || (sent.point OPERATOR(pg_catalog.-) pg_catalog.length(sent.digits)
                                       OPERATOR(pg_catalog.+) 1)::text)::numeric
               OPERATOR(pg_catalog.>=) (pg_catalog.power(2::numeric, 1024) OPERATOR(pg_catalog.-) pg_catalog.power(2::numeric, 970)) THEN
            magnitude := 'infinity';
        ELSIF sent.point OPERATOR(pg_catalog.<=) -323
              AND ((sent.digits || 'e' || (sent.point OPERATOR(pg_catalog.-) pg_catalog.length(sent.digits)
                                          OPERATOR(pg_catalog.+) 1)::text)::numeric
                  OPERATOR(pg_catalog.*) pg_catalog.power(2::numeric, 1075)) OPERATOR(pg_catalog.<=) 1 THEN
            magnitude := 0;
        ELSE
            magnitude := (sent.digits || 'e' || (sent.point OPERATOR(pg_catalog.-) pg_catalog.length(sent.digits)
                                                 OPERATOR(pg_catalog.+) 1)::text)::float8;
        END IF;
        IF magnitude OPERATOR(pg_catalog.=) 0
           OR magnitude OPERATOR(pg_catalog.=) 'infinity'::float8 THEN
            why := CASE WHEN sent.point OPERATOR(pg_catalog.>) 0
                        THEN 'its magnitude is too large for an IEEE 754 double'
                        ELSE 'its magnitude is too small for an IEEE 754 double (it would become 0)' END;
        ELSE
            nearest := idem.portable_jcs_digits(magnitude::text);
            -- PostgreSQL's Ryu never writes a value exactly halfway to the
            -- next double; std::to_chars (and ECMAScript) does when it is
            -- shorter and reads back as this double (ties go to the even
            -- one): 1e23 is written "1e+23", not 9.999999999999999e+22.
            -- Such a halfway value is a short decimal only for doubles from
            -- 2^53 to about 2^131, and it lies on the grid of j digits just
            -- below or above the shortest inner form.
            IF nearest.point OPERATOR(pg_catalog.>=) 15 AND nearest.point OPERATOR(pg_catalog.<=) 40 THEN
                DECLARE
                    inner_value numeric := (nearest.digits || 'e' || (nearest.point OPERATOR(pg_catalog.-)
                                            pg_catalog.length(nearest.digits) OPERATOR(pg_catalog.+) 1)::text)::numeric;
                    below numeric;
                    above numeric;
                BEGIN
                    FOR j IN 1 .. pg_catalog.length(nearest.digits) OPERATOR(pg_catalog.-) 1 LOOP
                        below := pg_catalog.trunc(inner_value, j OPERATOR(pg_catalog.-) 1 OPERATOR(pg_catalog.-) nearest.point);
                        above := below OPERATOR(pg_catalog.+)
                                 ('1e' || (nearest.point OPERATOR(pg_catalog.-) j OPERATOR(pg_catalog.+) 1)::text)::numeric;
                        IF below::float8 OPERATOR(pg_catalog.=) magnitude THEN
                            nearest := idem.portable_jcs_digits(below::text);
                            EXIT;
                        ELSIF above::float8 OPERATOR(pg_catalog.=) magnitude THEN
                            nearest := idem.portable_jcs_digits(above::text);
                            EXIT;
                        END IF;
                    END LOOP;
                END;
            END IF;
            IF nearest.digits OPERATOR(pg_catalog.<>) sent.digits OR nearest.point OPERATOR(pg_catalog.<>) sent.point THEN
                why := 'the nearest IEEE 754 double is written '
                       || idem.portable_jcs_ecmascript(negative, nearest.digits, nearest.point)
                       || ', a different number';
            END IF;
        END IF;
    END IF;
    IF why IS NOT NULL THEN
        -- abbreviate(): at most 40 bytes of the text, and its length when cut.
        shown := CASE WHEN pg_catalog.octet_length(written) OPERATOR(pg_catalog.<=) 40 THEN written
                      ELSE pg_catalog.left(written, 40) || '... (' || pg_catalog.octet_length(written)::text || ' bytes)' END;
        RAISE EXCEPTION USING
            ERRCODE = '{{sqlstate::inexact_number}}',
            MESSAGE = pg_catalog.format('number %s cannot be represented exactly as an IEEE 754 double', shown),
            DETAIL = pg_catalog.format('The JSON number %s cannot be canonicalized without changing its value: %s.',
                                       shown, why),
            HINT = 'Send it as a JSON string to keep every digit.';
    END IF;
    RETURN idem.portable_jcs_ecmascript(negative, sent.digits, sent.point);
END
$$;
GRANT EXECUTE ON FUNCTION idem.portable_jcs_number(text) TO PUBLIC;

-- A member name's sort key: RFC 8785 orders names by their UTF-16 code
-- units, which is code point order (text's under COLLATE "C" in UTF-8)
-- except that a character above U+FFFF (a surrogate pair, 0xD800..) comes
-- before U+E000..U+FFFF. The key maps each code unit, order-preserving, to
-- one character: units below 0xD800 stay, a surrogate becomes U+E000 plus
-- its ten bits, and U+E000..U+FFFF move above them, to U+10000 on. Names
-- without a character from U+E000 up are their own key (the common case;
-- the caller does not call this for them).
CREATE FUNCTION idem.portable_jcs_utf16_key(name text)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT COALESCE(pg_catalog.string_agg(
           CASE WHEN c.cp OPERATOR(pg_catalog.>=) 65536
                  THEN pg_catalog.chr(57344 OPERATOR(pg_catalog.+) ((c.cp OPERATOR(pg_catalog.-) 65536) OPERATOR(pg_catalog.>>) 10))
                       || pg_catalog.chr(57344 OPERATOR(pg_catalog.+) ((c.cp OPERATOR(pg_catalog.-) 65536) OPERATOR(pg_catalog.&) 1023))
                WHEN c.cp OPERATOR(pg_catalog.>=) 57344
                  THEN pg_catalog.chr(65536 OPERATOR(pg_catalog.+) c.cp OPERATOR(pg_catalog.-) 57344)
                ELSE c.ch END, '' ORDER BY c.ord), '')
    FROM (SELECT u.ch, pg_catalog.ascii(u.ch) AS cp, u.ord
            FROM pg_catalog.unnest(pg_catalog.string_to_array($1, NULL)) WITH ORDINALITY AS u(ch, ord)) c
$$;
GRANT EXECUTE ON FUNCTION idem.portable_jcs_utf16_key(text) TO PUBLIC;

-- The canonical text of one array or object, recursively (scalars are
-- written where they are met, without a call). Errors come in the order
-- the C++ parser meets them, jsonb's order: the sort's input, each
-- member's text, is computed row by row as jsonb_each /
-- jsonb_array_elements return them (PostgreSQL postpones past a sort only
-- volatile expressions, or expensive ones under a LIMIT), and only then
-- sorted. ARRAY(... ORDER BY) costs less than an ordered aggregate. Called only for documents at most
-- portable_jcs_recursion_limit levels deep (idem.portable_jcs), so the
-- recursion stays far from max_stack_depth.
CREATE FUNCTION idem.portable_jcs_container(doc jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.jsonb_typeof(doc) OPERATOR(pg_catalog.=) 'object' THEN
        RETURN '{' || pg_catalog.array_to_string(ARRAY(
            SELECT (
                       pg_catalog.to_jsonb(m.key)::text || ':' ||
                       CASE pg_catalog.jsonb_typeof(m.value)
                         WHEN 'object' THEN idem.portable_jcs_container(m.value)
                         WHEN 'array' THEN idem.portable_jcs_container(m.value)
                         WHEN 'number' THEN
                           CASE WHEN m.value::text OPERATOR(pg_catalog.~) '^-?(0|[1-9][0-9]*)(\.[0-9]*[1-9])?$'
                                 AND pg_catalog.length(pg_catalog.translate(m.value::text, '-.', '')) OPERATOR(pg_catalog.<=) 15
                                 AND m.value::text OPERATOR(pg_catalog.!~) '^-?0\.000000'
                                THEN m.value::text
                                ELSE idem.portable_jcs_number(m.value::text) END
                         ELSE m.value::text END)
              FROM pg_catalog.jsonb_each(doc) AS m
             ORDER BY CASE WHEN m.key OPERATOR(pg_catalog.~) '[\ue000-\U0010ffff]'
                           THEN idem.portable_jcs_utf16_key(m.key) ELSE m.key END COLLATE "C"), ',') || '}';
    ELSIF pg_catalog.jsonb_typeof(doc) OPERATOR(pg_catalog.=) 'array' THEN
        RETURN '[' || pg_catalog.array_to_string(ARRAY(
            SELECT (
                       CASE pg_catalog.jsonb_typeof(e.value)
                         WHEN 'object' THEN idem.portable_jcs_container(e.value)
                         WHEN 'array' THEN idem.portable_jcs_container(e.value)
                         WHEN 'number' THEN
                           CASE WHEN e.value::text OPERATOR(pg_catalog.~) '^-?(0|[1-9][0-9]*)(\.[0-9]*[1-9])?$'
                                 AND pg_catalog.length(pg_catalog.translate(e.value::text, '-.', '')) OPERATOR(pg_catalog.<=) 15
                                 AND e.value::text OPERATOR(pg_catalog.!~) '^-?0\.000000'
                                THEN e.value::text
                                ELSE idem.portable_jcs_number(e.value::text) END
                         ELSE e.value::text END)
              FROM pg_catalog.jsonb_array_elements(doc) WITH ORDINALITY AS e
             ORDER BY e.ordinality), ',') || ']';
    ELSIF pg_catalog.jsonb_typeof(doc) OPERATOR(pg_catalog.=) 'number' THEN
        RETURN idem.portable_jcs_number(doc::text);
    END IF;
    RETURN doc::text;
END
$$;
GRANT EXECUTE ON FUNCTION idem.portable_jcs_container(jsonb) TO PUBLIC;

-- The same for a deep document, without recursion: a loop over the tokens
-- of jsonb's text with an explicit stack, as the C++ parser reads it, which
-- also meets its errors in its order: an inexact number ({{sqlstate::inexact_number}}), or the
-- 1001st level of nesting ({{sqlstate::too_deep}}, at that bracket's byte offset in the
-- UTF-8 text).
CREATE FUNCTION idem.portable_jcs_deep(document text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- Every character of jsonb's text is in one token: whitespace too, so
    -- that byte offsets can be summed.
    tokens text[] := ARRAY(SELECT t.m[1] FROM pg_catalog.regexp_matches(document,
                               '("(?:[^"\\]|\\.)*"|[\[\]{},:]|\s+|[^\s"\[\]{},:]+)', 'g') AS t(m));
    token text;
    c1 text;
    item text;
    items text[] := '{}';          -- finished values (objects: name, value, name, value ...)
    frame_starts integer[] := '{}';   -- where each open container's items start, innermost last
    depth integer := 0;
    start integer;
    i integer;
BEGIN
    FOR i IN 1 .. COALESCE(pg_catalog.array_length(tokens, 1), 0) LOOP
        token := tokens[i];
        c1 := pg_catalog.left(token, 1);
        item := NULL;
        IF c1 OPERATOR(pg_catalog.=) '[' OR c1 OPERATOR(pg_catalog.=) '{' THEN
            depth := depth OPERATOR(pg_catalog.+) 1;
            IF depth OPERATOR(pg_catalog.>) 1000 THEN
                RAISE EXCEPTION 'JSON value nested too deeply'
                    USING ERRCODE = '{{sqlstate::too_deep}}',
                          DETAIL = pg_catalog.format('Arrays and objects are nested more than 1000 levels deep (at byte offset %s).',
                                                     pg_catalog.octet_length(pg_catalog.convert_to(
                                                         pg_catalog.array_to_string(tokens[1:i OPERATOR(pg_catalog.-) 1], ''), 'UTF8'))),
                          HINT = 'Flatten the request body.';
            END IF;
            frame_starts := frame_starts || (COALESCE(pg_catalog.array_length(items, 1), 0) OPERATOR(pg_catalog.+) 1);
        ELSIF c1 OPERATOR(pg_catalog.=) ']' OR c1 OPERATOR(pg_catalog.=) '}' THEN
            start := frame_starts[depth];
            IF c1 OPERATOR(pg_catalog.=) ']' THEN
                item := '[' || pg_catalog.array_to_string(items[start:], ',') || ']';
            ELSE
                SELECT '{' || COALESCE(pg_catalog.string_agg(items[j] || ':' || items[j OPERATOR(pg_catalog.+) 1], ','
                           ORDER BY CASE WHEN n.name OPERATOR(pg_catalog.~) '[\ue000-\U0010ffff]'
                                         THEN idem.portable_jcs_utf16_key(n.name) ELSE n.name END COLLATE "C"), '') || '}'
                  INTO item
                  FROM pg_catalog.generate_series(start, COALESCE(pg_catalog.array_length(items, 1), 0), 2) AS j,
                       LATERAL (SELECT items[j]::jsonb OPERATOR(pg_catalog.#>>) '{}'::text[] AS name) n;
            END IF;
            items := items[1:start OPERATOR(pg_catalog.-) 1];
            frame_starts := frame_starts[1:depth OPERATOR(pg_catalog.-) 1];
            depth := depth OPERATOR(pg_catalog.-) 1;
        ELSIF c1 OPERATOR(pg_catalog.=) '"' OR c1 OPERATOR(pg_catalog.=) 't'
              OR c1 OPERATOR(pg_catalog.=) 'f' OR c1 OPERATOR(pg_catalog.=) 'n' THEN
            item := token;
        ELSIF c1 OPERATOR(pg_catalog.=) '-' OR c1 OPERATOR(pg_catalog.~) '[0-9]' THEN
            item := idem.portable_jcs_number(token);
        END IF;
        IF item IS NOT NULL THEN
            IF depth OPERATOR(pg_catalog.=) 0 THEN
                RETURN item;
            END IF;
            items := items || item;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'JSON canonicalization found no value' USING ERRCODE = '{{sqlstate::internal}}';
END
$$;
GRANT EXECUTE ON FUNCTION idem.portable_jcs_deep(text) TO PUBLIC;

-- RFC 8785's canonical form of a document (what idem.request_hash hashes).
-- Documents with few brackets (counted in the text, strings included: an
-- upper bound of the depth) go to the recursive writer; others have their
-- depth measured, and those deeper than 64 levels go to the loop.
CREATE FUNCTION idem.portable_jcs(document jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    written text;
    brackets integer;
BEGIN
    IF pg_catalog.jsonb_typeof(document) OPERATOR(pg_catalog.<>) 'object'
       AND pg_catalog.jsonb_typeof(document) OPERATOR(pg_catalog.<>) 'array' THEN
        RETURN idem.portable_jcs_container(document);
    END IF;
    written := document::text;
    brackets := pg_catalog.length(written) OPERATOR(pg_catalog.-) pg_catalog.length(pg_catalog.translate(written, '[{', ''));
    -- Two IFs: a condition holding a query is no simple expression, and
    -- PL/pgSQL would start the executor for it even when its first half is
    -- false, for every document.
    IF brackets OPERATOR(pg_catalog.>) 64 THEN
      IF (SELECT pg_catalog.max(d.depth) OPERATOR(pg_catalog.>) 64
           FROM (SELECT pg_catalog.sum(CASE WHEN t.m[1] OPERATOR(pg_catalog.=) ANY ('{"[","{"}'::text[]) THEN 1
                                            WHEN t.m[1] OPERATOR(pg_catalog.=) ANY ('{"]","}"}'::text[]) THEN -1
                                            ELSE 0 END) OVER (ORDER BY t.ord) AS depth
                   FROM pg_catalog.regexp_matches(written, '("(?:[^"\\]|\\.)*"|[\[\]{}])', 'g') WITH ORDINALITY AS t(m, ord)) d) THEN
        RETURN idem.portable_jcs_deep(written);
      END IF;
    END IF;
    RETURN idem.portable_jcs_container(document);
END
$$;
GRANT EXECUTE ON FUNCTION idem.portable_jcs(jsonb) TO PUBLIC;
