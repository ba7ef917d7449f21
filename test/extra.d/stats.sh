#!/usr/bin/env bash
# idem.stats under concurrency: pgbench, 8 clients, and the counters must add
# up exactly to the calls the clients made (and to the rows in the table).
# Runs as the cluster's user against PGHOST/PGPORT; last line "stats: N passed, N failed".
set -uo pipefail
DB=idem_stats_bench
CLIENTS=8
TX=150  # transactions per client and script
WORK=${IDEM_WORK:-/tmp}/stats-extra
mkdir -p "$WORK"
passed=0
failed=0
check() {  # name expected actual
  if [ "$2" = "$3" ]; then
    passed=$((passed + 1)); printf 'ok     %-55s %s\n' "$1" "$3"
  else
    failed=$((failed + 1)); printf 'FAILED %-55s expected %s, got %s\n' "$1" "$2" "$3"
  fi
}
q() { psql -XAtq -d "$DB" -c "$1"; }
counter() { q "SELECT $1 FROM idem.stats WHERE datname = current_database()"; }

dropdb --if-exists "$DB" >/dev/null 2>&1
createdb "$DB" || exit 1
psql -Xq -d "$DB" -v ON_ERROR_STOP=1 >/dev/null <<'SQL' || exit 1
CREATE EXTENSION idem;
CREATE SEQUENCE bench_keys;
-- Refusals inside the scripts are caught here, so no pgbench client aborts;
-- the counters have counted them before the error unwound.
CREATE FUNCTION expect_error(statement text, wanted text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE statement;
  RAISE EXCEPTION 'expected SQLSTATE %, got none', wanted;
EXCEPTION WHEN OTHERS THEN
  IF SQLSTATE <> wanted THEN RAISE; END IF;
END $$;
SQL

# A: a new key's happy path, a replay, a reuse for another request (P4002).
cat >"$WORK/a.sql" <<'SQL'
SELECT nextval('bench_keys') AS n \gset
SELECT fence FROM idem.claim_idempotency_key('a', :n::text, 'h') \gset
SELECT idem.set_recovery_point('a', :n::text, :fence, 'charged');
SELECT idem.mark_succeeded('a', :n::text, :fence, 201);
SELECT kind FROM idem.claim_idempotency_key('a', :n::text, 'h');
SELECT expect_error(format('SELECT idem.claim_idempotency_key(%L, %L, %L)', 'a', :n::text, 'other'), 'P4002');
SQL
# B: a retryable failure taken over, the first owner's stale write (P4012), a final failure replayed.
cat >"$WORK/b.sql" <<'SQL'
SELECT nextval('bench_keys') AS n \gset
SELECT fence AS first FROM idem.claim_idempotency_key('b', :n::text, 'h') \gset
SELECT idem.mark_failed('b', :n::text, :first, true, 'later');
SELECT fence AS second FROM idem.claim_idempotency_key('b', :n::text, 'h') \gset
SELECT expect_error(format('SELECT idem.mark_succeeded(%L, %L, %s, 200)', 'b', :n::text, :first), 'P4012');
SELECT idem.mark_failed('b', :n::text, :second, false, 'declined');
SELECT kind FROM idem.claim_idempotency_key('b', :n::text, 'h');
SQL
# C: eight clients racing for fifty hot keys: one new claim per key, the rest see it in flight.
cat >"$WORK/c.sql" <<'SQL'
\set k random(1, 50)
SELECT kind FROM idem.claim_idempotency_key('c', :k::text, 'h');
SQL
# D and E: concurrent sweeps and purges in small batches; SKIP LOCKED means each row once.
echo "SELECT idem.sweep_stale(7);" >"$WORK/d.sql"
echo "SELECT idem.purge_expired(7);" >"$WORK/e.sql"

run() {  # script; prints the number of transactions pgbench completed
  local log="$WORK/$1.log"
  pgbench -n -c "$CLIENTS" -j 2 -t "$TX" -f "$WORK/$1.sql" "$DB" >"$log" 2>&1
  local done_tx
  done_tx=$(grep -oE 'number of transactions actually processed: [0-9]+' "$log" | grep -oE '[0-9]+$')
  echo "${done_tx:-0}"
}

q "SELECT idem.stats_reset()" >/dev/null
calls=$((CLIENTS * TX))
start=$(date +%s.%N)
tx_a=$(run a)
tx_b=$(run b)
tx_c=$(run c)
check "pgbench A completed every transaction" "$calls" "$tx_a"
check "pgbench B completed every transaction" "$calls" "$tx_b"
check "pgbench C completed every transaction" "$calls" "$tx_c"

hot=$(q "SELECT count(*) FROM idem.idempotency_request WHERE scope = 'c'")
check "new_claim = A + B + distinct hot keys" "$((tx_a + tx_b + hot))" "$(counter new_claim)"
check "processing_active = C calls - distinct hot keys" "$((tx_c - hot))" "$(counter processing_active)"
check "replay_success = A" "$tx_a" "$(counter replay_success)"
check "request_mismatches = A" "$tx_a" "$(counter request_mismatches)"
check "recovery_points_set = A" "$tx_a" "$(counter recovery_points_set)"
check "marked_succeeded = A" "$tx_a" "$(counter marked_succeeded)"
check "marked_failed_retryable = B" "$tx_b" "$(counter marked_failed_retryable)"
check "retryable_failure = B" "$tx_b" "$(counter retryable_failure)"
check "stale_fences = B" "$tx_b" "$(counter stale_fences)"
check "marked_failed_final = B" "$tx_b" "$(counter marked_failed_final)"
check "final_failure = B" "$tx_b" "$(counter final_failure)"
check "processing_stale = 0" 0 "$(counter processing_stale)"
check "claims of all kinds + mismatches = claim calls (3A + 3B + C)" "$((3 * tx_a + 3 * tx_b + tx_c))" \
  "$(counter 'new_claim + replay_success + processing_active + processing_stale + retryable_failure + final_failure + request_mismatches')"
check "marked_succeeded = succeeded rows" "$(q "SELECT count(*) FROM idem.idempotency_request WHERE status = 'succeeded'")" "$(counter marked_succeeded)"

# 1000 stale in-flight keys, swept by 8 clients in batches of 7; then purged the same way.
q "SELECT count(*) FROM generate_series(1, 1000) g, LATERAL idem.claim_idempotency_key('d', g::text, 'h')" >/dev/null
q "UPDATE idem.idempotency_request SET locked_until = now() - interval '1 second' WHERE scope = 'd'" >/dev/null
tx_d=$(run d)
check "pgbench D completed every transaction" "$calls" "$tx_d"
check "rows_swept = stale keys, each swept once" 1000 "$(counter rows_swept)"
check "swept rows in the table" 1000 "$(q "SELECT count(*) FROM idem.idempotency_request WHERE scope = 'd' AND failure_code = 'abandoned'")"
q "UPDATE idem.idempotency_request SET created_at = now() - interval '2 days', expires_at = now() - interval '1 second' WHERE scope IN ('a', 'd')" >/dev/null
expired=$(q "SELECT count(*) FROM idem.idempotency_request WHERE scope IN ('a', 'd')")
tx_e=$(run e)
check "pgbench E completed every transaction" "$calls" "$tx_e"
check "rows_purged = expired rows, each purged once" "$expired" "$(counter rows_purged)"
check "purged rows are gone" 0 "$(q "SELECT count(*) FROM idem.idempotency_request WHERE scope IN ('a', 'd')")"
elapsed=$(echo "$(date +%s.%N) - $start" | bc 2>/dev/null || echo "?")

echo "calls per script: $calls ($CLIENTS clients x $TX transactions); distinct hot keys: $hot; expired rows purged: $expired; pgbench time: ${elapsed}s"
psql -X -d "$DB" -c "SELECT datname, new_claim, replay_success, processing_active, retryable_failure, final_failure, request_mismatches, stale_fences, marked_succeeded, marked_failed_retryable, marked_failed_final, recovery_points_set, rows_swept, rows_purged FROM idem.stats WHERE datname = current_database()" | sed 's/^/  /'
dropdb "$DB"
echo "stats: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
