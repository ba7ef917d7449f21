-- mark_succeeded_returning (src/keys/outcome.cpp): the mark, then the key's
-- answer as every replay will carry it (idem.stored_answer). Unlike the C++
-- function, `(idem.mark_succeeded_returning(...)).*` calls it once per
-- column here (no per-row memo without the library): select the function
-- in FROM, or into a variable, instead.
LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM idem.mark_succeeded(scope, key, fence, response_code, response_body,
                                result_ref_type, result_ref_id);
    RETURN idem.stored_answer(scope, key);
END
$function$
