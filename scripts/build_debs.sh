#!/usr/bin/env bash
# Builds idem's binary packages for one Debian suite, inside that suite's
# build chroot (scripts/pkg_chroot.sh), the way Debian builds them:
#
#   pg_buildext updatecontrol             debian/control for the suite's majors
#   apt-get build-dep                     the Build-Depends, as root
#   dpkg-buildpackage -us -uc -b          as an unprivileged user, nocheck
#   lintian                               on the .changes
#
#   scripts/build_debs.sh SUITE SOURCE_DIR OUT_DIR      (as root)
#
# SOURCE_DIR is an unpacked source tree with its debian/ directory; it is
# copied, never written. OUT_DIR receives the .deb, .buildinfo and .changes
# files, build.log, warnings.txt and lintian.txt. Exits 1 when the build
# fails, 3 when it built but printed a "warning:" line (the compilers' or
# dpkg's) or lintian found an error; lintian's warnings are listed for the
# caller to judge.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/pkg_chroot.sh"
[ "$(id -u)" -eq 0 ] || { echo "build_debs.sh: run as root (it uses a chroot)" >&2; exit 1; }
pkg_private_mounts "$0" "$@"
trap pkg_unmount_all EXIT

suite=$1 src=$(cd "$2" && pwd) out=$3
[ -f "$src/debian/control.in" ] || { echo "build_debs.sh: $src has no debian/control.in" >&2; exit 1; }
pkg_ensure_build_chroot "$suite"
root=$PKG_CACHE/build-$suite
work=/home/builder/build.$$
rm -rf "${root:?}$work"
mkdir -p "$root$work/idem" "$out"
cp -a "$src/." "$root$work/idem/"
pkg_mount "$root" "$suite"
pkg_in "$root" chown -R builder: "$work"

as_builder() { pkg_in "$root" runuser -u builder -- env HOME=/home/builder "$@"; }
log=$out/build.log
t0=$(date +%s)
{
  as_builder sh -c "cd $work/idem && pg_buildext updatecontrol" &&
    pkg_apt "$root" update &&
    pkg_apt "$root" build-dep "$work/idem" &&
    as_builder sh -c "cd $work/idem && DEB_BUILD_OPTIONS=nocheck nice -n 10 dpkg-buildpackage -us -uc -b -j2"
} >"$log" 2>&1 || { tail -60 "$log"; echo "build failed (log $log)" >&2; exit 1; }
build_s=$(($(date +%s) - t0))

cp "$root$work"/*.deb "$root$work"/*.buildinfo "$root$work"/*.changes "$out/"
t1=$(date +%s)
as_builder sh -c "cd $work && lintian --info --pedantic --display-experimental --tag-display-limit 0 *.changes" >"$out/lintian.txt" 2>&1 || true
lintian_s=$(($(date +%s) - t1))
rm -rf "${root:?}$work"

status=0
if grep -n 'warning:' "$log" >"$out/warnings.txt"; then
  echo "the build printed warnings:" >&2
  cat "$out/warnings.txt" >&2
  status=3
fi
if grep -q '^E: ' "$out/lintian.txt"; then
  echo "lintian found errors:" >&2
  grep '^E: ' "$out/lintian.txt" >&2
  status=3
fi
printf 'built %s in %s s (lintian %s s): %s\n' "$suite" "$build_s" "$lintian_s" \
  "$(cd "$out" && ls -- *.deb | tr '\n' ' ')"
exit $status
