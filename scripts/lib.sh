# Shared by run-tests and run-demo: packages, a private installation and a
# throwaway cluster. Sourced, not run.

PG_MAJOR=15
PACKAGES=(make g++ clang-14 libclang-rt-14-dev libssl-dev libgtest-dev
  postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR postgresql-$PG_MAJOR-pgtap
  libtap-parser-sourcehandler-pgtap-perl libipc-run-perl python3
  libdbd-pg-perl)

say() { printf '==> %s\n' "$*"; }

# Installs what is missing (Debian, as root); otherwise checks it is there.
ensure_packages() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing packages: ${missing[*]} (run as root, or install them)" >&2
    return 1
  fi
  say "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Builds idem; a compiler warning fails the build.
build_extension() {
  local log
  log=$(mktemp)
  if ! make -s -j2 all >"$log" 2>&1; then cat "$log"; rm -f "$log"; return 1; fi
  if grep -E 'warning:' "$log"; then echo "build printed warnings" >&2; rm -f "$log"; return 1; fi
  rm -f "$log"
}

# A private copy of the PostgreSQL installation with idem installed into it,
# like PostgreSQL's own tmp_install: no system directory is written, and
# several runs can proceed side by side. Sets PGBIN.
make_private_install() {
  local root=$1
  local bindir sharedir pkglibdir
  bindir=$(pg_config --bindir)
  sharedir=$(pg_config --sharedir)
  pkglibdir=$(pg_config --pkglibdir)
  mkdir -p "$root$(dirname "$bindir")" "$root$(dirname "$sharedir")"
  cp -a "$(dirname "$bindir")/." "$root$(dirname "$bindir")/"
  cp -a "$sharedir" "$root$(dirname "$sharedir")/"
  [ -d "$root$pkglibdir" ] || cp -a "$pkglibdir" "$root$(dirname "$pkglibdir")/"
  make -s install DESTDIR="$root" >/dev/null
  PGBIN="$root$bindir"
}

# Runs a command as the user that owns the clusters (initdb refuses root).
as_cluster_user() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- env PATH="$PATH" "$@"
  else
    "$@"
  fi
}

# Starts a throwaway cluster in $1 with idem preloaded; sets PGHOST/PGPORT.
start_cluster() {
  local dir=$1 port=${2:-55432}
  as_cluster_user "$PGBIN/initdb" -D "$dir/data" -A trust -U postgres --no-sync >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log"; return 1; }
  mkdir -p "$dir/socket"
  [ "$(id -u)" -eq 0 ] && chown postgres "$dir/socket"
  cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$dir/socket'
port = $port
shared_preload_libraries = 'idem'
max_connections = 120
fsync = off
max_prepared_transactions = 10
log_min_messages = warning
CONF
  as_cluster_user "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start >/dev/null ||
    { cat "$dir/server.log"; return 1; }
  export PGHOST="$dir/socket" PGPORT=$port PGUSER=postgres
}

stop_cluster() {
  local dir=$1
  [ -f "$dir/data/postmaster.pid" ] && as_cluster_user "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1
  return 0
}
