# Debian chroots for the majors the host does not package: created with
# debootstrap on first use, cached outside the clone, reused while their
# stamp matches, and mounted only while a run uses them. Sourced by run-tests
# (after scripts/lib.sh), not run.
#
# Commands run inside through scripts/chroot-run.sh, which mounts what they
# need in a mount namespace of their own and unmounts it whatever happens.

CHROOT_CACHE=${IDEM_CHROOT_CACHE:-/var/cache/idem/chroots}
DEBIAN_MIRROR=http://deb.debian.org/debian

# The Debian suite that packages each major the host does not; "node" is
# the chroot the Node suites run in (scripts/node-chroot.sh): trixie's
# nodejs (20) and npm, whatever Node the host has (bookworm's is 18, and the
# packages need 20).
chroot_suite() {  # major|node
  case $1 in
    17) echo trixie ;;
    18) echo sid ;;
    node) echo trixie ;;
    *) return 1 ;;
  esac
}

# The chroot's directory name under CHROOT_CACHE, and what its lines say.
chroot_name() {  # major|node
  case $1 in
    node) echo trixie-node ;;
    *) chroot_suite "$1" ;;
  esac
}
chroot_label() {  # major|node
  case $1 in
    node) echo "Node" ;;
    *) echo "PostgreSQL $1" ;;
  esac
}

# The older major a chroot also holds, for pg_upgrade across majors
# (test/t/090_pg_upgrade.pl), and the Debian suite that packages it: its
# binaries run on the chroot's newer libraries, and apt takes from that
# suite only what the chroot's own suite lacks (the older PostgreSQL and the
# libraries it was built against, such as libicu72).
#
# 15 to 17 only. 17 to 18 (trixie's postgresql-17 in sid: "18) echo 17",
# and "17) echo trixie" below) installs and builds, but no cluster of
# trixie's 17.12 can be upgraded to sid's 18.6: 17.12 (a security release
# of November 2026, as are bookworm-security's 15.20 and the host's) stores
# a column option pg_attver on every column, which 18.6 (August 2026) does
# not know, so pg_upgrade fails restoring the first table ('unrecognized
# parameter "pg_attver"'), a plain one as well as idem's. Enable it once
# sid's 18 is a release of that date or later.
chroot_upgrade_from() {  # major
  case $1 in
    17) echo 15 ;;
    *) return 1 ;;
  esac
}
chroot_older_suite() {  # major
  case $(chroot_upgrade_from "$1") in
    15) echo bookworm ;;
    *) return 1 ;;
  esac
}

# What a chroot needs to build idem and run every per-major suite (bc: the
# stats suite's timing line; flex, bison, libkrb5-dev: pg_tle's build and
# pg_cron, for test/portable.sh; patch: its regress runner's reviewed
# differences; liblz4-dev, libzstd-dev, libicu-dev, libcurl4-openssl-dev:
# Citus's build, scripts/citus.sh), and the older major's server and
# headers (idem is built for it too, for the upgrade test).
chroot_packages() {  # major|node
  local from older=()
  # The Node chroot: nodejs, npm and the CA list npm's downloads need.
  [ "$1" = node ] && { echo nodejs npm ca-certificates; return; }
  from=$(chroot_upgrade_from "$1") && older=("postgresql-$from" "postgresql-server-dev-$from")
  echo make g++ "postgresql-$1" "postgresql-server-dev-$1" "postgresql-$1-pgtap" \
    libtap-parser-sourcehandler-pgtap-perl libipc-run-perl libssl-dev libdbd-pg-perl \
    python3 perl bc flex bison libkrb5-dev "postgresql-$1-cron" patch \
    liblz4-dev libzstd-dev libicu-dev libcurl4-openssl-dev "${older[@]}"
}

# What the stamp records: a change here (another package, another setup
# step) re-runs the setup and the install on the next run.
chroot_recipe() {  # suite major
  local older
  older=$(chroot_older_suite "$2") && older="; older suite $older at priority 100"
  printf 'suite: %s\nmirror: %s\nsetup: createcluster.conf create_main_cluster=false; policy-rc.d exit 101; %s%s\npackages: %s\n' \
    "$1" "$DEBIAN_MIRROR" "$([ "$1" = sid ] && echo 'Check-Valid-Until false' || echo '-')" "$older" \
    "$(chroot_packages "$2" | tr ' ' '\n' | sort | tr '\n' ' ')"
}

chroot_root() { echo "$CHROOT_CACHE/$(chroot_name "$1")"; }

# True when the chroot for a major is there with a stamp that matches.
chroot_ready() {  # major
  local root
  root=$(chroot_root "$1") || return 1
  [ -f "$root/.idem-stamp" ] && [ "$(cat "$root/.idem-stamp")" = "$(chroot_recipe "$(chroot_suite "$1")" "$1")" ]
}

# Creates the chroot for a major, or reuses it. A chroot made by hand with the
# same commands (debootstrap, the two PostgreSQL settings, the packages) is
# adopted: the install step finds every package there and only writes the stamp.
# Two runs making the same chroot would fight over its dpkg lock: the second
# waits for the first, then finds the chroot made.
ensure_chroot() {  # major|node
  local name
  name=$(chroot_name "$1") || { echo "no Debian suite known for PostgreSQL $1" >&2; return 1; }
  if chroot_ready "$1"; then
    say "$(chroot_label "$1"): chroot $CHROOT_CACHE/$name (cached)"
    return 0
  fi
  [ "$(id -u)" -eq 0 ] || { echo "creating a chroot needs root" >&2; return 1; }
  mkdir -p "$CHROOT_CACHE"
  (
    flock 9
    chroot_ready "$1" && { say "$(chroot_label "$1"): chroot $CHROOT_CACHE/$name (made by another run)"; exit 0; }
    setup_chroot "$1"
  ) 9>"$CHROOT_CACHE/.$name.lock"
}

setup_chroot() {  # major|node
  local major=$1 suite name label root stamp want started
  suite=$(chroot_suite "$major")
  name=$(chroot_name "$major")
  label=$(chroot_label "$major")
  root=$CHROOT_CACHE/$name
  stamp=$root/.idem-stamp
  want=$(chroot_recipe "$suite" "$major")
  started=$(date +%s)
  if [ ! -x "$root/usr/bin/apt-get" ]; then
    ensure_host_packages debootstrap
    # Into a scratch directory first: an interrupted debootstrap must not
    # leave a directory that looks like a chroot. In a mount namespace of its
    # own, so that the /proc and /sys it mounts inside go away with it.
    rm -rf "$root.partial"
    mkdir -p "$CHROOT_CACHE"
    say "$label: debootstrap $suite into $root (a few minutes, a line a minute; log $CHROOT_CACHE/$name.log)"
    run_with_heartbeat "debootstrap $suite" "$CHROOT_CACHE/$name.log" \
      unshare --mount --propagation private -- \
      debootstrap --variant=minbase "$suite" "$root.partial" "$DEBIAN_MIRROR" || return 1
    rm -rf "$root"
    mv "$root.partial" "$root"
    say "$label: debootstrap took $(( $(date +%s) - started ))s"
  fi
  # No cluster is made when the server package is installed, and no service
  # is started inside the chroot.
  mkdir -p "$root/etc/postgresql-common"
  echo "create_main_cluster = false" >"$root/etc/postgresql-common/createcluster.conf"
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod +x "$root/usr/sbin/policy-rc.d"
  # sid's Release file on the mirror is a snapshot whose Valid-Until passes.
  if [ "$suite" = sid ]; then
    echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99idem-snapshot"
  fi
  # The older major's suite, below the chroot's own (priority 100 < 500):
  # apt installs from it only what the chroot's suite does not have.
  local older
  if older=$(chroot_older_suite "$major"); then
    echo "deb $DEBIAN_MIRROR $older main" >"$root/etc/apt/sources.list.d/idem-$older.list"
    printf 'Package: *\nPin: release n=%s\nPin-Priority: 100\n' "$older" >"$root/etc/apt/preferences.d/idem-$older"
  fi
  local packages
  packages=$(chroot_packages "$major")
  say "$label: apt in the $name chroot ($packages; log $CHROOT_CACHE/$name-pkgs.log)"
  local t0
  t0=$(date +%s)
  run_with_heartbeat "apt in $name" "$CHROOT_CACHE/$name-pkgs.log" \
    scripts/chroot-run.sh "$root" -- sh -c "apt-get update -qq && apt-get install -y -qq --no-install-recommends $packages" ||
    return 1
  printf '%s\n' "$want" >"$stamp"
  say "$label: chroot ready (apt $(( $(date +%s) - t0 ))s; total $(( $(date +%s) - started ))s)"
}
