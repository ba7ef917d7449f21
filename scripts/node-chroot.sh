#!/usr/bin/env bash
# Runs a Node command (node, npm, npx) with trixie's Debian nodejs (20) and
# npm, from the chroot the test command makes (scripts/chroot.sh, "node"),
# whatever Node the host has: a fresh bookworm's is 18, and the packages
# need 20. The suites run as the cluster's user, not root, so this needs no
# root: an unprivileged user namespace (the user is root inside, and the
# files it writes are the user's outside) with a mount namespace and a PID
# namespace of its own. The network is the host's: the servers a suite
# starts on 127.0.0.1 are reachable, and so is the npm registry.
#
#   scripts/node-chroot.sh [--bind DIR]... -- COMMAND...
#   scripts/node-chroot.sh --describe    prints "node: v20.x (trixie's nodejs in ROOT)"
#
# The command runs in the current directory, with the caller's environment
# (PATH and HOME excepted: the chroot's PATH, HOME in the run's TMPDIR).
# Bound at the same paths: IDEM_WORK (the suites' work directory, which
# holds the tree, TMPDIR and the suites' files), each --bind DIR, the
# host's /etc/resolv.conf, /etc/hosts and /etc/ssl/certs (the host's CA
# list: an egress proxy's CA among them). npm reads the host's npm
# configuration (the global npmrc and the user's ~/.npmrc, copied into
# HOME/.npmrc) and the npm_config_* and *_proxy variables of the
# environment. When this ends (or is killed), every process it started ends
# with the PID namespace. IDEM_NODE_ROOT names another chroot.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -z "${IDEM_NODE_IN_NAMESPACE:-}" ]; then
  # unshare --fork blocks SIGTERM and SIGINT while it waits for the
  # namespace's first process, so a caller's kill or timeout would not end
  # it: this shell stays in front and answers them with SIGKILL to unshare,
  # whose --kill-child then ends the namespace's first process, and the PID
  # namespace every other one.
  IDEM_NODE_IN_NAMESPACE=1 unshare --user --map-root-user --mount --propagation private \
    --pid --fork --kill-child -- bash "$here/node-chroot.sh" "$@" <&0 &
  pid=$!
  for sig in TERM INT HUP; do
    # shellcheck disable=SC2064
    trap "kill -KILL $pid 2>/dev/null; wait $pid 2>/dev/null || true; trap - $sig; kill -$sig \$\$" "$sig"
  done
  st=0
  wait "$pid" || st=$?
  exit $st
fi
unset IDEM_NODE_IN_NAMESPACE

source "$here/lib.sh"
source "$here/chroot.sh"
root=${IDEM_NODE_ROOT:-$(chroot_root node)}
[ -x "$root/usr/bin/node" ] || { echo "node-chroot: no node in $root (run-tests makes it: scripts/make-cache.sh node)" >&2; exit 1; }

binds=()
[ -n "${IDEM_WORK:-}" ] && binds+=("$IDEM_WORK")
while [ "${1:-}" = --bind ]; do binds+=("$2"); shift 2; done
[ "${1:-}" = -- ] && shift
[ $# -gt 0 ] || { echo "usage: scripts/node-chroot.sh [--bind DIR]... -- COMMAND..." >&2; exit 2; }

# Mounts in this namespace only; they go away with it. The chroot's /tmp is
# a fresh tmpfs, where the bound directories' mount points are made (root
# inside the namespace may not write the cached chroot's own directories,
# which belong to the real root), so they must lie under /tmp, as the test
# command's work directory does.
mount -t proc proc "$root/proc"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/dev/shm"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/tmp"
for f in /etc/resolv.conf /etc/hosts; do
  [ -f "$f" ] && [ -f "$root$f" ] && mount --bind "$f" "$root$f"
done
[ -d /etc/ssl/certs ] && [ -d "$root/etc/ssl/certs" ] && mount --rbind /etc/ssl/certs "$root/etc/ssl/certs"
for dir in "${binds[@]}"; do
  case $dir in
    /tmp/*) ;;
    *) echo "node-chroot: $dir is not under /tmp" >&2; exit 2 ;;
  esac
  mkdir -p "$root$dir"
  mount --rbind "$dir" "$root$dir"
done

# HOME: npm's logs and its user configuration, in the chroot's /tmp.
home=/tmp/node-chroot-home
mkdir -p "$root$home"
: >"$root$home/.npmrc"
for f in /usr/etc/npmrc /etc/npmrc /usr/local/etc/npmrc "${HOME:-/nonexistent}/.npmrc"; do
  [ -r "$f" ] && cat "$f" >>"$root$home/.npmrc"
done

if [ "$1" = --describe ]; then
  echo "node: $(chroot "$root" /usr/bin/node --version) (trixie's nodejs in $root)"
  exit
fi
chroot "$root" /usr/bin/env PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" \
  sh -c 'cd "$1" && shift && exec "$@"' _ "$PWD" "$@"
