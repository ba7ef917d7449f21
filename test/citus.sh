# The Citus suites on one PostgreSQL major, sourced by test/suites.sh (its
# helpers: begin, tally, tally_tap, bounded_as_user, as_user, wanted) after
# the other suites. Not run on the assert build.
#
# Citus comes from the cache scripts/citus.sh makes (run-major.sh passes
# its staged tree with --citus, or --citus-skip and the reason there is
# none). It is copied into two private copies of the installation, never
# into a system directory:
#   citus           test/citus/*.pl on the C++ engine: a copy with idem
#                   installed (make install) and Citus
#   citus-portable  the same files on the portable engine
#                   (IDEM_ENGINE=portable): a copy without idem's files, so
#                   no library of idem's can be loaded, and Citus
# Each file starts its own cluster (test/citus/IdemCitus.pm: a coordinator
# and two workers) on ports from IDEM_CITUS_PORT_BASE. The short run fits
# the test command's budget; IDEM_CITUS_LONG=1 runs the long one.
# IDEM_ONLY: "citus" for both.

citus_run() {  # suite engine install-root
  local suite=$1 engine=$2 root=$3 bin log testdir pgxs st files=() sizes=()  # sizes: also the engine's settings
  bin=$root$("$PG_CONFIG" --bindir)
  pgxs=$("$bin/pg_config" --pkglibdir)/pgxs
  log=$WORKDIR/$suite.log
  testdir=$WORKDIR/$suite-tap
  rm -rf "$testdir"
  mkdir -p "$testdir"
  [ "$(id -u)" -eq 0 ] && chown postgres "$testdir"
  # IDEM_TAP_FILES may name some of them (it reaches the chroots).
  for f in ${IDEM_TAP_FILES:-}; do [[ $f == test/citus/*.pl ]] && files+=("$f"); done
  [ ${#files[@]} -gt 0 ] || files=(test/citus/*.pl)
  [ -n "${IDEM_CITUS_LONG:-}" ] && sizes=(CITUS_STORM_SECONDS=30 CITUS_STORM_CLIENTS=16 CITUS_STORM_KEYS=2000
    CITUS_ZOMBIE_SECONDS=12 CITUS_CRASH_SECONDS=24 CITUS_REBALANCE_KEYS=2000)
  begin "$suite (test/citus on the $engine engine: a coordinator and two workers, Citus $CITUS_VERSION; ports from $CITUS_PORT_BASE)"
  [ "$engine" = portable ] && sizes+=(IDEM_PORTABLE_BIN="$bin")
  bounded_as_user 1500 env "${sizes[@]}" TESTDIR="$testdir" TESTLOGDIR="$testdir/tmp_check/log" \
    TESTDATADIR="$testdir/tmp_check" IDEM_TREE="$TREE" IDEM_ENGINE="$engine" IDEM_CITUS_PORT_BASE="$CITUS_PORT_BASE" \
    PATH="$bin:$PATH" PG_REGRESS="$pgxs/src/test/regress/pg_regress" \
    prove -v -I "$pgxs/src/test/perl" -I test/citus -I test/t "${files[@]}" 2>&1 |
    tee "$log" | grep --line-buffered -E '^test/citus/|^# [a-z]|^not ok|^Files=|^Result|^  STOPPED' |
    sed -u 's/^/    /'
  st=${PIPESTATUS[0]}
  if [ "$st" -ne 0 ]; then
    tap_failure_summary "$log"
    tap_failure_logs "$log" test/citus/ "$testdir/tmp_check/log"
  fi
  tally_tap "$suite" "$log" "$st"
}

# bench/citus/run in smoke mode on the C++ engine's copy, so that the
# benchmark keeps working: once, on the host's PostgreSQL, like the other
# benchmarks' smoke tests (test/extra.d/bench_smoke.sh); 15-25 s, more
# under load (docs/testing.md).
bench_citus_smoke() {  # install-root
  local bin log=$WORKDIR/bench_citus_smoke.log
  bin=$1$("$PG_CONFIG" --bindir)
  begin "bench_citus_smoke (bench/citus/run --smoke: one node against a coordinator and two workers)"
  bounded_as_user 300 env PATH="$bin:$PATH" TMPDIR="$WORKDIR" IDEM_BENCH_PORT="$CITUS_PORT_BASE" \
    bash bench/citus/run --smoke --installed >"$log" 2>&1
  tally_counted bench_citus_smoke "$log" $?
}

if wanted citus; then
  if [ -n "$CITUS_SKIP" ]; then
    echo "citus: skipped ($CITUS_SKIP)"
  elif [ -z "$CITUS_DIR" ] || [ ! -f "$CITUS_DIR/.idem-stamp" ]; then
    echo "  citus: no Citus build at '${CITUS_DIR:-}' (scripts/make-cache.sh citus $major makes it)"
    tally citus-setup 0 1
  else
    CITUS_VERSION=$(sed -n 's/^citus: \([^ ]*\).*/\1/p' "$CITUS_DIR/.idem-stamp")
    begin "citus: copies of PostgreSQL $major with Citus $CITUS_VERSION (one with idem's files, one without)"
    log=$WORKDIR/citus-setup.log
    citus_ok=1
    # The portable engine's files (dist/): what `make portable` writes.
    as_user make -s portable PG_CONFIG="$PG_CONFIG" >"$log" 2>&1 || citus_ok=0
    if [ $citus_ok = 1 ]; then
      { make_private_install "$WORKDIR/citus-install" "$PG_CONFIG" &&
        cp -a "$CITUS_DIR/." "$WORKDIR/citus-install/" &&
        make_private_install_without_idem "$WORKDIR/citus-portable-install" "$PG_CONFIG" &&
        cp -a "$CITUS_DIR/." "$WORKDIR/citus-portable-install/"; } >>"$log" 2>&1 || citus_ok=0
      rm -f "$WORKDIR"/citus-install/.idem-stamp "$WORKDIR"/citus-portable-install/.idem-stamp
    fi
    if [ $citus_ok = 1 ]; then
      [ "$(id -u)" -eq 0 ] && chown -R postgres "$WORKDIR/citus-install" "$WORKDIR/citus-portable-install"
      tally citus-setup 1 0
      citus_run citus c++ "$WORKDIR/citus-install"
      citus_run citus-portable portable "$WORKDIR/citus-portable-install"
      [ "$PRIVATE" -eq 1 ] && bench_citus_smoke "$WORKDIR/citus-install"
    else
      tail -n 30 "$log" | sed 's/^/    /'
      echo "  the Citus suites' setup failed (log: $log)"
      tally citus-setup 0 1
    fi
  fi
fi
