#!/usr/bin/env bash
# The client packages as artifacts, installed the way their READMEs say into
# applications outside the checkout: the commands of the blocks marked
# "<!-- install: node -->" (clients/node/README.md: npm pack, then npm
# install of the tarball with pg, Express and Powertools from the registry,
# on trixie's nodejs and npm: scripts/node-chroot.sh) and "<!-- install:
# python -->" (clients/python/README.md: a wheel built with Debian's
# python3-build, installed into a venv made from /usr/bin/python3) run line
# by line, "/tmp" replaced by this run's directory, each in the directory its
# comment names ("# in a checkout of idem", "# in your application's
# directory"). Then a small application in each imports every entry point
# (@idem/postgres, /express, /powertools; idem_client, idem_client.asgi),
# proves they load from the installed artifact, and claims then replays a
# key on a real server. Also the grants: the functions of schema idem the
# packages call are all in README's "Privileges" block (run as written, for a
# role of its own), and that block, clients/node/test/setup.sql,
# clients/python/tests/setup.sql and examples/http/setup.sql grant one list.
# A cluster of its own on 127.0.0.1 (node-postgres speaks TCP), as
# node_package.sh, 30 above its port. Last line "client_artifacts: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
tree=$(pwd)
work=${IDEM_WORK:-/tmp}/client-artifacts
rm -rf "$work" && mkdir -p "$work"
if [ "$PGPORT" -ge 32768 ]; then db_port=$((PGPORT - 30000 + 30)); else db_port=$((PGPORT + 30)); fi
# trixie's nodejs and npm (scripts/node-chroot.sh), seeing this suite's files.
node_run() { "$tree/scripts/node-chroot.sh" --bind "$work" -- "$@"; }
python=/usr/bin/python3
passed=0
failed=0

ok() { passed=$((passed + 1)); echo "ok - $*"; }
note_failure() { failed=$((failed + 1)); echo "not ok - $*"; }
finish() { echo "client_artifacts: $passed passed, $failed failed"; exit 0; }
stop_all() { pg_ctl -D "$work/data" -m fast -w stop >/dev/null 2>&1; }
trap stop_all EXIT

initdb -D "$work/data" -A trust -U postgres --no-sync >"$work/initdb.log" 2>&1 || { cat "$work/initdb.log"; note_failure "initdb"; finish; }
cat >>"$work/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $db_port
unix_socket_directories = '$work'
shared_preload_libraries = 'idem'
fsync = off
CONF
pg_ctl -D "$work/data" -l "$work/server.log" -w start >/dev/null || { cat "$work/server.log"; note_failure "the server did not start"; finish; }
sql() { psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$db_port" -U postgres "$@"; }
sql -d postgres -c 'CREATE ROLE artifacts_app LOGIN' -c 'CREATE DATABASE artifacts' >/dev/null &&
  sql -d artifacts -c 'CREATE EXTENSION idem' -c 'GRANT USAGE ON SCHEMA idem TO artifacts_app' >/dev/null ||
  { note_failure "setting up the database"; finish; }
app_url="postgresql://artifacts_app@127.0.0.1:$db_port/artifacts"

# --- The grants ------------------------------------------------------------

# The application's statement of the indented block after "<!-- grants:
# app" in README.md (GRANT EXECUTE ON FUNCTION ... TO app;), as written.
readme_grants=$(awk '/^<!-- grants: app/ {found = 1; next}
  found && /^    / {inblock = 1; print; next}
  inblock {exit}' README.md | perl -0ne 'print "$1\n" if /(GRANT\s+EXECUTE\s+ON\s+FUNCTION\s.*?\sTO\s+app;)/s')
# The "idem.name(args)" entries of the first GRANT EXECUTE ON FUNCTION ...
# TO of a file, comments off, spaces dropped, sorted.
grant_list() {  # <file
  sed 's/--.*//' | perl -0ne 'print $1 if /GRANT\s+EXECUTE\s+ON\s+FUNCTION\s(.*?)\sTO\s/s' |
    tr -d ' \n' | grep -oE 'idem\.[a-z_]+\([^)]*\)' | sort
}
readme_list=$(echo "$readme_grants" | grant_list)
if [ -z "$readme_list" ]; then
  note_failure "README.md: no block after '<!-- grants: app'"
else
  for f in clients/node/test/setup.sql clients/python/tests/setup.sql examples/http/setup.sql; do
    other=$(grant_list <"$f")
    if [ "$other" = "$readme_list" ]; then ok "$f grants README's list"
    else note_failure "$f does not grant README's list:"; diff <(echo "$readme_list") <(echo "$other") | sed 's/^/    /'; fi
  done
fi
# README's block, run for the application's role: valid SQL, and enough for
# every function of schema idem the packages call.
if [ -n "$readme_grants" ] && echo "$readme_grants" | sed 's/\bTO app;/TO artifacts_app;/' | sql -d artifacts >"$work/grants.log" 2>&1; then
  ok "README's grants run as written"
else
  note_failure "README's grants do not run"; cat "$work/grants.log"
fi
called=$(cat clients/node/lib/*.js clients/python/src/idem_client/*.py | grep -oE 'idem\.[a-z_]+\(' |
  sed 's/^idem\.//; s/($//' | sort -u)
missing=$(sql -d artifacts -At -c "
  SELECT string_agg(name, ' ' ORDER BY name) FROM (
    SELECT p.proname AS name
      FROM pg_proc p
     WHERE p.pronamespace = 'idem'::regnamespace
       AND p.proname = ANY (string_to_array('$(echo $called)', ' '))
     GROUP BY p.proname
    HAVING NOT bool_or(has_function_privilege('artifacts_app', p.oid, 'EXECUTE'))) AS m")
count=$(sql -d artifacts -At -c "SELECT count(DISTINCT proname) FROM pg_proc
  WHERE pronamespace = 'idem'::regnamespace AND proname = ANY (string_to_array('$(echo $called)', ' '))")
if [ "${count:-0}" -gt 0 ] && [ -z "$missing" ]; then
  ok "README's grants cover the $count functions of idem the packages call"
else
  note_failure "functions the packages call that README's grants leave out: ${missing:-?} (of $count)"
fi

# --- The README's install commands ------------------------------------------

# The lines of the ```sh block after "<!-- install: WHICH".
install_block() {  # readme which
  awk -v tag="<!-- install: $2 " 'index($0, tag) == 1 {found = 1; next}
    found && /^```sh$/ {inblock = 1; next}
    inblock && /^```$/ {exit}
    inblock {print}' "$1"
}
# Runs a block's lines: "/tmp" is DIST; a line runs in the directory its
# comment names; RUNNER (the Node chroot, or nothing) runs each.
run_install() {  # readme which checkout app dist runner...
  local readme=$1 which=$2 checkout=$3 app=$4 dist=$5 dir= line cmd n=0
  shift 5
  while IFS= read -r line; do
    case $line in
      "# in a checkout of idem"*) dir=$checkout ;;
      "# in your application's directory"*) dir=$app ;;
      "#"* | "") ;;
      *)
        [ -n "$dir" ] || { echo "no directory named before: $line"; return 1; }
        cmd=${line//\/tmp/$dist}
        echo "\$ cd ${dir#"$work/"} && $cmd"
        (cd "$dir" && "$@" bash -c "$cmd") || { echo "failed: $cmd"; return 1; }
        n=$((n + 1)) ;;
    esac
  done < <(install_block "$readme" "$which")
  [ $n -gt 0 ] || { echo "no commands in $readme's '<!-- install: $which' block"; return 1; }
}

# A checkout of idem, as a user has one (here, the packages' sources).
mkdir -p "$work/checkout" "$work/dist"
cp -r clients "$work/checkout/clients"
rm -rf "$work/checkout/clients/node/node_modules"

# --- Node --------------------------------------------------------------------

"$tree/scripts/node-chroot.sh" --describe || note_failure "no Node chroot"
mkdir -p "$work/node-app"
# The application: its own package.json (npm install records what it adds).
printf '{ "name": "artifact-app", "version": "1.0.0", "private": true }\n' >"$work/node-app/package.json"
if run_install clients/node/README.md node "$work/checkout" "$work/node-app" "$work/dist" \
    node_run >"$work/node-install.log" 2>&1; then
  ok "clients/node/README.md's install commands"
  grep '^\$ ' "$work/node-install.log" | sed 's/^/    /'
  cat >"$work/node-app/check.js" <<'JS'
'use strict';
// Every entry point from the installed tarball, and a claim then a replay
// through the Express middleware and through Powertools.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
let failures = 0;
async function check(name, fn) {
  try { await fn(); console.log(`ok - ${name}`); } catch (error) { failures += 1; console.log(`not ok - ${name}: ${error.stack}`); }
}
(async () => {
  const modules = path.join(__dirname, 'node_modules') + path.sep;
  for (const entry of ['@idem/postgres', '@idem/postgres/express', '@idem/postgres/powertools']) {
    await check(`require('${entry}') from the installed tarball`, () => {
      const file = fs.realpathSync(require.resolve(entry));
      assert.ok(file.startsWith(modules), `${entry} resolves to ${file}, outside ${modules}`);
      require(entry);
    });
  }
  const { Pool } = require('pg');
  const pool = new Pool({ connectionString: process.env.DATABASE_URL, max: 4 });
  await check("Express: a claim, then the replay (require('@idem/postgres/express'))", async () => {
    const express = require('express');
    const { idempotency } = require('@idem/postgres/express');
    assert.equal(require('@idem/postgres').idempotency, idempotency);
    let effects = 0;
    const app = express();
    app.post('/orders', idempotency({ pool, scope: 'artifacts-node' }), async (req, res) => {
      effects += 1;
      res.status(201).json({ ordered: req.body.item });
    });
    const server = await new Promise((resolve) => { const s = app.listen(0, '127.0.0.1', () => resolve(s)); });
    try {
      const post = () => fetch(`http://127.0.0.1:${server.address().port}/orders`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': 'artifact-1' },
        body: JSON.stringify({ item: 'book' }),
      });
      const first = await post();
      const firstBody = await first.text();
      const second = await post();
      const secondBody = await second.text();
      assert.equal(first.status, 201);
      assert.equal(first.headers.get('idempotent-replayed'), null);
      assert.equal(second.status, 201);
      assert.equal(second.headers.get('idempotent-replayed'), 'true');
      assert.equal(secondBody, firstBody);
      assert.equal(effects, 1);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
  await check("Powertools: a claim, then the replay (require('@idem/postgres/powertools'))", async () => {
    const { makeIdempotent, IdempotencyConfig } = require('@aws-lambda-powertools/idempotency');
    const { IdemPersistenceLayer } = require('@idem/postgres/powertools');
    let calls = 0;
    const handler = makeIdempotent(async (event) => { calls += 1; return { paid: event.amount }; }, {
      persistenceStore: new IdemPersistenceLayer({ pool, scope: 'artifacts-powertools' }),
      config: new IdempotencyConfig({ eventKeyJmesPath: 'orderId' }),
    });
    const first = await handler({ orderId: 'o-1', amount: 10 });
    const second = await handler({ orderId: 'o-1', amount: 10 });
    assert.deepEqual(first, { paid: 10 });
    assert.deepEqual(second, first);
    assert.equal(calls, 1);
  });
  await pool.end();
  process.exitCode = failures === 0 ? 0 : 1;
})();
JS
  (cd "$work/node-app" && DATABASE_URL=$app_url timeout 300 "$tree/scripts/node-chroot.sh" --bind "$work" -- node check.js) >"$work/node-check.log" 2>&1
  st=$?
  while IFS= read -r line; do
    case $line in
      "ok - "*) ok "node: ${line#ok - }" ;;
      "not ok - "*) note_failure "node: ${line#not ok - }" ;;
    esac
  done <"$work/node-check.log"
  grep -q '^ok - ' "$work/node-check.log" || { note_failure "node: check.js printed no result (status $st)"; tail -n 20 "$work/node-check.log"; }
  [ $st -eq 0 ] || grep -q '^not ok' "$work/node-check.log" || note_failure "node: check.js exited with $st"
  grep -A 15 '^not ok' "$work/node-check.log" | head -n 40
else
  note_failure "clients/node/README.md's install commands"; tail -n 25 "$work/node-install.log"
fi

# --- Python ------------------------------------------------------------------

mkdir -p "$work/python-app"
if run_install clients/python/README.md python "$work/checkout" "$work/python-app" "$work/dist" \
    >"$work/python-install.log" 2>&1; then
  ok "clients/python/README.md's install commands"
  grep '^\$ ' "$work/python-install.log" | sed 's/^/    /'
  cat >"$work/python-app/check.py" <<'PY'
"""Every entry point from the installed wheel, and a claim then a replay
through the ASGI middleware (FastAPI) and through the context manager on a
psycopg_pool connection."""
import os
import sys
import traceback

failures = 0


def check(name):
    def run(fn):
        global failures
        try:
            fn()
            print(f"ok - {name}")
        except Exception:
            failures += 1
            print(f"not ok - {name}: {traceback.format_exc()}")
    return run


venv = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "venv"))
dsn = os.environ["DATABASE_URL"]


@check("import idem_client, idem_client.asgi from the installed wheel")
def _():
    import idem_client
    import idem_client.asgi
    for module in (idem_client, idem_client.asgi):
        assert os.path.realpath(module.__file__).startswith(venv + os.sep), module.__file__


@check("ASGI (FastAPI): a claim, then the replay")
def _():
    from fastapi import FastAPI, Request
    from fastapi.testclient import TestClient
    from idem_client import IdempotencyMiddleware

    app = FastAPI()
    app.add_middleware(IdempotencyMiddleware, dsn=dsn, scope="artifacts-python")
    effects = []

    @app.post("/orders", status_code=201)
    async def create_order(request: Request):
        order = await request.json()
        effects.append(order)
        return {"ordered": order["item"]}

    with TestClient(app) as client:
        send = lambda: client.post("/orders", json={"item": "book"}, headers={"Idempotency-Key": "artifact-1"})
        first, second = send(), send()
    assert first.status_code == 201 and second.status_code == 201, (first.status_code, second.status_code)
    assert "idempotent-replayed" not in first.headers, first.headers
    assert second.headers.get("idempotent-replayed") == "true", second.headers
    assert second.content == first.content, (first.content, second.content)
    assert len(effects) == 1, effects


@check("the context manager on a psycopg_pool connection: a claim, then the replay")
def _():
    from psycopg_pool import ConnectionPool
    from idem_client import Idem

    with ConnectionPool(dsn, kwargs={"autocommit": True}, min_size=1, max_size=1, open=True) as pool:
        for attempt in (1, 2):
            with pool.connection() as conn:
                with Idem(conn).claim("artifacts-cm", "k-1", {"amount": 10}) as run:
                    if attempt == 1:
                        assert not run.replayed
                        run.succeed(201, {"paid": 10})
                    else:
                        assert run.replayed and run.response_code == 201, (run.replayed, run.response_code)
                        assert run.response_body == {"paid": 10}, run.response_body


sys.exit(1 if failures else 0)
PY
  (cd "$work/python-app" && DATABASE_URL=$app_url timeout 300 venv/bin/python check.py) >"$work/python-check.log" 2>&1
  st=$?
  while IFS= read -r line; do
    case $line in
      "ok - "*) ok "python: ${line#ok - }" ;;
      "not ok - "*) note_failure "python: ${line#not ok - }" ;;
    esac
  done <"$work/python-check.log"
  grep -q '^ok - ' "$work/python-check.log" || { note_failure "python: check.py printed no result (status $st)"; tail -n 20 "$work/python-check.log"; }
  [ $st -eq 0 ] || grep -q '^not ok' "$work/python-check.log" || note_failure "python: check.py exited with $st"
  grep -A 15 '^not ok' "$work/python-check.log" | head -n 40
else
  note_failure "clients/python/README.md's install commands"; tail -n 25 "$work/python-install.log"
fi

finish
