#!/usr/bin/env bash
# The regress suite (test/sql/*.sql against test/expected/*.out) run on the
# portable engine, the way pg_regress runs it on the C++ one: one database
# (contrib_regression, made like pg_regress makes it), the files in order,
# psql -X -a -q with input on stdin, pg_regress's environment (time zone,
# date and interval style, C messages).
#
#   test/portable/regress.sh --mode pgtle|file --outdir DIR [test ...]
#
# Needs a running server (PGHOST, PGPORT) and a superuser in PGUSER; psql
# on PATH. idem is installed as on a managed service, by a role that is not
# superuser: regress_idem_installer (made once per server), granted CREATE
# on the database and pg_read_all_stats (what docs/portable.md tells the
# extension's owner to hold for bind_lock_to_session). The files'
# CREATE EXTENSION idem line becomes SET ROLE regress_idem_installer, the
# install, RESET ROLE, in the expected output too; every other statement
# runs as the superuser, as pg_regress runs them on the C++ engine (they
# make roles and grant). pgtle: the superuser makes pg_tle and grants the
# installer pgtle_admin, the installer runs dist/idem-pgtle.sql, and the
# files' CREATE EXTENSION idem (as the installer) installs the portable
# engine. file: the install is dist/idem-portable.sql, run without echo
# (in the expected output too).
#
# The one accepted difference: PL/pgSQL adds a CONTEXT line to an error
# raised in a function body, C does not. psql is told not to print
# context (SHOW_CONTEXT=never) and the expected files' CONTEXT lines are
# dropped, so both sides compare without them. A test that cannot pass on
# the portable engine is listed in test/portable/skip with its reason. A
# reviewed difference is a patch to the C++ engine's expected output (its
# install line edited as above), test/portable/expected/<test>.diff (both
# modes), then
# test/portable/expected/<mode>/<test>.diff: each hunk is a difference the
# engines are allowed, and the rest of the file must still match.
# test/portable/input/<test>.diff edits the input the same way, where a
# statement's effect differs by design. `--update-patch` writes the patch from the results (the common one in
# pgtle mode, the file mode's own in file mode; read it before committing).
# Prints "<test> ... ok|FAILED|skipped" lines and a closing
# "portable-regress-<mode>: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
TREE=$PWD

MODE= OUTDIR= UPDATE=0
while [ $# -gt 0 ]; do
  case $1 in
    --update-patch) UPDATE=1; shift ;;
    --mode) MODE=$2; shift 2 ;;
    --outdir) OUTDIR=$2; shift 2 ;;
    --*) echo "regress.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[[ $MODE == pgtle || $MODE == file ]] || { echo "regress.sh: --mode pgtle|file" >&2; exit 2; }
[ -n "$OUTDIR" ] || { echo "regress.sh: --outdir DIR" >&2; exit 2; }
command -v patch >/dev/null || { echo "regress.sh: needs patch(1) for the reviewed differences" >&2; exit 2; }
mkdir -p "$OUTDIR/results" "$OUTDIR/expected"

if [ $# -gt 0 ]; then
  tests=("$@")
else
  tests=()
  for f in test/sql/*.sql; do tests+=("$(basename "$f" .sql)"); done
fi

# The skip list: "<test> <reason>" or "<mode>:<test> <reason>".
skip_reason() {  # test
  [ -f test/portable/skip ] || return 1
  awk -v t="$1" -v m="$MODE" '
    /^[[:space:]]*(#|$)/ { next }
    $1 == t || $1 == m ":" t { $1 = ""; sub(/^ /, ""); print; found = 1; exit }
    END { exit !found }' test/portable/skip
}

# pg_regress's environment (src/test/regress/pg_regress.c).
export PGTZ=PST8PDT PGDATESTYLE='Postgres, MDY' PGAPPNAME=pg_regress
export PGOPTIONS="${PGOPTIONS:-} -c intervalstyle=postgres_verbose"
db=contrib_regression
installer=regress_idem_installer
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1
psql -X -q -d postgres -v ON_ERROR_STOP=1 >"$OUTDIR/setup.log" 2>&1 <<SQL || { cat "$OUTDIR/setup.log"; exit 1; }
SELECT 'CREATE ROLE $installer LOGIN NOSUPERUSER'
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$installer') \gexec
GRANT pg_read_all_stats TO $installer;
-- The file install is run by a role without pgtle_admin (a pgtle run on
-- this server before may have granted it).
SELECT 'REVOKE pgtle_admin FROM $installer'
 WHERE '$MODE' = 'file' AND pg_has_role('$installer', 'pgtle_admin', 'MEMBER') IS TRUE
   AND EXISTS (SELECT FROM pg_roles WHERE rolname = 'pgtle_admin') \gexec
CREATE DATABASE "$db" TEMPLATE=template0;
GRANT CREATE ON DATABASE "$db" TO $installer;
ALTER DATABASE "$db" SET lc_messages TO 'C';
ALTER DATABASE "$db" SET lc_monetary TO 'C';
ALTER DATABASE "$db" SET lc_numeric TO 'C';
ALTER DATABASE "$db" SET lc_time TO 'C';
ALTER DATABASE "$db" SET bytea_output TO 'hex';
ALTER DATABASE "$db" SET timezone_abbreviations TO 'Default';
SQL
if [ "$MODE" = pgtle ]; then
  { psql -X -q -d "$db" -v ON_ERROR_STOP=1 -c 'CREATE EXTENSION pg_tle' -c "GRANT pgtle_admin TO $installer" &&
    psql -X -q -d "$db" -U "$installer" -v ON_ERROR_STOP=1 -f "$TREE/dist/idem-pgtle.sql"; } \
    >>"$OUTDIR/setup.log" 2>&1 || { cat "$OUTDIR/setup.log"; exit 1; }
fi

# Drops CONTEXT lines and the lines that continue them (a context has one
# line per level: "PL/pgSQL function ...", "SQL statement ...", ...).
drop_context() {
  awk '
    /^CONTEXT:  / { ctx = 1; next }
    ctx && /^(PL\/pgSQL function|SQL statement|SQL function|extension script|COPY |JSON data|parallel worker|during |while )/ { next }
    { ctx = 0; print }'
}

# The install's edit of input and expected output alike: the installer
# runs it. pgtle: its CREATE EXTENSION idem; file: dist/idem-portable.sql,
# without echo.
install_line='^CREATE EXTENSION (IF NOT EXISTS )?idem;$'
install_input() {
  if [ "$MODE" = file ]; then
    sed -E "s#$install_line#SET ROLE $installer;\\n\\\\set ECHO none\\n\\\\i $TREE/dist/idem-portable.sql\\n\\\\set ECHO all\\nRESET ROLE;#"
  else
    sed -E "s#$install_line#SET ROLE $installer;\\n&\\nRESET ROLE;#"
  fi
}
install_expected() {
  if [ "$MODE" = file ]; then
    sed -E "s#$install_line#SET ROLE $installer;\\n\\\\set ECHO none\\nRESET ROLE;#"
  else
    sed -E "s#$install_line#SET ROLE $installer;\\n&\\nRESET ROLE;#"
  fi
}

passed=0 failed=0
for t in "${tests[@]}"; do
  if reason=$(skip_reason "$t"); then
    printf '%-36s ... skipped (%s)\n' "$t" "$reason"
    continue
  fi
  input=$TREE/test/sql/$t.sql
  result=$OUTDIR/results/$t.out
  # A reviewed edit of the input (test/portable/input/<test>.diff): where a
  # statement's effect differs by design (a setting refused at SET by the
  # C++ engine, at use by the portable one), the edit keeps the rest of the
  # file testing what it tests.
  if [ -f "$TREE/test/portable/input/$t.diff" ]; then
    patch -s -o "$OUTDIR/results/$t.in.sql" "$input" "$TREE/test/portable/input/$t.diff" ||
      echo "  test/portable/input/$t.diff does not apply"
    input=$OUTDIR/results/$t.in.sql
  fi
  install_input <"$input" >"$OUTDIR/results/$t.sql"
  input=$OUTDIR/results/$t.sql
  psql -X -a -q -d "$db" -v HIDE_TABLEAM=on -v HIDE_TOAST_COMPRESSION=on -v SHOW_CONTEXT=never \
    <"$input" 2>&1 | drop_context >"$result"
  # The best of the expected files (pg_regress accepts t.out, t_1.out, ...),
  # with the reviewed differences applied.
  best= bestsize=
  patch_out=$TREE/test/portable/expected/$t.diff
  [ "$MODE" = file ] && patch_out=$TREE/test/portable/expected/file/$t.diff
  for e in "$TREE"/test/expected/"$t".out "$TREE"/test/expected/"$t"_[0-9].out; do
    [ -f "$e" ] || continue
    exp=$OUTDIR/expected/$(basename "$e")
    drop_context <"$e" | install_expected >"$exp"
    for p in "$TREE/test/portable/expected/$t.diff" "$TREE/test/portable/expected/$MODE/$t.diff"; do
      [ -f "$p" ] || continue
      [ $UPDATE = 1 ] && [ "$p" = "$patch_out" ] && continue
      # A patch written for t.out need not apply to an alternative t_1.out:
      # that candidate is then left out (the log says so).
      if patch -s -o "$exp.patched" "$exp" "$p" >"$exp.patch.log" 2>&1; then
        mv "$exp.patched" "$exp"
      else
        echo "${p#$TREE/} does not apply to $(basename "$e")" >>"$OUTDIR/$t.patch.log"
        rm -f "$exp"; continue 2
      fi
    done
    size=$(diff -U3 "$exp" "$result" | wc -l)
    if [ -z "$best" ] || [ "$size" -lt "$bestsize" ]; then best=$exp bestsize=$size; fi
  done
  if [ $UPDATE = 1 ] && [ -n "$best" ] && [ "$bestsize" -gt 0 ]; then
    mkdir -p "$(dirname "$patch_out")"
    diff -U3 --label "test/expected/$t.out" --label "portable/$t.out" "$best" "$result" >"$patch_out"
    echo "  wrote ${patch_out#$TREE/}: read it"
  fi
  if [ -z "$best" ]; then
    printf '%-36s ... FAILED (no expected output a patch applies to)\n' "$t"
    [ -f "$OUTDIR/$t.patch.log" ] && sed 's/^/  /' "$OUTDIR/$t.patch.log"
    failed=$((failed + 1))
  elif [ "$bestsize" -eq 0 ]; then
    printf '%-36s ... ok\n' "$t"
    passed=$((passed + 1))
  else
    printf '%-36s ... FAILED (diff: %s)\n' "$t" "$OUTDIR/$t.diff"
    [ -f "$OUTDIR/$t.patch.log" ] && sed 's/^/  /' "$OUTDIR/$t.patch.log"
    diff -U3 "$best" "$result" >"$OUTDIR/$t.diff"
    failed=$((failed + 1))
  fi
done
echo "portable-regress-$MODE: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
