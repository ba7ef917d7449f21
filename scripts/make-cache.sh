#!/usr/bin/env bash
# Makes one of the test command's caches: the chroot of a major (17, 18) or
# the assert-enabled build ("assert"). run-tests starts several side by side,
# each the leader of its own process group.
#
#   scripts/make-cache.sh 17|18|assert
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source scripts/chroot.sh
source scripts/cassert.sh

case $1 in
  assert) ensure_cassert ;;
  *) ensure_chroot "$1" ;;
esac
