-- Scopes owned by roles (idem.scope_owner): src/policy/scope_owner.hpp in
-- SQL. Every call that reads or writes a scope's keys, messages or events
-- runs the owner check first.
-- portable: version 1.1
-- A 1.1 schema has no idem.scope_owner, so nothing is covered and every
-- scope may be used: these two answer that there, and 1.2 replaces them
-- (CREATE OR REPLACE, this file's piece for 1.2) with the check against the
-- table, where the table exists. The bodies are not versioned
-- (portable/build.pl), so they name the check in a 1.1 install too, where
-- it must exist and allow.
CREATE FUNCTION idem.portable_check_scope_owner(scope text)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
END
$$;
REVOKE ALL ON FUNCTION idem.portable_check_scope_owner(text) FROM PUBLIC;

CREATE FUNCTION idem.portable_may_use_scope(scope text)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT $1 IS NOT NULL
$$;
REVOKE ALL ON FUNCTION idem.portable_may_use_scope(text) FROM PUBLIC;

-- portable: version 1.2
-- From 1.2 on, the check against the table. The C++ engine keeps
-- idem.scope_owner in a per-backend cache dropped at each change's commit;
-- these read the table at each call, under the statement's snapshot
-- (docs/portable.md).
-- Called from idem's SECURITY DEFINER bodies, which run as the extension's
-- owner and so may read the table; PUBLIC may execute none of them.

-- The database's own value of idem.require_scope_owner (ALTER DATABASE
-- ... SET, pg_db_role_setting), or NULL. Both catalogs are shared: a lock
-- on a shared relation cannot take the fast path, so reading them at each
-- call took the lock manager's partition lock for the same two tags in
-- every backend, which serialised the covered calls at 32 clients. So the
-- value is read once per session, as the C++ engine's registered setting
-- takes it when the session starts: declared IMMUTABLE, a call with no
-- argument is folded by the planner into a constant of the calling
-- statement's plan (portable_require_scope_owner's, which PL/pgSQL keeps for
-- the session). A plan made again after an invalidation reads the catalog
-- again, so a session holds the database's value of some moment between
-- its first covered call and now, never one a caller wrote: the plan is
-- the backend's own, and neither a SET nor an object of the caller's
-- reaches it.
CREATE FUNCTION idem.portable_database_require_scope_owner()
RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT substr(c.entry, char_length('idem.require_scope_owner') + 2)
    FROM pg_catalog.pg_db_role_setting s, unnest(s.setconfig) AS c(entry)
   WHERE s.setdatabase = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database())
     AND s.setrole = 0
     AND left(c.entry, char_length('idem.require_scope_owner') + 1) = 'idem.require_scope_owner='
   LIMIT 1
$$;
REVOKE ALL ON FUNCTION idem.portable_database_require_scope_owner() FROM PUBLIC;

-- idem.require_scope_owner without the library is a placeholder any
-- session may SET, so a tenant could turn it off. It is on when the
-- session's value is on, or when the database's own value is (above: a
-- session can turn it on, not off). With the library loaded the setting is
-- registered (superuser only) and its value already holds the database's,
-- but this engine cannot tell a registered setting from a placeholder
-- cheaply, so it reads the database's value either way.
-- A value that is no boolean is refused as PostgreSQL refuses it for a
-- registered boolean setting. The catalog is read only when the session's
-- value is not on: NULL means the setting was never loaded in this session,
-- so the database had no value when it began, which is when the C++
-- engine's registered setting takes the database's value too.
CREATE FUNCTION idem.portable_require_scope_owner()
RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    setting text := current_setting('idem.require_scope_owner', true);
BEGIN
    IF setting IS NULL THEN
        RETURN false;
    END IF;
    FOR pass IN 1 .. 2 LOOP
        IF pass = 2 THEN
            setting := idem.portable_database_require_scope_owner();
            IF setting IS NULL THEN
                RETURN false;
            END IF;
        END IF;
        -- boolin's words and their unique prefixes ("o" is neither).
        IF lower(btrim(setting)) = ANY ('{t,tr,tru,true,y,ye,yes,on,1}'::text[]) THEN
            RETURN true;
        END IF;
        IF pass = 1 AND btrim(setting) = '' THEN
            CONTINUE;    -- SET to '' leaves no value of its own
        END IF;
        IF NOT lower(btrim(setting)) = ANY ('{f,fa,fal,fals,false,n,no,of,off,0}'::text[]) THEN
            RAISE EXCEPTION 'parameter "idem.require_scope_owner" requires a Boolean value'
                USING ERRCODE = '22023',
                      DETAIL = format('%s is %L.', CASE pass WHEN 1 THEN 'The session''s value'
                                                            ELSE 'The database''s value' END, setting);
        END IF;
    END LOOP;
    RETURN false;
END
$$;
REVOKE ALL ON FUNCTION idem.portable_require_scope_owner() FROM PUBLIC;

-- Why the calling role may not use the scope (the refusal's errdetail), or
-- NULL when it may. The calling role is the session's (GetOuterUserId in
-- C++): SET ROLE's role, else the login role; the SECURITY DEFINER switch
-- of the body that calls this changes current_user, not the 'role'
-- setting, and SET ROLE inside such a body is refused by PostgreSQL. The
-- covering row is the longest scope_prefix the scope starts with, found
-- through the primary key among the scope's own prefixes ('' included),
-- never by reading the whole table. pg_has_role's MEMBER lets superusers
-- pass, as is_member_of_role does; an owner OID left by a dropped role has
-- no members.
-- Whom a completer's calls are judged as. The C++ engine's worker runs a
-- completer in a process of its own, judged as the completer's owner; the
-- portable engine runs it inside run_maintenance's call, whose session role
-- is the operator's. So portable_run_completer records the completer's
-- owner for the length of the completer in a temporary table of the
-- extension's owner, which only that owner may write: a caller's own table
-- of the same name, or any other way to name a role, is not believed.
CREATE FUNCTION idem.portable_judge_as(role oid)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF role IS NULL THEN
        IF idem.portable_judged_role() IS NOT NULL THEN
            DROP TABLE pg_temp.idem_portable_judged_role;
        END IF;
        RETURN;
    END IF;
    CREATE TEMPORARY TABLE idem_portable_judged_role (role oid NOT NULL);
    INSERT INTO pg_temp.idem_portable_judged_role VALUES (role);
END
$$;
REVOKE ALL ON FUNCTION idem.portable_judge_as(oid) FROM PUBLIC;

-- The role a completer running now is judged as, or NULL: only a table
-- owned by the role this runs as (the extension's owner, in idem's
-- SECURITY DEFINER bodies) counts.
CREATE FUNCTION idem.portable_judged_role()
RETURNS oid
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    judged regclass;
    role oid;
BEGIN
    IF pg_my_temp_schema() = 0 THEN
        RETURN NULL;
    END IF;
    judged := to_regclass('pg_temp.idem_portable_judged_role');
    IF judged IS NULL
       OR (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = judged) <> current_user::regrole THEN
        RETURN NULL;
    END IF;
    SELECT j.role INTO role FROM pg_temp.idem_portable_judged_role j LIMIT 1;
    RETURN role;
END
$$;
REVOKE ALL ON FUNCTION idem.portable_judged_role() FROM PUBLIC;

-- The lookup's plan is kept (force_generic_plan): the custom plans
-- PL/pgSQL would otherwise choose, estimating the prefixes from the
-- argument, cost a planning at every call, which is most of the lookup.
CREATE FUNCTION idem.portable_scope_refusal(scope text)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    owner oid;
    caller oid := idem.portable_judged_role();
    caller_name text;
BEGIN
    IF caller IS NULL THEN
        caller_name := CASE WHEN current_setting('role') = 'none' THEN session_user
                            ELSE current_setting('role') END;
        caller := to_regrole(quote_ident(caller_name));
    ELSE
        caller_name := pg_get_userbyid(caller);
    END IF;
    -- The covering row is the longest of the scope's prefixes, by length as
    -- the C++ engine takes it (src/pure/scope_prefix.cpp: the longest byte
    -- prefix). Not the greatest under ORDER BY scope_prefix DESC: under the
    -- database's collation a longer prefix may sort first (ICU cy-GB puts
    -- 'shop/ng' before 'shop/n', "ng" being one letter of Welsh), and then
    -- another role would own the scope. Equality is byte equality under
    -- any database collation (a database's collation is deterministic).
    -- No prefix is longer than 255 characters (the table's CHECK), and a
    -- call that takes any text (typical_duration) may pass a longer scope.
    SELECT o.owner INTO owner
      FROM idem.scope_owner o
     WHERE o.scope_prefix = ANY (ARRAY(SELECT left(scope, n)
                                         FROM generate_series(0, LEAST(char_length(scope), 255)) AS n))
     ORDER BY octet_length(o.scope_prefix) DESC
     LIMIT 1;
    IF FOUND THEN
        IF caller IS NOT NULL AND coalesce(pg_has_role(caller, owner, 'MEMBER'), false) THEN
            RETURN NULL;
        END IF;
        -- A session may outlive the DROP ROLE of the role it runs as.
        RETURN format('The scope is owned by a role that role "%s" is not a member of (idem.scope_owner).',
                      CASE WHEN caller IS NULL THEN '(dropped role)' ELSE caller_name END);
    END IF;
    IF current_setting('idem.require_scope_owner', true) IS NULL
       OR NOT idem.portable_require_scope_owner()
       OR caller IS NOT NULL
          AND pg_has_role(caller, (SELECT c.relowner FROM pg_catalog.pg_class c
                                    WHERE c.oid = 'idem.scope_owner'::regclass), 'MEMBER') THEN
        RETURN NULL;
    END IF;
    RETURN 'No row of idem.scope_owner covers the scope, and idem.require_scope_owner is on.';
END
$$;
REVOKE ALL ON FUNCTION idem.portable_scope_refusal(text) FROM PUBLIC;

-- The refusal every covered call raises first, right after its arguments
-- are checked and before it reads a key: {{sqlstate::scope_not_owned}}, naming the scope and
-- nothing about the key (src/policy/scope_owner.cpp's texts, the scope
-- cut as every message cuts a caller's text). NULL scope: nothing to check
-- (the calls refuse a NULL scope themselves, first; check_scope_owner too).
-- Where no scope has an owner and idem.require_scope_owner is not on (never
-- loaded, off, or the library's registered default), every scope may be
-- used: answered by one look at the table, without the prefix lookup.
CREATE OR REPLACE FUNCTION idem.portable_check_scope_owner(scope text)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    refusal text;
BEGIN
    IF scope IS NULL
       OR current_setting('idem.require_scope_owner', true) IS NULL
          AND NOT EXISTS (SELECT FROM idem.scope_owner) THEN
        RETURN;
    END IF;
    -- Apart, so that the common case above starts no call of a function.
    IF NOT EXISTS (SELECT FROM idem.scope_owner) AND NOT idem.portable_require_scope_owner() THEN
        RETURN;
    END IF;
    refusal := idem.portable_scope_refusal(scope);
    IF refusal IS NOT NULL THEN
        RAISE EXCEPTION 'permission denied for idempotency scope "%"', idem.portable_excerpt(scope)
            USING ERRCODE = '{{sqlstate::scope_not_owned}}', DETAIL = refusal,
                  HINT = 'Grant the owning role to the calling role, or use a scope the calling role owns.';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION idem.portable_check_scope_owner(text) FROM PUBLIC;

-- The same rule as a boolean (outbox_lease's filter, may_use_scope); NULL
-- scope: false.
CREATE OR REPLACE FUNCTION idem.portable_may_use_scope(scope text)
RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT $1 IS NOT NULL AND idem.portable_scope_refusal($1) IS NULL
$$;
REVOKE ALL ON FUNCTION idem.portable_may_use_scope(text) FROM PUBLIC;

-- 1.1 gave PUBLIC the reading helper of idem.typical_duration, an
-- invoker's function there. In 1.2 typical_duration (and retry_after,
-- which calls it) is SECURITY DEFINER and checks the scope's owner before
-- calling the helper, as the extension's owner: PUBLIC may no longer call
-- the helper, which checks no scope (no idem.portable_* function is
-- PUBLIC's but request_hash's pure JSON helpers; test/sql/85_definer_grants.sql).
REVOKE ALL ON FUNCTION idem.portable_typical_duration(text) FROM PUBLIC;
