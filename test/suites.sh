#!/usr/bin/env bash
# Every per-major suite on one PostgreSQL, as run-tests calls it for each
# major: on the host (15, idem in a private copy of the installation), inside
# a Debian chroot (17, 18; idem in the chroot's system directories) or
# against the assert-enabled build (regress and isolation only). Runs as root
# and drops to the cluster's user (postgres) for everything that starts a
# server. The suites are the ones Postgres users know: `make installcheck`
# (regress + isolation on a temp instance that preloads idem), pgTAP,
# `make prove_installcheck` (test/t), and test/extra.d (except fuzz.sh, pure
# C++, which run-tests runs once, and clients.sh, node_package.sh,
# python_package.sh, client_artifacts.sh and monitoring.sh, run on the host
# only).
#
#   test/suites.sh --work DIR --pg-config PATH --port N [--private-install] [--assert] [--pg-tle DIR]
#                  [--citus DIR --citus-port N | --citus-skip WHY]
#
# DIR/tree is a copy of the source tree (run-tests makes it). Each suite's
# log is DIR/<suite>.log; DIR/tally gets one "suite passed failed" line per
# suite. A failing test is named, with the head of its diff or the tail of
# its log. IDEM_ONLY (any of regress isolation pgtap tap extra cluster
# portable, or an extra's or a portable suite's name) limits the suites;
# IDEM_TAP_FILES selects TAP files. The portable engine's suites
# (test/portable.sh) build pg_tle from the copy of its source in DIR
# (--pg-tle; without it, they skip what needs pg_tle). The Citus suites
# (test/citus.sh) copy Citus from the staged tree --citus names, their
# clusters on ports from --citus-port; --citus-skip says why they do not run.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/chroot.sh"  # chroot_upgrade_from

WORKDIR= PG_CONFIG= PORT= PRIVATE=0 ASSERT=0 PG_TLE_SRC= CITUS_DIR= CITUS_PORT_BASE= CITUS_SKIP=
while [ $# -gt 0 ]; do
  case $1 in
    --work) WORKDIR=$2; shift 2 ;;
    --pg-config) PG_CONFIG=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --private-install) PRIVATE=1; shift ;;
    --assert) ASSERT=1; shift ;;
    --pg-tle) PG_TLE_SRC=$2; shift 2 ;;
    --citus) CITUS_DIR=$2; shift 2 ;;
    --citus-port) CITUS_PORT_BASE=$2; shift 2 ;;
    --citus-skip) CITUS_SKIP=$2; shift 2 ;;
    *) echo "test/suites.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
TREE=$WORKDIR/tree
TALLY=$WORKDIR/tally
: >"$TALLY"
cd "$TREE" || exit 1

wanted() { [ -z "${IDEM_ONLY:-}" ] || [[ " $IDEM_ONLY " == *" $1 "* ]]; }
wanted_extra() { [ -z "${IDEM_ONLY:-}" ] || [[ " $IDEM_ONLY " == *" extra "* || " $IDEM_ONLY " == *" $1 "* ]]; }
# The suites run as the cluster's user, from the copy it owns; MAKEFLAGS
# from a caller's make must not leak into them.
as_user() { as_cluster_user env -u MAKEFLAGS -u MAKELEVEL "$@"; }

# A suite that hangs must fail with its logs, not use up CI's time. Each
# suite runs under timeout(1) with a limit several times its usual length
# (measured under CI's load: TAP ~6 min a major, the cluster suite ~3 min).
# timeout signals its whole process group, so the children a test forked
# go too; servers started with pg_ctl are in sessions of their own and are
# left to the run's cleanup. timeout's group is not the target's, so its id
# is left in DIR/bounded.pgid for run-tests' cleanup of a run cut short.
# Runs the command as the cluster's user, like as_user (which timeout cannot
# call: it is a function).
bounded_as_user() {  # seconds command...
  local limit=$1 st=0 pid user=()
  shift
  [ "$(id -u)" -eq 0 ] && user=(runuser -u postgres -- env PATH="$PATH")
  timeout --kill-after=30 "$limit" "${user[@]}" env -u MAKEFLAGS -u MAKELEVEL "$@" &
  pid=$!
  echo "$pid" >"$WORKDIR/bounded.pgid"
  wait "$pid" || st=$?
  rm -f "$WORKDIR/bounded.pgid"
  if [ $st -eq 124 ] || [ $st -eq 137 ]; then
    echo "  STOPPED: still running after $limit s (status $st): $*" | cut -c 1-200
  fi
  return $st
}

# Each suite's wall time runs from its begin to its tally.
begin() { say "$1"; suite_started=$SECONDS; }
suite_started=$SECONDS
tally() {  # suite passed failed
  printf '%s %d %d %d\n' "$1" "$2" "$3" $((SECONDS - suite_started)) >>"$TALLY"
  printf '  %-12s %d passed, %d failed (%ds)\n' "$1" "$2" "$3" $((SECONDS - suite_started))
}

# Ownership is set here, not by the caller: inside a chroot the user's id
# may differ from the host's.
[ "$(id -u)" -eq 0 ] && chown -R postgres "$WORKDIR"

# Build: zero warnings, with this major's headers.
begin "build ($("$PG_CONFIG" --version))"
as_user make -s -j2 PG_CONFIG="$PG_CONFIG" all >"$WORKDIR/build.log" 2>&1
st=$?
if [ $st -ne 0 ] || grep -q 'warning:' "$WORKDIR/build.log"; then
  grep -E 'warning:|error:' "$WORKDIR/build.log" | head -40
  [ $st -ne 0 ] && tail -n 20 "$WORKDIR/build.log"
  echo "  build failed or printed warnings (log: $WORKDIR/build.log)"
  tally build 0 1
  [ $st -ne 0 ] && exit 1
else
  tally build 1 0
fi

# Install: into a private copy of the installation (no system directory is
# written), or into this root's system directories (a chroot is ours).
if [ $PRIVATE = 1 ]; then
  make_private_install "$WORKDIR/install" "$PG_CONFIG" >"$WORKDIR/install.log" 2>&1 ||
    { cat "$WORKDIR/install.log"; tally install 0 1; exit 1; }
  RUN_PG_CONFIG=$PGBIN/pg_config
  # The copy's pg_config must point at the copy, or installcheck would test
  # whatever the system has installed.
  if [[ $("$RUN_PG_CONFIG" --pkglibdir) != "$WORKDIR/install"/* || $("$RUN_PG_CONFIG" --sharedir) != "$WORKDIR/install"/* ]]; then
    echo "  the private copy's pg_config reports $("$RUN_PG_CONFIG" --pkglibdir), not a path under $WORKDIR/install"
    tally install 0 1
    exit 1
  fi
  say "installed into $WORKDIR/install"
else
  make -s install PG_CONFIG="$PG_CONFIG" >"$WORKDIR/install.log" 2>&1 ||
    { cat "$WORKDIR/install.log"; tally install 0 1; exit 1; }
  RUN_PG_CONFIG=$PG_CONFIG
  PGBIN=$("$PG_CONFIG" --bindir)
  say "installed into $("$PG_CONFIG" --pkglibdir)"
fi
export PATH="$PGBIN:$PATH" IDEM_WORK="$WORKDIR"
# Temporary files (the TAP tests' socket directories among them) stay in the
# work directory, not in the /tmp of the host or of a cached chroot.
mkdir -p "$WORKDIR/tmp"
[ "$(id -u)" -eq 0 ] && chown postgres "$WORKDIR/tmp"
export TMPDIR=$WORKDIR/tmp
export IDEM_TEST_PORT=$PORT IDEM_BENCH_PORT=$PORT

# pg_regress and pg_isolation_regress through `make installcheck`, one suite
# at a time so that a failure in one does not hide the other.
installcheck_suite() {  # suite make-variable-that-empties-the-other output-dir
  local suite=$1 other=$2 outdir=$3 log="$WORKDIR/$1.log" st=0 total bad
  begin "$suite (make installcheck)"
  bounded_as_user 900 make installcheck PG_CONFIG="$RUN_PG_CONFIG" "$other=" >"$log" 2>&1 || st=$?
  # 15 prints "All 23 tests passed." / "1 of 23 tests failed."; 16+ prefixes "# ".
  total=$(grep -oE '(All [0-9]+ tests passed|[0-9]+ of [0-9]+ tests failed)' "$log" | grep -oE '[0-9]+ tests' | grep -oE '[0-9]+')
  bad=$(grep -oE '[0-9]+ of [0-9]+ tests failed' "$log" | awk '{print $1}')
  bad=${bad:-0}
  if [ -z "$total" ]; then
    tail -n 30 "$log"
    echo "  $suite: pg_regress did not finish (log: $log)"
    tally "$suite" 0 1
    return
  fi
  if [ "$bad" -ne 0 ] || [ $st -ne 0 ]; then
    echo "  failing $suite tests:"
    grep -E '\.\.\. FAILED|\.\.\. failed|^not ok' "$log" | sed 's/^/    /'
    [ -f "$outdir/regression.diffs" ] && { echo "  head of $TREE/$outdir/regression.diffs:"; head -n 60 "$outdir/regression.diffs"; }
    [ "$bad" -eq 0 ] && bad=1
  fi
  tally "$suite" $((total - bad)) "$bad"
}

# prove and pg_prove: one test an assertion.
tally_tap() {  # suite log exit-status
  local total bad
  total=$(grep -oE 'Tests=[0-9]+' "$2" | tail -n 1 | cut -d= -f2)
  total=${total:-0}
  bad=$(grep -oE 'Failed [0-9]+/[0-9]+ subtests' "$2" | awk -F'[ /]' '{s+=$2} END {print s+0}')
  if [ "$3" -ne 0 ] && [ "$bad" -eq 0 ]; then bad=1; total=$((total + 1)); fi
  tally "$1" $((total - bad)) "$bad"
}

# The summary prove prints after a failure (file, exit status, test numbers).
# The tally of a suite whose log ends "NAME: N passed, N failed" (the extra
# suites, bench_citus_smoke; closing_counts): on a failure, the failed lines
# and the log's tail, else its last line.
tally_counted() {  # name log status
  local p f
  read -r p f < <(closing_counts "$2" "$1" "$3")
  if [ "$f" -gt 0 ]; then
    grep -E '^(FAILED|not ok)' "$2" | sed 's/^/    /'
    echo "  tail of $2:"
    tail -n 25 "$2" | sed 's/^/    /'
  else
    tail -n 1 "$2" | sed 's/^/    /'
  fi
  tally "$1" "$p" "$f"
}

tap_failure_summary() {  # log
  sed -n '/^Test Summary Report/,/^Files=/p' "$1" | grep -v '^Files=' | sed 's/^/    /'
}

# The last lines of the log of each file prove's summary names as failed
# (PostgreSQL::Test::Utils writes LOGDIR/regress_log_NAME).
tap_failure_logs() {  # log file-prefix logdir
  local f name
  for f in $(sed -n '/^Test Summary Report/,$p' "$1" | grep -oE "^$2[^ ]+\.pl"); do
    name=$(basename "$f" .pl)
    echo "  tail of $3/regress_log_$name:"
    tail -n 25 "$3/regress_log_$name" 2>/dev/null | sed 's/^/    /'
  done
}

wanted regress && installcheck_suite regress ISOLATION .
wanted isolation && installcheck_suite isolation REGRESS output_iso

# A failed assertion or a crash in a background process (idem's worker) need
# not fail a test: the temp instances' logs must show none.
if wanted regress || wanted isolation; then
  begin "server logs of make installcheck (no TRAP, no crash)"
  crashes=$(cat log/postmaster.log output_iso/log/postmaster.log 2>/dev/null |
    grep -E 'TRAP:|terminated by signal|was terminated by exception|PANIC:')
  if [ -n "$crashes" ]; then
    echo "$crashes" | head -n 20 | sed 's/^/    /'
    echo "  (logs: $TREE/log/postmaster.log, $TREE/output_iso/log/postmaster.log)"
    tally server_logs 0 1
  else
    tally server_logs 1 0
  fi
fi

if [ $ASSERT = 1 ]; then
  # The point of this build: assertions are really on.
  begin "assertions (SHOW debug_assertions)"
  mkdir -p "$WORKDIR/cluster"
  [ "$(id -u)" -eq 0 ] && chown postgres "$WORKDIR/cluster"
  if start_cluster "$WORKDIR/cluster" "$PORT" >"$WORKDIR/assertions.log" 2>&1; then
    on=$(as_user psql -XAtq -d postgres -c 'SHOW debug_assertions' 2>>"$WORKDIR/assertions.log")
    stop_cluster "$WORKDIR/cluster"
  fi
  if [ "${on:-}" = on ]; then tally assertions 1 0; else
    echo "  SHOW debug_assertions gave '${on:-}' (log: $WORKDIR/assertions.log)"; tally assertions 0 1; fi
  exit 0
fi

# pgTAP and the extra suites share one cluster with idem preloaded.
mkdir -p "$WORKDIR/cluster"
[ "$(id -u)" -eq 0 ] && chown postgres "$WORKDIR/cluster"
extras=()
for extra in test/extra.d/*.sh; do
  name=$(basename "$extra" .sh)
  [ "$name" = fuzz ] && continue  # pure C++: run-tests runs it once
  # The client examples test the application side (Node, Python and Java
  # stacks are the host's packages); the server side they call is the same
  # SQL on every major, so they run once, on the host's PostgreSQL.
  [ "$name" = clients ] && [ "$PRIVATE" -eq 0 ] && continue
  # The Node package (clients/node) likewise: its suites test the
  # application's side of the same SQL, once, on the host's PostgreSQL.
  [ "$name" = node_package ] && [ "$PRIVATE" -eq 0 ] && continue
  # The Python package's suite likewise (Debian's python3-* packages are
  # the host's; its SQL is the request path every major's suites cover).
  [ "$name" = python_package ] && [ "$PRIVATE" -eq 0 ] && continue
  # The packages as artifacts (npm pack, the wheel) installed into
  # applications outside the tree: the application's side, once.
  [ "$name" = client_artifacts ] && [ "$PRIVATE" -eq 0 ] && continue
  # The benchmark's smoke test checks that bench/ runs (its scripts, peers
  # and report), not the server: once, on the host's PostgreSQL, like the
  # clients; the server's side of every workload is covered per major by
  # the suites above.
  [[ $name == bench_smoke || $name == bench_portable_smoke ]] && [ "$PRIVATE" -eq 0 ] && continue
  # Prometheus and the exporter are the host's packages, and what they read
  # (the views) is the same on every major: once, on the host.
  [ "$name" = monitoring ] && [ "$PRIVATE" -eq 0 ] && continue
  wanted_extra "$name" && extras+=("$name")
done
if wanted pgtap || [ ${#extras[@]} -gt 0 ]; then
  say "starting a cluster (port $PORT)"
  # The orders suite's completer scenario needs the worker in its shop
  # database (test/extra.d/orders.sh), with a round every second; it
  # switches the worker on for itself only.
  start_cluster "$WORKDIR/cluster" "$PORT" \
    "idem.database = 'postgres, orders_shop_test'" "idem.naptime = 1" \
    "idem.worker_enabled = off" || { tally cluster 0 1; exit 1; }
  if wanted pgtap; then
    begin "pgTAP"
    log=$WORKDIR/pgtap.log
    as_user createdb idem_pgtap &&
      as_user psql -qX -d idem_pgtap -c 'CREATE EXTENSION pgtap; CREATE EXTENSION idem;' >/dev/null
    bounded_as_user 600 pg_prove -d idem_pgtap test/pgtap/*.sql >"$log" 2>&1
    st=$?
    grep -E '^test/pgtap/|^#|^Files=|^Result|^  STOPPED' "$log" | sed 's/^/    /'
    [ $st -eq 0 ] || tap_failure_summary "$log"
    tally_tap pgtap "$log" $st
  fi
  for name in "${extras[@]}"; do
    begin "$name"
    log=$WORKDIR/$name.log
    bounded_as_user 900 bash "test/extra.d/$name.sh" >"$log" 2>&1
    tally_counted "$name" "$log" $?
  done
  stop_cluster "$WORKDIR/cluster"
fi

# pg_upgrade across majors (test/t/090_pg_upgrade.pl) needs idem for the
# older major its chroot holds (scripts/chroot.sh: 15 beside 17), built from
# a copy of the tree (this one holds this major's objects) and installed into
# that major's directories. Without JIT bitcode: the old cluster only has to
# run until pg_upgrade takes it over.
major=$("$RUN_PG_CONFIG" --version | grep -oE '[0-9]+' | head -n 1)
upgrade_test_wanted() {
  wanted tap && { [ -z "${IDEM_TAP_FILES:-}" ] || [[ " $IDEM_TAP_FILES " == *090_pg_upgrade* ]]; }
}
if [ $PRIVATE = 0 ] && from=$(chroot_upgrade_from "$major") && upgrade_test_wanted; then
  begin "idem for PostgreSQL $from (pg_upgrade from $from to $major)"
  old_pg_config=/usr/lib/postgresql/$from/bin/pg_config
  log=$WORKDIR/build-$from.log
  if [ ! -x "$old_pg_config" ]; then
    echo "  no PostgreSQL $from in this root ($old_pg_config): its chroot predates scripts/chroot.sh's package list"
    tally "build_$from" 0 1
  else
    rm -rf "$WORKDIR/tree-$from"
    cp -a "$TREE" "$WORKDIR/tree-$from"
    find "$WORKDIR/tree-$from" \( -name '*.o' -o -name '*.so' -o -name '*.bc' -o -name tmp_check \) -prune -exec rm -rf {} +
    if (cd "$WORKDIR/tree-$from" && as_user make -s -j2 PG_CONFIG="$old_pg_config" with_llvm=no all &&
        make -s PG_CONFIG="$old_pg_config" with_llvm=no install) >"$log" 2>&1 && ! grep -q 'warning:' "$log"; then
      export IDEM_UPGRADE_FROM=${old_pg_config%/bin/pg_config}
      tally "build_$from" 1 0
    else
      grep -E 'warning:|error:' "$log" | head -20
      echo "  building idem for PostgreSQL $from failed (log: $log)"
      tally "build_$from" 0 1
    fi
  fi
fi

if wanted tap && compgen -G "test/t/*.pl" >/dev/null; then
  begin "TAP (make prove_installcheck)"
  log=$WORKDIR/tap.log
  # prove prints a line as each file finishes; the pipe shows it at once.
  selection=()
  [ -n "${IDEM_TAP_FILES:-}" ] && selection=(PROVE_TESTS="$IDEM_TAP_FILES")
  bounded_as_user 1800 make -s prove_installcheck PG_CONFIG="$RUN_PG_CONFIG" "${selection[@]}" 2>&1 |
    tee "$log" | grep --line-buffered -E '^test/t/|^#   |^# Looks like|^Files=|^Result|^  STOPPED' |
    grep --line-buffered -v '(Wstat' | sed -u 's/^/    /'
  st=${PIPESTATUS[0]}
  if [ "$st" -ne 0 ]; then
    tap_failure_summary "$log"
    # Stopped by bounded_as_user: prove printed no summary; the file it was running
    # has the newest log.
    newest=$(ls -t tmp_check/log/regress_log_* 2>/dev/null | head -n 1)
    if [ -n "$newest" ] && ! grep -q '^Test Summary Report' "$log"; then
      echo "  tail of $TREE/$newest (the file running when it stopped):"
      tail -n 25 "$newest" | sed 's/^/    /'
    fi
    tap_failure_logs "$log" test/t/ "$TREE/tmp_check/log"
  fi
  tally_tap tap "$log" "$st"
fi

# Beyond one server (test/cluster/*.pl): Patroni + etcd failover, replays
# from a hot standby, PL/Proxy sharding, PgBouncer. Debian packages the
# host's 15 has, so on the host only; their clusters take ports from
# IDEM_CLUSTER_PORT_BASE (default: this major's port - 29500: below Linux's
# ephemeral range, 32768-60999, where the storms' own connections may hold
# a port the suite would listen on; + 1500 for a port too low). The short
# run fits the test command's budget; IDEM_CLUSTER_LONG=1 runs the long one.
cluster_port_base() {  # port
  if [ "$1" -ge 31000 ]; then echo $(($1 - 29500)); else echo $(($1 + 1500)); fi
}
if wanted cluster && [ $PRIVATE = 1 ] && [ "$major" = 15 ]; then
  begin "beyond one server (test/cluster: Patroni, standby replays, PL/Proxy, PgBouncer)"
  log=$WORKDIR/cluster.log
  sizes=()
  [ -n "${IDEM_CLUSTER_LONG:-}" ] && sizes=(STORM_SECONDS=30 STORM_CLIENTS=32 STORM_KEYS=4000
    FAILOVER_CLIENTS=32 FAILOVER_KEYS=3000 STANDBY_BENCH_SECONDS=30)
  # IDEM_TAP_FILES naming test/cluster/*.pl files runs only those.
  files=$(for f in ${IDEM_TAP_FILES:-}; do if [[ $f == test/cluster/*.pl ]]; then echo "$f"; fi; done | xargs)
  bounded_as_user 1200 env "${sizes[@]}" IDEM_CLUSTER_PORT_BASE="${IDEM_CLUSTER_PORT_BASE:-$(cluster_port_base "$PORT")}" \
    make -s prove_installcheck PG_CONFIG="$RUN_PG_CONFIG" PROVE_TESTS="${files:-$(echo test/cluster/*.pl)}" PROVE_FLAGS=-v 2>&1 |
    tee "$log" | grep --line-buffered -E '^test/cluster/|^# [a-z]|^not ok|^Files=|^Result|^  STOPPED' | sed -u 's/^/    /'
  st=${PIPESTATUS[0]}
  [ "$st" -ne 0 ] && tap_failure_summary "$log"
  tally_tap cluster "$log" "$st"
fi

# The portable engine: its installs (pg_tle, SQL file, pg_cron) and the
# contract suites against it.
source test/portable.sh

# Citus: the proofs on a coordinator and two workers, both engines.
source test/citus.sh
exit 0
