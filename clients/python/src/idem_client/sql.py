"""The statements the package sends: idem's request path, nothing else
(README, "Privileges": the application role needs exactly those grants, plus
idem.claim_or_wait for waiting and idem.release for forgetting a key)."""

# One row with what every caller needs of a claim; retry_after is the
# seconds for a 409's Retry-After (NULL unless processing_active); the
# backend's pid lets the outcome check it runs on the claim's session.
_CLAIM_COLUMNS = """
SELECT c.kind::text, c.fence, c.recovery_point, c.response_code,
       c.response_body::text, idem.retry_after(%(scope)s, c), pg_backend_pid()
"""

# For this claim's transaction only: a key it owns is bound to this session,
# so that the session's end (a crash) frees the key at once.
BIND_LOCK_TO_SESSION = "SELECT set_config('idem.bind_lock_to_session', 'on', true)"

CLAIM = _CLAIM_COLUMNS + """
  FROM idem.claim_idempotency_key(%(scope)s, %(key)s, %(hash)s,
         lock_timeout => %(lock_timeout)s::interval) c
"""

CLAIM_OR_WAIT = _CLAIM_COLUMNS + """
  FROM idem.claim_or_wait(%(scope)s, %(key)s, %(hash)s, %(max_wait)s::interval,
         lock_timeout => %(lock_timeout)s::interval) c
"""

# The outcome, in the caller's transaction, answered as every replay will
# carry it (and the backend's pid, for the session binding's check).
SUCCEED = """
SELECT a.response_code, a.response_body::text, pg_backend_pid()
  FROM idem.mark_succeeded_returning(%(scope)s, %(key)s, %(fence)s,
         %(code)s, %(body)s::jsonb) a
"""

FAIL_FINAL = """
SELECT a.response_code, a.response_body::text, pg_backend_pid()
  FROM idem.mark_failed_returning(%(scope)s, %(key)s, %(fence)s, false,
         %(failure_code)s, %(failure_message)s, %(code)s, %(body)s::jsonb) a
"""

FAIL_RETRYABLE = """
SELECT idem.mark_failed(%(scope)s, %(key)s, %(fence)s, true,
         %(failure_code)s, %(failure_message)s, %(code)s, %(body)s::jsonb), pg_backend_pid()
"""

RELEASE = "SELECT idem.release(%(scope)s, %(key)s, %(fence)s)"

SET_RECOVERY_POINT = "SELECT idem.set_recovery_point(%(scope)s, %(key)s, %(fence)s, %(point)s)"

# A read by key alone (1.2): what a claim with the stored hash would answer,
# without writing or taking the key; every column NULL for no live key.
PEEK = """
SELECT p.kind::text, p.fence, p.recovery_point, p.response_code,
       p.response_body::text, NULL::integer, NULL::integer
  FROM idem.peek(%(scope)s, %(key)s) p
"""
