# Citus for the Citus suite (test/citus.sh): built once per major from its
# source snapshot beside the clone (../shared/third_party/citus-VERSION,
# found as pg_tle's is), staged with DESTDIR and cached outside the clone,
# as the chroots are. Sourced by run-tests, run-major.sh and make-cache.sh
# (after scripts/lib.sh and scripts/chroot.sh), not run.
#
# The cache of a major is CITUS_CACHE/MAJOR, a symbolic link to the staged
# tree of one build (CITUS_CACHE/MAJOR-<recipe id>, a mirror of the
# installation's paths: usr/lib/postgresql/MAJOR/lib/citus.so, ...) whose
# .idem-stamp records the recipe. A rebuild stages a new tree and switches
# the link with one rename, so a run copying the old tree is not disturbed.
# A suite installs Citus by copying the staged tree into its private copy
# of PostgreSQL (`cp -a TREE/. ROOT/`); nothing is installed into a system
# directory, the chroots' included.

CITUS_CACHE=${IDEM_CITUS_CACHE:-/var/cache/idem/citus}

# The Citus release each major is built against: 13.2 supports PostgreSQL
# 15-17, 14.0 16-18.
citus_version() {  # major
  case $1 in
    15) echo 13.2.2 ;;
    17|18) echo 14.0.1 ;;
    *) return 1 ;;
  esac
}

# The majors the Citus suite runs on unless IDEM_CITUS_MAJORS says otherwise:
# the host's and the newest (docs/testing.md gives the times that decided it).
CITUS_DEFAULT_MAJORS="15 18"
citus_majors() { echo "${IDEM_CITUS_MAJORS:-$CITUS_DEFAULT_MAJORS}"; }
citus_major_wanted() { [[ " $(citus_majors) " == *" $1 "* ]]; }

# The source tree of a major's Citus (absolute path), or failure when the
# snapshot is not there.
citus_source() {  # major
  local version
  version=$(citus_version "$1") || return 1
  third_party_source "citus-$version" configure
}

# configure's options. Without libcurl (Citus would use it only for its
# anonymous statistics, which a build from source never sends), except on
# 18: its server headers define HAVE_LIBCURL (PostgreSQL's OAuth client), so
# Citus's statistics code compiles whatever configure says, and must link
# against libcurl (libcurl4-openssl-dev in the chroot).
citus_configure_flags() {  # major
  case $1 in
    18) echo --with-libcurl ;;
    *) echo --without-libcurl ;;
  esac
}

# The server development package the build compiles against, with its
# version: a new minor of PostgreSQL rebuilds Citus.
citus_pg_package() {  # major
  local admindir=/var/lib/dpkg
  [ "$1" = "$PG_MAJOR" ] || admindir=$(chroot_root "$1")/var/lib/dpkg
  dpkg-query --admindir="$admindir" -W -f='${Package} ${Version}' "postgresql-server-dev-$1" 2>/dev/null
}

# What the stamp records: the source (its version and a digest of every
# file), the PostgreSQL it is built for and how. Any change rebuilds.
citus_recipe() {  # major
  local src digest
  src=$(citus_source "$1") || return 1
  digest=$(cd "$src" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
  printf 'citus: %s (source digest %s)\npostgresql: %s\nconfigure: %s\nmake: with_llvm=no\n' \
    "$(citus_version "$1")" "$digest" "$(citus_pg_package "$1")" "$(citus_configure_flags "$1")"
}

# The staged tree of a major's cache: where the link points (absolute path).
citus_tree() {  # major
  readlink -f "$CITUS_CACHE/$1"
}

# True when the cache of a major is there with a stamp that matches.
citus_ready() {  # major
  local want
  want=$(citus_recipe "$1") || return 1
  [ -f "$CITUS_CACHE/$1/.idem-stamp" ] && [ "$(cat "$CITUS_CACHE/$1/.idem-stamp")" = "$want" ]
}

# Builds a major's Citus, or reuses the cache. Two runs building the same
# major take turns: the second finds the cache made.
ensure_citus() {  # major
  local major=$1
  if ! citus_source "$major" >/dev/null; then
    say "PostgreSQL $major: no Citus source (../shared/third_party/citus-$(citus_version "$major" || echo '?')): the Citus suite skips"
    return 0
  fi
  if citus_ready "$major"; then
    say "PostgreSQL $major: Citus $(citus_version "$major") $(citus_tree "$major") (cached)"
    return 0
  fi
  [ "$(id -u)" -eq 0 ] || { echo "building Citus needs root" >&2; return 1; }
  mkdir -p "$CITUS_CACHE"
  (
    flock 9
    citus_ready "$major" && { say "PostgreSQL $major: Citus (made by another run)"; exit 0; }
    build_citus "$major"
  ) 9>"$CITUS_CACHE/.$major.lock"
}

# Copies the source into a scratch directory (the snapshot may be
# read-only), configures, builds and stages it there, inside the major's
# chroot for the majors the host does not package, then publishes it.
build_citus() {  # major
  local major=$1 src want id tree scratch log pgc started cmd
  src=$(citus_source "$major")
  want=$(citus_recipe "$major")
  id=$(printf '%s' "$want" | sha256sum | cut -c1-12)
  tree=$CITUS_CACHE/$major-$id
  scratch=$CITUS_CACHE/$major-$id.build
  log=$CITUS_CACHE/$major-build.log
  pgc=/usr/lib/postgresql/$major/bin/pg_config
  started=$(date +%s)
  rm -rf "$scratch" "$tree"
  mkdir -p "$scratch"
  cp -a "$src" "$scratch/src"
  chmod -R u+w "$scratch/src"
  # configure must not look older than configure.ac (a copy may make them
  # equal), or make would regenerate it with autoconf, which is not here.
  touch "$scratch/src/configure"
  # The snapshot holds Citus's symbolic links to its vendored safestringlib
  # as files that hold the target: without the links, citus.so builds
  # without strcpy_s and friends and fails to load ("undefined symbol").
  local f
  for f in "$scratch"/src/src/backend/*/safeclib; do
    [ -f "$f" ] && [ "$(wc -l <"$f")" -le 1 ] && [ -d "$(dirname "$f")/$(cat "$f")" ] &&
      ln -sfn "$(cat "$f")" "$f.link" && mv -T "$f.link" "$f"
  done
  # No JIT bitcode (with_llvm=no): it takes longer than the rest of the
  # build, and the suite does not need Citus JIT-compiled.
  cmd="cd '$scratch/src' && ./configure $(citus_configure_flags "$major") PG_CONFIG='$pgc' &&
    make -j2 with_llvm=no && make install with_llvm=no DESTDIR='$scratch/stage'"
  say "PostgreSQL $major: building Citus $(citus_version "$major") (about 5 minutes, a line a minute; log $log)"
  if [ "$major" = "$PG_MAJOR" ]; then
    ensure_host_packages liblz4-dev libzstd-dev || return 1
    run_with_heartbeat "Citus for $major" "$log" bash -c "$cmd" || return 1
  else
    run_with_heartbeat "Citus for $major" "$log" \
      scripts/chroot-run.sh "$(chroot_root "$major")" --bind "$scratch" -- bash -c "$cmd" || return 1
  fi
  [ -f "$scratch/stage/usr/lib/postgresql/$major/lib/citus.so" ] ||
    { echo "the Citus build staged no citus.so for $major (log $log)" >&2; return 1; }
  # What a build without its vendored library gives (see above): refused
  # here rather than when a server fails to start.
  if nm -D --undefined-only "$scratch/stage/usr/lib/postgresql/$major/lib/citus.so" | grep -qw strcpy_s; then
    echo "the Citus build for $major left strcpy_s undefined: safestringlib was not linked in (log $log)" >&2
    return 1
  fi
  mv "$scratch/stage" "$tree"
  printf '%s\n' "$want" >"$tree/.idem-stamp"
  rm -rf "$scratch"
  citus_publish "$major" "$tree"
  say "PostgreSQL $major: Citus built in $(( $(date +%s) - started ))s ($tree)"
}

# Points CITUS_CACHE/MAJOR at a staged tree: a new link renamed over the old
# one. A tree staged by hand there (a directory) is moved aside first. The
# trees older than the one replaced are removed; the one replaced stays
# until the next build, for a run still copying it.
citus_publish() {  # major tree
  local major=$1 tree=$2 link=$CITUS_CACHE/$1 old= d
  if [ -L "$link" ]; then
    old=$(readlink -f "$link")
  elif [ -d "$link" ]; then
    old=$CITUS_CACHE/$major-by-hand-$(date +%s)
    mv "$link" "$old"
  fi
  ln -sfn "$(basename "$tree")" "$link.new"
  mv -T "$link.new" "$link"
  for d in "$CITUS_CACHE/$major"-*; do
    [ -d "$d" ] || continue
    [ "$d" = "$tree" ] || [ "$d" = "$old" ] || rm -rf "$d"
  done
}
