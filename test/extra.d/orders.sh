#!/usr/bin/env bash
# The orders example (README's main job) under test: every crash point, the
# twins, a declined card, an unreachable provider, a changed body and a
# replay, each judged by the rows left in the shop and at the provider.
# Runs against the shared test cluster in PGHOST/PGPORT, in two databases
# of its own; the last line is "orders: N passed, N failed". The lock timeout
# leaves a loaded machine ample time to retry within it (the 409 checks).
set -uo pipefail
cd "$(dirname "$0")/../.."
perl test/orders/check.pl --shop-db orders_shop_test --provider-db orders_provider_test \
  --lock-timeout '2 seconds'
