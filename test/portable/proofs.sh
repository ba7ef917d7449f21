#!/usr/bin/env bash
# The proofs on the portable engine: the twin storm (test/t/101) and the
# crash run (test/t/103) through prove with IDEM_ENGINE=portable, as
# test/suites.sh runs test/t, and the pgTAP files on a database where the
# portable engine was installed by the database's owner, a role that is not
# superuser: from dist/idem-portable.sql, and through pg_tle when the
# installation has it.
#
#   IDEM_PORTABLE_BIN=<bindir> test/portable/proofs.sh [--work DIR] [--port N]
#
# IDEM_PORTABLE_BIN: the bindir of a PostgreSQL installation without idem's
# library (default: pg_config's on PATH). The proofs start their own
# clusters from it; pgTAP gets one on --port (default IDEM_TEST_PORT, else
# 55432). pgTAP needs the pgtap extension in that installation, and its
# pg_tle pass pg_tle; without them that part says "skipped". Both pgTAP
# files run: stats.sql asserts the operator surface's shape and privileges,
# not counter values, so it holds on the portable engine too. Run as root,
# everything that starts a server runs as postgres. Prints closing lines
#   portable-proofs: N passed, N failed
#   portable-pgtap: N passed, N failed
#
# Durations: the portable pass runs the storm for PORTABLE_STORM_SECONDS
# (default 10, against 20 on the C++ engine) and the crash run for
# PORTABLE_CRASH_SECONDS (default 16, against 24), with the clients and
# keys of the C++ pass (32 clients, 1,000 keys). What makes the proofs
# meaningful is kept: 32 twins racing on a hot window, chaos (walk-aways and
# retryable failures, so takeovers) in its first 60%, every key asked for
# again in the final pass; in the crash run the same 4 kill -9 and 2
# immediate stops, all inside the shorter run. The seconds shrink the number
# of requests, not the kinds of races.
set -uo pipefail
cd "$(dirname "$0")/../.."
TREE=$PWD

WORK= PORT=${IDEM_TEST_PORT:-55432}
while [ $# -gt 0 ]; do
  case $1 in
    --work) WORK=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    *) echo "proofs.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

BIN=${IDEM_PORTABLE_BIN:-$(pg_config --bindir)}
[ -x "$BIN/postgres" ] || { echo "proofs.sh: no postgres in $BIN (IDEM_PORTABLE_BIN)" >&2; exit 2; }
# The point of the pass: no library of idem's can be loaded.
for d in "$("$BIN/pg_config" --pkglibdir)" "$("$BIN/pg_config" --sharedir)/extension"; do
  if compgen -G "$d/idem*" >/dev/null; then
    echo "proofs.sh: $d holds idem's C++ engine; give an installation without it" >&2
    exit 2
  fi
done
[ -f dist/idem-portable.sql ] || { echo "proofs.sh: dist/idem-portable.sql is missing (make portable)" >&2; exit 2; }
[ -n "$WORK" ] || WORK=$(mktemp -d "${TMPDIR:-/tmp}/idem-portable-proofs.XXXXXX")
mkdir -p "$WORK/tmp"
as_user() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- env PATH="$PATH" "$@"; else "$@"; fi
}
[ "$(id -u)" -eq 0 ] && chown -R postgres "$WORK"

# prove's TAP summary: "Tests=N" and "Failed x/y subtests" (test/suites.sh's tally_tap).
count_tap() {  # log exit-status -> "passed failed"
  local total bad
  total=$(grep -oE 'Tests=[0-9]+' "$1" | tail -n 1 | cut -d= -f2)
  total=${total:-0}
  bad=$(grep -oE 'Failed [0-9]+/[0-9]+ subtests' "$1" | awk -F'[ /]' '{s+=$2} END {print s+0}')
  if [ "$2" -ne 0 ] && [ "$bad" -eq 0 ]; then bad=1; total=$((total + 1)); fi
  echo "$((total - bad)) $bad"
}

# --- the twin storm and the crash run ---
pgxs=$(dirname "$(dirname "$(dirname "$("$BIN/pg_config" --pgxs)")")")
log=$WORK/proofs.log
as_user env -u MAKEFLAGS -u MAKELEVEL TMPDIR="$WORK/tmp" \
  TESTDIR="$WORK" TESTLOGDIR="$WORK/tmp_check/log" TESTDATADIR="$WORK/tmp_check" \
  IDEM_TREE="$TREE" PATH="$BIN:$PATH" PG_REGRESS="$pgxs/src/test/regress/pg_regress" \
  IDEM_ENGINE=portable IDEM_PORTABLE_BIN="$BIN" \
  STORM_SECONDS="${PORTABLE_STORM_SECONDS:-10}" CRASH_SECONDS="${PORTABLE_CRASH_SECONDS:-16}" \
  prove -I "$pgxs/src/test/perl" -I test/t ${PROVE_FLAGS:-} test/t/101_twin_storm.pl test/t/103_crash.pl \
  >"$log" 2>&1
st=$?
grep -E '^test/t/|^#   |^# Looks like|^Files=|^Result' "$log" | grep -v '(Wstat' | sed 's/^/    /'
if [ $st -ne 0 ]; then
  sed -n '/^Test Summary Report/,/^Files=/p' "$log" | grep -v '^Files=' | sed 's/^/    /'
  for f in "$WORK"/tmp_check/log/regress_log_*; do
    [ -f "$f" ] && { echo "  tail of $f:"; tail -n 25 "$f" | sed 's/^/    /'; }
  done
fi
# The notes the proofs print (engine, counts of claims and faults) are in
# the regress logs; the engine line shows which install ran.
grep -h -oE '# (engine|storm|crash):.*' "$WORK"/tmp_check/log/regress_log_* 2>/dev/null | sed 's/^/    /'
read -r proofs_passed proofs_failed < <(count_tap "$log" $st)

# --- pgTAP ---
# Two ways in, each in a database of its own owned by a role that is not
# superuser: "file" runs dist/idem-portable.sql as the owner, on a server
# that loads no library; "pgtle" (when the installation has pg_tle: it needs
# the preload, so the server restarts with it) runs dist/idem-pgtle.sql and
# CREATE EXTENSION idem as the owner, granted pgtle_admin. pgtap is not a
# trusted extension: the superuser creates it.
pgtap_passed=0 pgtap_failed=0
dir=$WORK/pgtap
sql() { as_user "$BIN/psql" -XAtq -v ON_ERROR_STOP=1 "$@"; }
run_pgtap() {  # mode
  local mode=$1 db=idem_pgtap_$1 owner=idem_owner_$1 log=$WORK/pgtap-$1.log st p f
  {
    sql -U postgres -d postgres -c "CREATE ROLE $owner LOGIN" -c "CREATE DATABASE $db OWNER $owner" &&
      sql -U postgres -d "$db" -c 'CREATE EXTENSION pgtap' &&
      if [ "$mode" = file ]; then
        sql -U "$owner" -d "$db" -f dist/idem-portable.sql
      else
        sql -U postgres -d "$db" -c 'CREATE EXTENSION pg_tle' -c "GRANT pgtle_admin TO $owner" &&
          sql -U "$owner" -d "$db" -f dist/idem-pgtle.sql -c 'CREATE EXTENSION idem'
      fi
  } >"$log" 2>&1 || {
    echo "  pgTAP ($mode): installing pgtap and the portable engine failed:"
    tail -n 20 "$log" | sed 's/^/    /'
    pgtap_failed=$((pgtap_failed + 1))
    return
  }
  local how
  how=$(sql -U "$owner" -d "$db" -c "SELECT 'CREATE EXTENSION idem ' || extversion FROM pg_extension WHERE extname = 'idem'")
  [ -n "$how" ] || how="SQL file, idem.installed_version $(sql -U "$owner" -d "$db" -c 'SELECT version FROM idem.installed_version')"
  echo "  pgTAP ($mode): $how, as $owner (not superuser)"
  as_user env PATH="$BIN:$PATH" pg_prove -U "$owner" -d "$db" pgtap/*.sql >>"$log" 2>&1
  st=$?
  grep -E '^pgtap/|^#|^Files=|^Result' "$log" | sed 's/^/    /'
  [ $st -eq 0 ] || sed -n '/^Test Summary Report/,/^Files=/p' "$log" | grep -v '^Files=' | sed 's/^/    /'
  read -r p f < <(count_tap "$log" $st)
  pgtap_passed=$((pgtap_passed + p)) pgtap_failed=$((pgtap_failed + f))
}
server() {  # start|stop
  if [ "$1" = start ]; then
    as_user "$BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start >/dev/null || { cat "$dir/server.log"; exit 1; }
  else
    as_user "$BIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1
  fi
}
extdir=$("$BIN/pg_config" --sharedir)/extension
if [ ! -f "$extdir/pgtap.control" ]; then
  echo "  pgTAP: skipped (no pgtap extension in $extdir)"
else
  mkdir -p "$dir/socket"
  [ "$(id -u)" -eq 0 ] && chown -R postgres "$dir"
  as_user "$BIN/initdb" -D "$dir/data" -A trust -U postgres --no-sync >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log"; exit 1; }
  cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$dir/socket'
port = $PORT
fsync = off
CONF
  export PGHOST=$dir/socket PGPORT=$PORT
  server start
  run_pgtap file
  if [ -f "$extdir/pg_tle.control" ]; then
    echo "shared_preload_libraries = 'pg_tle'" >>"$dir/data/postgresql.conf"
    server stop
    server start
    run_pgtap pgtle
  else
    echo "  pgTAP (pgtle): skipped (no pg_tle in $extdir)"
  fi
  server stop
fi

echo "portable-proofs: $proofs_passed passed, $proofs_failed failed"
echo "portable-pgtap: $pgtap_passed passed, $pgtap_failed failed"
[ "$proofs_failed" -eq 0 ] && [ "$pgtap_failed" -eq 0 ]
