-- search_path_proof: the portable engine keeps no statements of its own
-- (its bodies are PL/pgSQL, each function pinned to search_path =
-- pg_catalog, pg_temp), so there is nothing to prove: no rows.
LANGUAGE plpgsql
AS $function$
BEGIN
    RETURN;
END
$function$
