# The per-major part of test/packages.sh (sourced): build the 1.1 and 1.0
# packages, then in one fresh chroot of the suite: install 1.1 and use it,
# remove and purge it, install 1.0, fill keys in every status, upgrade to 1.1,
# ALTER EXTENSION idem UPDATE, check every key, purge again.
# Uses ROOT, MAJOR and PORT of the major under test.

csql() {  # database sql: one statement (or several, the last one's rows)
  pkg_in "$ROOT" runuser -u postgres -- psql -XAtq -v ON_ERROR_STOP=1 -h /var/run/postgresql -p "$PORT" -d "$1" -c "$2"
}
csql_stdin() {  # database < script
  pkg_in "$ROOT" runuser -u postgres -- psql -XAtq -v ON_ERROR_STOP=1 -h /var/run/postgresql -p "$PORT" -d "$1" -f -
}
# Polls until the query returns t; never waits a fixed time.
poll() {  # seconds database query
  local deadline=$(($(date +%s) + $1))
  until [ "$(csql "$2" "$3" 2>/dev/null)" = t ]; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo "not true within $1 s: $3"; return 1; }
    sleep 0.2
  done
}

fill_keys() { csql_stdin idemtest <"$TREE/test/packages/keys_1_0.sql"; }

# A cluster as an administrator would make one, with idem preloaded.
create_cluster() {  # worker_enabled
  pkg_in "$ROOT" pg_createcluster "$MAJOR" main -p "$PORT" -- --no-sync || return 1
  # Appended to postgresql.conf: bookworm's clusters have no conf.d.
  cat >>"$ROOT/etc/postgresql/$MAJOR/main/postgresql.conf" <<CONF || return 1
listen_addresses = ''
fsync = off
shared_preload_libraries = 'idem'
idem.database = 'idemtest'
idem.naptime = 1
idem.worker_enabled = $1
CONF
  pkg_in "$ROOT" pg_ctlcluster "$MAJOR" main start && csql postgres "CREATE DATABASE idemtest"
}

no_cluster_made() {
  local clusters
  clusters=$(pkg_in "$ROOT" pg_lsclusters -h)
  [ -z "$clusters" ] || { echo "clusters after the install: $clusters"; return 1; }
  ! compgen -G "$ROOT/var/lib/postgresql/*/*/postmaster.pid" >/dev/null || { echo "a server is running"; return 1; }
}

# The library, the control file, every versioned script the build installs
# (those in sql/, and a base script for every version an update script
# reaches, which make generates), and the documents.
shipped_files() {  # source-dir
  local ext=$ROOT/usr/share/postgresql/$MAJOR/extension default expected actual missing=()
  default=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$1/idem.control")
  expected=$({ echo idem.control; echo "idem--$default.sql"; ls "$1/sql" | grep '^idem--.*\.sql$'
               ls "$1/sql" | sed -n 's/^idem--[0-9.]*--\([0-9.]*\)\.sql$/idem--\1.sql/p'; } | sort -u)
  actual=$(ls "$ext" | grep '^idem[.-]' | sort)
  [ "$expected" = "$actual" ] ||
    { echo "extension directory: expected"; echo "$expected"; echo "found"; echo "$actual"; return 1; }
  local f
  for f in "usr/lib/postgresql/$MAJOR/lib/idem.so" "usr/share/doc/postgresql-$MAJOR-idem/copyright" \
    "usr/share/doc/postgresql-$MAJOR-idem/README.md.gz" "usr/share/doc/postgresql-$MAJOR-idem/changelog.Debian.gz"; do
    [ -f "$ROOT/$f" ] || missing+=("/$f")
  done
  [ ${#missing[@]} -eq 0 ] || { echo "missing: ${missing[*]}"; return 1; }
}

# After apt remove/purge: nothing of the package's file list is left but
# directories other packages own, and no idem file in the server's directories.
nothing_left() {  # file-list
  local path left=()
  while read -r path; do
    [ "$path" != /. ] && [ -e "$ROOT$path" ] || continue
    if [ -d "$ROOT$path" ] && pkg_in "$ROOT" dpkg-query -S "$path" >/dev/null 2>&1; then continue; fi
    left+=("$path")
  done <"$1"
  left+=($(cd "$ROOT" && find "usr/share/postgresql/$MAJOR/extension" "usr/lib/postgresql/$MAJOR/lib" -name 'idem*'))
  [ ${#left[@]} -eq 0 ] || { echo "left behind: ${left[*]}"; return 1; }
}
package_state() { pkg_in "$ROOT" dpkg-query -W -f='${db:Status-Status}' "postgresql-$MAJOR-idem" 2>/dev/null || echo not-installed; }

# apt remove or apt purge (the package has no conffiles, so either must
# leave nothing), then the server directories and dpkg's database are checked.
remove_package() {  # label remove|purge
  pkg_in "$ROOT" dpkg -L "postgresql-$MAJOR-idem" >"$WORK/files-$MAJOR.txt"
  pkg_in "$ROOT" pg_dropcluster --stop "$MAJOR" main >>"$WORK/$2-$MAJOR.log" 2>&1
  timed "$1: apt $2" "$WORK/$2-$MAJOR.log" pkg_in "$ROOT" apt "$2" -y "postgresql-$MAJOR-idem"
  check "$1: apt $2 leaves no file of the package" nothing_left "$WORK/files-$MAJOR.txt"
  check_eq "$1: dpkg knows no postgresql-$MAJOR-idem" not-installed "$(package_state)"
  check "$1: dpkg -L finds nothing" bash -c "! chroot '$ROOT' dpkg -L postgresql-$MAJOR-idem >/dev/null 2>&1"
  check_eq "$1: the server stays installed" installed \
    "$(pkg_in "$ROOT" dpkg-query -W -f='${db:Status-Status}' "postgresql-$MAJOR")"
}

# The build of one package, its warnings and lintian's findings.
# The background builds (test/packages.sh) have made it; this finds it in the
# cache, or builds it if they could not.
build_and_judge() {  # suite label source-dir
  local suite=$1 label=$2 st=0
  wait_for_builds "$MAJOR"
  build_cached "$suite" "$3" "$label" >>"$WORK/build-$MAJOR-$label.log" 2>&1 || st=$?
  timings+=("$(printf '%-52s %6s s%s' "build $label for $MAJOR in $suite" "$(cat "$BUILT/seconds" 2>/dev/null || echo -)" \
    "$(head -1 "$WORK/build-$MAJOR-$label.log" | grep -q '^(cached' && echo ' (cached by an earlier run)')")")
  DEB=$(ls "$BUILT"/postgresql-"$MAJOR"-idem_*.deb 2>/dev/null | head -1)
  if [ $st = 1 ] || [ -z "$DEB" ]; then
    DEB=
    return 1
  fi
  [ -n "$DEB" ] && sizes+=("$(basename "$DEB"): $(stat -c %s "$DEB") bytes, Installed-Size $(dpkg-deb -f "$DEB" Installed-Size) KiB")
  return 0
}

test_major() {  # major port
  MAJOR=$1 PORT=$2
  local suite deb11 deb10 mm
  suite=$(pkg_suite "$MAJOR")
  # The version CREATE EXTENSION makes: the tree's control file (between
  # releases it is ahead of the package's upstream version).
  mm=$(sed -n "s/^default_version = '\(.*\)'$/\1/p" "$WORK/src-1.1/idem/idem.control")
  echo "==> PostgreSQL $MAJOR ($suite)"

  if build_and_judge "$suite" 1.1 "$WORK/src-1.1/idem"; then
    ok "build postgresql-$MAJOR-idem $V11-1 (dpkg-buildpackage in $suite)"
    deb11=$DEB
  else
    bad "build postgresql-$MAJOR-idem $V11-1 (dpkg-buildpackage in $suite)" "$(tail -30 "$WORK/build-$MAJOR-1.1.log")"
    return
  fi
  check_eq "no warning in the build" "" "$(cat "$BUILT/warnings.txt")"
  check_eq "lintian: no error" "" "$(grep '^E: ' "$BUILT/lintian.txt")"
  echo "      lintian ($suite): $(grep -cE '^[EWIP]: ' "$BUILT/lintian.txt") findings"
  grep -E '^[EWIP]: ' "$BUILT/lintian.txt" | sed 's/^/        /'

  if build_and_judge "$suite" 1.0 "$WORK/src-1.0/idem"; then
    deb10=$DEB
    ok "build postgresql-$MAJOR-idem 1.0.0-1 from $RELEASED_1_0"
    [ -s "$BUILT/warnings.txt" ] && echo "      (1.0's own build warns on $MAJOR: $(grep -m1 -o 'warning: .*' "$BUILT/warnings.txt"))"
  elif [[ $RELEASED_1_0_MAJORS == *" $MAJOR "* ]]; then
    bad "build postgresql-$MAJOR-idem 1.0.0-1 from $RELEASED_1_0" "$(tail -30 "$WORK/build-$MAJOR-1.0.log")"
  else
    echo "      1.0 ($RELEASED_1_0, released for${RELEASED_1_0_MAJORS% }) does not build for PostgreSQL $MAJOR:" \
      "$(grep -m1 -E 'error:' "$BUILT/build.log" 2>/dev/null)"
    echo "      so no 1.0 package exists there: the upgrade starts from CREATE EXTENSION idem VERSION '1.0' under the $V11 package"
  fi

  ROOT=$WORK/root-$suite
  CHROOTS+=("$ROOT")
  timed "fresh $suite chroot (unpack the minbase tarball)" "$WORK/fresh-$MAJOR.log" pkg_fresh_chroot "$suite" "$ROOT" || return
  pkg_mount "$ROOT" "$suite"
  mkdir -p "$ROOT/debs"
  cp "$deb11" ${deb10:+"$deb10"} "$ROOT/debs/"
  timed "apt-get update" "$WORK/update-$MAJOR.log" pkg_apt "$ROOT" update || return

  # A fresh install of the new package.
  timed "apt install ./$(basename "$deb11") (and postgresql-$MAJOR)" "$WORK/install-$MAJOR.log" \
    pkg_in "$ROOT" apt install -y --no-install-recommends "/debs/$(basename "$deb11")" || return
  check "the install made no cluster and started no server" no_cluster_made
  check "ships the library, the control file, every versioned script, the docs" shipped_files "$WORK/src-1.1/idem"
  timed "pg_createcluster and start, idem preloaded" "$WORK/cluster-$MAJOR.log" create_cluster on || return
  csql idemtest "CREATE EXTENSION idem" >/dev/null
  check_eq "CREATE EXTENSION idem makes version $mm" "$mm" \
    "$(csql idemtest "SELECT extversion FROM pg_extension WHERE extname = 'idem'")"
  check_eq "a claim: new_claim with a fence" "new_claim|t" \
    "$(csql idemtest "SELECT kind, fence > 0 FROM idem.claim_idempotency_key('pkg', 'k1', 'h1')")"
  csql idemtest "SELECT idem.mark_succeeded('pkg', 'k1', fence, 201, '{\"order\": 1}')
                   FROM idem.idempotency_request WHERE scope = 'pkg' AND key = 'k1'" >/dev/null
  check_eq "a replay: the stored response" 'replay_success|201|{"order": 1}' \
    "$(csql idemtest "SELECT kind, response_code, response_body FROM idem.claim_idempotency_key('pkg', 'k1', 'h1')")"
  local t0
  t0=$(now_ms)
  csql idemtest "SELECT kind FROM idem.claim_idempotency_key('pkg', 'zombie', 'h', lock_timeout => '1 second')" >/dev/null
  if poll 60 idemtest "SELECT status <> 'processing' FROM idem.idempotency_request WHERE scope = 'pkg' AND key = 'zombie'"; then
    ok "the worker sweeps a zombie key ($(awk "BEGIN {printf \"%.1f\", ($(now_ms) - $t0) / 1000}") s after its claim, lock 1 s, naptime 1 s)"
  else
    bad "the worker sweeps a zombie key within 60 s"
  fi
  check_eq "swept by the worker (idem.stats), not by hand" "t|t" \
    "$(csql idemtest "SELECT rows_swept >= 1, worker_rounds >= 1 FROM idem.stats WHERE datname = 'idemtest'")"
  remove_package "fresh $V11" remove

  # The upgrade: keys made by 1.0, the 1.1 package installed over it.
  local from10=1
  if [ -n "${deb10:-}" ]; then
    timed "apt install ./$(basename "$deb10")" "$WORK/install10-$MAJOR.log" \
      pkg_in "$ROOT" apt install -y --no-install-recommends "/debs/$(basename "$deb10")" || return
  else
    from10=0
    timed "apt install ./$(basename "$deb11") (no 1.0 package)" "$WORK/install10-$MAJOR.log" \
      pkg_in "$ROOT" apt install -y --no-install-recommends "/debs/$(basename "$deb11")" || return
  fi
  create_cluster off >"$WORK/cluster10-$MAJOR.log" 2>&1 || { bad "cluster for the upgrade" "$(cat "$WORK/cluster10-$MAJOR.log")"; return; }
  csql idemtest "CREATE EXTENSION idem VERSION '1.0'" >/dev/null
  check "keys in every status, made by idem 1.0" fill_keys
  check "the stale key's lock and the expired key's retention have run out" \
    poll 30 idemtest "SELECT bool_and(CASE key WHEN 'stale' THEN locked_until ELSE expires_at END < clock_timestamp())
                        FROM idem.idempotency_request WHERE key IN ('stale', 'expired')"
  local rows_q replays_q rows_before replays_before max_fence retry_fence
  rows_q="SELECT (scope, key, request_hash, status, recovery_point, fence, attempt_count, claimed_by, claimed_at,
                  locked_until, response_code, response_body, result_ref_type, result_ref_id, failure_code,
                  failure_message, created_at, updated_at, finished_at, expires_at)::text
            FROM idem.idempotency_request ORDER BY scope, key"
  replays_q="SELECT (c.*)::text FROM (VALUES ('ok', 'h-ok'), ('final', 'h-final')) AS k(key, hash),
                    idem.claim_idempotency_key('up', k.key, k.hash) AS c ORDER BY k.key"
  rows_before=$(csql idemtest "$rows_q")
  replays_before=$(csql idemtest "$replays_q")
  max_fence=$(csql idemtest "SELECT max(fence) FROM idem.idempotency_request")
  retry_fence=$(csql idemtest "SELECT fence FROM idem.idempotency_request WHERE key = 'retry'")
  check_eq "six keys before the upgrade" 6 "$(echo "$rows_before" | grep -c .)"

  if [ $from10 = 1 ]; then
    timed "apt install ./$(basename "$deb11") over 1.0.0-1" "$WORK/upgrade-$MAJOR.log" \
      pkg_in "$ROOT" apt install -y --no-install-recommends "/debs/$(basename "$deb11")" || return
    check_eq "dpkg: the package is upgraded" "$V11-1" \
      "$(pkg_in "$ROOT" dpkg-query -W -f='${Version}' "postgresql-$MAJOR-idem")"
  fi
  timed "restart (the $V11 library)" "$WORK/restart-$MAJOR.log" pkg_in "$ROOT" pg_ctlcluster "$MAJOR" main restart || return
  check_eq "before the update, the $V11 library replays the 1.0 schema's keys" "$replays_before" \
    "$(csql idemtest "$replays_q" 2>&1)"
  timed "ALTER EXTENSION idem UPDATE" "$WORK/alter-$MAJOR.log" csql idemtest "ALTER EXTENSION idem UPDATE"
  check_eq "updated to $mm" "$mm" "$(csql idemtest "SELECT extversion FROM pg_extension WHERE extname = 'idem'")"
  check_eq "every key's row intact" "$rows_before" "$(csql idemtest "$rows_q" 2>&1)"
  check_eq "replays equal" "$replays_before" "$(csql idemtest "$replays_q" 2>&1)"
  check_eq "fences rising: retryable, stale and expired keys taken over, a new key" \
    "retry|retryable_failure|t|order_created
stale|processing_stale|t|started
expired|new_claim|t|started
new|new_claim|t|started" \
    "$(csql idemtest "SELECT k.key, c.kind, c.fence > $max_fence, c.recovery_point
                        FROM (VALUES (1, 'retry'), (2, 'stale'), (3, 'expired'), (4, 'new')) AS k(n, key),
                             idem.claim_idempotency_key('up', k.key, 'h-' || k.key) AS c ORDER BY k.n" 2>&1)"
  check_eq "the active key is still owned" "processing_active" \
    "$(csql idemtest "SELECT kind FROM idem.claim_idempotency_key('up', 'active', 'h-active')" 2>&1)"
  check_eq "the old owner's fence is refused (P4012), the new owner's accepted" "P4012|ok" \
    "$(csql idemtest "CREATE FUNCTION pg_temp.sqlstate_of(statement text) RETURNS text LANGUAGE plpgsql AS \$\$
                        BEGIN EXECUTE statement; RETURN 'ok'; EXCEPTION WHEN OTHERS THEN RETURN SQLSTATE; END \$\$;
                      SELECT pg_temp.sqlstate_of(format('SELECT idem.mark_succeeded(%L, %L, %s, 200)', 'up', 'retry', f.old))
                             || '|' || pg_temp.sqlstate_of(format('SELECT idem.mark_succeeded(%L, %L, %s, 200)', 'up', 'retry', f.new))
                        FROM (SELECT (SELECT fence FROM idem.idempotency_request WHERE key = 'retry') AS new,
                                     $retry_fence AS old) AS f" 2>&1)"
  check_eq "a hand-written UPDATE that breaks an invariant is refused (23514)" 23514 \
    "$(csql idemtest "CREATE FUNCTION pg_temp.sqlstate_of(statement text) RETURNS text LANGUAGE plpgsql AS \$\$
                        BEGIN EXECUTE statement; RETURN 'ok'; EXCEPTION WHEN OTHERS THEN RETURN SQLSTATE; END \$\$;
                      SELECT pg_temp.sqlstate_of('UPDATE idem.idempotency_request SET response_code = NULL WHERE key = ''ok''')" 2>&1)"
  remove_package "upgraded" purge

  pkg_unmount_all "$ROOT"
  rm -rf "$ROOT"
}
