# Shared by run-tests and run-demo: packages, a private installation and a
# throwaway cluster. Sourced, not run.

PG_MAJOR=15
# The host's PostgreSQL, named by its major (a bare pg_config is whichever
# the PATH finds first).
HOST_PG_CONFIG=/usr/lib/postgresql/$PG_MAJOR/bin/pg_config
PACKAGES=(make g++ clang-14 libclang-rt-14-dev libssl-dev libgtest-dev
  postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR postgresql-$PG_MAJOR-pgtap
  libtap-parser-sourcehandler-pgtap-perl libipc-run-perl python3
  libdbd-pg-perl
  python3-psycopg default-jdk-headless libpostgresql-jdbc-java  # examples/http (Node: scripts/node-chroot.sh)
  python3-starlette python3-fastapi python3-httpx python3-pytest python3-anyio python3-uvicorn
  python3-pip python3-setuptools python3-wheel python3-venv  # clients/python: test/extra.d/python_package.sh
  python3-django python3-psycopg-pool python3-build  # clients/python: Django, pool=, its wheel (test/extra.d/client_artifacts.sh)
  patroni python3-etcd etcd-server pgbouncer postgresql-$PG_MAJOR-plproxy  # test/cluster
  prometheus prometheus-sql-exporter  # test/extra.d/monitoring.sh
  flex bison libkrb5-dev postgresql-$PG_MAJOR-cron patch  # test/portable.sh: pg_tle's build, pg_cron, the regress runner
  liblz4-dev libzstd-dev libicu-dev)  # scripts/citus.sh: Citus's build

say() { printf '==> %s\n' "$*"; }

# A third-party source snapshot beside the clone,
# ../shared/third_party/NAME (for a git worktree: beside the clone it
# belongs to), recognised by a file it holds. Prints its absolute path;
# fails when there is none. Run from the clone's top directory.
third_party_source() {  # name file
  local common
  if [ -f "../shared/third_party/$1/$2" ]; then (cd "../shared/third_party/$1" && pwd); return; fi
  common=$(git rev-parse --path-format=absolute --git-common-dir 2>/dev/null) || return 1
  [ -f "$common/../../shared/third_party/$1/$2" ] || return 1
  (cd "$common/../../shared/third_party/$1" && pwd)
}

# The pg_tle source tree the portable engine's pg_tle suites build pg_tle
# from (test/portable.sh): the setting PG_TLE_SRC, else the snapshot beside
# the clone. Prints its absolute path; fails when there is none, and those
# suites then skip.
pg_tle_source() {
  if [ -n "${PG_TLE_SRC:-}" ]; then
    [ -f "$PG_TLE_SRC/Makefile" ] || return 1
    (cd "$PG_TLE_SRC" && pwd)
    return
  fi
  third_party_source pg_tle Makefile
}

# Installs what is missing of the named packages (Debian, as root);
# otherwise checks they are there.
ensure_host_packages() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing packages: ${missing[*]} (run as root, or install them)" >&2
    return 1
  fi
  say "apt: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The host's Node is not needed: the Node suites run on trixie's nodejs and
# npm, in a chroot (scripts/node-chroot.sh).
ensure_packages() {
  ensure_host_packages "${PACKAGES[@]}"
}

# Runs "$@" with its output in $log, printing a line a minute so a long step
# is visibly alive: the log's last line, or what HEARTBEAT_PROGRESS (a shell
# command) prints.
run_with_heartbeat() {  # what log command...
  local what=$1 log=$2 pid start st=0 progress
  shift 2
  start=$(date +%s)
  "$@" >"$log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -0 "$pid" 2>/dev/null || break
    if [ -n "${HEARTBEAT_PROGRESS:-}" ]; then progress=$(eval "$HEARTBEAT_PROGRESS" 2>/dev/null)
    else progress=$(grep -v '^\s*$' "$log" | tail -n 1 | cut -c1-80); fi
    say "  $what: $(( ($(date +%s) - start) / 60 )) min so far${progress:+ ($progress)}"
  done
  wait "$pid" || st=$?
  [ $st -eq 0 ] || { echo "$what failed (exit $st); last lines of $log:"; tail -n 30 "$log"; }
  return $st
}

# Builds idem for the PostgreSQL of the given pg_config (the host's by
# default; bench/run --major passes a chroot's); a compiler warning fails
# the build.
build_extension() {  # [pg_config]
  local pgc=${1:-$HOST_PG_CONFIG} log
  log=$(mktemp)
  if ! make -s -j2 PG_CONFIG="$pgc" all >"$log" 2>&1; then cat "$log"; rm -f "$log"; return 1; fi
  if grep -E 'warning:' "$log"; then echo "build printed warnings" >&2; rm -f "$log"; return 1; fi
  rm -f "$log"
}

# A private copy of the PostgreSQL installation, like PostgreSQL's own
# tmp_install: no system directory is written, and several runs can proceed
# side by side. The copy's pg_config, postgres and pgxs find their files
# relative to where they are, so the copy's pg_config reports the copy's
# directories (and `make installcheck PG_CONFIG=<it>` tests the copy); the
# server headers come along so it can build too. Sets PGBIN.
make_private_pg_copy() {  # root [pg_config]
  local root=$1 pgc=${2:-$HOST_PG_CONFIG}
  local bindir sharedir pkglibdir includedir
  bindir=$("$pgc" --bindir)
  sharedir=$("$pgc" --sharedir)
  pkglibdir=$("$pgc" --pkglibdir)
  includedir=$("$pgc" --includedir-server)
  mkdir -p "$root$(dirname "$bindir")" "$root$(dirname "$sharedir")" "$root$(dirname "$includedir")"
  cp -a "$(dirname "$bindir")/." "$root$(dirname "$bindir")/"
  [ -d "$root$sharedir" ] || cp -a "$sharedir" "$root$(dirname "$sharedir")/"
  [ -d "$root$pkglibdir" ] || cp -a "$pkglibdir" "$root$(dirname "$pkglibdir")/"
  [ -d "$root$includedir" ] || cp -a "$includedir" "$root$(dirname "$includedir")/"
  PGBIN="$root$bindir"
}

# The private copy with the tree in the current directory installed into it.
# Sets PGBIN.
make_private_install() {  # root [pg_config]
  local root=$1 pgc=${2:-$HOST_PG_CONFIG}
  make_private_pg_copy "$root" "$pgc" || return
  make -s install DESTDIR="$root" PG_CONFIG="$pgc" >/dev/null
}

# The private copy without any of idem's files, as on a server that cannot
# load idem's library (the portable engine's installs): whatever a system
# installation holds of idem (a developer's `make install`, a chroot's run)
# is removed from the copy, and none may remain. Sets PGBIN.
make_private_install_without_idem() {  # root [pg_config]
  local root=$1 pgc=${2:-$HOST_PG_CONFIG} left
  make_private_pg_copy "$root" "$pgc" || return
  rm -rf "$root$("$pgc" --sharedir)"/extension/idem.control \
    "$root$("$pgc" --sharedir)"/extension/idem--*.sql \
    "$root$("$pgc" --pkglibdir)"/idem.so \
    "$root$("$pgc" --pkglibdir)"/bitcode/idem "$root$("$pgc" --pkglibdir)"/bitcode/idem.index.bc
  left=$(find "$root" \( -name 'idem.control' -o -name 'idem--*.sql' -o -name 'idem.so' \) -print -quit)
  [ -z "$left" ] || { echo "make_private_install_without_idem: $left is still in the copy" >&2; return 1; }
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
# Arguments after the port are further postgresql.conf lines. A $1/data
# that already holds a cluster (a cold copy of one, as start_citus_cluster
# makes) is started as it is, the lines appended (the last of a setting wins).
start_cluster() {
  local dir=$1 port=${2:-55432}
  shift 2 || shift $#
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_cluster_user "$PGBIN/initdb" -D "$dir/data" -A trust -U postgres --no-sync >"$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log"; return 1; }
  fi
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
  [ $# -eq 0 ] || printf '%s\n' "$@" >>"$dir/data/postgresql.conf"
  as_cluster_user "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start >/dev/null ||
    { cat "$dir/server.log"; return 1; }
  export PGHOST="$dir/socket" PGPORT=$port PGUSER=postgres
}

stop_cluster() {
  local dir=$1
  [ -f "$dir/data/postmaster.pid" ] && as_cluster_user "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1
  return 0
}

# The tree a run tests: what git tracks plus new files, without build
# products (a developer's clone may hold objects of another major).
copy_tree() {  # destination
  mkdir -p "$1"
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z -c -o --exclude-standard | tar --null -T - -cf - --ignore-failed-read 2>/dev/null |
      tar -xf - -C "$1"
  else
    cp -a . "$1"
    find "$1" \( -name '*.o' -o -name '*.so' -o -name '*.bc' \) -delete
  fi
}

# "passed failed" of a log that ends "NAME: N passed, N failed", given
# the run's exit status: a failure when there is no such line or the status
# is not 0.
closing_counts() {  # log name status
  local line p f
  line=$(grep -E "^$2: [0-9]+ passed, [0-9]+ failed" "$1" | tail -n 1)
  p=$(echo "$line" | awk '{print $2}')
  f=$(echo "$line" | awk '{print $4}')
  [ -n "$line" ] || { p=0; f=1; }
  [ "$3" -eq 0 ] || [ "${f:-0}" -gt 0 ] || f=1
  echo "$p $f"
}

# Stops, by the pid in their postmaster.pid, the servers whose data
# directories lie under a directory (a run cut short leaves them: pg_ctl
# detaches them from the run's process group). Immediate shutdown.
stop_servers_under() {  # dir
  local f pid
  while IFS= read -r f; do
    pid=$(head -n 1 "$f" 2>/dev/null)
    [[ $pid =~ ^[0-9]+$ ]] || continue
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = postgres ] && kill -QUIT "$pid" 2>/dev/null
  done < <(find "$1" -name postmaster.pid 2>/dev/null)
  return 0
}

# A Citus cluster on this machine: a coordinator in $dir/node0 on $port and
# $workers workers in $dir/node1.. on the next ports, each a start_cluster
# (its own socket directory, no TCP port) with Citus and idem preloaded and
# the further postgresql.conf lines given; database $db with Citus on every
# node, the workers added. PGBIN's installation must hold Citus (a private
# copy with the staged Citus tree copied in: test/citus.sh, bench/citus/run).
# Leaves PGHOST/PGPORT at the coordinator.
start_citus_cluster() {  # dir port workers db [conf lines...]
  local dir=$1 port=$2 workers=$3 db=$4 n
  shift 4
  # One initdb, copied cold into every node: initdb is most of a node's start.
  mkdir -p "$dir/template"
  [ "$(id -u)" -eq 0 ] && chown postgres "$dir/template"
  as_cluster_user "$PGBIN/initdb" -D "$dir/template/data" -A trust -U postgres --no-sync >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log"; return 1; }
  for ((n = 0; n <= workers; n++)); do
    mkdir -p "$dir/node$n"
    [ "$(id -u)" -eq 0 ] && chown postgres "$dir/node$n"
    as_cluster_user cp -a "$dir/template/data" "$dir/node$n/data" || return
    # Citus reaches each node, itself included, by its socket directory.
    start_cluster "$dir/node$n" $((port + n)) "shared_preload_libraries = 'citus, idem'" \
      "max_prepared_transactions = 100" "citus.local_hostname = '$dir/node$n/socket'" "$@" || return
    psql -qX -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE $db" &&
      psql -qX -v ON_ERROR_STOP=1 -d "$db" -c 'CREATE EXTENSION citus' || return
  done
  export PGHOST=$dir/node0/socket PGPORT=$port
  psql -qAtX -v ON_ERROR_STOP=1 -d "$db" \
    -c "SELECT citus_set_coordinator_host('$dir/node0/socket', $port)" >/dev/null || return
  for ((n = 1; n <= workers; n++)); do
    psql -qAtX -v ON_ERROR_STOP=1 -d "$db" \
      -c "SELECT citus_add_node('$dir/node$n/socket', $((port + n)))" >/dev/null || return
  done
}

stop_citus_cluster() {  # dir
  local node
  for node in "$1"/node*; do [ -d "$node" ] && stop_cluster "$node"; done
  return 0
}
