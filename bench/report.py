#!/usr/bin/env python3
"""Turns bench/run's raw measurements into the results table (markdown).

Every figure is the median over the rounds of one cell; the peers of a cell
ran interleaved, so their ratios compare like with like on a noisy machine.
"""
import argparse
import datetime
import json
import os
import statistics
from collections import defaultdict

WORKLOAD_TITLES = {
    "newkey": "new-key lifecycle (claim, then complete: 2 transactions)",
    "replay": "replay of a succeeded key",
    "hot": "hot keys (16 keys; claim, complete if won)",
}

# (workload, sync, clients or None for all) -> [(peer, minimum ratio of idem to it)]
def targets(workload, sync, clients, top_clients):
    wanted = []
    if workload == "newkey":
        wanted.append(("floor", 1.0))
        if clients == top_clients:
            wanted.append(("ref", 1.3))
    elif workload == "replay" and sync == "on":
        wanted.append(("ref", 2.0))
    elif workload == "hot" and clients == top_clients:
        wanted.append(("ref", 1.3))
    return wanted


# The physical floor: each workload's least possible peer, and the ratio
# idem must reach against it (bench/README.md, "Restated speed targets").
FLOOR_PEERS = {"newkey": ("bare", 0.9), "replay": ("pkread", 0.9)}

# The inbox and outbox cells: their peers (bench/run, "inbox and outbox") in
# the order shown, and the one each is held to with its minimum ratio.
MESSAGE_CELLS = {
    "inbox_new": ("consume_once, new message", ("kept", "plain"), ("kept", 1.0)),
    "inbox_replay": ("consume_once, replay", ("plain", "pkread"), ("plain", 1.0)),
    "outbox": ("outbox put + lease + publish, prepared", ("ordered",), ("ordered", 1.0)),
    "outbox_simple": ("outbox put + lease + publish, simple protocol", ("ordered",), ("ordered", 1.0)),
}


def messages_table(med_tps, med_lat, verdicts):
    cells = sorted({(w, s, c) for (w, s, c, _p) in med_tps if w in MESSAGE_CELLS},
                   key=lambda x: (list(MESSAGE_CELLS).index(x[0]), x[1] != "on", x[2]))
    if not cells:
        return []
    out = ["Inbox and outbox against plain tables written by hand (bench/messages/): kept = the plain inbox "
           "with consume_once's invariants (the hash compared on a seen id, an expiry index), plain = "
           "INSERT ... ON CONFLICT DO NOTHING, pkread = one primary-key read, ordered = a queue with the "
           "outbox's guarantees; median tps of the rounds:", "",
           "| cell | sync commit | clients | idem tps | idem ms | peers' tps | idem/peer | target | met |",
           "|---|---|---:|---:|---:|---|---|---|---|"]
    for workload, sync, clients in cells:
        title, peers, (held, minimum) = MESSAGE_CELLS[workload]
        a = med_tps.get((workload, sync, clients, "idem"))
        ratios, tps_text = [], []
        for peer in peers:
            b = med_tps.get((workload, sync, clients, peer))
            tps_text.append(f"{peer} {b:,.0f}" if b else f"{peer} n/a")
            ratios.append(f"{peer} {a / b:.2f}" if a and b else f"{peer} n/a")
        b = med_tps.get((workload, sync, clients, held))
        r = a / b if a and b else None
        ok = r is not None and r >= minimum
        verdicts.append((f"{workload}, sync {sync}, {clients} clients: idem/{held} ≥ {minimum:g}",
                         f"{r:.2f}" if r else "n/a", ok))
        lat = med_lat.get((workload, sync, clients, "idem"))
        a_text = f"{a:,.0f}" if a else "n/a"
        lat_text = f"{lat:.3f}" if lat else "n/a"
        out.append(f"| {title} | {sync} | {clients} | {a_text} | {lat_text} | {'; '.join(tps_text)} | "
                   f"{'; '.join(ratios)} | ≥ {minimum:g}× {held} | {'yes' if ok else '**no**'} |")
    out.append("")
    return out
WAL_PEERS = ("idem", "ref", "floor", "bare", "pkread")


def physical_floor(med_tps, wal, cells, verdicts):
    out = []
    rows = [c for c in cells if c[0] in FLOOR_PEERS and (c[0], c[1], c[2], FLOOR_PEERS[c[0]][0]) in med_tps]
    if not rows:
        return out
    out.append("The physical floor: the new key against a table with only a primary key and one-column "
               "checks (bare), the replay against one primary-key SELECT of the stored response (pkread); "
               "WAL bytes per pgbench transaction (one lifecycle, or one replay), median of the rounds:")
    out.append("")
    out.append("| workload | sync commit | clients | idem tps | floor peer | its tps | idem/it | target | met | "
               + " | ".join(f"{p} WAL B" for p in WAL_PEERS) + " |")
    out.append("|---|---|---:|---:|---|---:|---:|---|---|" + "---:|" * len(WAL_PEERS))
    for workload, sync, clients in rows:
        peer, minimum = FLOOR_PEERS[workload]
        a, b = med_tps.get((workload, sync, clients, "idem")), med_tps.get((workload, sync, clients, peer))
        r = a / b if a and b else None
        ok = r is not None and r >= minimum
        verdicts.append((f"{workload}, sync {sync}, {clients} clients: idem/{peer} ≥ {minimum:g}",
                         f"{r:.2f}" if r else "n/a", ok))
        wal_text = []
        for p in WAL_PEERS:
            v = wal.get((workload, sync, clients, p))
            wal_text.append(f"{statistics.median(v):,.0f}" if v else "-")
        out.append("| " + " | ".join([
            workload, sync, str(clients), f"{a:,.0f}" if a else "n/a", peer, f"{b:,.0f}" if b else "n/a",
            f"{r:.2f}" if r else "n/a", f"≥ {minimum:g}", "yes" if ok else "**no**"] + wal_text) + " |")
    out.append("")
    return out


def bound_table(med_tps, cells, verdicts, flush_slow):
    """Peer bound: idem's new-key script with idem.bind_lock_to_session on,
    whose claim commits without its own flush when it wrote nothing else.
    Its targets: with synchronous_commit on, 1.3x the floor at one client
    (1.6x where a flush costs about 1 ms) and ahead of it with more; the
    unbound idem with synchronous_commit off, 0.85x the floor at one client."""
    rows = [c for c in cells if c[0] == "newkey" and (c[0], c[1], c[2], "bound") in med_tps]
    if not rows:
        return []
    out = ["Bound claims: the new-key lifecycle with idem.bind_lock_to_session on (bound), against "
           "idem unbound and the floor in the same rounds; median tps:", "",
           "| sync commit | clients | bound tps | idem tps | floor tps | bound/floor | idem/floor | bound/idem "
           "| target | met |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for workload, sync, clients in rows:
        b, i, f = (med_tps.get((workload, sync, clients, p)) for p in ("bound", "idem", "floor"))
        r = lambda x, y: x / y if x and y else None
        goal = None
        if sync == "on":
            goal = ("bound", (1.6 if flush_slow else 1.3) if clients == 1 else 1.0)
        elif clients == 1:
            goal = ("idem", 0.85)
        goal_text, met = "-", "-"
        if goal:
            who, minimum = goal
            v = r(b if who == "bound" else i, f)
            ok = v is not None and v >= minimum
            goal_text = f"{who}/floor ≥ {minimum:g}" if clients == 1 else f"{who}/floor > {minimum:g}"
            if clients != 1:
                ok = v is not None and v > minimum
            met = "yes" if ok else "**no**"
            verdicts.append((f"{workload}, sync {sync}, {clients} clients: {goal_text}",
                             f"{v:.2f}" if v else "n/a", ok))
        fmt = lambda v, d=0: "n/a" if v is None else f"{v:,.{d}f}"
        out.append("| " + " | ".join([sync, str(clients), fmt(b), fmt(i), fmt(f), fmt(r(b, f), 2),
                                       fmt(r(i, f), 2), fmt(r(b, i), 2), goal_text, met]) + " |")
    out.append("")
    return out


def ab_table(med_tps, cells, tps_by_round):
    """BENCH_AB: idem against itself with the file applied (peer ab), and
    both against the cell's physical floor peer, all in the same rounds.
    Besides the ratio of the medians, the median of the rounds' own ab/idem
    ratios (the two ran in the same round, under much the same load)."""
    rows = [c for c in cells if (c[0], c[1], c[2], "ab") in med_tps]
    if not rows:
        return []
    out = ["A/B: idem as installed against peer ab (idem with the file applied before each of its runs), "
           "alternating round by round; medians of the rounds, and the median of each round's own ab/idem:", "",
           "| workload | sync commit | clients | idem tps | ab tps | ab/idem | ab/idem per round (median; all) "
           "| floor peer | idem/it | ab/it |",
           "|---|---|---:|---:|---:|---:|---|---|---:|---:|"]
    for workload, sync, clients in rows:
        a = med_tps.get((workload, sync, clients, "idem"))
        b = med_tps.get((workload, sync, clients, "ab"))
        peer = FLOOR_PEERS.get(workload, ("floor", 0))[0]
        f = med_tps.get((workload, sync, clients, peer))
        r = lambda x, y: f"{x / y:.3f}" if x and y else "n/a"
        rounds = sorted({k[4] for k in tps_by_round if k[:4] == (workload, sync, clients, "ab")}, key=int)
        paired = [tps_by_round[(workload, sync, clients, "ab", n)] / tps_by_round[(workload, sync, clients, "idem", n)]
                  for n in rounds if tps_by_round.get((workload, sync, clients, "idem", n))]
        paired_text = (f"{statistics.median(paired):.3f}; " + " ".join(f"{v:.2f}" for v in paired)) if paired else "n/a"
        out.append(f"| {workload} | {sync} | {clients} | {a:,.0f} | {b:,.0f} | {r(b, a)} | {paired_text} | {peer} | "
                   f"{r(a, f)} | {r(b, f)} |")
    out.append("")
    return out


def wait_samples(raw):
    """What the backends of the cells with the most clients waited on."""
    counts = defaultdict(lambda: defaultdict(int))
    for name in sorted(os.listdir(raw)):
        if not (name.startswith("waits-") and name.endswith(".tsv")):
            continue
        workload, peer, clients, sync, _round = name[len("waits-"):-len(".tsv")].split("-")
        for row in read_tsv(os.path.join(raw, name)):
            if len(row) == 2 and row[1].isdigit():
                counts[(workload, sync, int(clients), peer)][row[0]] += int(row[1])
    if not counts:
        return []
    out = ["Wait events of the pgbench backends in the cells with the most clients (pg_stat_activity "
           "every 50 ms, all rounds; CPU = waiting on nothing, Client:ClientRead = waiting for the next "
           "statement):", "", "| workload | sync commit | clients | peer | samples | wait events (share) |",
           "|---|---|---:|---|---:|---|"]
    for (workload, sync, clients, peer), seen in sorted(counts.items()):
        total = sum(seen.values())
        top = sorted(seen.items(), key=lambda x: -x[1])[:5]
        out.append(f"| {workload} | {sync} | {clients} | {peer} | {total:,} | "
                   + ", ".join(f"{w} {n / total:.0%}" for w, n in top) + " |")
    out.append("")
    return out


def read_tsv(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="full")
    ap.add_argument("--raw", required=True)
    ap.add_argument("--machine", default="?")
    ap.add_argument("--rounds", default="?")
    ap.add_argument("--seconds", default="?")
    ap.add_argument("--purge-batch", default="?")
    ap.add_argument("--flush-slow", action="store_true",
                    help="the run made a flush cost about 1 ms (BENCH_FLUSH_DELAY)")
    args = ap.parse_args()

    tps = defaultdict(list)
    lat = defaultdict(list)
    wal = defaultdict(list)  # WAL bytes per pgbench transaction, one per round
    tps_by_round = {}
    for row in read_tsv(os.path.join(args.raw, "pgbench.tsv")):
        workload, sync, clients, peer, round_, t, l = row[:7]
        key = (workload, sync, int(clients), peer)
        tps[key].append(float(t))
        tps_by_round[key + (round_,)] = float(t)
        lat[key].append(float(l))
        if len(row) >= 9 and int(row[8]) > 0:
            wal[key].append(int(row[7]) / int(row[8]))
    med_tps = {k: statistics.median(v) for k, v in tps.items()}
    med_lat = {k: statistics.median(v) for k, v in lat.items()}

    out = []
    verdicts = []
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out.append(f"# idem benchmark, {now}" + (" (smoke mode: not a measurement)" if args.mode != "full" else ""))
    out.append("")
    out.append(f"Machine: {args.machine}. pgbench -M prepared, {args.rounds} interleaved rounds of "
               f"{args.seconds} s per peer and cell; medians. tps = transactions per second as "
               "pgbench counts them (one pass of the workload script), latency in ms.")
    out.append("")
    out.append("| workload | sync commit | clients | idem tps | ref tps | floor tps | idem ms | ref ms | floor ms | idem/ref | idem/floor | target | met |")
    out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    cells = sorted({(w, s, c) for (w, s, c, _p) in med_tps if w in WORKLOAD_TITLES},
                   key=lambda x: (list(WORKLOAD_TITLES).index(x[0]), x[1] != "on", x[2]))
    top_clients = max((c for (_w, _s, c) in cells), default=0)
    for workload, sync, clients in cells:
        def t(peer):
            return med_tps.get((workload, sync, clients, peer))
        def l(peer):
            return med_lat.get((workload, sync, clients, peer))
        def ratio(peer):
            a, b = t("idem"), t(peer)
            return a / b if a and b else None
        goal_texts, met = [], []
        for peer, minimum in targets(workload, sync, clients, top_clients):
            r = ratio(peer)
            goal_texts.append(f"≥ {minimum:g}× {peer}")
            ok = r is not None and r >= minimum
            met.append(ok)
            verdicts.append((f"{workload}, sync {sync}, {clients} clients: idem/{peer} ≥ {minimum:g}",
                             f"{r:.2f}" if r else "n/a", ok))
        fmt = lambda v, d=0: "n/a" if v is None else f"{v:,.{d}f}"
        out.append("| " + " | ".join([
            workload, sync, str(clients), fmt(t("idem")), fmt(t("ref")), fmt(t("floor")),
            fmt(l("idem"), 3), fmt(l("ref"), 3), fmt(l("floor"), 3),
            fmt(ratio("ref"), 2), fmt(ratio("floor"), 2),
            "; ".join(goal_texts) or "-",
            ("yes" if all(met) else "**no**") if met else "-"]) + " |")
    out.append("")

    out.extend(physical_floor(med_tps, wal, cells, verdicts))
    out.extend(messages_table(med_tps, med_lat, verdicts))
    out.extend(bound_table(med_tps, cells, verdicts, args.flush_slow))
    out.extend(ab_table(med_tps, cells, tps_by_round))
    out.extend(wait_samples(args.raw))

    purge = {p: (int(r), float(s)) for p, r, s in read_tsv(os.path.join(args.raw, "purge.tsv"))}
    if purge:
        rate = {p: (r / s if s > 0 else 0) for p, (r, s) in purge.items()}
        r = rate["idem"] / rate["ref"] if rate.get("ref") else None
        ok = r is not None and r >= 2.0
        verdicts.append(("purge: idem/ref rows/s ≥ 2", f"{r:.2f}" if r else "n/a", ok))
        out.append(f"Purge (batches of {args.purge_batch}, peers taking turns batch by batch, each batch "
                   "its own transaction, synchronous_commit on):")
        out.append("")
        out.append("| peer | rows | seconds | rows/s |")
        out.append("|---|---:|---:|---:|")
        for p in ("idem", "ref", "floor"):
            if p in purge:
                out.append(f"| {p} | {purge[p][0]:,} | {purge[p][1]:.2f} | {rate[p]:,.0f} |")
        fr = rate["idem"] / rate["floor"] if rate.get("floor") else 0
        out.append("")
        out.append(f"idem/ref = {r:.2f} (target ≥ 2: {'yes' if ok else '**no**'}); idem/floor = {fr:.2f}.")
        out.append("")

    memory = read_tsv(os.path.join(args.raw, "memory.tsv"))
    if memory:
        claims, before, after, kinds = memory[0]
        growth = int(after) - int(before)
        ok = growth < 1024 * 1024
        verdicts.append(("memory: backend growth < 1 MB", f"{growth / 1024:+.0f} kB", ok))
        kinds_text = ", ".join(f"{k} {v:,}" for k, v in sorted(json.loads(kinds).items()))
        out.append(f"Memory: one backend serving one pgbench client, {int(claims):,} claims (each its own transaction; {kinds_text}): "
                   f"{int(before):,} bytes before, {int(after):,} after, growth {growth:+,} bytes "
                   f"(target < 1 MB: {'yes' if ok else '**no**'}).")
        samples = read_tsv(os.path.join(args.raw, "memory_samples.tsv"))
        if samples:
            out.append("Backend memory along the way (claims: bytes above the start): " + ", ".join(
                f"{int(c):,}: {int(b) - int(before):+,}" for c, b in samples) + ".")
            out.append("")

    worker_skipped = os.path.join(args.raw, "worker.tsv.skipped")
    if os.path.exists(worker_skipped):
        with open(worker_skipped) as f:
            why = f.read().strip()
        out.append(f"Worker overhead: {why}.")
        out.append("")
        verdicts.append(("worker overhead < 3%", why, None))
    else:
        def worker_tps(state):
            runs = [v for (k, v) in tps.items() if k[0] == "worker" and k[3] == "worker_" + state]
            return statistics.median(runs[0]) if runs else None
        m_on, m_off, m_idle = worker_tps("on"), worker_tps("off"), worker_tps("idle")
        m_off_idle = worker_tps("off_idle") or m_off
        if m_on and m_off:
            overhead = 1 - m_on / m_off
            done = [int(r[2]) for r in read_tsv(os.path.join(args.raw, "worker.tsv")) if r[0] == "on"]
            ok = overhead < 0.03
            verdicts.append(("worker overhead < 3%", f"{overhead * 100:.1f}%", ok))
            idle_text = (f"; with the worker on but idle {m_idle:,.0f} tps against {m_off_idle:,.0f} off "
                         f"({(1 - m_idle / m_off_idle) * 100:+.1f}%)" if m_idle else "")
            settings_file = os.path.join(args.raw, "worker_settings.txt")
            settings_text = ""
            if os.path.exists(settings_file):
                with open(settings_file) as f:
                    settings_text = f" ({f.read().strip()})"
            out.append(f"Worker overhead{settings_text} (new-key lifecycle, synchronous_commit on, median of the rounds): "
                       f"{m_on:,.0f} tps while the worker sweeps and purges a backlog, {m_off:,.0f} with the "
                       f"worker off: {overhead * 100:+.1f}% (target < 3%: {'yes' if ok else '**no**'})"
                       f"{idle_text}. Backlog rows the worker handled during each measured run: "
                       f"{', '.join(f'{d:,}' for d in done)}.")
            out.append("")

    out.append("Targets:")
    out.append("")
    out.append("| target | measured | met |")
    out.append("|---|---|---|")
    for name, measured, ok in verdicts:
        out.append(f"| {name} | {measured} | {'-' if ok is None else ('yes' if ok else '**no**')} |")
    print("\n".join(out))


if __name__ == "__main__":
    main()
