#!/usr/bin/env bash
# Runs every suite against the cluster in PGHOST/PGPORT, from the tree in $1,
# and prints the closing line. Called by ../run-tests as the cluster's user.
set -uo pipefail
TREE=$1
cd "$TREE"
PGXS_DIR=$(dirname "$(pg_config --pgxs)")/../..
OUT=$IDEM_WORK/out
mkdir -p "$OUT"
passed=0
failed=0
failed_suites=()
# IDEM_ONLY="tap regress" runs just those suites (unit regress isolation pgtap tap extra).
wanted() { [ -z "${IDEM_ONLY:-}" ] || [[ " $IDEM_ONLY " == *" $1 "* ]]; }

tally() {  # suite passed failed
  passed=$((passed + $2))
  failed=$((failed + $3))
  printf '    %-12s %d passed, %d failed\n' "$1" "$2" "$3"
  [ "$3" -eq 0 ] || failed_suites+=("$1")
}

# pg_regress and pg_isolation_regress: one test a file.
run_regress() {  # suite driver inputdir tests...
  local suite=$1 driver=$2 inputdir=$3 log="$OUT/$1.log"
  shift 3
  local count=$#
  "$driver" --inputdir="$inputdir" --outputdir="$OUT/$suite" --bindir="$(dirname "$(command -v psql)")" \
    --host="$PGHOST" --port="$PGPORT" --user=postgres --dbname="idem_$suite" "$@" >"$log" 2>&1
  local bad
  bad=$(grep -oE '^ *[0-9]+ of [0-9]+ tests failed' "$log" | awk '{print $1}')
  bad=${bad:-0}
  # No summary line at all: the driver itself failed, so nothing passed.
  grep -qE 'tests passed|tests failed' "$log" || bad=$count
  grep -E '\.\.\. |tests passed|tests failed' "$log" | sed 's/^/      /'
  [ "$bad" -eq 0 ] || { [ -f "$OUT/$suite/regression.diffs" ] && head -100 "$OUT/$suite/regression.diffs"; }
  tally "$suite" $((count - bad)) "$bad"
}

# prove and pg_prove: one test an assertion.
tally_tap() {  # suite log exit-status
  local total bad
  total=$(grep -oE 'Tests=[0-9]+' "$2" | tail -1 | cut -d= -f2)
  total=${total:-0}
  bad=$(grep -oE 'Failed [0-9]+/[0-9]+ subtests' "$2" | awk -F'[ /]' '{s+=$2} END {print s+0}')
  if [ "$3" -ne 0 ] && [ "$bad" -eq 0 ]; then bad=1; total=$((total + 1)); fi
  tally "$1" $((total - bad)) "$bad"
}

if wanted unit && [ -f test/unit/run.sh ]; then
  echo "==> unit tests (C++, plain and ASan/UBSan)"
  bash test/unit/run.sh "$OUT/unit" >"$OUT/unit.log" 2>&1; st=$?
  tail -5 "$OUT/unit.log" | sed 's/^/      /'
  line=$(grep -E '^unit: [0-9]+ passed, [0-9]+ failed' "$OUT/unit.log" | tail -1)
  p=$(echo "$line" | awk '{print $2}'); f=$(echo "$line" | awk '{print $4}')
  [ -n "$line" ] || { p=0; f=1; }
  [ $st -eq 0 ] || [ "${f:-0}" -gt 0 ] || f=1
  tally unit "${p:-0}" "${f:-1}"
fi

wanted regress && echo "==> pg_regress" &&
run_regress regress "$PGXS_DIR/src/test/regress/pg_regress" . \
  $(ls sql/*.sql | xargs -n1 basename | grep -v '^idem--' | sed 's/\.sql$//')

wanted isolation && echo "==> isolation" &&
run_regress isolation "$PGXS_DIR/src/test/isolation/pg_isolation_regress" test \
  $(ls test/specs/*.spec | xargs -n1 basename | sed 's/\.spec$//')

if wanted pgtap; then
  echo "==> pgTAP"
  createdb idem_pgtap && psql -qX -d idem_pgtap -c 'CREATE EXTENSION pgtap; CREATE EXTENSION idem;' >/dev/null
  pg_prove -d idem_pgtap pgtap/*.sql >"$OUT/pgtap.log" 2>&1; st=$?
  grep -vE '^\s*$' "$OUT/pgtap.log" | tail -15 | sed 's/^/      /'
  tally_tap pgtap "$OUT/pgtap.log" $st
fi

if wanted tap && compgen -G "test/t/*.pl" >/dev/null; then
  echo "==> TAP (PostgreSQL::Test::Cluster)"
  export PERL5LIB="$PGXS_DIR/src/test/perl" PG_REGRESS="$PGXS_DIR/src/test/regress/pg_regress"
  export TESTDIR="$OUT/tap" IDEM_TREE="$TREE"
  mkdir -p "$TESTDIR"
  (unset PGHOST PGPORT; prove -v ${IDEM_TAP_FILES:-test/t/*.pl} >"$OUT/tap.log" 2>&1); st=$?
  grep -E '^(# [a-z].*:|t/|Files=|Result)' "$OUT/tap.log" | sed 's/^/      /'
  tally_tap tap "$OUT/tap.log" $st
fi

if wanted extra && [ -d test/extra.d ]; then
  for extra in test/extra.d/*.sh; do
    [ -f "$extra" ] || continue
    name=$(basename "$extra" .sh)
    echo "==> $name"
    bash "$extra" >"$OUT/$name.log" 2>&1; st=$?
    sed 's/^/      /' "$OUT/$name.log" | tail -20
    line=$(grep -E '^[a-z_-]+: [0-9]+ passed, [0-9]+ failed' "$OUT/$name.log" | tail -1)
    p=$(echo "$line" | awk '{print $2}'); f=$(echo "$line" | awk '{print $4}')
    [ -n "$line" ] || { p=0; f=1; }
    [ $st -eq 0 ] || [ "${f:-0}" -gt 0 ] || f=1
    tally "$name" "${p:-0}" "${f:-1}"
  done
fi

echo
[ ${#failed_suites[@]} -eq 0 ] || echo "failed suites: ${failed_suites[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
