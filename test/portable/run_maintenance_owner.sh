#!/usr/bin/env bash
# test/portable/sql/run_maintenance_owner.sql against its expected output, on
# a running server without idem's library: a database owned by a role that
# is not a superuser (maint_dbo, with CREATEROLE, as a managed service's
# admin user is), dist/idem-portable.sql installed by that role, the file run
# as that role. Needs PGHOST, PGPORT, a superuser in PGUSER, psql on PATH,
# and `make portable` done. Prints "run_maintenance_owner ... ok|FAILED".
#
#   test/portable/run_maintenance_owner.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?OUTDIR}
mkdir -p "$out"
db=idem_maint_owner
psql -X -q -d postgres -v ON_ERROR_STOP=1 >"$out/setup.log" 2>&1 <<SQL || { cat "$out/setup.log"; exit 1; }
DROP DATABASE IF EXISTS $db;
DROP ROLE IF EXISTS maint_dbo;
CREATE ROLE maint_dbo LOGIN CREATEROLE NOSUPERUSER;
CREATE DATABASE $db OWNER maint_dbo TEMPLATE template0;
ALTER DATABASE $db SET lc_messages TO 'C';
SQL
psql -X -q -U maint_dbo -d "$db" -v ON_ERROR_STOP=1 -f dist/idem-portable.sql >>"$out/setup.log" 2>&1 ||
  { cat "$out/setup.log"; exit 1; }
psql -X -a -q -U maint_dbo -d "$db" -v SHOW_CONTEXT=never \
  <test/portable/sql/run_maintenance_owner.sql >"$out/run_maintenance_owner.out" 2>&1
psql -X -q -d postgres -c "DROP DATABASE $db" -c "DROP ROLE maint_dbo" >>"$out/setup.log" 2>&1
if diff -U3 test/portable/expected/run_maintenance_owner.out "$out/run_maintenance_owner.out" >"$out/run_maintenance_owner.diff"; then
  echo "run_maintenance_owner ... ok"
else
  echo "run_maintenance_owner ... FAILED (diff: $out/run_maintenance_owner.diff)"
  exit 1
fi
