#!/usr/bin/env bash
# Makes one of the test command's caches: the chroot of a major (17, 18),
# the Node suites' chroot ("node": trixie's nodejs and npm), the
# assert-enabled build ("assert") or the package test's chroots
# ("packages", for the majors named after it) or Citus for one major
# ("citus MAJOR", scripts/citus.sh; in the major's chroot for 17 and 18,
# made first if it is not). run-tests starts several side by side, each the
# leader of its own process group.
#
#   scripts/make-cache.sh 17|18|node|assert|packages [MAJOR...]
#   scripts/make-cache.sh citus MAJOR
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source scripts/chroot.sh
source scripts/cassert.sh
source scripts/citus.sh

case $1 in
  assert) ensure_cassert ;;
  citus)
    citus_version "${2:-}" >/dev/null || { echo "make-cache.sh citus: no Citus release known for PostgreSQL ${2:-?}" >&2; exit 2; }
    # The chroot it builds in: run-tests may be making it side by side
    # (ensure_chroot waits for that run, then finds it made).
    [ "$2" = "$PG_MAJOR" ] || ensure_chroot "$2"
    ensure_citus "$2" ;;
  packages)
    shift
    args=()
    for m in "$@"; do args+=(--major "$m"); done
    # Its own closing line would read like the test command's: leave it out.
    test/packages.sh --caches-only "${args[@]}" | grep -v '^packages: [0-9]* passed'
    exit "${PIPESTATUS[0]}" ;;
  *) ensure_chroot "$1" ;;
esac
