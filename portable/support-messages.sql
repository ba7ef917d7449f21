-- The portable engine's helpers for the inbox and outbox. They are called
-- only from SECURITY DEFINER bodies, which run as the extension's owner;
-- PUBLIC may execute none of them.

-- ---- the inbox's and outbox's error wording (src/pg/message_text.cpp) ----

-- excerpt(): at most max_chars characters of a text, "..." when cut.
CREATE FUNCTION idem.portable_msg_excerpt(value text, max_chars integer DEFAULT 300)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN pg_catalog.char_length($1) OPERATOR(pg_catalog.>) $2
              THEN pg_catalog.left($1, $2) || '...' ELSE $1 END
$$;
REVOKE ALL ON FUNCTION idem.portable_msg_excerpt(text, integer) FROM PUBLIC;

-- quoted(): format()'s %L of the excerpt, NULL unquoted.
CREATE FUNCTION idem.portable_msg_quoted(value text, max_chars integer DEFAULT 300)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN $1 IS NULL THEN 'NULL'
              ELSE pg_catalog.quote_literal(idem.portable_msg_excerpt($1, $2)) END
$$;
REVOKE ALL ON FUNCTION idem.portable_msg_quoted(text, integer) FROM PUBLIC;

-- idem.inbox_retention as consume_once uses it: NULL for -1 (forever), else
-- that many seconds (7 days when unset). Without the library the setting is
-- a placeholder that takes any text, so it is judged here, by the key
-- store's rule for an integer setting with units (idem.portable_int_setting,
-- portable/support-keys.sql), and 0 with the words of the library's check
-- (src/messages/message_maintenance.cpp), at use instead of at SET.
CREATE FUNCTION idem.portable_msg_inbox_retention()
RETURNS interval
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    seconds integer := idem.portable_int_setting('idem.inbox_retention', 604800, 's', -1, 2147483647);
BEGIN
    IF seconds = 0 THEN
        RAISE EXCEPTION 'invalid value for parameter "idem.inbox_retention": 0'
            USING ERRCODE = '22023',
                  DETAIL = 'The retention must be positive, or -1 to keep rows forever.';
    END IF;
    IF seconds = -1 THEN
        RETURN NULL;
    END IF;
    RETURN pg_catalog.make_interval(secs => seconds);
END
$$;
REVOKE ALL ON FUNCTION idem.portable_msg_inbox_retention() FROM PUBLIC;
