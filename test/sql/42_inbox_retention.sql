-- consume_once's retention: the argument, else the consumer's scope policy
-- (idem.scope_policy: retention or keep_forever, the consumer is the scope),
-- else the setting idem.inbox_retention (-1: forever).
\set VERBOSITY default
\set SHOW_CONTEXT never
SET idem.inbox_retention = '2d';
INSERT INTO idem.scope_policy (scope, retention) VALUES ('retention billing', '1 hour');
INSERT INTO idem.scope_policy (scope, keep_forever) VALUES ('retention archive', true);
SELECT idem.consume_once('retention billing', 'policy', 'h') AS consumed,
       idem.consume_once('retention billing', 'argument', 'h', '5 minutes') AS consumed_with_argument,
       idem.consume_once('retention archive', 'forever', 'h') AS consumed_forever,
       idem.consume_once('retention orders', 'setting', 'h') AS consumed_by_setting;
SELECT consumer, message_id, expires_at = 'infinity' AS forever,
       CASE WHEN expires_at <> 'infinity' THEN expires_at - consumed_at END AS kept_for
  FROM idem.consumed_message
 WHERE consumer IN ('retention billing', 'retention archive', 'retention orders') ORDER BY consumer, message_id;
-- A policy change is seen by the next call of this backend.
UPDATE idem.scope_policy SET retention = '3 hours' WHERE scope = 'retention billing';
SELECT idem.consume_once('retention billing', 'after change', 'h') AS consumed;
SELECT expires_at - consumed_at AS kept_for FROM idem.consumed_message
 WHERE consumer = 'retention billing' AND message_id = 'after change';
-- Without a policy row, idem.inbox_retention = -1 keeps a message forever.
SET idem.inbox_retention = -1;
SELECT idem.consume_once('retention orders', 'kept', 'h') AS consumed;
SELECT expires_at = 'infinity' AS forever FROM idem.consumed_message
 WHERE consumer = 'retention orders' AND message_id = 'kept';
RESET idem.inbox_retention;
DELETE FROM idem.scope_policy WHERE scope IN ('retention billing', 'retention archive');
DELETE FROM idem.consumed_message WHERE consumer IN ('retention billing', 'retention archive', 'retention orders');
