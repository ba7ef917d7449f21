#!/usr/bin/env bash
# monitoring/: the alert rules' unit tests (promtool test rules), then the
# whole pipeline for real: a cluster with idem preloaded, Debian's
# prometheus-sql-exporter running monitoring/idem-sql-exporter.yml as a
# pg_monitor role, and Debian's prometheus scraping it through
# monitoring/prometheus-scrape.yml with monitoring/idem-alerts.yml. The
# worker is off (idem.worker_enabled) while a backlog of expired keys, a
# stuck key, a dead and a pending outbox event, a timed-out wait, a stale
# fence, a takeover and a mismatch are made; the firing alerts are read from
# Prometheus's /api/v1/alerts. Then the worker is switched on: in app the
# worker's and the key table's alerts must clear, while the worker of
# "bare", a database of idem.database without the extension, waits for it
# and raises IdemWorkerNotRunning.
#
# Prometheus scrapes and evaluates every second here. The test copy of the
# rules differs from monitoring/idem-alerts.yml in two ways only (sed, below,
# each checked to have matched): every `for:` is 1s, and the outbox's
# pending-age limit is 2 s instead of 900; the other limits come from the
# cluster's settings (idem.naptime 1 s, idem.lock_timeout 1 s in the
# database), as they do in production. The exporter's jobs run every second
# instead of 15.
#
# Runs once, on the host (test/suites.sh), as clients.sh does, with a cluster
# of its own on 127.0.0.1. Ports: three from IDEM_MONITORING_PORT_BASE
# (PostgreSQL, the exporter, Prometheus). By default PGPORT - 29900: a
# hundred above clients.sh's, and like it below Linux's ephemeral range
# (32768-60999), where a client connection's own end may hold a port; for a
# PGPORT too low for that, PGPORT + 1600 (beside the cluster suite's hundred
# from PGPORT + 1500, which is PGPORT - 29500 otherwise). Alone:
#   IDEM_ONLY=monitoring ./run-tests --major 15 --no-assert --no-packages
# Last line "monitoring: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
mon=$(pwd)/monitoring
work=${IDEM_WORK:-/tmp}/monitoring-extra
rm -rf "$work" && mkdir -p "$work"
if [ -n "${IDEM_MONITORING_PORT_BASE:-}" ]; then base=$IDEM_MONITORING_PORT_BASE
elif [ "$PGPORT" -ge 31024 ]; then base=$((PGPORT - 29900))
else base=$((PGPORT + 1600)); fi
db_port=$base exporter_port=$((base + 1)) prom_port=$((base + 2))
passed=0
failed=0
exporter_pid=
prom_pid=

ok() { passed=$((passed + 1)); echo "ok - $*"; }
not_ok() { failed=$((failed + 1)); echo "not ok - $*"; }

stop_all() {
  [ -n "$prom_pid" ] && kill "$prom_pid" 2>/dev/null && wait "$prom_pid" 2>/dev/null
  [ -n "$exporter_pid" ] && kill "$exporter_pid" 2>/dev/null && wait "$exporter_pid" 2>/dev/null
  pg_ctl -D "$work/data" -m fast -w stop >/dev/null 2>&1
}
trap stop_all EXIT

finish() { echo "monitoring: $passed passed, $failed failed"; exit 0; }

for tool in promtool prometheus prometheus-sql-exporter; do
  command -v "$tool" >/dev/null || { not_ok "$tool is not installed (packages prometheus, prometheus-sql-exporter)"; finish; }
done

# The rules and their unit tests.
if promtool check rules "$mon/idem-alerts.yml" >"$work/check-rules.log" 2>&1; then
  ok "promtool check rules monitoring/idem-alerts.yml"
else
  not_ok "promtool check rules"; cat "$work/check-rules.log"
fi
for t in "$mon"/tests/*.yml; do
  if promtool test rules "$t" >"$work/promtool-$(basename "$t" .yml).log" 2>&1; then
    ok "promtool test rules monitoring/tests/$(basename "$t")"
  else
    not_ok "promtool test rules monitoring/tests/$(basename "$t")"
    grep -v '^$' "$work/promtool-$(basename "$t" .yml).log" | head -n 40
  fi
done

# Copies a file through sed expressions, each of which must change
# something (so that a rewording of the original fails here, loudly).
copy_with() {  # source destination sed-expression...
  local src=$1 dst=$2 e
  shift 2
  cp "$src" "$dst"
  for e in "$@"; do
    if cmp -s <(sed -E "$e" "$dst") "$dst"; then
      not_ok "test copy of $(basename "$src"): '$e' matches nothing"; return 1
    fi
    sed -E -i "$e" "$dst"
  done
}

copy_with "$mon/idem-alerts.yml" "$work/idem-alerts.yml" \
  's/^( +for: ).*/\11s/' 's/(idem_outbox_oldest_pending_age_seconds\) > )900$/\12/' || finish
copy_with "$mon/idem-sql-exporter.yml" "$work/exporter.yml" \
  "s#postgres://metrics@localhost:5432/#postgres://metrics@127.0.0.1:$db_port/#" \
  's/^( +interval: )15s$/\11s/' || finish
{
  cat <<CONF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $work/idem-alerts.yml
scrape_configs:
CONF
  sed -E -e "s/'localhost:9237'/'127.0.0.1:$exporter_port'/" -e 's/^( +scrape_interval: )15s$/\11s/' \
    "$mon/prometheus-scrape.yml"
} >"$work/prometheus.yml"
grep -q "127.0.0.1:$exporter_port" "$work/prometheus.yml" || { not_ok "prometheus.yml: no target"; finish; }
if promtool check config "$work/prometheus.yml" >"$work/check-config.log" 2>&1; then
  ok "promtool check config (monitoring/prometheus-scrape.yml as the scrape job)"
else
  not_ok "promtool check config"; cat "$work/check-config.log"; finish
fi

# The cluster: the worker configured for app with a round every second, but
# off until the end.
initdb -D "$work/data" -A trust -U postgres --no-sync >"$work/initdb.log" 2>&1 || { cat "$work/initdb.log"; exit 1; }
cat >>"$work/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $db_port
unix_socket_directories = '$work'
shared_preload_libraries = 'idem'
idem.database = 'app, bare'
idem.naptime = 1
idem.worker_enabled = off
fsync = off
CONF
pg_ctl -D "$work/data" -l "$work/server.log" -w start >/dev/null || { cat "$work/server.log"; exit 1; }
sql() { psql -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$db_port" -U postgres -d app "$@"; }
createdb -h 127.0.0.1 -p "$db_port" -U postgres app || exit 1
createdb -h 127.0.0.1 -p "$db_port" -U postgres bare || exit 1
sql <<'SQL' || { not_ok "setting up the database"; finish; }
CREATE EXTENSION idem;
CREATE ROLE metrics LOGIN;
GRANT pg_monitor TO metrics;
-- Locks run out after a second: the stuck key's, and the limit of
-- IdemOldestClaimTooOld (2 x the largest lock_timeout).
ALTER DATABASE app SET idem.lock_timeout = 1000;
SQL

# Gauges: 20 finished keys kept for a second (the backlog, never purged
# while the worker is off), one key whose owner never ends it (stuck after
# its second), one dead and one pending outbox event.
sql <<'SQL' >"$work/gauges.log" 2>&1 || { not_ok "making the backlog, the stuck key and the outbox events"; cat "$work/gauges.log"; finish; }
SELECT idem.mark_succeeded('pay', k.key, c.fence, 200)
  FROM generate_series(1, 20) i,
       LATERAL (SELECT 'old-' || i AS key) k,
       LATERAL idem.claim_idempotency_key('pay', k.key, 'h', retention => '1 second') c;
SELECT kind FROM idem.claim_idempotency_key('pay', 'stuck', 'h');
SET idem.outbox_max_attempts = 1;
SELECT idem.outbox_put('mail', 'order-1', 'receipt', '{}');
SELECT idem.outbox_failed(l.id, l.lease_fence, 'smtp 550') FROM idem.outbox_lease(1) l;
SELECT idem.outbox_put('mail', 'order-2', 'receipt', '{}');
SQL
[ "$(sql -c "SELECT dead || ' ' || pending FROM idem.outbox_summary")" = "1 1" ] &&
  ok "one dead and one pending outbox event" || not_ok "outbox: $(sql -c 'SELECT * FROM idem.outbox_summary')"

LOGLEVEL=info prometheus-sql-exporter -config.file "$work/exporter.yml" -web.listen-address "127.0.0.1:$exporter_port" \
  >"$work/exporter.log" 2>&1 &
exporter_pid=$!
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/prometheus-data" \
  --web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
prom_pid=$!

# Prometheus's HTTP API through python3 (urllib, json): `api query EXPR`
# prints one "labels value" line per series; `api alerts` one line per alert,
# "name datname state".
api() {
  /usr/bin/python3 - "$prom_port" "$@" <<'PY'
import json, sys, urllib.parse, urllib.request
port, what = sys.argv[1], sys.argv[2]
base = "http://127.0.0.1:%s/api/v1/" % port
# Straight to loopback, whatever http_proxy says.
urllib.request.install_opener(urllib.request.build_opener(urllib.request.ProxyHandler({})))
try:
    if what == "query":
        url = base + "query?" + urllib.parse.urlencode({"query": sys.argv[3]})
        for r in json.load(urllib.request.urlopen(url, timeout=5))["data"]["result"]:
            labels = ",".join("%s=%s" % kv for kv in sorted(r["metric"].items()))
            print(labels, r["value"][1])
    else:
        for a in json.load(urllib.request.urlopen(base + "alerts", timeout=5))["data"]["alerts"]:
            print(a["labels"]["alertname"], a["labels"].get("datname", "-"), a["state"])
except OSError as e:  # not up yet
    print("unreachable:", e, file=sys.stderr)
    sys.exit(1)
PY
}

# Polls (deadline in seconds) until the command succeeds.
eventually() {  # seconds command...
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    [ $SECONDS -gt $deadline ] && return 1
    if ! kill -0 "$exporter_pid" 2>/dev/null || ! kill -0 "$prom_pid" 2>/dev/null; then
      echo "the exporter or Prometheus ended"; tail -n 20 "$work/exporter.log" "$work/prometheus.log"; return 1
    fi
    sleep 0.5  # the next scrape or evaluation is at most a second away; bounded by the deadline
  done
}

has_series() { [ -n "$(api query "$1" 2>/dev/null)" ]; }

# Every view's series, under the names and labels the rules use.
if eventually 90 has_series 'idem_stats_waits_started_total{datname="app"}'; then
  ok "Prometheus scrapes the exporter"
else
  not_ok "no idem_stats_waits_started_total{datname=\"app\"} in Prometheus"
  tail -n 20 "$work/exporter.log" "$work/prometheus.log"; finish
fi
for series in 'idem_claims_total{datname="app",kind="new_claim"}' \
    'idem_worker_last_round_end_seconds{datname="app"}' 'idem_worker_naptime_seconds{datname="app"}' \
    'idem_worker_state{datname="app",state="disabled"}' 'idem_worker_state{datname="bare",state="disabled"}' \
    'idem_keys_stuck{datname="app",scope="pay"}' 'idem_keys_expired_unpurged{datname="app",scope="pay"}' \
    'idem_outbox_dead{datname="app"}' 'idem_outbox_oldest_pending_age_seconds{datname="app"}' \
    'idem_settings_lock_timeout_max_seconds{datname="app"}' \
    'idem_stats_messages_purged_total{datname="app"}' 'idem_stats_events_purged_total{datname="app"}' \
    'idem_stats_failed_rounds_total{datname="app"}' 'idem_worker_failed_rounds_total{datname="app"}' \
    'idem_worker_failing_since_seconds{datname="app"}'; do
  if eventually 30 has_series "$series"; then ok "series $series"; else not_ok "no series $series"; fi
done
# The exporter's own labels are gone from idem_*, the row's stay.
if extra=$(api query "$(for l in col driver host database user sql_job; do
    printf '%s{__name__=~"idem_.*",%s!=""}' "${or:-}" "$l"; or=' or '; done)"); then
  [ -z "$extra" ] && ok "idem_* series carry only their rows' labels" || not_ok "labels left: $(echo "$extra" | head -n 3)"
else
  not_ok "the label query failed"
fi
[ "$(api query 'idem_keys_expired_unpurged{scope="pay"}' | awk '{print $2}')" = 20 ] &&
  ok "idem_keys_expired_unpurged counts the backlog (20)" ||
  not_ok "expired_unpurged: $(api query 'idem_keys_expired_unpurged')"

# Counters move only now, so that Prometheus has seen them before: the rates
# of the rules need a sample on each side of the change.
sql <<'SQL' >"$work/counters.log" 2>&1 || { not_ok "driving the counters"; cat "$work/counters.log"; }
-- A wait that times out: 'held' stays in flight for an hour.
SELECT kind FROM idem.claim_idempotency_key('pay', 'held', 'h', lock_timeout => '1 hour');
SELECT kind FROM idem.claim_or_wait('pay', 'held', 'h', max_wait => '50 milliseconds');
-- A takeover from a stale owner, whose write is then refused (P4012).
DO $$
DECLARE
    first idem.claim := idem.claim_idempotency_key('pay', 'zombie', 'h', lock_timeout => '10 milliseconds');
    deadline timestamptz := clock_timestamp() + interval '60 seconds';
BEGIN
    WHILE (SELECT locked_until FROM idem.lookup('pay', 'zombie')) > clock_timestamp() LOOP
        IF clock_timestamp() > deadline THEN RAISE EXCEPTION 'the lock never ran out'; END IF;
        PERFORM pg_sleep(0.005);  -- until the lock has run out, bounded above
    END LOOP;
    IF (idem.claim_idempotency_key('pay', 'zombie', 'h')).kind <> 'processing_stale' THEN
        RAISE EXCEPTION 'no takeover';
    END IF;
    BEGIN
        PERFORM idem.mark_succeeded('pay', 'zombie', first.fence, 200);
        RAISE EXCEPTION 'the zombie''s write went through';
    EXCEPTION WHEN SQLSTATE 'P4012' THEN NULL;
    END;
    -- A key reused for another request (P4002).
    PERFORM idem.claim_idempotency_key('pay', 'mismatch', 'h');
    BEGIN
        PERFORM idem.claim_idempotency_key('pay', 'mismatch', 'other');
        RAISE EXCEPTION 'no mismatch';
    EXCEPTION WHEN SQLSTATE 'P4002' THEN NULL;
    END;
END $$;
SELECT waits_timed_out || ' ' || stale_fences || ' ' || processing_stale || ' ' || request_mismatches
  FROM idem.stats WHERE datname = current_database();
SQL
[ "$(tail -n 1 "$work/counters.log")" = "1 1 1 1" ] &&
  ok "a timed-out wait, a stale fence, a takeover and a mismatch counted" ||
  not_ok "counters: $(tail -n 3 "$work/counters.log")"

# The alerts, as Prometheus serves them.
expected=(IdemWorkerNoRound IdemKeysStuck IdemOldestClaimTooOld IdemExpiredBacklogGrowing
  IdemOutboxDeadEvents IdemOutboxOldestPending IdemWaitsTimingOut IdemStaleFences
  IdemOwnersOutliveLocks IdemRequestMismatches)
all_firing() {
  local firing a
  firing=$(api alerts 2>/dev/null | awk '$3 == "firing" && $2 == "app" {print $1}') || return 1
  for a in "${expected[@]}"; do grep -qx "$a" <<<"$firing" || return 1; done
}
eventually 120 all_firing
firing=$(api alerts | awk '$3 == "firing" && $2 == "app" {print $1}' | sort -u)
echo "firing: $(echo $firing)"
for a in "${expected[@]}"; do
  grep -qx "$a" <<<"$firing" && ok "$a fires" || not_ok "$a does not fire"
done
# A disabled worker is the operator's choice: only IdemWorkerNoRound says it.
api alerts | grep -q '^IdemWorkerNotRunning ' && not_ok "IdemWorkerNotRunning fires for a disabled worker" ||
  ok "IdemWorkerNotRunning stays quiet for disabled workers"

# The worker on: it sweeps the stuck key, purges the backlog and ends its
# rounds, and those alerts clear ('held' and 'zombie' keep their locks or
# outcomes; the outbox and the counters' alerts stay).
sql -c "ALTER SYSTEM SET idem.worker_enabled = on" -c "SELECT pg_reload_conf()" >/dev/null
cleared=(IdemWorkerNoRound IdemKeysStuck IdemExpiredBacklogGrowing)
none_of_cleared_fire() {
  local firing a
  firing=$(api alerts 2>/dev/null) || return 1
  for a in "${cleared[@]}"; do grep -q "^$a app " <<<"$firing" && return 1; done
  grep -qx 'IdemWorkerNotRunning bare firing' <<<"$firing"
}
eventually 120 none_of_cleared_fire
alerts=$(api alerts)
left=$(awk '$2 == "app" {print $1}' <<<"$alerts" | sort -u)
for a in "${cleared[@]}"; do
  grep -qx "$a" <<<"$left" && not_ok "$a still active after the worker's rounds" || ok "$a clears once the worker runs"
done
grep -qx IdemOutboxDeadEvents <<<"$left" && ok "IdemOutboxDeadEvents stays (dead events stay)" ||
  not_ok "IdemOutboxDeadEvents cleared"
grep -qx 'IdemWorkerNotRunning bare firing' <<<"$alerts" &&
  ok "IdemWorkerNotRunning fires for bare (waiting for extension)" ||
  not_ok "IdemWorkerNotRunning does not fire for bare: $(api query 'idem_worker_state{datname="bare"}')"

# Failed rounds: a trigger raising for scope "evil"'s rows, standing for a
# tenant's (created by the superuser here), makes every round fail for that
# scope. IdemWorkerRoundsFailing fires, the exported counts move; dropped,
# the rounds succeed and the alert clears.
sql <<'SQL' >"$work/failing.log" 2>&1 || { not_ok "making the rounds fail"; cat "$work/failing.log"; }
CREATE FUNCTION public.refuse_evil() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'refused' USING ERRCODE = 'TN001'; END $$;
CREATE TRIGGER refuse_evil BEFORE UPDATE OR DELETE ON idem.idempotency_request
  FOR EACH ROW WHEN (OLD.scope = 'evil') EXECUTE FUNCTION public.refuse_evil();
SELECT kind FROM idem.claim_idempotency_key('evil', 'z', 'h');
SQL
failing_fires() { api alerts 2>/dev/null | grep -qx 'IdemWorkerRoundsFailing app firing'; }
if eventually 120 failing_fires; then
  ok "IdemWorkerRoundsFailing fires while the rounds fail for one scope"
else
  not_ok "IdemWorkerRoundsFailing does not fire: $(api query 'idem_worker_failing_since_seconds')"
fi
counted() {
  [ "$(api query 'idem_worker_failed_rounds_total{datname="app"} > 0' | wc -l)" = 1 ] &&
    [ "$(api query 'idem_stats_failed_rounds_total{datname="app"} > 0' | wc -l)" = 1 ]
}
eventually 30 counted && ok "idem_worker_failed_rounds_total and idem_stats_failed_rounds_total count them" ||
  not_ok "failed rounds not exported: $(api query 'idem_worker_failed_rounds_total')"
sql -c "DROP TRIGGER refuse_evil ON idem.idempotency_request" >/dev/null
failing_clears() { ! api alerts 2>/dev/null | grep -q '^IdemWorkerRoundsFailing app ' && api alerts >/dev/null 2>&1; }
eventually 120 failing_clears && ok "IdemWorkerRoundsFailing clears once a round succeeds" ||
  not_ok "IdemWorkerRoundsFailing still active: $(api alerts | grep IdemWorkerRoundsFailing)"

finish
