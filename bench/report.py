"""Helpers of bench/serve.sh (standard library only).

    report.py bodies QUERIES_TSV OUT_JSONL [K]     request bodies for wrk, one per line
    report.py timings URL BODIES N OUT_JSON         mean timings_ms per stage over N sequential requests
    report.py tables OUT_DIR                        Markdown tables with ratios (stdout) + latency SVG
"""

import glob
import http.client
import json
import math
import os
import sys
import time
import urllib.parse


def bodies(queries, out, k=10):
    with open(queries, encoding="utf-8") as f, open(out, "w", encoding="utf-8") as o:
        for line in f:
            if "\t" in line:
                o.write(json.dumps({"query": line.rstrip("\n").split("\t", 1)[1], "k": int(k)}) + "\n")


def timings(url, bodies_file, n, out):
    """Sends N requests one after another on one keep-alive connection (concurrency 1) and
    averages the stage timings the service reports in each response, and the round trip the
    client sees (`client`)."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    lines = [l for l in open(bodies_file, encoding="utf-8") if l.strip()]
    sums, count = {}, 0
    for i in range(int(n)):
        started = time.perf_counter()
        conn.request("POST", u.path, body=lines[i % len(lines)].encode(),
                     headers={"content-type": "application/json"})
        r = conn.getresponse()
        body = r.read()
        if r.status != 200:
            raise SystemExit(f"{url}: HTTP {r.status}: {body[:200]!r}")
        client = (time.perf_counter() - started) * 1e3
        for stage, ms in json.loads(body)["timings_ms"].items():
            sums[stage] = sums.get(stage, 0.0) + ms
        sums["client"] = sums.get("client", 0.0) + client
        count += 1
    json.dump({"requests": count, "mean_ms": {s: v / count for s, v in sums.items()}}, open(out, "w"), indent=2)


def load(path):
    return json.load(open(path)) if os.path.exists(path) else None


def hist(path):
    """wrk histogram file (`microseconds count` lines) → sorted list of (ms, count)."""
    if not os.path.exists(path):
        return []
    rows = [tuple(map(int, l.split())) for l in open(path) if l.strip()]
    return sorted((us / 1e3, c) for us, c in rows)


def quantile(h, q):
    total = sum(c for _, c in h)
    seen = 0
    for v, c in h:
        seen += c
        if seen >= q * total:
            return v
    return h[-1][0] if h else float("nan")


def svg(series, out, title):
    """Hand-written SVG: share of requests per latency bin, one outlined histogram per series,
    with p50 (dashed) and p99 (dotted) markers."""
    series = [(name, h, colour) for name, h, colour in series if h]
    if not series:
        return
    hi = max(quantile(h, 0.995) for _, h, _ in series) * 1.05
    lo = min(h[0][0] for _, h, _ in series) * 0.9
    bins = 80
    width, height, left, bottom, top, right = 760, 360, 60, 45, 40, 20
    pw, ph = width - left - right, height - top - bottom
    step = (hi - lo) / bins
    shares = []
    for _, h, _ in series:
        total = sum(c for _, c in h)
        b = [0.0] * bins
        for v, c in h:
            b[min(bins - 1, max(0, int((v - lo) / step)))] += c / total
        shares.append(b)
    ymax = max(max(b) for b in shares) * 1.1
    x = lambda v: left + (v - lo) / (hi - lo) * pw
    y = lambda s: top + ph - s / ymax * ph
    p = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
         f'<rect width="{width}" height="{height}" fill="white"/>',
         f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
         f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="black"/>',
         f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="black"/>']
    nice = [0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50]
    tick = next((t for t in nice if (hi - lo) / t <= 10), 100)
    t = math.ceil(lo / tick) * tick
    while t <= hi:
        p.append(f'<line x1="{x(t):.1f}" y1="{top + ph}" x2="{x(t):.1f}" y2="{top + ph + 4}" stroke="black"/>')
        p.append(f'<text x="{x(t):.1f}" y="{top + ph + 17}" text-anchor="middle">{t:g}</text>')
        t += tick
    p.append(f'<text x="{left + pw / 2}" y="{height - 8}" text-anchor="middle">latency (ms), concurrency 1</text>')
    for frac in (0.25, 0.5, 0.75, 1.0):
        s = ymax / 1.1 * frac
        p.append(f'<text x="{left - 6}" y="{y(s) + 4:.1f}" text-anchor="end">{100 * s:.0f}%</text>')
        p.append(f'<line x1="{left}" y1="{y(s):.1f}" x2="{left + pw}" y2="{y(s):.1f}" stroke="#eee"/>')
    p.append(f'<text transform="translate(14,{top + ph / 2}) rotate(-90)" text-anchor="middle">share of requests</text>')
    for i, ((name, h, colour), b) in enumerate(zip(series, shares)):
        pts = [f"{x(lo):.1f},{y(0):.1f}"]
        for j, s in enumerate(b):
            pts += [f"{x(lo + j * step):.1f},{y(s):.1f}", f"{x(lo + (j + 1) * step):.1f},{y(s):.1f}"]
        pts.append(f"{x(hi):.1f},{y(0):.1f}")
        p.append(f'<polygon points="{" ".join(pts)}" fill="{colour}" fill-opacity="0.25" stroke="{colour}" stroke-width="1.5"/>')
        p50, p99 = quantile(h, 0.5), quantile(h, 0.99)
        for v, dash in ((p50, "6,3"), (p99, "2,3")):
            if v <= hi:
                p.append(f'<line x1="{x(v):.1f}" y1="{top}" x2="{x(v):.1f}" y2="{top + ph}" stroke="{colour}" stroke-dasharray="{dash}"/>')
        ly = top + 14 + 18 * i
        p.append(f'<rect x="{left + pw - 250}" y="{ly - 10}" width="12" height="12" fill="{colour}" fill-opacity="0.5" stroke="{colour}"/>')
        p.append(f'<text x="{left + pw - 232}" y="{ly}">{name}: p50 {p50:.2f} ms, p99 {p99:.2f} ms</text>')
    p.append("</svg>")
    open(out, "w").write("\n".join(p) + "\n")


def split_workers(w):
    """("2nagle", "float32") from a WORKERS token such as "2nagle" or "2-int8"."""
    return (w[:-5], "int8") if w.endswith("-int8") else (w, "float32")


def short_label(w):
    w, prec = split_workers(w)
    s = f"FastAPI {w[:-5]}w Nagle" if w.endswith("nagle") else f"FastAPI {w}w"
    return s + (" int8" if prec == "int8" else "")


def long_label(w):
    w, prec = split_workers(w)
    n = w[:-5] if w.endswith("nagle") else w
    s = f"{n} worker{'s' if n != '1' else ''}"
    s += " (uvicorn as it comes: Nagle on)" if w.endswith("nagle") else ""
    return s + (", int8 model" if prec == "int8" else ", float32 model")


def tables(out):
    floor = load(f"{out}/floor.json")
    # capot services by configuration (SESSIONSxTHREADS[-int8]), from wrk-capot-<cfg>-c<c>.json.
    capots = {}
    for f in glob.glob(f"{out}/wrk-capot-*-c*.json"):
        cfg, c = f.rsplit("/", 1)[1][len("wrk-capot-"):-len(".json")].rsplit("-c", 1)
        capots.setdefault(cfg, {})[int(c)] = load(f)
    def capot_label(cfg):
        n, t = cfg.split("x")
        prec = "int8" if t.endswith("-int8") else "float32"
        return f"capot {n}×{t.removesuffix('-int8')} {prec}"
    fast = {}
    for f in glob.glob(f"{out}/wrk-fastapi-w*-c*.json"):
        w, c = f.rsplit("/", 1)[1][len("wrk-fastapi-w"):-len(".json")].rsplit("-c", 1)
        fast.setdefault(w, {})[int(c)] = load(f)
    meta = load(f"{out}/meta.json") or {}
    f1 = next(r for r in floor["results"] if r["batch_size"] == 1 and r.get("concurrency", 1) == 1)
    fsat = [r for r in floor["results"] if r is not f1]
    fbest = max(floor["results"], key=lambda r: r["queries_per_second"])

    def sat(runs):
        best_c = max((c for c in runs if c > 1), key=lambda c: runs[c]["requests_per_second"])
        return best_c, runs[best_c]

    rows = [("in-process floor (`capot bench search`, batch 1)", f1["latency_ms_p50"], f1["latency_ms_p99"],
             f1["queries_per_second"], "1 call at a time", f1["latency_ms_p99"])]
    if fbest is not f1:
        b, c = fbest["batch_size"], fbest.get("concurrency", 1)
        rows.append((f"in-process floor at saturation (best of batch 1/8/32 × 1/2 threads)", None, None,
                     fbest["queries_per_second"], f"batch {b}, {c} threads",
                     fbest["latency_ms_p99"] if b == 1 else None))
    if fsat:
        f1c = [r for r in fsat if r["batch_size"] == 1 and r["concurrency"] > 1]
        if f1c and f1c[0] is not fbest:
            r = f1c[0]
            rows.append((f"in-process, batch 1 × {r['concurrency']} threads (no batching)", None, None,
                         r["queries_per_second"], f"{r['concurrency']} threads", r["latency_ms_p99"]))
    for cfg in sorted(capots):
        capot = capots[cfg]
        c, s = sat(capot)
        rows.append((f"capot serve `/search`, {capot_label(cfg)[6:]} (sessions × threads)", capot[1]["latency_ms_p50"],
                     capot[1]["latency_ms_p99"], s["requests_per_second"], f"c={c}", s["latency_ms_p99"]))
    for w in sorted(fast):
        c, s = sat(fast[w])
        rows.append((f"FastAPI + onnxruntime + hnswlib, {long_label(w)}", fast[w][1]["latency_ms_p50"],
                     fast[w][1]["latency_ms_p99"], s["requests_per_second"], f"c={c}", s["latency_ms_p99"]))
    f2 = lambda v: "–" if v is None else f"{v:.2f}"
    print("#### Search: latency at concurrency 1, throughput at saturation\n")
    print("| | p50 ms (c=1) | p99 ms (c=1) | queries/s at saturation | at | p99 ms there |")
    print("|---|---|---|---|---|---|")
    for name, p50, p99, qps, at, p99s in rows:
        print(f"| {name} | {f2(p50)} | {f2(p99)} | {qps:.0f} | {at} | {'–' if p99s is None else f'{p99s:.1f}'} |")

    print("\n#### Ratios\n")
    print("| ratio | p50 (c=1) | p99 (c=1) | throughput |")
    print("|---|---|---|---|")
    for cfg in sorted(capots):
        capot = capots[cfg]
        cap1, (cc, cs) = capot[1], sat(capot)
        print(f"| {capot_label(cfg)} / floor (latency: >1 = slower; throughput: <1 = fewer q/s) | {cap1['latency_ms_p50'] / f1['latency_ms_p50']:.2f} | "
              f"{cap1['latency_ms_p99'] / f1['latency_ms_p99']:.2f} | {cs['requests_per_second'] / fbest['queries_per_second']:.2f} |")
        for w in sorted(fast):
            fc1, (fcc, fcs) = fast[w][1], sat(fast[w])
            print(f"| {capot_label(cfg)} / {short_label(w)} (latency: <1 = capot faster; throughput: >1 = capot more q/s) | "
                  f"{cap1['latency_ms_p50'] / fc1['latency_ms_p50']:.2f} | {cap1['latency_ms_p99'] / fc1['latency_ms_p99']:.2f} | "
                  f"{cs['requests_per_second'] / fcs['requests_per_second']:.2f} |")

    print("\n#### Throughput and p99 per concurrency\n")
    services = [(capot_label(cfg), capots[cfg]) for cfg in sorted(capots)] + [(short_label(w), fast[w]) for w in sorted(fast)]
    cs_all = sorted({c for _, runs in services for c in runs})
    print("| concurrency | " + " | ".join(f"{n} q/s | {n} p99 ms" for n, _ in services) + " |")
    print("|---|" + "---|---|" * len(services))
    for c in cs_all:
        cells = []
        for _, runs in services:
            r = runs.get(c)
            cells.append("– | –" if r is None else f"{r['requests_per_second']:.0f} | {r['latency_ms_p99']:.1f}")
        errs = sum((runs.get(c) or {}).get("errors", 0) for _, runs in services)
        print(f"| {c} | " + " | ".join(cells) + " |" + (f" ({errs} errors)" if errs else ""))

    print("\n#### Where the time goes at concurrency 1 (mean ms per request, from the responses' timings_ms)\n")
    first = sorted(capots)[0]
    tc = load(f"{out}/timings-capot-{first}.json")
    tf = {w: load(f"{out}/timings-fastapi-w{w}.json") for w in sorted(fast)}
    stages = ["tokenize", "queue", "encode", "search", "total"]
    head = [f"{capot_label(first)} /search"] + [short_label(w) for w in tf] + ["floor (in-process, batch 1)"]
    print("| stage | " + " | ".join(head) + " |")
    print("|---|" + "---|" * len(head))
    fst = {**f1["stage_ms_mean"], "total": f1["latency_ms_mean"]}
    samples = [tc] + list(tf.values())
    for st in stages + ["client round trip", "outside the service (HTTP, JSON, client)"]:
        cells = []
        for t in samples:
            m = (t or {}).get("mean_ms", {})
            if st == "client round trip":
                v = m.get("client")
            elif st.startswith("outside"):
                v = m["client"] - m["total"] if "client" in m else None
            else:
                v = m.get(st)
            cells.append(f2(v))
        cells.append(f2(fst.get(st)))
        print(f"| {st} | " + " | ".join(cells) + " |")
    print("\n(the FastAPI service has no queue stage: each request runs the model itself; its `encode` includes"
          " pooling and normalisation in NumPy; `client round trip` is measured by the sampling client on the"
          " same requests, `outside` = round trip minus the service's own total)")

    series = [(capot_label(cfg), hist(f"{out}/hist-capot-{cfg}-c1.txt"), c)
              for cfg, c in zip(sorted(capots), ["#1f77b4", "#2ca02c", "#9467bd", "#8c564b"])]
    series += [(short_label(w), hist(f"{out}/hist-fastapi-w{w}-c1.txt"), c)
               for w, c in zip([w for w in sorted(fast) if not split_workers(w)[0].endswith("nagle")],
                               ["#d62728", "#ff7f0e", "#e377c2", "#bcbd22"])]
    svg(series, f"{out}/latency-c1.svg",
        f"/search latency at concurrency 1, MiniLM + dl19-sample (load avg {meta.get('load_during', '?')})")


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    {"bodies": bodies, "timings": timings, "tables": tables}[cmd](*args)
