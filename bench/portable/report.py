#!/usr/bin/env python3
"""bench/portable/run's raw measurements as the results table (markdown).

Every figure is the median over the rounds of one cell; the peers of a cell
ran interleaved, round by round, so their ratios compare like with like on a
noisy machine. Besides the ratio of the medians, the portable/ref column
gives the range of each round's own ratio (the two ran in the same round).
A cell measured with synchronous_commit off is named "<workload>, sync off".
With --waits (BENCH_WAITS=1), the wait events sampled in each cell of 8
clients or more follow the table.
"""
import argparse
import datetime
import statistics
from collections import defaultdict

TITLES = [
    ("newkey", "new-key lifecycle: claim, then mark_succeeded (2 transactions)"),
    ("replay", "replay: claim one of 200,000 succeeded keys"),
    ("hot", "hot keys: 16 keys; claim, mark_failed(retryable) if won"),
    ("consume_new", "consume_once of a new message (floor: INSERT ... ON CONFLICT DO NOTHING)"),
    ("consume_replay", "consume_once of a consumed message (floor: the same INSERT)"),
    ("outbox", "outbox: put, lease, publish (3 transactions; floor: ordered_queue, the same guarantees by hand)"),
    ("purge", "purge: batches of expired keys, 1 client (rows per second)"),
]
PEERS = ["portable", "cpp", "ref", "floor"]


def main():
    ap = argparse.ArgumentParser()
    for name in ("mode", "raw", "machine", "rounds", "seconds", "purge-batch", "purge-rows", "commit"):
        ap.add_argument("--" + name, required=True)
    ap.add_argument("--waits")
    ap.add_argument("--portable-options", default="")
    a = ap.parse_args()
    batch = int(a.purge_batch)

    tps = defaultdict(list)           # (workload, clients, peer) -> [tps of each round]
    by_round = {}                     # (workload, clients, peer, round) -> tps
    with open(a.raw) as f:
        for line in f:
            workload, clients, peer, rnd, value, sync = line.rstrip("\n").split("\t")
            if sync != "on":
                workload += f", sync {sync}"
            v = float(value) * (batch if workload == "purge" else 1)
            tps[(workload, int(clients), peer)].append(v)
            by_round[(workload, int(clients), peer, rnd)] = v
    med = {k: statistics.median(v) for k, v in tps.items()}

    def ratio(x, y):
        return f"{x / y:.2f}" if x and y else "-"

    def fig(x):
        return f"{x:,.0f}" if x else ("0" if x == 0 else "-")

    out = [f"# The portable engine beside the C++ engine, the reference and the floor "
           f"({datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC)", ""]
    if a.mode == "smoke":
        out += ["Smoke mode: one short round of a fixed number of transactions; the figures are not "
                "measurements.", ""]
    length = (f"{a.rounds} rounds of {a.seconds} s per peer and cell" if a.mode == "full"
              else "one round of 50 transactions per client, fsync off")
    syncs = "on" if all(", sync " not in k[0] for k in tps) else "on (and off where a cell says so)"
    out += [f"bench/portable/run at {a.commit}; {a.machine}; synchronous_commit {syncs}"
            f"{', fsync on' if a.mode == 'full' else ''}; pgbench -M prepared; {length}, the peers "
            f"interleaved in an order that rotates every round; the purge: {a.purge_rows} expired keys "
            f"per peer in batches of {batch}, one client. A shared machine: its 2 cores also ran other "
            "sessions' builds and tests, so the absolute figures move from round to round and from run "
            "to run; the ratios of peers measured in the same rounds are what count.", "",
            "Peers: **portable** = the portable engine (dist/idem-portable.sql, installed by a role "
            "that is not superuser, in a second cluster on the same machine, alike but without idem's "
            "library, as on a managed service); **C++** = the extension; **ref** = "
            "bench/reference.sql, a careful hand-written PL/pgSQL store of the design documents "
            "(no inbox or outbox: '-' there); **floor** = the least plain SQL a client could send "
            "(bench/workloads/*_floor.sql, bench/messages/*_plain.sql)."
            + (f" The portable engine's sessions ran with PGOPTIONS `{a.portable_options}`."
               if a.portable_options else ""), "",
            "| workload | clients | portable | C++ | ref | floor | portable/C++ | portable/ref "
            "| portable/ref per round (min-max) | portable/floor |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    behind = []
    for workload, title in TITLES:
        cells = sorted({(k[0], k[1]) for k in tps if k[0] == workload or k[0].startswith(workload + ", sync")})
        for workload, clients in cells:
            m = {p: med.get((workload, clients, p)) for p in PEERS}
            rounds = sorted({k[3] for k in by_round if k[:3] == (workload, clients, "portable")}, key=int)
            paired = [by_round[(workload, clients, "portable", r)] / by_round[(workload, clients, "ref", r)]
                      for r in rounds if by_round.get((workload, clients, "ref", r))]
            spread = f"{min(paired):.2f}-{max(paired):.2f}" if paired else "-"
            out.append("| " + " | ".join([
                workload, str(clients), fig(m["portable"]), fig(m["cpp"]), fig(m["ref"]), fig(m["floor"]),
                ratio(m["portable"], m["cpp"]), ratio(m["portable"], m["ref"]), spread,
                ratio(m["portable"], m["floor"])]) + " |")
            if m["portable"] is not None and m["ref"] and m["portable"] < m["ref"]:
                behind.append(f"- {workload}, {clients} clients: portable/ref "
                              f"{m['portable'] / m['ref']:.2f} ({1 - m['portable'] / m['ref']:.0%} slower)")
    out += ["", "Workloads: " + "; ".join(f"{w} = {t}" for w, t in TITLES) + ".", ""]
    out += ["Cells where the portable engine is slower than the reference (median of the rounds):", ""]
    out += behind or ["- none"]
    if a.waits:
        waits = defaultdict(lambda: defaultdict(int))   # (workload, clients, peer) -> event -> samples
        with open(a.waits) as f:
            for line in f:
                workload, sync, clients, peer, event, n = line.rstrip("\n").split("\t")
                if sync != "on":
                    workload += f", sync {sync}"
                waits[(workload, int(clients), peer)][event] += int(n)
        if waits:
            out += ["", "Wait events of the active sessions, sampled every 20 ms over every round "
                    "(CPU: no wait event), and the relation locks held off the fast path; samples, "
                    "the most frequent first:", "",
                    "| workload | clients | peer | samples |", "|---|---:|---|---|"]
            for (workload, clients, peer), events in sorted(waits.items()):
                top = sorted(events.items(), key=lambda e: -e[1])[:6]
                out.append(f"| {workload} | {clients} | {peer} | "
                           + ", ".join(f"{e} {n}" for e, n in top) + " |")
    print("\n".join(out))


if __name__ == "__main__":
    main()
