-- typical_duration: the C++ engine keeps a running mean per scope in shared
-- memory, fed by mark_succeeded and mark_failed (each completion moves it by
-- 1/8 of its distance; src/waits/request_durations.cpp). The portable
-- engine computes the same mean from the table: the scope's 64 most
-- recently finished keys (claim to outcome, finished_at - claimed_at),
-- oldest first, leaving out the keys idem itself ended (swept, forced to
-- expire, past max_attempts), which no owner completed. NULL when the
-- scope has none. Reads the scope's rows through the primary key, so its
-- cost grows with the scope's size; idem.retry_after calls it only for a
-- processing_active answer. The reading is done by a SECURITY DEFINER
-- helper (portable/support-keys.sql), so that EXECUTE on this function is
-- all a role needs, as with the C++ engine.
LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM idem.portable_check_scope_owner(scope);
    RETURN idem.portable_typical_duration(scope);
END
$function$
