-- search_path_proof(statement text): the proof parses the text with
-- PostgreSQL's raw_parser, which PL/pgSQL cannot reach; the portable engine
-- needs no proof (every function of it is pinned to search_path =
-- pg_catalog, pg_temp), so it says so rather than answer NULL ("proven").
LANGUAGE plpgsql
AS $function$
BEGIN
    RAISE EXCEPTION 'idem: search_path_proof(statement) needs the C++ engine''s parser'
        USING ERRCODE = 'feature_not_supported',
              DETAIL = 'The portable engine proves no statement text: each of its functions runs pinned to search_path = pg_catalog, pg_temp.';
END
$function$
