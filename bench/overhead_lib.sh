# What bench/binding_overhead.sh, bench/policy_overhead.sh and
# bench/stats_overhead.sh share: a private install of the freshly built
# extension, a work directory the cluster user can write, the new-key
# lifecycle they all measure, and the median of their ABBA pairs.
# Sourced after scripts/lib.sh, from the repository's root.

# Builds, installs into a fresh work directory /tmp/idem-NAME.XXXXXX and
# sets WORK; the clusters named are stopped and the directory removed on exit.
prepare_overhead_work() {  # name cluster-dir...
  local name=$1
  shift
  ensure_packages
  build_extension
  WORK=$(mktemp -d "/tmp/idem-$name.XXXXXX")
  chmod 755 "$WORK"
  local stops="" dir
  for dir in "$@"; do
    stops+="stop_cluster \"\$WORK/$dir\"; "
    mkdir -p "$WORK/$dir"
  done
  # shellcheck disable=SC2064  # the cluster list is fixed now, WORK at exit
  trap "${stops}rm -rf \"\$WORK\"" EXIT
  make_private_install "$WORK/install"
  [ "$(id -u)" -eq 0 ] && chown -R postgres "$WORK"
  export PATH="$PGBIN:$PATH"
}

# A new key's lifecycle, claim then mark_succeeded: $WORK/lifecycle.sql.
write_lifecycle_script() {
  cat >"$WORK/lifecycle.sql" <<'SQL'
\set r random(1, 9000000000000000000)
SELECT fence FROM idem.claim_idempotency_key('bench', :r::text, 'h') \gset
SELECT idem.mark_succeeded('bench', :r::text, :fence, 201);
SQL
  chmod 644 "$WORK/lifecycle.sql"
}

# pgbench's output on stdin -> its tps figure.
tps_of() { grep -oE '^tps = [0-9.]+' | grep -oE '[0-9.]+'; }

# Numbers, one a line -> their median.
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
