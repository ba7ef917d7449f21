#!/usr/bin/env bash
# Runs a command as root inside a Debian chroot, with what PostgreSQL and apt
# need mounted: /proc, a private /dev/shm (dynamic shared memory), a private
# /dev/pts, and any host directories given with --bind (at the same path, so
# the paths a run prints are the host's). debootstrap made the device nodes.
#
#   scripts/chroot-run.sh ROOT [--bind DIR]... -- COMMAND...
#
# The mounts are made in a mount namespace of this command's own (unshare):
# they are invisible to the host and to other runs using the same chroot, and
# they go away with the namespace even if this is killed with SIGKILL. The
# trap also unmounts them (lazily, newest first) on EXIT, INT and TERM, so a
# server left running in the chroot does not keep them alive.
set -euo pipefail
if [ -z "${IDEM_IN_MOUNT_NAMESPACE:-}" ]; then
  IDEM_IN_MOUNT_NAMESPACE=1 exec unshare --mount --propagation private -- bash "$0" "$@"
fi

root=$1
shift
binds=()
while [ "$1" = --bind ]; do binds+=("$2"); shift 2; done
[ "$1" = -- ] && shift

mounts=()
made=()  # directories made for bind mounts, removed again (deepest first)
unmount_all() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[$i]}" 2>/dev/null || true; done
  for ((i = ${#made[@]} - 1; i >= 0; i--)); do rmdir "${made[$i]}" 2>/dev/null || true; done
  mounts=() made=()
}
trap unmount_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mount -t proc proc "$root/proc" && mounts+=("$root/proc")
mkdir -p "$root/dev/shm" "$root/dev/pts"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/dev/shm" && mounts+=("$root/dev/shm")
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$root/dev/pts" && mounts+=("$root/dev/pts")
for node in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0; do
  IFS=: read -r name maj min <<<"$node"
  [ -e "$root/dev/$name" ] || mknod -m 666 "$root/dev/$name" c "$maj" "$min"
done
for dir in "${binds[@]}"; do
  d=$root
  for part in $(echo "${dir#/}" | tr '/' ' '); do
    d=$d/$part
    [ -d "$d" ] || { mkdir "$d" && made+=("$d"); }
  done
  mount --bind "$dir" "$root$dir" && mounts+=("$root$dir")
done

# A clean environment, but the test command's selections pass through.
env=(HOME=/root LANG=C.UTF-8 TERM=dumb DEBIAN_FRONTEND=noninteractive
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
for var in IDEM_ONLY IDEM_TAP_FILES IDEM_CITUS_LONG IDEM_CITUS_SHARDS; do
  [ -n "${!var:-}" ] && env+=("$var=${!var}")
done
st=0
chroot "$root" /usr/bin/env -i "${env[@]}" "$@" || st=$?
exit $st
