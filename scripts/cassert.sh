# An assert-enabled PostgreSQL 15 (--enable-cassert --enable-debug) built
# from Debian's source package, cached outside the clone so it is built once
# per machine. Sourced by run-tests (after scripts/lib.sh), not run.
#
# Debian's 50-per-version-dirs.patch hard-codes pkglibdir to
# /usr/lib/postgresql/15/lib unless libdir contains "postgres" or "pgsql":
# with a plain --prefix, `make install` would overwrite the system server's
# modules (plpgsql.so, contrib, pgxs). --libdir=<prefix>/lib/postgresql keeps
# every file under the prefix. The build is installed into a staging
# directory and renamed into place, so an interrupted build never leaves a
# half-installed server behind a valid stamp.

CASSERT_PREFIX=${IDEM_CASSERT_PREFIX:-/var/cache/idem/pg15-cassert}
CASSERT_SRC=/var/cache/idem/src
CASSERT_CONFIGURE=(--prefix="$CASSERT_PREFIX" --libdir="$CASSERT_PREFIX/lib/postgresql"
  --enable-cassert --enable-debug --without-readline --without-zlib --without-icu)
CASSERT_CFLAGS="-O1 -g"
CASSERT_BUILD_PACKAGES=(dpkg-dev bison flex gcc make perl xz-utils bzip2)
# What the stamp records: a change here rebuilds.
cassert_recipe() { echo "configure: ${CASSERT_CONFIGURE[*]} CFLAGS=$CASSERT_CFLAGS; targets: core + isolation"; }
CASSERT_STAMP=$CASSERT_PREFIX/.idem-stamp
CASSERT_PG_CONFIG=$CASSERT_PREFIX/bin/pg_config
DEB_SRC_LIST=/etc/apt/sources.list.d/idem-deb-src.sources

# A build without a stamp (made by hand with the same recipe) is adopted when
# its configure line matches and every directory is inside the prefix.
cassert_adoptable() {
  [ -x "$CASSERT_PG_CONFIG" ] && [ -x "$CASSERT_PREFIX/bin/postgres" ] || return 1
  local conf want
  conf=$("$CASSERT_PG_CONFIG" --configure | sed 's/^ *//; s/ *$//')
  want="$(printf "'%s' " "${CASSERT_CONFIGURE[@]}")'CFLAGS=$CASSERT_CFLAGS'"
  [ "$conf" = "$want" ] || return 1
  local d
  for d in --bindir --pkglibdir --sharedir --pgxs; do
    [[ $("$CASSERT_PG_CONFIG" $d) == "$CASSERT_PREFIX"/* ]] || return 1
  done
  [ -x "$("$CASSERT_PG_CONFIG" --pkglibdir)/pgxs/src/test/isolation/pg_isolation_regress" ]
}

# Debian's source lines, in a file of their own. Not the security suite:
# its source pool is not served by every mirror (404 here), and any 15.x
# minor release serves to find our bugs.
ensure_deb_src() {
  local want
  want="Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
  if [ ! -f "$DEB_SRC_LIST" ] || [ "$(cat "$DEB_SRC_LIST")" != "$want" ]; then
    say "adding Debian's deb-src lines ($DEB_SRC_LIST)"
    printf '%s\n' "$want" >"$DEB_SRC_LIST"
  fi
  say "apt-get update (source indexes)"
  apt-get update -qq
}

build_cassert() {
  local started version dir staging
  started=$(date +%s)
  ensure_host_packages "${CASSERT_BUILD_PACKAGES[@]}"
  ensure_deb_src
  mkdir -p "$CASSERT_SRC"
  say "apt-get source postgresql-15 (into $CASSERT_SRC)"
  version=$(apt-cache showsrc postgresql-15 | sed -n 's/^Version: //p' | sort -V | tail -n 1)
  dir=$CASSERT_SRC/postgresql-15-${version%%-*}
  rm -rf "$dir"
  (cd "$CASSERT_SRC" && apt-get source -qq "postgresql-15=$version") >"$CASSERT_SRC/source.log" 2>&1 ||
    { cat "$CASSERT_SRC/source.log"; return 1; }
  say "configuring PostgreSQL $version with assertions"
  (cd "$dir" && ./configure "${CASSERT_CONFIGURE[@]}" CFLAGS="$CASSERT_CFLAGS") >"$CASSERT_SRC/configure.log" 2>&1 ||
    { tail -n 30 "$CASSERT_SRC/configure.log"; return 1; }
  say "building the assert-enabled server (a line a minute; log $CASSERT_SRC/make.log)"
  HEARTBEAT_PROGRESS="echo \$(find '$dir' -name '*.o' | wc -l) object files" \
    run_with_heartbeat "assert build" "$CASSERT_SRC/make.log" \
    bash -c "make -C '$dir' -j$(nproc) -s && make -C '$dir/src/test/isolation' -j$(nproc) -s" || return 1
  staging=$CASSERT_PREFIX.staging
  rm -rf "$staging"
  (make -C "$dir" -s install DESTDIR="$staging" &&
    make -C "$dir/src/test/isolation" -s install DESTDIR="$staging") >"$CASSERT_SRC/install.log" 2>&1 ||
    { tail -n 30 "$CASSERT_SRC/install.log"; return 1; }
  rm -rf "$CASSERT_PREFIX.old"
  [ -e "$CASSERT_PREFIX" ] && mv "$CASSERT_PREFIX" "$CASSERT_PREFIX.old"
  mv "$staging$CASSERT_PREFIX" "$CASSERT_PREFIX"
  rm -rf "$staging" "$CASSERT_PREFIX.old"
  printf '%s\nsource: postgresql-15 %s\n' "$(cassert_recipe)" "$version" >"$CASSERT_STAMP"
  say "assert build of $version ready in $(( $(date +%s) - started ))s"
}

# True when the cached build can be used: its stamp matches the recipe, or
# it was made by hand with the same recipe (then it is adopted: stamped).
cassert_ready() {
  if [ -f "$CASSERT_STAMP" ] && [ "$(head -n 1 "$CASSERT_STAMP")" = "$(cassert_recipe)" ]; then
    say "assert-enabled PostgreSQL: cached ($(sed -n 's/^source: //p' "$CASSERT_STAMP"), $CASSERT_PREFIX)"
    return 0
  fi
  if cassert_adoptable; then
    say "assert-enabled PostgreSQL: adopting the build in $CASSERT_PREFIX"
    printf '%s\nsource: %s (adopted)\n' "$(cassert_recipe)" "$("$CASSERT_PG_CONFIG" --version)" >"$CASSERT_STAMP"
    return 0
  fi
  return 1
}

# Two runs would build into the same directories: the second waits, then
# finds the build made.
ensure_cassert() {
  cassert_ready && return 0
  [ "$(id -u)" -eq 0 ] || { echo "the assert build needs root (apt-get source, $CASSERT_PREFIX)" >&2; return 1; }
  mkdir -p "$CASSERT_SRC"
  (
    flock 9
    cassert_ready && exit 0
    build_cassert
  ) 9>"$CASSERT_SRC/.build.lock"
}
