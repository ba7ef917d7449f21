-- Shape for bench/run (BENCH_SHAPE, the whole run; or BENCH_AB, a peer "ab"
-- that runs idem's scripts with it applied, alternating with idem round by
-- round): every SECURITY DEFINER function of schema idem pinned to
-- search_path = pg_catalog, pg_temp with ALTER FUNCTION, as the 1.1 upgrade
-- script does. It measures what the pinning costs a call: the
-- function manager saves, sets and restores the setting around each call of
-- a function with a proconfig. Functions pinned already are left alone.
-- Run with -v undo=1 it takes off the pins it put on (BENCH_AB's rounds of
-- plain idem), and leaves the others as they were.
\set ON_ERROR_STOP on
SET client_min_messages = warning;
CREATE TABLE IF NOT EXISTS public.bench_pinned_functions (fn regprocedure PRIMARY KEY);
\if :{?undo}
DO $$
DECLARE
  f regprocedure;
BEGIN
  FOR f IN SELECT fn FROM public.bench_pinned_functions LOOP
    EXECUTE format('ALTER FUNCTION %s RESET search_path', f);
  END LOOP;
  DELETE FROM public.bench_pinned_functions;
END
$$;
\else
DO $$
DECLARE
  f regprocedure;
BEGIN
  FOR f IN
    SELECT p.oid::regprocedure FROM pg_proc p
    WHERE p.pronamespace = 'idem'::regnamespace AND p.prosecdef
      AND NOT coalesce(p.proconfig::text[] && ARRAY(SELECT c FROM unnest(p.proconfig) c
                                                    WHERE c LIKE 'search\_path=%'), false)
  LOOP
    EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, pg_temp', f);
    INSERT INTO public.bench_pinned_functions VALUES (f);
  END LOOP;
END
$$;
\endif
SELECT count(*) FILTER (WHERE proconfig IS NOT NULL
                          AND EXISTS (SELECT FROM unnest(proconfig) c WHERE c LIKE 'search\_path=%'))
         || ' of ' || count(*) || ' SECURITY DEFINER functions of schema idem pin search_path'
FROM pg_proc WHERE pronamespace = 'idem'::regnamespace AND prosecdef;
