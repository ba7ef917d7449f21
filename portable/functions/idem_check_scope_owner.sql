-- check_scope_owner (src/policy/scope_owner.cpp): {{sqlstate::scope_not_owned}} naming the scope
-- when the calling role may not use it; a NULL scope is {{sqlstate::scope_invalid}}, as a claim
-- refuses it. The decision is idem.portable_scope_refusal
-- (portable/support-owners.sql), the one every covered body asks through
-- idem.portable_check_scope_owner.
LANGUAGE plpgsql
AS $function$
BEGIN
    IF scope IS NULL THEN
        PERFORM idem.portable_require_scope_and_key(scope, NULL);
    END IF;
    PERFORM idem.portable_check_scope_owner(scope);
END
$function$
