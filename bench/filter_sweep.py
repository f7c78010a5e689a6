"""Filtered search against unfiltered search at equal recall: `capot bench filter` over a sweep of
`ef`, in rounds, and the queries/s each filter cell reaches at a recall target beside the
unfiltered walk's at the same target (standard library only).

    python3 bench/filter_sweep.py --capot BIN --index DIR --queries-vectors FILE --out DIR \
        [--ef 16,24,32,48,64,96,128,192,256] [--selectivities 0.1,0.2,0.3,0.5] [--rounds 3] \
        [--targets 0.9,0.95] [--queries 300]
    python3 bench/filter_sweep.py --capot before=BIN1 after=BIN2 ...   # binaries in turns
    python3 bench/filter_sweep.py --capot "walk=BIN --filter-scan-factor 0" \
        "scan=BIN --filter-scan-factor 1e12 --sign-row-cost 1e12" ...   # arguments after BIN go to `bench filter`

A filtered walk keeps `ef` admitted candidates and, stepping through refused nodes, scores more
nodes per `ef` than an unfiltered walk does: at the same `ef` it finds more of its exact top k
(0.94 against 0.84 at 30% of 100,000 documents, ef 64) and answers fewer queries. Issue 41 asks
for both recall >= 0.95 and >= 0.5x the unfiltered queries/s; read at the same `ef` that compares
walks of unequal recall. Here each curve is interpolated to the target (bench/curves.py) and the
ratio is taken there, against the run's unfiltered walk and (`× paired unfiltered`) against the
unfiltered walk timed between the cell's own queries, which shares the machine's drift with it. Each round runs every `ef` once, in an order rotated per round (the
machine's drift spreads over all of them), and with several `--capot LABEL=BIN` every binary at
each `ef` in turn, each against its own unfiltered walk; a cell's queries/s at an `ef` is the
median over the rounds, its recall is the same in every round (the walk is deterministic).

Writes OUT/sweep.json, OUT/filter-recall-qps[-LABEL].svg (recall against queries/s, a panel
per selectivity) and prints Markdown tables.
"""

import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys

from curves import at_recall, qps_at

# Series name prefix of the unfiltered walk timed between one cell's filtered queries.
PAIRED = "paired unfiltered: "

COLOURS = {"independent": "#1f77b4", "correlated": "#2ca02c", "anti-correlated": "#d62728"}


def run(a, binary, ef, out):
    binary, *extra = shlex.split(binary)
    cmd = [binary, "bench", "filter", "--index", a.index, "--queries-vectors", a.queries_vectors,
           "--queries", str(a.queries), "--ef", str(ef), "--selectivities", a.selectivities, *extra]
    with open(out, "w") as f:
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"capot bench filter --ef {ef} failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    return json.load(open(out))


def curves(runs):
    """{series: [{"ef", "recall", "queries_per_second", "p99_ms"}]} from {ef: [bench JSON per
    round]}: the unfiltered walk as series "unfiltered", each cell under its name."""
    series = {}
    for ef, rounds in sorted(runs.items()):
        named = [{"unfiltered": r["unfiltered"], **{c["name"]: c for c in r["cells"]}} for r in rounds]
        # The unfiltered walk timed between each cell's queries (`paired_unfiltered`, binaries
        # from 2026-12-01 on): its recall is the unfiltered walk's at this ef.
        for r, n in zip(rounds, named):
            for c in r["cells"]:
                if "paired_unfiltered" in c:
                    n[PAIRED + c["name"]] = {**c["paired_unfiltered"], "recall": r["unfiltered"]["recall"]}
        for name in named[0]:
            rows = [n[name] for n in named if name in n]
            series.setdefault(name, []).append({
                "ef": ef,
                "recall": rows[0]["recall"],
                "queries_per_second": statistics.median(x["queries_per_second"] for x in rows),
                "p99_ms": statistics.median(x["p99_ms"] for x in rows),
                "strategies": rows[0].get("strategies"),
            })
    return series


def svg(series, cells, path):
    """A panel per selectivity: recall@k (x) against queries/s (y, log scale), one line per
    correlation, the unfiltered walk in black in every panel."""
    shares = sorted({c["selectivity"] for c in cells.values() if c["correlation"] in COLOURS})
    if not shares:
        return
    pw, ph, left, top, gap = 300, 240, 60, 40, 30
    width = left + len(shares) * (pw + gap)
    height = top + ph + 60
    qps = [r["queries_per_second"] for rows in series.values() for r in rows]
    recall = [r["recall"] for rows in series.values() for r in rows]
    y_lo, y_hi = math.log10(min(qps) * 0.8), math.log10(max(qps) * 1.25)
    x_lo, x_hi = max(0.0, min(recall) - 0.02), 1.0
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="16" text-anchor="middle" font-size="13">filtered walks against the unfiltered walk: recall@10 and queries/s over an ef sweep</text>']
    for p, share in enumerate(shares):
        x0 = left + p * (pw + gap)
        x = lambda r, x0=x0: x0 + (r - x_lo) / (x_hi - x_lo) * pw
        y = lambda q: top + ph - (math.log10(q) - y_lo) / (y_hi - y_lo) * ph
        out.append(f'<rect x="{x0}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="black"/>')
        out.append(f'<text x="{x0 + pw / 2}" y="{top - 6}" text-anchor="middle">{share * 100:g}% admitted</text>')
        for t in (0.7, 0.8, 0.9, 0.95, 1.0):
            if x_lo <= t <= x_hi:
                out.append(f'<line x1="{x(t):.1f}" y1="{top}" x2="{x(t):.1f}" y2="{top + ph}" stroke="#eee"/>')
                out.append(f'<text x="{x(t):.1f}" y="{top + ph + 14}" text-anchor="middle">{t:g}</text>')
        decade = 10 ** math.floor(y_lo)
        while decade <= 10 ** y_hi:
            for m in (1, 2, 5):
                q = decade * m
                if 10 ** y_lo <= q <= 10 ** y_hi:
                    out.append(f'<line x1="{x0}" y1="{y(q):.1f}" x2="{x0 + pw}" y2="{y(q):.1f}" stroke="#eee"/>')
                    if p == 0:
                        out.append(f'<text x="{x0 - 4}" y="{y(q) + 4:.1f}" text-anchor="end">{q:g}</text>')
            decade *= 10
        lines = [("unfiltered", "black")] + [(n, COLOURS[c["correlation"]]) for n, c in cells.items()
                                             if c["selectivity"] == share and c["correlation"] in COLOURS]
        for name, colour in lines:
            pts = " ".join(f'{x(r["recall"]):.1f},{y(r["queries_per_second"]):.1f}' for r in series[name])
            out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
            for r in series[name]:
                out.append(f'<circle cx="{x(r["recall"]):.1f}" cy="{y(r["queries_per_second"]):.1f}" r="2" fill="{colour}"/>')
    out.append(f'<text x="{width / 2}" y="{top + ph + 32}" text-anchor="middle">recall@10 against the exact (filtered) top 10</text>')
    out.append(f'<text transform="translate(14,{top + ph / 2}) rotate(-90)" text-anchor="middle">queries/s, one thread</text>')
    legend = [("unfiltered", "black")] + list(COLOURS.items())
    for i, (name, colour) in enumerate(legend):
        lx = left + i * 130
        out.append(f'<line x1="{lx}" y1="{top + ph + 48}" x2="{lx + 20}" y2="{top + ph + 48}" stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{lx + 24}" y="{top + ph + 52}">{name}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def report(label, runs, efs, targets, rounds):
    """Prints one binary's tables; returns (series, its equal-recall readings)."""
    series = curves(runs)
    first = runs[efs[0]][0]
    cells = {c["name"]: c for c in first["cells"]}
    title = f" — {label}" if label else ""
    print(f"\n#### Recall@{first['k']} / queries/s per ef ({first['documents']:,} documents, "
          f"{first['queries']} queries, median of {rounds} rounds){title}\n")
    names = ["unfiltered"] + [n for n in cells if n in series]
    paired = all(PAIRED + n in series for n in names[1:])
    print("| ef | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for i, ef in enumerate(sorted(efs)):
        row = [f'{series[n][i]["recall"]:.3f} / {series[n][i]["queries_per_second"]:,.0f}' for n in names]
        print(f"| {ef} | " + " | ".join(row) + " |")

    equal = {}
    print(f"\n#### Queries/s at equal recall@{first['k']} (interpolated between the ef values around it){title}\n")
    also = " / × paired unfiltered / p99 ×" if paired else ""
    print("| filter | admitted | " + " | ".join(f"recall ≥ {t:g}: q/s (ef) / × unfiltered / p99 ×{also}"
                                             for t in targets) + " |")
    print("|---|---|" + "---|" * len(targets))
    base = {t: qps_at(series["unfiltered"], t) for t in targets}
    base_p99 = {t: at_recall(series["unfiltered"], t, "p99_ms")[0] for t in targets}
    row = [f"{q:,.0f} ({lo}–{hi}) / 1 / 1" if q else "not reached" for q, lo, hi in base.values()]
    print(f"| unfiltered | {first['documents']:,} | " + " | ".join(row) + " |")
    for name in names[1:]:
        equal[name] = {}
        row = []
        for t in targets:
            q, lo, hi = qps_at(series[name], t)
            p99 = at_recall(series[name], t, "p99_ms")[0]
            b, bp = base[t][0], base_p99[t]
            ratio = q / b if q and b else None
            p99_ratio = p99 / bp if p99 and bp else None
            equal[name][str(t)] = {"queries_per_second": q, "ef_lo": lo, "ef_hi": hi, "vs_unfiltered": ratio,
                                   "p99_ms": p99, "p99_vs_unfiltered": p99_ratio}
            cell = "not reached" if q is None else f"{q:,.0f} ({lo}–{hi}) / " + (
                f"{ratio:.2f} / {p99_ratio:.2f}" if ratio else "– / –")
            if paired and q is not None:
                # Against the unfiltered walk timed in the same seconds, at the same recall.
                pq = qps_at(series[PAIRED + name], t)[0]
                pp = at_recall(series[PAIRED + name], t, "p99_ms")[0]
                pr, ppr = (q / pq if pq else None), (p99 / pp if pp and p99 else None)
                equal[name][str(t)].update({"vs_paired_unfiltered": pr, "p99_vs_paired_unfiltered": ppr})
                cell += f" / {pr:.2f} / {ppr:.2f}" if pr and ppr else " / – / –"
            row.append(cell)
        print(f"| {name} | {cells[name]['admitted_mean']:,.0f} | " + " | ".join(row) + " |")
    print("\n(a target already passed at the smallest ef is credited with that ef's q/s)")
    return series, cells, equal, {str(t): base[t][0] for t in targets}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--capot", required=True, nargs="+",
                    help="capot binary (a release build), or several as LABEL=BIN, run in turns; "
                         "words after BIN are added to `capot bench filter`")
    ap.add_argument("--index", required=True)
    ap.add_argument("--queries-vectors", required=True)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--ef", default="16,24,32,48,64,96,128,192,256")
    ap.add_argument("--selectivities", default="0.1,0.2,0.3,0.5")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--targets", default="0.9,0.95")
    ap.add_argument("--out", required=True)
    ap.add_argument("--reuse", action="store_true",
                    help="read the runs already in --out instead of running them again (re-reports a sweep)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    binaries = [tuple(c.split("=", 1)) if "=" in c else ("", c) for c in a.capot]
    if len({label for label, _ in binaries}) != len(binaries):
        sys.exit("--capot: give each binary its own LABEL= when there are several")
    efs = [int(x) for x in a.ef.split(",")]
    targets = [float(x) for x in a.targets.split(",")]
    runs = {label: {ef: [] for ef in efs} for label, _ in binaries}
    for rnd in range(a.rounds):
        order = efs[rnd % len(efs):] + efs[:rnd % len(efs)]
        for ef in order:
            turn = binaries[rnd % len(binaries):] + binaries[:rnd % len(binaries)]
            for label, binary in turn:
                if not a.reuse:
                    print(f"round {rnd + 1}/{a.rounds}: ef {ef} {label}".rstrip(), file=sys.stderr, flush=True)
                out = os.path.join(a.out, f"{label + '-' if label else ''}ef{ef}-r{rnd + 1}.json")
                if a.reuse and os.path.exists(out):
                    runs[label][ef].append(json.load(open(out)))
                else:
                    runs[label][ef].append(run(a, binary, ef, out))
    result = {"index": a.index, "rounds": a.rounds, "ef": efs, "targets": targets, "binaries": {}}
    for label, binary in binaries:
        series, cells, equal, base = report(label, runs[label], efs, targets, a.rounds)
        svg(series, cells, os.path.join(a.out, f"filter-recall-qps{'-' + label if label else ''}.svg"))
        result["binaries"][label or binary] = {"binary": binary, "series": series, "equal_recall": equal,
                                               "unfiltered_equal_recall": base}
    if len(binaries) > 1:
        labels = [label for label, _ in binaries]
        first = labels[0]
        eq = {label: result["binaries"][label]["equal_recall"] for label in labels}
        print("\n#### Binaries side by side at equal recall: × their own unfiltered walk, and q/s ÷ "
              f"{first}'s\n")
        print("| filter | recall ≥ | " + " | ".join(labels) + " | " +
              " | ".join(f"{x} ÷ {first}" for x in labels[1:]) + " |")
        print("|---|---|" + "---|" * (2 * len(labels) - 1))
        for name in eq[first]:
            for t in targets:
                got = [eq[label].get(name, {}).get(str(t), {}) for label in labels]
                cols = [(f"{g['vs_unfiltered']:.2f}" if g.get("vs_unfiltered") else "–")
                        + (f" (paired {g['vs_paired_unfiltered']:.2f})" if g.get("vs_paired_unfiltered") else "")
                        for g in got]
                q0 = got[0].get("queries_per_second")
                cols += [f"{g['queries_per_second'] / q0:.2f}" if q0 and g.get("queries_per_second") else "–"
                         for g in got[1:]]
                print(f"| {name} | {t:g} | " + " | ".join(cols) + " |")
    with open(os.path.join(a.out, "sweep.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
