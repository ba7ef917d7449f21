#!/usr/bin/env python3
"""Turns bench/citus/run's raw measurements into its table (markdown).

Each peer's figure is its median tps over the rounds of a cell; a ratio is
the peer's tps over one's in the same round (the peers of a round ran one
after the other, so a noisy machine hurts them alike), shown as the median
of the rounds with the lowest and highest beside it.
"""
import argparse
import datetime
import statistics
from collections import defaultdict

TITLES = {
    "newkey": "new key (claim, then mark_succeeded: 2 transactions)",
    "replay": "replay of a succeeded key",
    "local": "replay of one key the first worker holds",
}
# Each workload's peers: one, the middle peer, delegated.
MIDDLE = {"newkey": "plain", "replay": "plain", "local": "worker"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", required=True)
    ap.add_argument("--machine", required=True)
    ap.add_argument("--rounds", required=True)
    ap.add_argument("--seconds", required=True)
    ap.add_argument("--mode", required=True)
    ap.add_argument("--sync", required=True)
    ap.add_argument("--load-start", required=True)
    ap.add_argument("--load-end", required=True)
    a = ap.parse_args()

    tps = defaultdict(dict)   # (workload, clients) -> {(peer, round): tps}
    load = defaultdict(list)  # (workload, clients) -> 1-minute load averages
    with open(a.raw) as f:
        for line in f:
            workload, clients, peer, rnd, t, _lat, l1 = line.rstrip("\n").split("\t")
            tps[(workload, int(clients))][(peer, int(rnd))] = float(t)
            load[(workload, int(clients))].append(float(l1))

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"# idem on Citus against one node ({now})\n")
    print(f"{a.machine}. A coordinator and two workers and one server, all on this machine, "
          f"the C++ engine; pgbench -M prepared connected to one or to the coordinator; "
          f"{a.rounds} rounds" + (f" of {a.seconds} s" if a.mode == "full" else " (smoke: 50 transactions per client, not a measurement)")
          + f" per peer and cell, the peers rotating; synchronous_commit {a.sync}. Load average (1, 5, 15 min) "
          f"{a.load_start} at the start, {a.load_end} at the end.\n")
    print("- one: idem on one server without Citus")
    print("- plain: through the coordinator, the calls not delegated (the coordinator runs them "
          "and routes each statement to the key's worker, as in a transaction block)")
    print("- delegated: through the coordinator, the calls delegated to the key's worker "
          "(idem.citus_distribute())")
    print("- worker (the local cells): connected to the worker that holds the key, the call run there\n")
    header = None
    for (workload, clients) in sorted(tps, key=lambda k: (list(TITLES).index(k[0]), k[1])):
        middle = MIDDLE[workload]
        if header != middle:
            if header is not None:
                print()
            print(f"| workload | clients | one tps | {middle} tps | delegated tps | {middle} / one | delegated / one | load (1 min) |")
            print("|---|---:|---:|---:|---:|---|---|---|")
            header = middle
        cell = tps[(workload, clients)]
        rounds = sorted({r for (_p, r) in cell})
        med = {p: statistics.median([cell[(p, r)] for r in rounds if (p, r) in cell] or [0])
               for p in ("one", middle, "delegated")}
        ratios = {}
        for p in (middle, "delegated"):
            rs = [cell[(p, r)] / cell[("one", r)] for r in rounds
                  if cell.get(("one", r)) and (p, r) in cell]
            ratios[p] = (f"{statistics.median(rs):.2f} ({min(rs):.2f}–{max(rs):.2f})" if rs else "–")
        ls = load[(workload, clients)]
        print(f"| {TITLES[workload]} | {clients} | {med['one']:.0f} | {med[middle]:.0f} | "
              f"{med['delegated']:.0f} | {ratios[middle]} | {ratios['delegated']} | "
              f"{min(ls):.2f}–{max(ls):.2f} |")
    print("\nA ratio: the peer's tps over one's in the same round; the median of the rounds, "
          "the lowest and highest in brackets.")


if __name__ == "__main__":
    main()
