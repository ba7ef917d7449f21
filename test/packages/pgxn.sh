# The PGXN part of test/packages.sh (sourced): the release zip from
# scripts/pgxn_zip.sh, its layout, and `pgxn install` of it on a bookworm
# machine that has PostgreSQL 15, its headers, a compiler and pgxnclient and
# has never seen idem (a tarball of such a machine, cached, unpacked afresh).

PGXN_PACKAGES="postgresql-15 postgresql-server-dev-15 pgxnclient make g++ libssl-dev"

pkg_ensure_pgxn_machine() {
  local tarball=$PKG_CACHE/pgxn-bookworm.tar want dir=$PKG_CACHE/pgxn-bookworm.partial
  want=$(pkg_recipe bookworm "pgxn machine: minbase + $PGXN_PACKAGES")
  if pkg_stamp_ok "$tarball.stamp" "$want" && [ -f "$tarball" ]; then return 0; fi
  rm -rf "$dir"
  pkg_fresh_chroot bookworm "$dir" || return 1
  pkg_mount "$dir" bookworm
  { pkg_apt "$dir" update && pkg_apt "$dir" install $PGXN_PACKAGES && pkg_in "$dir" apt-get clean; } ||
    { pkg_unmount_all "$dir"; return 1; }
  pkg_unmount_all "$dir"
  tar -C "$dir" -cf "$tarball.partial" . && mv "$tarball.partial" "$tarball" || return 1
  rm -rf "$dir"
  printf '%s\n' "$want" >"$tarball.stamp"
}

# One top directory NAME-VERSION/ with META.json at its root; nothing of git
# and no build product.
zip_layout() {  # zip dist
  local names
  names=$(python3 -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$1") || return 1
  local tops
  tops=$(echo "$names" | cut -d/ -f1 | sort -u)
  [ "$tops" = "$2" ] || { echo "top directories: $tops"; return 1; }
  # A here-string, not a pipe: grep -q stops at its first match, and under
  # pipefail the writer's SIGPIPE on a long list would fail the check.
  grep -qx "$2/META.json" <<<"$names" || { echo "no $2/META.json"; return 1; }
  local bad
  bad=$(echo "$names" | grep -E "(^|/)\.git(/|\$)|\.(o|so|bc|zip)\$|^$2/(results|tmp_check|output_iso|log)/|/regression\.(diffs|out)\$" || true)
  [ -z "$bad" ] || { echo "does not belong in a release: $bad"; return 1; }
}

test_pgxn() {  # port
  MAJOR=15 PORT=$1
  # The zip is named by META.json's version (semantic: 1.2.0, or 1.3.0-dev
  # between releases, when it differs from the Debian one, 1.3.0~dev).
  local dist zip
  dist=idem-$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' "$TREE/META.json")
  echo "==> PGXN: $dist.zip on bookworm"
  mkdir -p "$WORK/dist"
  timed "pgxn_zip.sh (validates META.json)" "$WORK/dist.log" bash "$TREE/scripts/pgxn_zip.sh" --worktree "$WORK/dist" || return
  zip=$WORK/dist/$dist.zip
  sizes+=("$dist.zip: $(stat -c %s "$zip") bytes, $(python3 -m zipfile -l "$zip" | tail -n +2 | wc -l) entries")
  check "the zip's layout: one $dist/ with META.json, no .git, no build product" zip_layout "$zip" "$dist"
  check "META.json valid in the zip's own tree (check_meta_json.py)" \
    bash -c "d=\$(mktemp -d) && cd \$d && python3 -m zipfile -e '$zip' . && python3 $dist/scripts/check_meta_json.py $dist/META.json; st=\$?; rm -rf \$d; exit \$st"

  timed "bookworm with PostgreSQL 15 and pgxnclient (cached tarball)" "$WORK/pgxn-machine.log" pkg_ensure_pgxn_machine || return
  ROOT=$WORK/root-pgxn
  CHROOTS+=("$ROOT")
  timed "fresh copy of that machine" "$WORK/pgxn-fresh.log" \
    bash -c "mkdir -p '$ROOT' && tar -C '$ROOT' -xf '$PKG_CACHE/pgxn-bookworm.tar'" || return
  pkg_mount "$ROOT" bookworm
  cp "$zip" "$ROOT/root/"
  timed "pgxn install ./$dist.zip" "$WORK/pgxn-install.log" \
    pkg_in "$ROOT" sh -c "cd /root && nice pgxn install ./$dist.zip" || return
  check "the extension files are where PostgreSQL 15 finds them" \
    test -f "$ROOT/usr/share/postgresql/15/extension/idem.control" -a -f "$ROOT/usr/lib/postgresql/15/lib/idem.so"
  { pkg_in "$ROOT" pg_createcluster 15 main -p "$PORT" -- --no-sync &&
    echo "listen_addresses = ''" >>"$ROOT/etc/postgresql/15/main/postgresql.conf" &&
    pkg_in "$ROOT" pg_ctlcluster 15 main start; } >"$WORK/pgxn-cluster.log" 2>&1 ||
    { bad "a cluster on the PGXN machine" "$(cat "$WORK/pgxn-cluster.log")"; return; }
  check_eq "CREATE EXTENSION idem, a claim and a replay (no preload)" "${V11%.*}
new_claim
replay_success|201" \
    "$(csql postgres "CREATE EXTENSION idem; SELECT extversion FROM pg_extension WHERE extname = 'idem'" 2>&1
       csql postgres "SELECT kind FROM idem.claim_idempotency_key('pgxn', 'k', 'h')" 2>&1
       csql postgres "SELECT idem.mark_succeeded('pgxn', 'k', fence, 201) FROM idem.idempotency_request WHERE key = 'k'" >/dev/null 2>&1
       csql postgres "SELECT kind, response_code FROM idem.claim_idempotency_key('pgxn', 'k', 'h')" 2>&1)"
  pkg_in "$ROOT" pg_dropcluster --stop 15 main >/dev/null 2>&1
  pkg_unmount_all "$ROOT"
  rm -rf "$ROOT"
}
