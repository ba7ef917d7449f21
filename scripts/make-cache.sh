#!/usr/bin/env bash
# Makes one of the test command's caches: the chroot of a major (17, 18),
# the Node suites' chroot ("node": trixie's nodejs and npm), the
# assert-enabled build ("assert") or the package test's chroots
# ("packages", for the majors named after it). run-tests starts several side
# by side, each the leader of its own process group.
#
#   scripts/make-cache.sh 17|18|node|assert|packages [MAJOR...]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source scripts/chroot.sh
source scripts/cassert.sh

case $1 in
  assert) ensure_cassert ;;
  packages)
    shift
    args=()
    for m in "$@"; do args+=(--major "$m"); done
    # Its own closing line would read like the test command's: leave it out.
    test/packages.sh --caches-only "${args[@]}" | grep -v '^packages: [0-9]* passed'
    exit "${PIPESTATUS[0]}" ;;
  *) ensure_chroot "$1" ;;
esac
