#!/usr/bin/env bash
# One target of the test command: copies the tree into WORK/LABEL/tree and
# runs there the pure C++ suites (KIND "host": unit tests, the layering
# check of src/ and the fuzzer, once per run) or test/suites.sh for one
# PostgreSQL: the host's 15 (idem in a private copy of the installation), a
# major in its Debian chroot (17, 18), or the assert-enabled 15 (KIND "assert"). run-tests starts it as the leader
# of its own process group, so a run cut short can end it and its children.
#
#   scripts/run-major.sh LABEL KIND PORT WORK     (KIND: host 15 17 18 assert)
#   scripts/run-major.sh packages packages MAJORS WORK   (MAJORS: 15,17,18)
#
# Leaves WORK/LABEL/tally (a line per suite) and WORK/LABEL/wall.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source scripts/chroot.sh
source scripts/cassert.sh
source scripts/citus.sh

label=$1 kind=$2 port=$3 work=$4
dir=$work/$label
started=$(date +%s)
mkdir -p "$dir"
[ "$kind" = packages ] || copy_tree "$dir/tree"
wanted() { [ -z "${IDEM_ONLY:-}" ] || [[ " $IDEM_ONLY " == *" $1 "* ]]; }

# Reads a "<suite>: N passed, N failed" closing line into the tally.
tally_line() {  # suite log status started-at
  local p f
  read -r p f < <(closing_counts "$2" "$1" "$3")
  if [ "$f" -gt 0 ]; then echo "  $1 failed; tail of $2:"; tail -n 30 "$2" | sed 's/^/    /'; fi
  printf '  %-12s %d passed, %d failed (%ds)\n' "$1" "$p" "$f" $((SECONDS - $4))
  echo "$1 $p $f $((SECONDS - $4))" >>"$dir/tally"
}

# The pure C++ suites: as the cluster's user, from the copy it owns.
run_host_suites() {
  local st t
  : >"$dir/tally"
  [ "$(id -u)" -eq 0 ] && chown -R postgres "$dir"
  if wanted unit; then
    say "unit tests (C++, plain and ASan/UBSan)"
    st=0 t=$SECONDS
    (cd "$dir/tree" && as_cluster_user bash test/unit/run.sh "$dir/unit") >"$dir/unit.log" 2>&1 || st=$?
    tally_line unit "$dir/unit.log" $st $t
  fi
  if wanted includes; then
    say "includes (the layering of src/: no include climbs)"
    st=0 t=$SECONDS
    (cd "$dir/tree" && as_cluster_user bash test/includes.sh "$dir/includes") >"$dir/includes.log" 2>&1 || st=$?
    tally_line includes "$dir/includes.log" $st $t
  fi
  if wanted fuzz || wanted extra; then
    say "fuzz (libFuzzer on the JSON canonicalizer)"
    st=0 t=$SECONDS
    (cd "$dir/tree" && IDEM_WORK=$dir as_cluster_user bash test/extra.d/fuzz.sh) >"$dir/fuzz.log" 2>&1 || st=$?
    tally_line fuzz "$dir/fuzz.log" $st $t
  fi
}

# The package test, from the clone itself (it builds the 1.0 package from
# the released commit, so it needs the git history), as root.
run_package_test() {
  local st=0 t=$SECONDS args=() m
  : >"$dir/tally"
  for m in ${port//,/ }; do args+=(--major "$m"); done
  say "package test (Debian packages of ${port//,/, }; PGXN)"
  test/packages.sh "${args[@]}" 2>&1 | tee "$dir/packages.log"
  st=${PIPESTATUS[0]}
  tally_line packages "$dir/packages.log" $st $t
}

# pg_tle's source (the portable engine's pg_tle install, test/portable.sh):
# the setting PG_TLE_SRC (scripts/lib.sh pg_tle_source, docs/testing.md). It
# is copied into the target's directory, where the build may write (the
# source may be read-only) and which a chroot has mounted.
pg_tle=()
if [ "$kind" != host ] && [ "$kind" != packages ] && [ "$kind" != assert ] &&
  { wanted portable || [[ " ${IDEM_ONLY:-} " == *" portable-"* ]]; }; then
  if src=$(pg_tle_source); then
    rm -rf "$dir/pg_tle"
    cp -a "$src" "$dir/pg_tle"
    chmod -R u+w "$dir/pg_tle"
    pg_tle=(--pg-tle "$dir/pg_tle")
  fi  # else test/portable.sh says "pg_tle: SKIP" and names PG_TLE_SRC
fi

# Citus (test/citus.sh): the staged tree of this major's cache (for a
# chroot, a copy in the target's directory, which it has mounted: a path
# shared by runs must not be a mount point of one), or why the suites skip.
# Its clusters take 16 ports a major from IDEM_CITUS_PORT_BASE (default: the
# test command's first port + 1600), in the order of the majors' own ports,
# so majors running side by side never share one.
citus=()
if [ "$kind" != host ] && [ "$kind" != packages ] && [ "$kind" != assert ] && wanted citus; then
  if ! citus_major_wanted "$kind"; then
    citus=(--citus-skip "not on PostgreSQL $kind unless IDEM_CITUS_MAJORS names it; it is '$(citus_majors)'")
  elif ! citus_source "$kind" >/dev/null; then
    citus=(--citus-skip "no Citus source for PostgreSQL $kind: ../shared/third_party/citus-$(citus_version "$kind" || echo '?') is not there")
  else
    run_port=${IDEM_TEST_PORT:-55432}
    staged=$(citus_tree "$kind")
    if [ "$kind" != "$PG_MAJOR" ] && [ -d "$staged" ]; then
      rm -rf "$dir/citus"
      cp -a "$staged" "$dir/citus"
      staged=$dir/citus
    fi
    citus=(--citus "$staged" --citus-port $(( ${IDEM_CITUS_PORT_BASE:-$((run_port + 1600))} + 16 * (port - run_port) )))
  fi
fi

st=0
case $kind in
  host)
    run_host_suites ;;
  packages)
    run_package_test ;;
  15)
    bash "$dir/tree/test/suites.sh" --work "$dir" --port "$port" --private-install "${pg_tle[@]}" "${citus[@]}" \
      --pg-config /usr/lib/postgresql/15/bin/pg_config || st=$? ;;
  assert)
    bash "$dir/tree/test/suites.sh" --work "$dir" --port "$port" --private-install --assert \
      --pg-config "$CASSERT_PG_CONFIG" || st=$? ;;
  *)
    scripts/chroot-run.sh "$CHROOT_CACHE/$(chroot_suite "$kind")" --bind "$dir" -- \
      bash "$dir/tree/test/suites.sh" --work "$dir" --port "$port" "${pg_tle[@]}" "${citus[@]}" \
      --pg-config "/usr/lib/postgresql/$kind/bin/pg_config" || st=$? ;;
esac
# Suites that ended before counting anything still count as a failure (the
# host's may count nothing when IDEM_ONLY names none of them).
[ -s "$dir/tally" ] || [ "$kind" = host ] || echo "suites 0 1" >"$dir/tally"
[ $st -eq 0 ] || echo "suites.sh exited with status $st"
echo $(( $(date +%s) - started )) >"$dir/wall"
exit $st
