-- Which SECURITY DEFINER functions of schema idem PUBLIC may execute (both
-- engines). Such a function runs as the extension's owner, whoever calls
-- it: PUBLIC may execute one only when it is a call that checks the scope's
-- owner itself (a scope-checked call, listed here by hand); every other one
-- (an operator's tool, an internal helper such as the portable engine's
-- idem.portable_*) must have no PUBLIC EXECUTE, and is granted to roles by
-- name. A new SECURITY DEFINER function left executable by PUBLIC fails
-- here until it is revoked, or checks scopes and joins the list.
\set VERBOSITY terse

CREATE TEMPORARY TABLE scope_checked_public_calls (call text PRIMARY KEY);
INSERT INTO scope_checked_public_calls VALUES
    ('idem.check_scope_owner(text)'),
    ('idem.may_use_scope(text)');

-- Each listed call exists, is SECURITY DEFINER and is PUBLIC's.
SELECT c.call, p.prosecdef AS security_definer,
       EXISTS (SELECT FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
                WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE') AS public_may_execute
  FROM scope_checked_public_calls c
  LEFT JOIN pg_proc p ON p.oid = to_regprocedure(c.call)
 ORDER BY c.call;

-- Any other SECURITY DEFINER function PUBLIC may execute: none.
SELECT coalesce(string_agg(p.oid::regprocedure::text, ', ' ORDER BY p.oid::regprocedure::text), 'none')
       AS unchecked_definers_public_may_execute
  FROM pg_proc p
 WHERE p.pronamespace = 'idem'::regnamespace
   AND p.prosecdef
   AND EXISTS (SELECT FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
                WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
   AND p.oid::regprocedure::text NOT IN (SELECT c.call FROM scope_checked_public_calls c);

-- The test sees what it should: a SECURITY DEFINER function granted to
-- PUBLIC by mistake is named.
CREATE FUNCTION idem.definer_by_mistake() RETURNS integer
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS 'SELECT 1';
SELECT coalesce(string_agg(p.oid::regprocedure::text, ', ' ORDER BY p.oid::regprocedure::text), 'none')
       AS unchecked_definers_public_may_execute
  FROM pg_proc p
 WHERE p.pronamespace = 'idem'::regnamespace
   AND p.prosecdef
   AND EXISTS (SELECT FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
                WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
   AND p.oid::regprocedure::text NOT IN (SELECT c.call FROM scope_checked_public_calls c);
DROP FUNCTION idem.definer_by_mistake();
