#!/usr/bin/env bash
# The proofs on the portable engine, through each install: the twin storm
# (test/t/101), the zombie run (test/t/102), the crash runs (test/t/103,
# unbound, and 106, bound to sessions) and the tenant storm (test/t/105)
# through prove with IDEM_ENGINE=portable, as test/suites.sh runs test/t, and
# the pgTAP files, each on a database whose owner, a role that is not
# superuser, installed the portable engine: from dist/idem-portable.sql
# ("file"), or through pg_tle ("pgtle": dist/idem-pgtle.sql and CREATE
# EXTENSION idem, as pgtle_admin's member) when the installation has it.
#
#   IDEM_PORTABLE_BIN=<bindir> test/portable/proofs.sh [--work DIR] [--port N]
#       [--server SOCKETDIR] [--only PART]...
#
# PART: proofs-file, proofs-pgtle, pgtap-file, pgtap-pgtle (default: all).
# IDEM_PORTABLE_BIN: the bindir of a PostgreSQL installation without idem's
# library (default: pg_config's on PATH). The proofs start their own
# clusters from it (test/t/IdemProof.pm; IDEM_PORTABLE_VIA names the
# install). pgTAP uses the running server on --server and --port (its
# superuser "postgres", pg_tle preloaded for the pg_tle part), else starts
# its own on --port (default IDEM_TEST_PORT, else 55432). pgTAP needs the
# pgtap extension in that installation; the pg_tle parts need pg_tle:
# without them a part says "skipped". Both pgTAP files run: stats.sql
# asserts the operator surface's shape and privileges, not counter values,
# so it holds on the portable engine too. Run as root, everything that
# starts a server runs as postgres. Prints a closing line a part, named by
# its install (no suffix: through pg_tle, as test/portable.sh names them):
#   portable-proofs-file: N passed, N failed (through the SQL file, Ns)
#   portable-proofs: N passed, N failed (through pg_tle, Ns)
#   portable-pgtap-file: ...             portable-pgtap: ...
# or "<suite>: skipped (why)".
#
# Durations: the portable passes run the storm for PORTABLE_STORM_SECONDS
# (default 10, against 20 on the C++ engine), the zombie run for
# PORTABLE_ZOMBIE_SECONDS (default 6, against 12) and the crash run for
# PORTABLE_CRASH_SECONDS (default 16, against 24), with the clients and
# keys of the C++ pass (32 clients, 1,000 keys; 18 zombie clients). What
# makes the proofs meaningful is kept: 32 twins racing on a hot window,
# chaos (walk-aways and retryable failures, so takeovers) in its first 60%,
# every key asked for again in the final pass; owners stalling past their
# 200 ms lock while twins take over, every stale write refused; in the crash
# run the same 4 kill -9 and 2 immediate stops, all inside the shorter run.
# The seconds shrink the number of requests, not the kinds of races.
set -uo pipefail
cd "$(dirname "$0")/../.."
TREE=$PWD

WORK= PORT=${IDEM_TEST_PORT:-55432} SERVER= PARTS=()
while [ $# -gt 0 ]; do
  case $1 in
    --work) WORK=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --server) SERVER=$2; shift 2 ;;
    --only)
      [[ $2 =~ ^(proofs|pgtap)-(file|pgtle)$ ]] || { echo "proofs.sh: --only proofs-file|proofs-pgtle|pgtap-file|pgtap-pgtle" >&2; exit 2; }
      PARTS+=("$2"); shift 2 ;;
    *) echo "proofs.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ ${#PARTS[@]} -gt 0 ] || PARTS=(proofs-file proofs-pgtle pgtap-file pgtap-pgtle)
part_wanted() { [[ " ${PARTS[*]} " == *" $1 "* ]]; }

BIN=${IDEM_PORTABLE_BIN:-$(pg_config --bindir)}
[ -x "$BIN/postgres" ] || { echo "proofs.sh: no postgres in $BIN (IDEM_PORTABLE_BIN)" >&2; exit 2; }
# The point of the pass: no library of idem's can be loaded.
for d in "$("$BIN/pg_config" --pkglibdir)" "$("$BIN/pg_config" --sharedir)/extension"; do
  if compgen -G "$d/idem*" >/dev/null; then
    echo "proofs.sh: $d holds idem's C++ engine; give an installation without it" >&2
    exit 2
  fi
done
[ -f dist/idem-portable.sql ] && [ -f dist/idem-pgtle.sql ] ||
  { echo "proofs.sh: dist/idem-portable.sql or dist/idem-pgtle.sql is missing (make portable)" >&2; exit 2; }
[ -n "$WORK" ] || WORK=$(mktemp -d "${TMPDIR:-/tmp}/idem-portable-proofs.XXXXXX")
mkdir -p "$WORK"
as_user() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- env PATH="$PATH" "$@"; else "$@"; fi
}
[ "$(id -u)" -eq 0 ] && chown -R postgres "$WORK"
extdir=$("$BIN/pg_config" --sharedir)/extension
have_pg_tle=0
[ -f "$extdir/pg_tle.control" ] && have_pg_tle=1

# The suite a part's counts go to, and its install in words.
suite_of() { case $1 in *-file) echo "portable-${1%-file}-file" ;; *) echo "portable-${1%-pgtle}" ;; esac; }
how_of() { case $1 in *-file) echo 'through the SQL file' ;; *) echo 'through pg_tle' ;; esac; }
status=0
closing() {  # part passed failed started
  echo "$(suite_of "$1"): $2 passed, $3 failed ($(how_of "$1"), $((SECONDS - $4))s)"
  [ "$3" -eq 0 ] || status=1
}

# prove's TAP summary: "Tests=N" and "Failed x/y subtests" (test/suites.sh's tally_tap).
count_tap() {  # log exit-status -> "passed failed"
  local total bad
  total=$(grep -oE 'Tests=[0-9]+' "$1" | tail -n 1 | cut -d= -f2)
  total=${total:-0}
  bad=$(grep -oE 'Failed [0-9]+/[0-9]+ subtests' "$1" | awk -F'[ /]' '{s+=$2} END {print s+0}')
  if [ "$2" -ne 0 ] && [ "$bad" -eq 0 ]; then bad=1; total=$((total + 1)); fi
  echo "$((total - bad)) $bad"
}

# --- the twin storm, the zombie run and the crash run, through one install ---
pgxs=$(dirname "$(dirname "$(dirname "$("$BIN/pg_config" --pgxs)")")")
run_proofs() {  # file|pgtle
  local via=$1 part=proofs-$1 started=$SECONDS dir=$WORK/proofs-$1 st p f
  if [ "$via" = pgtle ] && [ $have_pg_tle = 0 ]; then
    echo "$(suite_of $part): skipped (no pg_tle in $extdir)"
    return
  fi
  echo "  twin storm, zombie run, crash run $(how_of $part):"
  rm -rf "$dir"
  mkdir -p "$dir/tmp"
  [ "$(id -u)" -eq 0 ] && chown -R postgres "$dir"
  local log=$dir/proofs.log
  as_user env -u MAKEFLAGS -u MAKELEVEL TMPDIR="$dir/tmp" \
    TESTDIR="$dir" TESTLOGDIR="$dir/tmp_check/log" TESTDATADIR="$dir/tmp_check" \
    IDEM_TREE="$TREE" PATH="$BIN:$PATH" PG_REGRESS="$pgxs/src/test/regress/pg_regress" \
    IDEM_ENGINE=portable IDEM_PORTABLE_VIA="$via" IDEM_PORTABLE_BIN="$BIN" \
    STORM_SECONDS="${PORTABLE_STORM_SECONDS:-10}" ZOMBIE_SECONDS="${PORTABLE_ZOMBIE_SECONDS:-6}" \
    CRASH_SECONDS="${PORTABLE_CRASH_SECONDS:-16}" \
    prove -I "$pgxs/src/test/perl" -I test/t ${PROVE_FLAGS:-} \
    test/t/101_twin_storm.pl test/t/102_zombies.pl test/t/103_crash.pl test/t/105_tenant_storm.pl \
    test/t/106_bound_crash.pl >"$log" 2>&1
  st=$?
  grep -E '^test/t/|^#   |^# Looks like|^Files=|^Result' "$log" | grep -v '(Wstat' | sed 's/^/    /'
  if [ $st -ne 0 ]; then
    sed -n '/^Test Summary Report/,/^Files=/p' "$log" | grep -v '^Files=' | sed 's/^/    /'
    for f in "$dir"/tmp_check/log/regress_log_*; do
      [ -f "$f" ] && { echo "  tail of $f:"; tail -n 25 "$f" | sed 's/^/    /'; }
    done
  fi
  # The notes the proofs print (the engine and its install, the counts of
  # claims and faults) are in the regress logs.
  grep -h -oE '# (engine|storm|zombies|crash|bound crash|tenants):.*' "$dir"/tmp_check/log/regress_log_* 2>/dev/null | sed 's/^/    /'
  read -r p f < <(count_tap "$log" $st)
  closing $part "$p" "$f" $started
}

# --- pgTAP ---
# Each install in a database of its own owned by a role that is not
# superuser: "file" runs dist/idem-portable.sql as the owner (the database
# has no pg_tle); "pgtle" (the server preloads pg_tle) runs
# dist/idem-pgtle.sql and CREATE EXTENSION idem as the owner, granted
# pgtle_admin. pgtap is not a trusted extension: the superuser creates it.
dir=$WORK/pgtap
sql() { as_user "$BIN/psql" -XAtq -v ON_ERROR_STOP=1 "$@"; }
run_pgtap() {  # file|pgtle
  local mode=$1 part=pgtap-$1 started=$SECONDS db=idem_pgtap_$1 owner=idem_owner_$1 log=$WORK/pgtap-$1.log st p f how
  if [ "$mode" = pgtle ] && [ "$(sql -U postgres -d postgres -c 'SHOW shared_preload_libraries')" != pg_tle ]; then
    echo "$(suite_of $part): skipped (the server does not preload pg_tle)"
    return
  fi
  {
    sql -U postgres -d postgres -c "DROP DATABASE IF EXISTS $db" -c "DROP ROLE IF EXISTS $owner" \
      -c "CREATE ROLE $owner LOGIN" -c "CREATE DATABASE $db OWNER $owner" &&
      sql -U postgres -d "$db" -c 'CREATE EXTENSION pgtap' &&
      if [ "$mode" = file ]; then
        sql -U "$owner" -d "$db" -f dist/idem-portable.sql
      else
        sql -U postgres -d "$db" -c 'CREATE EXTENSION pg_tle' -c "GRANT pgtle_admin TO $owner" &&
          sql -U "$owner" -d "$db" -f dist/idem-pgtle.sql -c 'CREATE EXTENSION idem'
      fi
  } >"$log" 2>&1 || {
    echo "  pgTAP $(how_of $part): installing pgtap and the portable engine failed:"
    tail -n 20 "$log" | sed 's/^/    /'
    closing $part 0 1 $started
    return
  }
  how=$(sql -U "$owner" -d "$db" -c "SELECT 'CREATE EXTENSION idem ' || extversion FROM pg_extension WHERE extname = 'idem'")
  [ -n "$how" ] || how="idem.installed_version $(sql -U "$owner" -d "$db" -c 'SELECT version FROM idem.installed_version')"
  echo "  pgTAP $(how_of $part): $how, as $owner (not superuser)"
  as_user env PATH="$BIN:$PATH" pg_prove -U "$owner" -d "$db" test/pgtap/*.sql >>"$log" 2>&1
  st=$?
  grep -E '^test/pgtap/|^#|^Files=|^Result' "$log" | sed 's/^/    /'
  [ $st -eq 0 ] || sed -n '/^Test Summary Report/,/^Files=/p' "$log" | grep -v '^Files=' | sed 's/^/    /'
  read -r p f < <(count_tap "$log" $st)
  sql -U postgres -d postgres -c "DROP DATABASE $db" >>"$log" 2>&1
  closing $part "$p" "$f" $started
}
own_server() {  # start|stop
  if [ "$1" = start ]; then
    as_user "$BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start >/dev/null || { cat "$dir/server.log"; exit 1; }
  else
    as_user "$BIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1
  fi
}

for via in file pgtle; do
  part_wanted proofs-$via && run_proofs $via
done
if part_wanted pgtap-file || part_wanted pgtap-pgtle; then
  if [ ! -f "$extdir/pgtap.control" ]; then
    for mode in file pgtle; do
      part_wanted pgtap-$mode && echo "$(suite_of pgtap-$mode): skipped (no pgtap extension in $extdir)"
    done
  else
    if [ -n "$SERVER" ]; then
      export PGHOST=$SERVER PGPORT=$PORT
    else
      # A server of its own, preloading pg_tle when the installation has
      # it (the file install does not use it).
      mkdir -p "$dir/socket"
      [ "$(id -u)" -eq 0 ] && chown -R postgres "$dir"
      as_user "$BIN/initdb" -D "$dir/data" -A trust -U postgres --no-sync >"$dir/initdb.log" 2>&1 ||
        { cat "$dir/initdb.log"; exit 1; }
      cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$dir/socket'
port = $PORT
fsync = off
shared_preload_libraries = '$([ $have_pg_tle = 1 ] && echo pg_tle)'
CONF
      export PGHOST=$dir/socket PGPORT=$PORT
      own_server start
    fi
    for mode in file pgtle; do
      part_wanted pgtap-$mode && run_pgtap $mode
    done
    [ -n "$SERVER" ] || own_server stop
  fi
fi
exit $status
