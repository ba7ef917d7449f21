-- SHA-256 of the bytes as lowercase hex, as src/pure/hashing.cpp writes it.
LANGUAGE sql
AS $function$
SELECT pg_catalog.encode(pg_catalog.sha256($1), 'hex')
$function$
