# The portable engine's suites on one PostgreSQL major, sourced by
# test/suites.sh (its helpers: begin, tally, tally_tap, bounded_as_user,
# as_user, wanted) after the C++ engine's suites. Not run on the assert build.
#
# The portable engine is for servers that cannot load idem's library, so it
# is tested in a private copy of the installation WITHOUT idem's files
# (scripts/lib.sh make_private_install_without_idem), with pg_tle built into
# it from PG_TLE_SRC (run-major.sh copies ../shared/third_party/pg_tle under
# the work directory; empty when that folder is absent, and then only the
# pg_tle parts are skipped). Suites, each tallied:
#   portable-install    test/portable/t/*.pl (prove): the pg_tle install, the
#                       SQL-file install and its upgrades, maintenance under
#                       pg_cron, each as a role that is not superuser; the
#                       differential test and the engine move through pg_tle
#   portable-regress    test/portable/regress.sh --mode pgtle: the regress
#                       files against a pg_tle install (CREATE EXTENSION idem)
#   portable-regress-file  the same through the SQL-file install (--mode file;
#                       needs no pg_tle)
#   portable-maint-owner  test/portable/run_maintenance_owner.sh: run_maintenance
#                       where the extension's owner is not a superuser
#   portable-isolation  pg_isolation_regress on test/specs against the same
#                       server
#   portable-proofs     test/portable/proofs.sh: the twin storm and the crash
#                       run (test/t/101, 103) with IDEM_ENGINE=portable
#   portable-pgtap      the same script's pgTAP files, through the SQL file
#                       and through pg_tle
# Regress and isolation share one server with pg_tle preloaded; each
# installs idem in a database of its own. test/portable/skip names the tests
# the portable engine does not run, each with its reason.
# IDEM_ONLY: "portable" for all of them, or a suite's name
# ("portable-regress" takes both modes).

portable_wanted() { wanted portable || wanted "$1"; }

# pg_regress and pg_isolation_regress print the same closing lines; reads
# them into the tally (as installcheck_suite does for the C++ engine).
portable_tally_regress() {  # suite log status outdir
  local suite=$1 log=$2 st=$3 outdir=$4 total bad
  total=$(grep -oE '(All [0-9]+ tests passed|[0-9]+ of [0-9]+ tests failed)' "$log" | grep -oE '[0-9]+ tests' | grep -oE '[0-9]+')
  bad=$(grep -oE '[0-9]+ of [0-9]+ tests failed' "$log" | awk '{print $1}')
  bad=${bad:-0}
  if [ -z "$total" ]; then
    tail -n 30 "$log" | sed 's/^/    /'
    echo "  $suite: the runner did not finish (log: $log)"
    tally "$suite" 0 1
    return
  fi
  if [ "$bad" -ne 0 ] || [ "$st" -ne 0 ]; then
    echo "  failing $suite tests:"
    grep -E '\.\.\. FAILED|\.\.\. failed|^not ok' "$log" | sed 's/^/    /'
    [ -f "$outdir/regression.diffs" ] && { echo "  head of $outdir/regression.diffs:"; head -n 60 "$outdir/regression.diffs"; }
    [ "$bad" -eq 0 ] && bad=1
  fi
  tally "$suite" $((total - bad)) "$bad"
}

# The isolation specs test/portable/skip names: "<test> <reason>" or
# "isolation:<test> <reason>" (regress.sh reads the same file, with its
# modes "pgtle:" and "file:").
portable_skipped_specs() {
  [ -f test/portable/skip ] || return 0
  awk '/^[[:space:]]*(#|$)/ { next } $1 !~ /:/ { print $1 } $1 ~ /^isolation:/ { sub(/^isolation:/, "", $1); print $1 }' \
    test/portable/skip
}

# test/portable/regress.sh closes with "portable-regress-<mode>: N passed,
# N failed" and names each failing test.
portable_tally_runner() {  # suite log status closing-name
  local suite=$1 log=$2 st=$3 line p f
  line=$(grep -E "^$4: [0-9]+ passed, [0-9]+ failed" "$log" | tail -n 1)
  p=$(echo "$line" | awk '{print $2}')
  f=$(echo "$line" | awk '{print $4}')
  [ -n "$line" ] || { p=0; f=1; }
  [ "$st" -eq 0 ] || [ "${f:-0}" -gt 0 ] || f=1
  grep -E '\.\.\. skipped' "$log" | sed 's/^/    /'
  if [ "$f" -gt 0 ]; then
    echo "  failing $suite tests:"
    grep -E '\.\.\. FAILED' "$log" | sed 's/^/    /'
    [ -n "$line" ] || tail -n 20 "$log" | sed 's/^/    /'
    for d in $(grep -oE '\(diff: [^)]+\)' "$log" | head -n 3 | sed 's/(diff: //; s/)//'); do
      echo "  head of $d:"
      head -n 30 "$d" | sed 's/^/    /'
    done
  fi
  tally "$suite" "$p" "$f"
}

# The server regress and isolation share: the portable installation, with
# pg_tle preloaded when it was built. Each runner makes its own database.
portable_start_server() {  # dir with-pg_tle(0|1)
  local dir=$1 preload=
  [ "$2" = 1 ] && preload=pg_tle
  mkdir -p "$dir/socket"
  [ "$(id -u)" -eq 0 ] && chown -R postgres "$dir"
  as_user "$PORTABLE_BIN/initdb" -D "$dir/data" -A trust -U postgres --no-sync >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log"; return 1; }
  cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$dir/socket'
port = $PORT
shared_preload_libraries = '$preload'
max_connections = 120
fsync = off
max_prepared_transactions = 10
log_min_messages = warning
CONF
  as_user "$PORTABLE_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start >/dev/null ||
    { cat "$dir/server.log"; return 1; }
}

# The isolation specs' database, made here (pg_regress would make it from
# template0, without pg_tle): idem registered by a role granted pgtle_admin,
# not a superuser, as on a managed service.
portable_isolation_database() {  # dir db
  local psql=("$PORTABLE_BIN/psql" -XAtq -v ON_ERROR_STOP=1 -h "$1/socket" -p "$PORT")
  as_user "${psql[@]}" -U postgres -d postgres -c "CREATE DATABASE $2" &&
    as_user "${psql[@]}" -U postgres -d "$2" -c '
      CREATE EXTENSION pg_tle;
      CREATE ROLE tle_admin LOGIN NOSUPERUSER;
      GRANT pgtle_admin TO tle_admin;' &&
    as_user "${psql[@]}" -U tle_admin -d "$2" -f dist/idem-pgtle.sql >/dev/null
}

portable_stop_server() {  # dir
  [ -f "$1/data/postmaster.pid" ] && as_user "$PORTABLE_BIN/pg_ctl" -D "$1/data" -m fast -w stop >/dev/null 2>&1
  return 0
}

if portable_wanted portable-install || portable_wanted portable-regress || portable_wanted portable-regress-file ||
  portable_wanted portable-maint-owner || portable_wanted portable-isolation; then
  begin "portable engine: make portable; a copy of the installation without idem${PG_TLE_SRC:+, with pg_tle}"
  log=$WORKDIR/portable-setup.log
  IDEM_CPP_BIN=$PGBIN
  portable_ok=1
  # dist/ is what users run: when the tree carries it, it must be what
  # `make portable` writes from sql/ and portable/ (the tests then use the
  # files make writes, the same ones).
  if [ -d dist ]; then
    if as_user make -s portable-check PG_CONFIG="$PG_CONFIG" >"$WORKDIR/portable-dist.log" 2>&1; then
      tally portable-dist 1 0
    else
      tail -n 5 "$WORKDIR/portable-dist.log" | sed 's/^/    /'
      tally portable-dist 0 1
    fi
  fi
  as_user make -s portable PG_CONFIG="$PG_CONFIG" >"$log" 2>&1 || portable_ok=0
  if [ $portable_ok = 1 ]; then
    make_private_install_without_idem "$WORKDIR/portable-install" "$PG_CONFIG" >>"$log" 2>&1 || portable_ok=0
    PORTABLE_BIN=$PGBIN
    PGBIN=$IDEM_CPP_BIN  # what the C++ engine's suites use, as before
    [ "$(id -u)" -eq 0 ] && chown -R postgres "$WORKDIR/portable-install"
  fi
  # pg_tle: once per major, into the copy (whose pg_config names the copy's
  # directories); its own warnings are not ours to fail on. No JIT bitcode:
  # nothing here is JIT-compiled, and the chroots have no clang.
  pg_tle_built=0
  if [ $portable_ok = 1 ] && [ -n "$PG_TLE_SRC" ]; then
    if (cd "$PG_TLE_SRC" && as_user make -s -j2 PG_CONFIG="$PORTABLE_BIN/pg_config" with_llvm=no &&
        as_user make -s install PG_CONFIG="$PORTABLE_BIN/pg_config" with_llvm=no) >>"$log" 2>&1; then
      pg_tle_built=1
    else
      portable_ok=0
    fi
  fi
  if [ $portable_ok = 1 ]; then
    tally portable-setup 1 0
  else
    tail -n 30 "$log" | sed 's/^/    /'
    echo "  the portable engine's setup failed (log: $log)"
    tally portable-setup 0 1
  fi
  [ -n "$PG_TLE_SRC" ] || echo "pg_tle: skipped (../shared/third_party/pg_tle not found)"

  if [ $portable_ok = 1 ] && portable_wanted portable-install; then
    begin "portable-install (test/portable/t: pg_tle, SQL file, pg_cron; as non-superusers)"
    log=$WORKDIR/portable-install.log
    pgxs=$("$PORTABLE_BIN/pg_config" --pkglibdir)/pgxs
    rm -rf "$WORKDIR/portable-tap"
    mkdir -p "$WORKDIR/portable-tap"
    [ "$(id -u)" -eq 0 ] && chown postgres "$WORKDIR/portable-tap"
    # IDEM_TAP_FILES may name some of them (it reaches the chroots).
    files=()
    for f in ${IDEM_TAP_FILES:-}; do [[ $f == test/portable/t/*.pl ]] && files+=("$f"); done
    [ ${#files[@]} -gt 0 ] || files=(test/portable/t/*.pl)
    bounded_as_user 600 env TESTDIR="$WORKDIR/portable-tap" TESTLOGDIR="$WORKDIR/portable-tap/tmp_check/log" \
      TESTDATADIR="$WORKDIR/portable-tap/tmp_check" IDEM_TREE="$TREE" IDEM_PORTABLE_BIN="$PORTABLE_BIN" \
      IDEM_CPP_BIN="$IDEM_CPP_BIN" IDEM_PG_TLE="$pg_tle_built" PATH="$PORTABLE_BIN:$PATH" \
      PG_REGRESS="$pgxs/src/test/regress/pg_regress" \
      prove -I "$pgxs/src/test/perl" -I test/portable/t "${files[@]}" 2>&1 |
      tee "$log" | grep --line-buffered -E '^test/portable/|^#   |^# Looks like|^Files=|^Result|^  STOPPED' |
      grep --line-buffered -v '(Wstat' | sed -u 's/^/    /'
    st=${PIPESTATUS[0]}
    if [ "$st" -ne 0 ]; then
      tap_failure_summary "$log"
      for f in $(sed -n '/^Test Summary Report/,$p' "$log" | grep -oE '^test/portable/t/[^ ]+\.pl'); do
        name=$(basename "$f" .pl)
        echo "  tail of $WORKDIR/portable-tap/tmp_check/log/regress_log_$name:"
        tail -n 25 "$WORKDIR/portable-tap/tmp_check/log/regress_log_$name" 2>/dev/null | sed 's/^/    /'
      done
    fi
    tally_tap portable-install "$log" "$st"
  fi

  if [ $portable_ok = 1 ] && { portable_wanted portable-regress || portable_wanted portable-regress-file ||
    portable_wanted portable-maint-owner || portable_wanted portable-isolation; }; then
    server=$WORKDIR/portable-server
    rm -rf "$server"
    begin "portable engine: a server of the installation without idem$([ $pg_tle_built = 1 ] && echo ', pg_tle preloaded') (port $PORT)"
    if ! portable_start_server "$server" $pg_tle_built >"$WORKDIR/portable-server.log" 2>&1; then
      tail -n 30 "$WORKDIR/portable-server.log" | sed 's/^/    /'
      tally portable-server 0 1
    else
      # The regress files, through each install (pg_tle's CREATE EXTENSION,
      # the SQL file), each in a database of its own that regress.sh makes.
      for mode in pgtle file; do
        suite=portable-regress$([ $mode = file ] && echo -file)
        portable_wanted "$suite" || { [ $mode = file ] && portable_wanted portable-regress; } || continue
        if [ $mode = pgtle ] && [ $pg_tle_built = 0 ]; then
          echo "  $suite: skipped (it installs idem through pg_tle)"
          continue
        fi
        begin "$suite (test/portable/regress.sh --mode $mode)"
        log=$WORKDIR/$suite.log
        st=0
        bounded_as_user 900 env PGHOST="$server/socket" PGPORT="$PORT" PGUSER=postgres \
          PATH="$PORTABLE_BIN:$PATH" bash test/portable/regress.sh --mode $mode \
          --outdir "$WORKDIR/$suite" >"$log" 2>&1 || st=$?
        portable_tally_runner "$suite" "$log" $st "portable-regress-$mode"
      done
      # run_maintenance where the extension's owner is not a superuser and
      # another role calls it (test/portable/run_maintenance_owner.sh).
      if [ -f test/portable/run_maintenance_owner.sh ] && portable_wanted portable-maint-owner; then
        begin "portable-maint-owner (test/portable/run_maintenance_owner.sh)"
        log=$WORKDIR/portable-maint-owner.log
        st=0
        bounded_as_user 300 env PGHOST="$server/socket" PGPORT="$PORT" PGUSER=postgres \
          PATH="$PORTABLE_BIN:$PATH" bash test/portable/run_maintenance_owner.sh \
          "$WORKDIR/portable-maint-owner" >"$log" 2>&1 || st=$?
        sed 's/^/    /' "$log" | tail -n 20
        if [ $st -eq 0 ]; then tally portable-maint-owner 1 0; else
          d=$WORKDIR/portable-maint-owner/run_maintenance_owner.diff
          [ -f "$d" ] && head -n 40 "$d" | sed 's/^/    /'
          tally portable-maint-owner 0 1
        fi
      fi
      if portable_wanted portable-isolation && [ $pg_tle_built = 0 ]; then
        echo "  portable-isolation: skipped (its specs CREATE EXTENSION idem, through pg_tle)"
      elif portable_wanted portable-isolation; then
        begin "portable-isolation (pg_isolation_regress on test/specs against the pg_tle install)"
        log=$WORKDIR/portable-isolation.log
        outdir=$WORKDIR/portable-isolation
        mkdir -p "$outdir"
        [ "$(id -u)" -eq 0 ] && chown postgres "$outdir"
        skip=$(portable_skipped_specs)
        specs=() skipped=()
        for spec in test/specs/*.spec; do
          name=$(basename "$spec" .spec)
          if grep -qxF "$name" <<<"$skip"; then skipped+=("$name"); else specs+=("$name"); fi
        done
        [ ${#skipped[@]} -eq 0 ] || echo "  not run (test/portable/skip): ${skipped[*]}"
        st=0
        portable_isolation_database "$server" idem_portable_isolation >"$log" 2>&1 || st=$?
        bounded_as_user 900 "$("$PORTABLE_BIN/pg_config" --pkglibdir)/pgxs/src/test/isolation/pg_isolation_regress" \
          --use-existing --host="$server/socket" --port="$PORT" --user=postgres \
          --bindir="$PORTABLE_BIN" --inputdir=test --outputdir="$outdir" \
          --dbname=idem_portable_isolation "${specs[@]}" >>"$log" 2>&1 || st=$?
        portable_tally_regress portable-isolation "$log" $st "$outdir"
      fi
    fi
    portable_stop_server "$server"
  fi

  # The proofs (twin storm, crash run) and pgTAP on the portable engine,
  # each in clusters of their own (test/portable/proofs.sh).
  if [ $portable_ok = 1 ] && { portable_wanted portable-proofs || portable_wanted portable-pgtap; }; then
    begin "portable-proofs and portable-pgtap (test/portable/proofs.sh: twin storm, crash run, pgTAP)"
    log=$WORKDIR/portable-proofs.log
    mkdir -p "$WORKDIR/portable-proofs"
    [ "$(id -u)" -eq 0 ] && chown postgres "$WORKDIR/portable-proofs"
    st=0
    bounded_as_user 900 env IDEM_PORTABLE_BIN="$PORTABLE_BIN" IDEM_TREE="$TREE" \
      bash test/portable/proofs.sh --work "$WORKDIR/portable-proofs" --port "$PORT" >"$log" 2>&1 || st=$?
    for suite in portable-proofs portable-pgtap; do
      line=$(grep -E "^$suite: [0-9]+ passed, [0-9]+ failed" "$log" | tail -n 1)
      p=$(awk '{print $2}' <<<"$line") f=$(awk '{print $4}' <<<"$line")
      if [ -z "$line" ]; then p=0 f=1; fi
      if [ "$f" -gt 0 ] || { [ $st -ne 0 ] && [ "$suite" = portable-pgtap ]; }; then
        [ "$f" -gt 0 ] || f=1
        echo "  $suite failed; tail of $log:"; tail -n 30 "$log" | sed 's/^/    /'
      fi
      tally "$suite" "$p" "$f"
    done
  fi
fi
