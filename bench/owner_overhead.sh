#!/usr/bin/env bash
# What the scope-owner check costs a replay (a claim of a key that already
# succeeded: the call the check weighs most on, since it does the least
# else): pgbench -M prepared on one cluster, as a login role that is not a
# superuser (a superuser passes before any lookup), with idem.scope_owner
# empty and with 1,001 rows (1,000 prefixes of other scopes, owned by another
# role, and one covering the benchmarked scope, owned by a role the login
# role is a member of: the check finds the longest prefix and tests the
# membership). The table is filled or emptied between runs, alternating ABBA
# so drift and neighbours' load fall on both alike; each run's connections
# are new, so every backend loads its cache once. Prints each pair and the
# median ratio (1,001 owners / none); the target is >= 0.95.
# Usage (as root, like ./run-tests): bench/owner_overhead.sh [pairs] [seconds] [clients] [keys]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source bench/overhead_lib.sh
PAIRS=${1:-8}
SECONDS_PER_RUN=${2:-10}
CLIENTS=${3:-4}
KEYS=${4:-200000}

prepare_overhead_work owner-overhead cluster
start_cluster "$WORK/cluster" "${IDEM_BENCH_PORT:-55622}"
CONN=(-h "$PGHOST" -p "$PGPORT" -d postgres)
sql() { as_cluster_user psql -XAtq -v ON_ERROR_STOP=1 "${CONN[@]}" -U postgres -c "$1"; }
app() { as_cluster_user psql -XAtq -v ON_ERROR_STOP=1 "${CONN[@]}" -U bench_app -c "$1"; }
sql 'CREATE EXTENSION idem' >/dev/null

# The roles of docs/tenants.md's two services, reduced to what a replay needs.
sql "CREATE ROLE bench_owner NOLOGIN; CREATE ROLE bench_other NOLOGIN;
     CREATE ROLE bench_app LOGIN IN ROLE bench_owner;
     GRANT EXECUTE ON FUNCTION idem.claim_idempotency_key(text, text, text, text, interval, interval)
       TO bench_app" >/dev/null

# KEYS finished keys of scope 'bench', written as bench.fill writes them
# (bench/setup.sql): succeeded, never expiring.
sql "INSERT INTO idem.idempotency_request (scope, key, request_hash, status, recovery_point,
       fence, attempt_count, claimed_at, response_code, response_body, created_at, updated_at,
       finished_at, expires_at)
     SELECT 'bench', g::text, 'h', 'succeeded', 'finished', nextval('idem.fence_seq'), 1,
            now(), 200, jsonb_build_object('id', g), now(), now(), now(), 'infinity'
       FROM generate_series(1, $KEYS) g" >/dev/null
sql 'VACUUM ANALYZE idem.idempotency_request' >/dev/null

cat >"$WORK/replay.sql" <<SQL
\\set k random(1, $KEYS)
SELECT kind, response_code, response_body FROM idem.claim_idempotency_key('bench', :k, 'h');
SQL
chmod 644 "$WORK/replay.sql"

owners() {  # with | none
  sql 'TRUNCATE idem.scope_owner' >/dev/null
  [ "$1" = with ] && sql "INSERT INTO idem.scope_owner (scope_prefix, owner)
    SELECT 'other_' || g || '/', 'bench_other'::regrole FROM generate_series(1, 1000) g
    UNION ALL SELECT 'bench', 'bench_owner'::regrole" >/dev/null
  sql 'CHECKPOINT' >/dev/null
}

# The runs must measure what they say: with the rows, the benchmarked scope
# is covered and allowed, another is covered and refused; a replay answers
# replay_success either way.
owners with
[ "$(sql "SELECT count(*) FROM idem.scope_owner WHERE 'bench' LIKE scope_prefix || '%'")" = 1 ] &&
  [ "$(app "SELECT idem.may_use_scope('bench')::text || ' ' || idem.may_use_scope('other_7/x')::text")" = 'true false' ] ||
  { echo "owner_overhead: the owner rows do not decide as intended" >&2; exit 1; }
if app "SELECT kind FROM idem.claim_idempotency_key('other_7/x', '1', 'h')" >/dev/null 2>&1; then
  echo "owner_overhead: a scope of another owner was not refused" >&2
  exit 1
fi
[ "$(app "SELECT kind FROM idem.claim_idempotency_key('bench', '1', 'h')")" = replay_success ] ||
  { echo "owner_overhead: the benchmarked claim is not a replay" >&2; exit 1; }

run() {  # with | none -> tps
  owners "$1"
  as_cluster_user pgbench -n -M prepared -c "$CLIENTS" -j 2 -T "$SECONDS_PER_RUN" "${CONN[@]}" \
    -U bench_app -f "$WORK/replay.sql" 2>/dev/null | tps_of
}

run none >/dev/null; run with >/dev/null  # warm-up, not counted
ratios=()
printf '%-5s %12s %12s %8s\n' pair tps-none tps-owners ratio
for ((i = 1; i <= PAIRS; i++)); do
  if ((i % 2)); then none=$(run none); with=$(run with); else with=$(run with); none=$(run none); fi
  ratio=$(echo "scale=4; $with / $none" | bc | sed 's/^\./0./')
  ratios+=("$ratio")
  printf '%-5s %12s %12s %8s\n' "$i" "$none" "$with" "$ratio"
done
echo "over $PAIRS pairs of ${SECONDS_PER_RUN}s, $CLIENTS clients, replays of $KEYS keys:"
echo "  median tps ratio (1,001 owners / none): $(printf '%s\n' "${ratios[@]}" | median) (target >= 0.95)"
