-- Found by the 1.1 security review: a relay granted only EXECUTE on outbox_lease puts its
-- own text = text operator first on its search_path. The lease's ordering
-- probe compares aggregate types with IS NOT DISTINCT FROM, which looks "="
-- up by name; a kept plan is analysed again under the caller's search_path
-- when it differs from the one it was planned under. Unpinned, the relay's
-- operator ran as idem's owner (a superuser) and made the relay superuser.
-- Every SECURITY DEFINER function now runs under search_path = pg_catalog,
-- pg_temp: the relay's operator never runs.
CREATE ROLE idem_relay60 LOGIN;
CREATE SCHEMA relay60 AUTHORIZATION idem_relay60;
GRANT USAGE ON SCHEMA idem TO idem_relay60;
GRANT EXECUTE ON FUNCTION idem.outbox_lease(integer, interval, text[]) TO idem_relay60;
-- Where the relay's operator records that it ran, and as whom.
CREATE TABLE public.relay60_ran (ran_as name, became_superuser boolean);
GRANT INSERT ON public.relay60_ran TO PUBLIC;

-- Two events of one aggregate: leasing the second one compares its
-- aggregate with the first's.
SELECT idem.outbox_put('sp60', 'k1', 'sp60_event', '{}', 'order', '60') IS NOT NULL AS put;
SELECT idem.outbox_put('sp60', 'k2', 'sp60_event', '{}', 'order', '60') IS NOT NULL AS put;

SET ROLE idem_relay60;
CREATE FUNCTION relay60.evil_eq(a text, b text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE promoted boolean := true;
BEGIN
  BEGIN
    EXECUTE 'ALTER ROLE idem_relay60 SUPERUSER';
  EXCEPTION WHEN insufficient_privilege THEN
    promoted := false;
  END;
  INSERT INTO public.relay60_ran VALUES (current_user, promoted);
  RETURN a OPERATOR(pg_catalog.=) b;
END $$;
CREATE OPERATOR relay60.= (LEFTARG = text, RIGHTARG = text, FUNCTION = relay60.evil_eq);
SET search_path = relay60, pg_catalog;
SELECT key, event_type FROM idem.outbox_lease(10, '1 minute', ARRAY['sp60_event']) ORDER BY id;
RESET search_path;
RESET ROLE;

-- The relay got its one due event; its operator never ran; it is no superuser.
SELECT count(*) AS operator_calls FROM public.relay60_ran;
SELECT rolsuper FROM pg_roles WHERE rolname = 'idem_relay60';
SELECT key, status FROM idem.outbox_event WHERE scope = 'sp60' ORDER BY id;

ALTER ROLE idem_relay60 NOSUPERUSER;
DELETE FROM idem.outbox_event WHERE scope = 'sp60';
DROP TABLE public.relay60_ran;
DROP SCHEMA relay60 CASCADE;
REVOKE ALL ON FUNCTION idem.outbox_lease(integer, interval, text[]) FROM idem_relay60;
REVOKE ALL ON SCHEMA idem FROM idem_relay60;
DROP ROLE idem_relay60;
