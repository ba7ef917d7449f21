-- lookup (src/keys/key_tools.cpp): the key's row, or no row; each use
-- logged with who asked.
LANGUAGE plpgsql
AS $function$
DECLARE
    found_row idem.idempotency_request;
BEGIN
    PERFORM idem.portable_require_scope_and_key(scope, key);
    SELECT * INTO found_row FROM idem.idempotency_request r
     WHERE r.scope = lookup.scope AND r.key = lookup.key;
    IF NOT FOUND THEN
        PERFORM idem.portable_log_tool_use('lookup', scope, key, 'no such key');
        RETURN;
    END IF;
    PERFORM idem.portable_log_tool_use('lookup', scope, key,
        pg_catalog.format('found (status %s, fence %s)', found_row.status, found_row.fence));
    RETURN NEXT found_row;
END
$function$
