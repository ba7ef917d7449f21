-- scope_policy_changed: the C++ engine keeps each backend's copy of
-- idem.scope_policy and this trigger invalidates it. The portable engine
-- reads the scope's policy row at every call, so there is no copy to
-- invalidate: the trigger does nothing.
LANGUAGE plpgsql
AS $function$
BEGIN
    RETURN NULL;
END
$function$
