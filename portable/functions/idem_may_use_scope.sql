-- may_use_scope (src/policy/scope_owner.cpp): whether the calling role may
-- use the scope, as check_scope_owner decides it; NULL scope: false.
LANGUAGE sql
AS $function$
  SELECT idem.portable_may_use_scope($1)
$function$
