#!/usr/bin/env bash
# The Python package (clients/python): its wheel (built with Debian's
# python3-build, as its README says) installed into a virtual environment
# that sees Debian's python3-psycopg, -fastapi, -httpx, -pytest, -uvicorn,
# then its pytest suite against a real server: a cluster of its own with idem
# preloaded, reached on its socket (the HTTP servers the tests start take any
# free port on 127.0.0.1). Everything runs on the C++ engine (CREATE
# EXTENSION); the draft's cases, the context manager and the fingerprint also
# run on the portable engine, in a second database installed from
# dist/idem-portable.sql by its non-superuser owner. Last line
# "python_package: N passed, N failed", pytest's counts.
set -uo pipefail
cd "$(dirname "$0")/../.."
tree=$(pwd)
work=${IDEM_WORK:-/tmp}/python-package-extra
rm -rf "$work" && mkdir -p "$work"
passed=0
failed=0
python=/usr/bin/python3  # Debian's, with its packages (a pyenv python3 may be first on the PATH)

stop_all() { pg_ctl -D "$work/data" -m fast -w stop >/dev/null 2>&1; }
trap stop_all EXIT

note_failure() { failed=$((failed + 1)); echo "not ok - $*"; }
finish() { echo "python_package: $passed passed, $failed failed"; exit 0; }

# The install a user makes: the wheel, built from a copy (the build leaves
# build/ and *.egg-info beside the sources), so the tests run against what
# ships (client_artifacts.sh runs the README's very commands).
cp -r "$tree/clients/python" "$work/package"
if ! "$python" -m build --wheel --no-isolation --outdir "$work/dist" "$work/package" >"$work/build.log" 2>&1 ||
   ! "$python" -m venv --system-site-packages --without-pip "$work/venv" >"$work/venv.log" 2>&1 ||
   ! "$work/venv/bin/python" -m pip install --no-deps --no-index \
       --no-cache-dir "$work"/dist/idem_client-*.whl >"$work/pip.log" 2>&1; then
  note_failure "the wheel of ./clients/python, built and installed"
  cat "$work/build.log" "$work/venv.log" "$work/pip.log" 2>/dev/null | tail -n 20
  finish
fi
installed=$(cd "$work" && "$work/venv/bin/python" -c 'import idem_client; print(idem_client.__file__)')
case $installed in
  "$work/venv/"*) passed=$((passed + 1)); echo "ok - installed into the venv: $installed" ;;
  *) note_failure "idem_client is imported from $installed, not from the venv"; finish ;;
esac

initdb -D "$work/data" -A trust -U postgres --no-sync >"$work/initdb.log" 2>&1 || { cat "$work/initdb.log"; exit 1; }
mkdir -p "$work/socket"
cat >>"$work/data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$work/socket'
port = $PGPORT
shared_preload_libraries = 'idem'
max_connections = 120
fsync = off
CONF
pg_ctl -D "$work/data" -l "$work/server.log" -w start >/dev/null || { cat "$work/server.log"; exit 1; }
sql() { psql -X -q -v ON_ERROR_STOP=1 -h "$work/socket" -p "$PGPORT" "$@"; }

# The C++ engine, as a superuser installs it.
sql -U postgres -d postgres -c 'CREATE ROLE idem_py_app LOGIN' \
  -c 'CREATE ROLE idem_py_owner LOGIN' -c 'GRANT pg_read_all_stats TO idem_py_owner' \
  -c 'CREATE DATABASE python_package' \
  -c 'CREATE DATABASE python_package_portable OWNER idem_py_owner' || exit 1
cpp_ready=1
sql -U postgres -d python_package -c 'CREATE EXTENSION idem' \
  -f "$work/package/tests/setup.sql" >"$work/cpp.log" 2>&1 ||
  { cpp_ready=0; note_failure "the C++ engine's database did not set up"; tail -n 20 "$work/cpp.log"; }
# The portable engine, as the database's owner installs it: no superuser.
sql -U idem_py_owner -d python_package_portable -f "$tree/dist/idem-portable.sql" >"$work/portable.log" 2>&1 &&
  sql -U idem_py_owner -d python_package_portable -f "$work/package/tests/setup.sql" >>"$work/portable.log" 2>&1 ||
  { note_failure "the portable engine did not install"; tail -n 20 "$work/portable.log"; }

# The cross-language test starts the Node package's Express app: node and
# npm are trixie's, from the test command's chroot (scripts/node-chroot.sh),
# as in node_package.sh, whatever the host has. pytest's temporary files go
# under $work, which the chroot sees at the same path.
mkdir -p "$work/bin" "$work/pytest-tmp"
for cmd in node npm; do
  printf '#!/bin/sh\nexec "%s/scripts/node-chroot.sh" -- %s "$@"\n' "$tree" "$cmd" >"$work/bin/$cmd"
  chmod +x "$work/bin/$cmd"
done

# pytest in the copy's tests/, which imports the installed package (not
# src/). Adds pytest's counts; a run that printed none is one failure.
run_pytest() {  # name dsn admin_dsn pytest-arguments...
  local name=$1 log="$work/pytest-$1.log" summary p f e
  export IDEM_TEST_DSN=$2 IDEM_TEST_ADMIN_DSN=$3
  shift 3
  (cd "$work/package/tests" && IDEM_TEST_WORK="$work" IDEM_KEY_VECTORS="$tree/clients/conformance/idempotency-key.json" IDEM_TEST_REPORT="$work/report" \
    IDEM_DRAFT_CASES="$tree/clients/conformance/draft-cases.json" IDEM_NODE_PACKAGE="$tree/clients/node" \
    IDEM_NODE="$work/bin/node" IDEM_NPM="$work/bin/npm" \
    "$work/venv/bin/python" -m pytest -p no:cacheprovider -q -rfE --basetemp="$work/pytest-tmp/$name" "$@") >"$log" 2>&1
  summary=$(tail -n 1 "$log")
  p=$(grep -oE '[0-9]+ passed' <<<"$summary" | grep -oE '[0-9]+')
  f=$(grep -oE '[0-9]+ failed' <<<"$summary" | grep -oE '[0-9]+')
  e=$(grep -oE '[0-9]+ errors?' <<<"$summary" | grep -oE '[0-9]+')
  echo "$name: $summary"
  if [ -z "$p$f$e" ]; then note_failure "$name: pytest printed no counts"; tail -n 30 "$log"; return; fi
  grep -E '^(FAILED|ERROR) ' "$log" | sed 's/^/not ok - /'
  [ -n "${f:-}${e:-}" ] && tail -n 40 "$log"
  passed=$((passed + ${p:-0}))
  failed=$((failed + ${f:-0} + ${e:-0}))
}

socket_dsn() { echo "postgresql://$1@/$2?host=$work/socket&port=$PGPORT"; }
[ $cpp_ready = 1 ] &&
  run_pytest cpp "$(socket_dsn idem_py_app python_package)" "$(socket_dsn postgres python_package)" .
if [ -f "$work/portable.log" ] && ! grep -q ERROR "$work/portable.log"; then
  run_pytest portable "$(socket_dsn idem_py_app python_package_portable)" \
    "$(socket_dsn idem_py_owner python_package_portable)" test_draft.py test_store.py test_jcs.py \
    test_draft_table.py test_answers.py test_crash.py
fi
[ -f "$work/report" ] && cat "$work/report"
finish
