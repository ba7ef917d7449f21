#!/usr/bin/env bash
# One target of the test command: copies the tree into WORK/LABEL/tree and
# runs test/suites.sh there for one PostgreSQL: the host's 15 (idem in a
# private copy of the installation), a major in its Debian chroot (17, 18),
# or the assert-enabled 15 (KIND "assert"). run-tests starts it as the leader
# of its own process group, so a run cut short can end it and its children.
#
#   scripts/run-major.sh LABEL KIND PORT WORK
#
# Leaves WORK/LABEL/tally (a line per suite) and WORK/LABEL/wall.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source scripts/chroot.sh
source scripts/cassert.sh

label=$1 kind=$2 port=$3 work=$4
dir=$work/$label
started=$(date +%s)
mkdir -p "$dir"
copy_tree "$dir/tree"
st=0
case $kind in
  15)
    bash "$dir/tree/test/suites.sh" --work "$dir" --port "$port" --private-install \
      --pg-config /usr/lib/postgresql/15/bin/pg_config || st=$? ;;
  assert)
    bash "$dir/tree/test/suites.sh" --work "$dir" --port "$port" --private-install --assert \
      --pg-config "$CASSERT_PG_CONFIG" || st=$? ;;
  *)
    scripts/chroot-run.sh "$CHROOT_CACHE/$(chroot_suite "$kind")" --bind "$dir" -- \
      bash "$dir/tree/test/suites.sh" --work "$dir" --port "$port" \
      --pg-config "/usr/lib/postgresql/$kind/bin/pg_config" || st=$? ;;
esac
# Suites that ended before counting anything still count as a failure.
[ -s "$dir/tally" ] || echo "suites 0 1" >"$dir/tally"
[ $st -eq 0 ] || echo "suites.sh exited with status $st"
echo $(( $(date +%s) - started )) >"$dir/wall"
exit $st
