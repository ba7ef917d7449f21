#!/usr/bin/env bash
# The package test (as root): for each supported major, builds idem's Debian
# package in a chroot of the suite that packages that major, installs it with
# apt into a fresh chroot of that suite, uses it (a cluster with idem
# preloaded, CREATE EXTENSION, a claim, a replay, the worker's sweep),
# removes and purges it, upgrades from the 1.0 package to it with ALTER
# EXTENSION idem UPDATE, removes it again; then installs the PGXN release
# zip with pgxnclient on a fresh bookworm. Prints each step's time, the
# package sizes and lintian's findings, and ends "packages: N passed, N failed".
#
#   test/packages.sh [--major N]... [--no-pgxn] [--caches-only]
#
# --caches-only makes the cached chroots that are missing (what a first run
# spends most of its time on) and stops: a caller may run it beside other
# slow setup work.
#
# The 1.0 package is built from the released commit (RELEASED_1_0) with this
# tree's debian/ directory (version 1.0.0-1); the 1.1 package from the working
# tree (tracked and untracked files git does not ignore). Chroots, builds and
# apt downloads are cached under /var/cache/idem/pkg (scripts/pkg_chroot.sh),
# a build by the hash of its source and chroot: a second run of the same tree
# builds nothing. KEEP_WORK=1 keeps the work directory; it is kept on failure.
set -uo pipefail
TREE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$TREE/scripts/pkg_chroot.sh"
[ "$(id -u)" -eq 0 ] || { echo "test/packages.sh: run as root (chroots, apt)"; echo "packages: 0 passed, 1 failed"; exit 1; }
pkg_private_mounts "$TREE/test/packages.sh" "$@"

RELEASED_1_0=49c4c27          # the 1.0 release: the last commit before 1.1's work
RELEASED_1_0_MAJORS=" 15 "    # the majors 1.0 was released for
BASE_PORT=${IDEM_PKG_PORT:-55560}
majors=()
pgxn=1
caches_only=0
while [ $# -gt 0 ]; do
  case $1 in
    --major) pkg_suite "${2:-}" >/dev/null || exit 2; majors+=("$2"); shift 2 ;;
    --no-pgxn) pgxn=0; shift ;;
    --caches-only) caches_only=1; shift ;;
    *) sed -n 's/^#   //p' "$0" >&2; exit 2 ;;
  esac
done
[ ${#majors[@]} -gt 0 ] || majors=(15 17 18)

WORK=$(mktemp -d /tmp/idem-packages.XXXXXX)
passed=0
failed=0
timings=()
sizes=()
CHROOTS=()

# Servers still running in a chroot (a run cut short) are stopped before
# their chroot is unmounted and deleted.
stop_chroot_servers() {  # root
  local pidfile pid i
  for pidfile in "$1"/var/lib/postgresql/*/*/postmaster.pid; do
    [ -f "$pidfile" ] || continue
    pid=$(head -1 "$pidfile")
    kill -TERM "$pid" 2>/dev/null || continue
    for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
  done
}
kill_tree() {  # pid: the process and its descendants, children first
  local child
  for child in $(pgrep -P "$1"); do kill_tree "$child"; done
  kill -TERM "$1" 2>/dev/null
}
BUILDER=
cleanup() {
  local root
  [ -z "$BUILDER" ] || kill_tree "$BUILDER"
  for root in "${CHROOTS[@]}"; do stop_chroot_servers "$root"; done
  pkg_unmount_all
  if [ "${KEEP_WORK:-0}" = 1 ] || [ "$failed" -ne 0 ]; then
    echo "work directory kept: $WORK"
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ok() { passed=$((passed + 1)); printf '    ok     %s\n' "$1"; }
bad() {
  failed=$((failed + 1))
  printf '    FAILED %s\n' "$1"
  [ -z "${2:-}" ] || printf '%s\n' "$2" | head -40 | sed 's/^/           /'
}
check() {  # name command...: passes when the command succeeds
  local name=$1 out
  shift
  if out=$("$@" 2>&1); then ok "$name"; else bad "$name" "$out"; fi
}
check_eq() {  # name expected actual
  if [ "$2" = "$3" ]; then ok "$1"; else bad "$1" "$(printf 'expected: %s\nactual:   %s' "$2" "$3")"; fi
}
now_ms() { date +%s%3N; }
# Runs a step with its output in a log, records its time, and counts it.
timed() {  # label log command...
  local label=$1 log=$2 t0 st
  shift 2
  t0=$(now_ms)
  "$@" >"$log" 2>&1
  st=$?
  local ms=$(($(now_ms) - t0))
  timings+=("$(printf '%-52s %6.1f s' "$label" "$(echo "$ms" | awk '{print $1 / 1000}')")")
  if [ $st -eq 0 ]; then ok "$label ($(awk "BEGIN {printf \"%.1f\", $ms / 1000}") s)"; else bad "$label" "$(tail -25 "$log")"; fi
  return $st
}

# The sources of the two packages.
upstream_of() { sed -n '1s/^[^(]*(\([^-)]*\)-[^)]*).*/\1/p' "$1/debian/changelog"; }
prepare_sources() {
  mkdir -p "$WORK/src-1.1/idem" "$WORK/src-1.0/idem"
  (cd "$TREE" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -C "$WORK/src-1.1/idem" -xf - ||
    return 1
  if ! git -C "$TREE" cat-file -e "$RELEASED_1_0^{commit}" 2>/dev/null; then
    echo "the released 1.0 ($RELEASED_1_0) is not in this clone: run from a full clone (git fetch --unshallow)"
    return 1
  fi
  git -C "$TREE" archive "$RELEASED_1_0" | tar -C "$WORK/src-1.0/idem" -xf - || return 1
  # The same debian/ directory, its changelog ending at the 1.0.0-1 entry.
  cp -a "$TREE/debian" "$WORK/src-1.0/idem/"
  sed -i -n '/^idem (1\.0\.0-1)/,$p' "$WORK/src-1.0/idem/debian/changelog"
  [ "$(upstream_of "$WORK/src-1.0/idem")" = 1.0.0 ] || { echo "debian/changelog has no 1.0.0-1 entry"; return 1; }
}

# Builds one source for one suite, or reuses the build of the same source in
# the same build chroot. Sets BUILT to the directory of its results.
build_cached() {  # suite source-dir label
  local suite=$1 src=$2 label=$3 key
  pkg_ensure_build_chroot "$suite" >"$WORK/chroot-$suite.log" 2>&1 || { cat "$WORK/chroot-$suite.log"; return 1; }
  key=$({ tar -C "$src" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - . ;
          cat "$PKG_CACHE/build-$suite/.idem-stamp" "$TREE/scripts/build_debs.sh"; } | sha256sum | cut -c1-16)
  BUILT=$PKG_CACHE/debs/$suite-$label-$key
  if [ -f "$BUILT/status" ]; then
    echo "(cached build $BUILT)"
    return "$(cat "$BUILT/status")"
  fi
  rm -rf "$BUILT.partial"
  local st=0 t0
  t0=$(now_ms)
  nice bash "$TREE/scripts/build_debs.sh" "$suite" "$src" "$BUILT.partial" || st=$?
  echo "$st" >"$BUILT.partial/status"
  awk "BEGIN {printf \"%.1f\", ($(now_ms) - $t0) / 1000}" >"$BUILT.partial/seconds"
  rm -rf "$BUILT" && mv "$BUILT.partial" "$BUILT"
  # Older builds of the same suite and label are superseded.
  find "$PKG_CACHE/debs" -maxdepth 1 -name "$suite-$label-*" ! -path "$BUILT" -mtime +7 -exec rm -rf {} + 2>/dev/null
  return $st
}

source "$TREE/test/packages/install.sh"
source "$TREE/test/packages/pgxn.sh"

echo "==> package test: majors ${majors[*]}$([ $pgxn = 1 ] && echo ', PGXN'); work directory $WORK"
started=$(date +%s)
if ! timed "sources: working tree and 1.0 ($RELEASED_1_0)" "$WORK/sources.log" prepare_sources; then
  echo "packages: $passed passed, $failed failed"
  exit 1
fi
V11=$(upstream_of "$WORK/src-1.1/idem")

# The cached chroots that are missing or stale are made first, one suite per
# background job: debootstrap and apt wait on the mirror and the disk, so the
# three take little longer than one. The PGXN machine grows from bookworm's
# minbase, after bookworm's build chroot has made it.
prepare_caches() {
  local major suite jobs=() st=0
  for major in "${majors[@]}"; do
    suite=$(pkg_suite "$major")
    if [ "$suite" = bookworm ] && [ $pgxn = 1 ]; then
      (pkg_ensure_build_chroot bookworm && pkg_ensure_pgxn_machine) >"$WORK/cache-$suite.log" 2>&1 &
    else
      pkg_ensure_build_chroot "$suite" >"$WORK/cache-$suite.log" 2>&1 &
    fi
    jobs+=($!)
  done
  if [ $pgxn = 1 ] && [[ " ${majors[*]} " != *" 15 "* ]]; then
    (pkg_ensure_minbase bookworm && pkg_ensure_pgxn_machine) >"$WORK/cache-pgxn.log" 2>&1 &
    jobs+=($!)
  fi
  for job in "${jobs[@]}"; do wait "$job" || st=1; done
  cat "$WORK"/cache-*.log
  return $st
}
timed "chroots cached under $PKG_CACHE (made if missing)" "$WORK/caches.log" prepare_caches ||
  { echo "packages: $passed passed, $failed failed"; exit 1; }
[ $caches_only = 0 ] || { echo "packages: $passed passed, $failed failed"; exit 0; }
# The builds run one after another in the background, ahead of the install
# tests (which wait on dpkg and the servers more than on the CPU); a major's
# install test starts when its builds are done. No two chroots of one suite
# use apt at once: a suite's build is done before its install test starts.
build_all() {
  local major suite
  for major in "${majors[@]}"; do
    suite=$(pkg_suite "$major")
    build_cached "$suite" "$WORK/src-1.1/idem" 1.1 >"$WORK/build-$major-1.1.log" 2>&1
    build_cached "$suite" "$WORK/src-1.0/idem" 1.0 >"$WORK/build-$major-1.0.log" 2>&1
    touch "$WORK/built-$major"
  done
}
build_all &
BUILDER=$!
wait_for_builds() {  # major
  while [ ! -e "$WORK/built-$1" ] && kill -0 "$BUILDER" 2>/dev/null; do sleep 1; done
}

port=$BASE_PORT
for major in "${majors[@]}"; do
  test_major "$major" "$port"
  port=$((port + 1))
done
wait "$BUILDER"
BUILDER=
[ $pgxn = 0 ] || test_pgxn "$port"

echo
echo "==> times"
printf '    %s\n' "${timings[@]}"
echo "==> package sizes"
printf '    %s\n' "${sizes[@]}"
echo "==> total $(($(date +%s) - started)) s"
echo "packages: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
