# Debian chroots for building and installing idem's packages, cached under
# /var/cache/idem/pkg (not the test suites' chroots under
# /var/cache/idem/chroots, which this never touches). Sourced by
# scripts/build_debs.sh, test/packages.sh and test/pgxn.sh, not run.
#
#   minbase-SUITE.tar   a pristine `debootstrap --variant=minbase` of the suite,
#                       with apt's lists and the two PostgreSQL settings below;
#                       unpacked afresh for every install test
#   build-SUITE/        that tarball plus the build tools, reused by every build
#   apt-SUITE/          the .deb files apt downloaded, shared by the suite's
#                       chroots so that a fresh chroot does not fetch them again
#
# Each cached item has a stamp holding the recipe it was made from; a changed
# recipe remakes it. The callers run in a mount namespace of their own
# (pkg_private_mounts), so every mount made here disappears with them even if
# they are killed; pkg_unmount_all (their EXIT trap) also unmounts at once.

PKG_CACHE=${IDEM_PKG_CACHE:-/var/cache/idem/pkg}
PKG_MIRROR=http://deb.debian.org/debian
PKG_MOUNTS=()

# The Debian suite that packages each supported major.
pkg_suite() {  # major
  case $1 in
    15) echo bookworm ;;
    17) echo trixie ;;
    18) echo sid ;;
    *) echo "no Debian suite known for PostgreSQL $1" >&2; return 1 ;;
  esac
}

pkg_say() { printf '==> %s\n' "$*"; }

# Re-executes the calling script in a private mount namespace (once).
pkg_private_mounts() {  # "$0" "$@"
  if [ -z "${IDEM_PKG_NAMESPACE:-}" ]; then
    IDEM_PKG_NAMESPACE=1 exec unshare --mount --propagation private -- bash "$@"
  fi
}

# Runs a long command with its output in a log; prints the log's tail if it fails.
pkg_logged() {  # log command...
  local log=$1
  shift
  if ! "$@" >"$log" 2>&1; then
    echo "failed: $* (log $log):" >&2
    tail -40 "$log" >&2
    return 1
  fi
}

# What PostgreSQL and apt need inside a chroot: /proc, a private /dev/shm
# (dynamic shared memory), a private /dev/pts, and the suite's apt cache.
pkg_mount() {  # root suite
  local root=$1 suite=$2
  mountpoint -q "$root/proc" || { mount -t proc proc "$root/proc" && PKG_MOUNTS+=("$root/proc"); }
  mkdir -p "$root/dev/shm" "$root/dev/pts" "$PKG_CACHE/apt-$suite/partial" "$root/var/cache/apt/archives"
  mountpoint -q "$root/dev/shm" ||
    { mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/dev/shm" && PKG_MOUNTS+=("$root/dev/shm"); }
  mountpoint -q "$root/dev/pts" ||
    { mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$root/dev/pts" && PKG_MOUNTS+=("$root/dev/pts"); }
  mountpoint -q "$root/var/cache/apt/archives" ||
    { mount --bind "$PKG_CACHE/apt-$suite" "$root/var/cache/apt/archives" && PKG_MOUNTS+=("$root/var/cache/apt/archives"); }
}

# Unmounts (lazily, newest first) every mount under root, or every one made.
pkg_unmount_all() {  # [root]
  local i kept=()
  for ((i = ${#PKG_MOUNTS[@]} - 1; i >= 0; i--)); do
    if [ -z "${1:-}" ] || [[ ${PKG_MOUNTS[$i]} == "$1"/* ]]; then
      umount -l "${PKG_MOUNTS[$i]}" 2>/dev/null || true
    else
      kept=("${PKG_MOUNTS[$i]}" "${kept[@]}")
    fi
  done
  PKG_MOUNTS=("${kept[@]}")
}

# Runs a command as root inside a chroot with a clean environment.
pkg_in() {  # root command...
  local root=$1
  shift
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb DEBIAN_FRONTEND=noninteractive \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
}

pkg_apt() {  # root apt-get arguments...
  local root=$1
  shift
  pkg_in "$root" apt-get -y -q -o Dpkg::Use-Pty=0 --no-install-recommends "$@"
}

# The recipe a stamp records; $2 is the extra part of the caller.
pkg_recipe() {  # suite what
  printf 'suite: %s\nmirror: %s\nsetup: createcluster.conf create_main_cluster=false; policy-rc.d exit 101; sid Check-Valid-Until false\n%s\n' \
    "$1" "$PKG_MIRROR" "$2"
}

pkg_stamp_ok() {  # stamp recipe
  [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]
}

# The pristine chroot of a suite, as a tarball: minbase, apt's lists, no
# cluster when a PostgreSQL server is installed, no service started.
pkg_ensure_minbase() {  # suite
  local suite=$1 tarball=$PKG_CACHE/minbase-$1.tar want t0 dir
  want=$(pkg_recipe "$suite" 'minbase: debootstrap --variant=minbase; apt-get update')
  if pkg_stamp_ok "$tarball.stamp" "$want" && [ -f "$tarball" ]; then return 0; fi
  t0=$(date +%s)
  if ! command -v debootstrap >/dev/null; then
    pkg_say "apt-get install debootstrap (on the host)"
    apt-get install -y -qq debootstrap >/dev/null || return 1
  fi
  mkdir -p "$PKG_CACHE"
  dir=$PKG_CACHE/minbase-$suite.partial
  rm -rf "$dir"
  pkg_say "debootstrap --variant=minbase $suite (about two minutes; log $PKG_CACHE/minbase-$suite.log)"
  pkg_logged "$PKG_CACHE/minbase-$suite.log" \
    nice debootstrap --variant=minbase "$suite" "$dir" "$PKG_MIRROR" || return 1
  mkdir -p "$dir/etc/postgresql-common"
  echo "create_main_cluster = false" >"$dir/etc/postgresql-common/createcluster.conf"
  printf '#!/bin/sh\n# No service starts inside this chroot.\nexit 101\n' >"$dir/usr/sbin/policy-rc.d"
  chmod 755 "$dir/usr/sbin/policy-rc.d"
  # sid's Release file on the mirror is a snapshot whose Valid-Until has passed.
  [ "$suite" = sid ] && echo 'Acquire::Check-Valid-Until "false";' >"$dir/etc/apt/apt.conf.d/99idem-snapshot"
  pkg_mount "$dir" "$suite"
  pkg_logged "$PKG_CACHE/minbase-$suite.log" pkg_apt "$dir" update || { pkg_unmount_all "$dir"; return 1; }
  pkg_in "$dir" apt-get clean
  pkg_unmount_all "$dir"
  tar -C "$dir" -cf "$tarball.partial" . && mv "$tarball.partial" "$tarball" || return 1
  rm -rf "$dir"
  printf '%s\n' "$want" >"$tarball.stamp"
  pkg_say "minbase $suite ready in $(($(date +%s) - t0)) s ($(du -m "$tarball" | cut -f1) MB)"
}

# A fresh chroot from the pristine tarball, in a new directory. dpkg there
# skips its fsync calls (force-unsafe-io, as pbuilder and sbuild do): the
# chroot is thrown away, and the syncs cost more than half of an install.
pkg_fresh_chroot() {  # suite dir
  pkg_ensure_minbase "$1" || return 1
  mkdir -p "$2" && tar -C "$2" -xf "$PKG_CACHE/minbase-$1.tar" &&
    echo force-unsafe-io >"$2/etc/dpkg/dpkg.cfg.d/idem-unsafe-io"
}

# What every build needs before it can read debian/control (pg_buildext, the
# pgxs debhelper addon, the supported majors), lintian, and a user to build as.
PKG_BUILD_TOOLS="build-essential fakeroot debhelper postgresql-server-dev-all lintian"

# The build chroot of a suite: the pristine tarball plus the build tools.
# Each build then installs its own Build-Depends (apt-get build-dep), so a
# missing one fails the build instead of being hidden by this chroot.
pkg_ensure_build_chroot() {  # suite
  local suite=$1 root=$PKG_CACHE/build-$1 want t0
  want=$(pkg_recipe "$suite" "build tools: $PKG_BUILD_TOOLS; user builder")
  if pkg_stamp_ok "$root/.idem-stamp" "$want"; then return 0; fi
  t0=$(date +%s)
  rm -rf "$root"
  pkg_fresh_chroot "$suite" "$root" || return 1
  pkg_say "build chroot $suite: apt install $PKG_BUILD_TOOLS (log $PKG_CACHE/build-$suite.log)"
  pkg_mount "$root" "$suite"
  { pkg_logged "$PKG_CACHE/build-$suite.log" pkg_apt "$root" install $PKG_BUILD_TOOLS &&
    pkg_in "$root" useradd --create-home builder; } || { pkg_unmount_all "$root"; return 1; }
  pkg_unmount_all "$root"
  printf '%s\n' "$want" >"$root/.idem-stamp"
  pkg_say "build chroot $suite ready in $(($(date +%s) - t0)) s"
}
