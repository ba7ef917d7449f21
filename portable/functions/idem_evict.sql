-- evict (src/keys/key_tools.cpp): deletes a key so a client may reuse it;
-- an in-flight key only with force ({{sqlstate::key_in_flight}} otherwise), a missing one {{sqlstate::key_not_found}}.
-- Returns the row as it was; each use logged with who asked.
LANGUAGE plpgsql
AS $function$
DECLARE
    gone idem.idempotency_request;
BEGIN
    PERFORM idem.portable_require_scope_and_key(scope, key);
    PERFORM idem.portable_require_bool(force, 'force', scope, key);
    DELETE FROM idem.idempotency_request AS r
     WHERE r.scope = evict.scope AND r.key = evict.key
       AND (r.status <> 'processing' OR evict.force)
    RETURNING r.* INTO gone;
    IF NOT FOUND THEN
        PERFORM idem.portable_refuse_tool('evict', scope, key);
    END IF;
    PERFORM idem.portable_log_tool_use('evict', scope, key,
        pg_catalog.format('deleted (status %s, fence %s%s)', gone.status, gone.fence,
                          CASE WHEN force THEN ', forced' ELSE '' END));
    RETURN gone;
END
$function$
