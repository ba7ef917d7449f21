-- SHA-256 of the document's RFC 8785 canonical form in UTF-8, as lowercase
-- hex (src/keys/request_hash.cpp): the same hex as the C++ engine for every
-- document. The canonical form is idem.portable_jcs's (portable/support-request-hash.sql);
-- pg_catalog.sha256 is built in from PostgreSQL 11 on. PL/pgSQL, not SQL,
-- because the helper is created after this function in the install script.
LANGUAGE plpgsql
AS $function$
BEGIN
    RETURN pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(idem.portable_jcs($1), 'UTF8')), 'hex');
END
$function$
