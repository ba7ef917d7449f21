# The portable engine's suites on one PostgreSQL major, sourced by
# test/suites.sh (its helpers: begin, tally, tally_tap, bounded_as_user,
# as_user, wanted) after the C++ engine's suites. Not run on the assert build.
#
# The portable engine is for servers that cannot load idem's library, so it
# is tested in a private copy of the installation WITHOUT idem's files
# (scripts/lib.sh make_private_install_without_idem), with pg_tle built into
# it from PG_TLE_SRC (run-major.sh copies the setting PG_TLE_SRC's tree,
# default ../shared/third_party/pg_tle, under the work directory; empty when
# there is none, and then only the pg_tle parts are skipped). Suites, each
# tallied:
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
#   portable-isolation  pg_isolation_regress on test/specs through pg_tle
#   portable-isolation-file  the same through the SQL-file install
#   portable-proofs     test/portable/proofs.sh: the twin storm, the zombie
#                       run and the crash runs (test/t/101, 102, 103, 106) with
#                       IDEM_ENGINE=portable, through pg_tle
#   portable-proofs-file  the same through the SQL-file install
#   portable-pgtap      the same script's pgTAP files, through pg_tle
#   portable-pgtap-file   the same through the SQL-file install
# Every suite installs idem as a role that is not superuser: isolation, the
# proofs and pgTAP as the database's owner (granted pgtle_admin for pg_tle),
# and run as it; the regress files as regress_idem_installer (regress.sh),
# their other statements as the superuser, as on the C++ engine (their
# expected output is the C++ engine's). Regress, isolation and pgTAP share
# one server with pg_tle preloaded; each installs idem in a database of its
# own. The proofs make clusters of their own. test/portable/skip names the
# tests the portable engine does not run, each with its reason.
# IDEM_ONLY: "portable" for all of them, or a suite's name (a name without
# "-file" takes both installs: "portable-regress" runs portable-regress and
# portable-regress-file).

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
  local suite=$1 log=$2 p f
  read -r p f < <(closing_counts "$log" "$4" "$3")
  grep -E '\.\.\. skipped' "$log" | sed 's/^/    /'
  if [ "$f" -gt 0 ]; then
    echo "  failing $suite tests:"
    grep -E '\.\.\. FAILED' "$log" | sed 's/^/    /'
    grep -qE "^$4: [0-9]+ passed, [0-9]+ failed" "$log" || tail -n 20 "$log" | sed 's/^/    /'
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

# The isolation specs through one install, in a database of their own
# (pg_isolation_regress would make it from template0, as a superuser) owned
# by a role that is not superuser, which installs idem and runs every spec,
# as on a managed service: "pgtle" (the role granted pgtle_admin runs
# dist/idem-pgtle.sql and CREATE EXTENSION idem; the specs' CREATE EXTENSION
# IF NOT EXISTS then finds it) or "file" (the role runs
# dist/idem-portable.sql). Prints the input directory pg_isolation_regress
# reads.
portable_isolation_database() {  # dir mode db owner outdir
  local dir=$1 mode=$2 db=$3 owner=$4 outdir=$5
  local psql=("$PORTABLE_BIN/psql" -XAtq -v ON_ERROR_STOP=1 -h "$dir/socket" -p "$PORT")
  as_user "${psql[@]}" -U postgres -d postgres -c "CREATE ROLE $owner LOGIN NOSUPERUSER" \
    -c "CREATE DATABASE $db OWNER $owner" >&2 || return 1
  if [ "$mode" = pgtle ]; then
    as_user "${psql[@]}" -U postgres -d "$db" -c 'CREATE EXTENSION pg_tle' -c "GRANT pgtle_admin TO $owner" >&2 &&
      as_user "${psql[@]}" -U "$owner" -d "$db" -f dist/idem-pgtle.sql -c 'CREATE EXTENSION idem' >&2 || return 1
    echo test
    return
  fi
  as_user "${psql[@]}" -U "$owner" -d "$db" -f dist/idem-portable.sql >&2 || return 1
  portable_isolation_file_input "$outdir/input" &&
    as_user "${psql[@]}" -U "$owner" -d "$db" -f "$outdir/input/reinstall.sql" >&2 || return 1
  echo "$outdir/input"
}

# The file install's edit of the specs and their expected outputs alike:
# idem is there already, so the specs' CREATE EXTENSION IF NOT EXISTS idem
# goes; a reinstall (reinstall_in_other_session: DROP EXTENSION idem; CREATE
# EXTENSION idem) is what it is without an extension, DROP SCHEMA idem
# CASCADE and the file again: public.idem_drop_and_reinstall(), which
# reinstall.sql creates, runs them (the file's statements without its BEGIN
# and COMMIT, the step's own transaction taking their place; without the
# NOTICE that lists what the drop cascades to). A reviewed
# difference of the file install's output would be a patch,
# test/portable/isolation-file/<spec>.diff (none is needed today).
portable_isolation_file_input() {  # dir
  local dir=$1 spec name
  mkdir -p "$dir/specs" "$dir/expected"
  local reinstall='s/DROP EXTENSION idem; CREATE EXTENSION idem;/CALL public.idem_drop_and_reinstall();/'
  for spec in test/specs/*.spec; do
    name=$(basename "$spec" .spec)
    grep -vxE '[[:space:]]*CREATE EXTENSION IF NOT EXISTS idem;' "$spec" | sed "$reinstall" >"$dir/specs/$name.spec"
    sed "$reinstall" "test/expected/$name.out" >"$dir/expected/$name.out"
    if [ -f "test/portable/isolation-file/$name.diff" ]; then
      patch -s "$dir/expected/$name.out" "test/portable/isolation-file/$name.diff" ||
        { echo "test/portable/isolation-file/$name.diff does not apply" >&2; return 1; }
    fi
  done
  {
    echo 'CREATE PROCEDURE public.idem_drop_and_reinstall() LANGUAGE plpgsql SET client_min_messages = warning'
    echo 'AS $reinstall$ BEGIN DROP SCHEMA idem CASCADE; EXECUTE $script$'
    sed -e '0,/^BEGIN;$/{/^BEGIN;$/d}' -e '${/^COMMIT;$/d}' dist/idem-portable.sql
    echo '$script$; END $reinstall$;'
  } >"$dir/reinstall.sql"
  [ "$(id -u)" -eq 0 ] && chown -R postgres "$dir"
  return 0
}

# pg_isolation_regress on test/specs through one install (above), as the
# database's owner; test/portable/skip names the specs not run.
portable_isolation() {  # server mode
  local server=$1 mode=$2 suite=portable-isolation db=idem_portable_isolation owner=iso_tle_owner how='through pg_tle'
  [ "$mode" = file ] && suite=portable-isolation-file db=idem_portable_isolation_file owner=iso_file_owner how='through the SQL file'
  if [ "$mode" = pgtle ] && [ "$pg_tle_built" = 0 ]; then
    echo "  $suite: skipped (it installs idem through pg_tle)"
    return
  fi
  begin "$suite (pg_isolation_regress on test/specs $how, as the database's owner, not superuser)"
  local log=$WORKDIR/$suite.log outdir=$WORKDIR/$suite skip spec name inputdir st=0
  local specs=() skipped=()
  mkdir -p "$outdir"
  [ "$(id -u)" -eq 0 ] && chown postgres "$outdir"
  skip=$(portable_skipped_specs)
  for spec in test/specs/*.spec; do
    name=$(basename "$spec" .spec)
    if grep -qxF "$name" <<<"$skip"; then skipped+=("$name"); else specs+=("$name"); fi
  done
  [ ${#skipped[@]} -eq 0 ] || echo "  not run (test/portable/skip): ${skipped[*]}"
  inputdir=$(portable_isolation_database "$server" "$mode" "$db" "$owner" "$outdir" 2>"$log") || st=$?
  [ $st -eq 0 ] && bounded_as_user 900 "$("$PORTABLE_BIN/pg_config" --pkglibdir)/pgxs/src/test/isolation/pg_isolation_regress" \
    --use-existing --host="$server/socket" --port="$PORT" --user="$owner" \
    --bindir="$PORTABLE_BIN" --inputdir="$inputdir" --outputdir="$outdir" \
    --dbname="$db" "${specs[@]}" >>"$log" 2>&1 || st=$?
  portable_tally_regress "$suite" "$log" $st "$outdir"
}

portable_stop_server() {  # dir
  [ -f "$1/data/postmaster.pid" ] && as_user "$PORTABLE_BIN/pg_ctl" -D "$1/data" -m fast -w stop >/dev/null 2>&1
  return 0
}

portable_any_wanted() {
  local suite
  for suite in portable-install portable-regress portable-regress-file portable-maint-owner portable-isolation \
    portable-isolation-file portable-proofs portable-proofs-file portable-pgtap portable-pgtap-file; do
    portable_wanted $suite && return 0
  done
  return 1
}

if portable_any_wanted; then
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
  [ -n "$PG_TLE_SRC" ] ||
    echo "pg_tle: SKIP (the suites that install idem through pg_tle): no pg_tle source; set PG_TLE_SRC to a pg_tle source tree (default ../shared/third_party/pg_tle)"

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
      tap_failure_logs "$log" test/portable/t/ "$WORKDIR/portable-tap/tmp_check/log"
    fi
    tally_tap portable-install "$log" "$st"
  fi

  server=
  if [ $portable_ok = 1 ] && { portable_wanted portable-regress || portable_wanted portable-regress-file ||
    portable_wanted portable-maint-owner || portable_wanted portable-isolation ||
    portable_wanted portable-isolation-file || portable_wanted portable-pgtap || portable_wanted portable-pgtap-file; }; then
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
      # The isolation specs, through each install.
      portable_wanted portable-isolation && portable_isolation "$server" pgtle
      { portable_wanted portable-isolation || portable_wanted portable-isolation-file; } &&
        portable_isolation "$server" file
    fi
  fi

  # The proofs (twin storm, zombie run, crash run; clusters of their own)
  # and pgTAP (on the server above, when it runs) through each install:
  # test/portable/proofs.sh, a part at a time, so each has its time.
  if [ $portable_ok = 1 ]; then
    mkdir -p "$WORKDIR/portable-proofs"
    [ "$(id -u)" -eq 0 ] && chown postgres "$WORKDIR/portable-proofs"
    for part in proofs-file proofs-pgtle pgtap-file pgtap-pgtle; do
      case $part in
        *-file) suite=portable-${part%-file}-file how='through the SQL file' ;;
        *) suite=portable-${part%-pgtle} how='through pg_tle' ;;
      esac
      portable_wanted "$suite" || { [[ $part == *-file ]] && portable_wanted "portable-${part%-file}"; } || continue
      if [[ $part == *-pgtle ]] && [ $pg_tle_built = 0 ]; then
        echo "  $suite: skipped (it installs idem through pg_tle)"
        continue
      fi
      if [[ $part == pgtap-* ]] && [ ! -f "$server/data/postmaster.pid" ]; then
        echo "  $suite: not run (no portable server)"
        tally "$suite" 0 1
        continue
      fi
      begin "$suite (test/portable/proofs.sh --only $part: $([[ $part == proofs-* ]] &&
        echo 'twin storm, zombie run, crash run' || echo pgTAP) $how)"
      log=$WORKDIR/$suite.log
      st=0
      bounded_as_user 600 env IDEM_PORTABLE_BIN="$PORTABLE_BIN" IDEM_TREE="$TREE" \
        bash test/portable/proofs.sh --work "$WORKDIR/portable-proofs" --port "$PORT" \
        ${server:+--server "$server/socket"} --only $part >"$log" 2>&1 || st=$?
      grep -vE "^$suite: " "$log" | sed 's/^/  /'
      line=$(grep -E "^$suite: ([0-9]+ passed, [0-9]+ failed|skipped)" "$log" | tail -n 1)
      if [[ $line == "$suite: skipped"* ]]; then echo "  $line"; continue; fi
      p=$(awk '{print $2}' <<<"$line") f=$(awk '{print $4}' <<<"$line")
      if [ -z "$line" ]; then p=0 f=1; fi
      [ $st -eq 0 ] || [ "$f" -gt 0 ] || f=1
      tally "$suite" "$p" "$f"
    done
  fi
  [ -n "$server" ] && portable_stop_server "$server"
fi
