-- mark_failed_returning (src/keys/outcome.cpp): the mark, then the key's
-- answer as every replay will carry it (idem.stored_answer). As with
-- mark_succeeded_returning, no per-row memo: call it once per row (in FROM).
LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM idem.mark_failed(scope, key, fence, retryable, failure_code, failure_message,
                             response_code, response_body);
    RETURN idem.stored_answer(scope, key);
END
$function$
