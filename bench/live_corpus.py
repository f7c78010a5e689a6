#!/usr/bin/env python3
"""The live corpus on one machine, in one run: ingest rate against `capot index build`'s encode
rate, and search latency with and without a live segment.

1. `capot index build` of CORPUS with ENCODER: its encode rate (documents over the build's time
   less the graph and files, which index.json records as build_seconds).
2. `capot serve` on INDEX with ENCODER and a fresh data directory (127.0.0.1, free ports):
   /search p50/p99 at concurrency 1 over QUERIES with no live documents;
3. LIVE documents (CORPUS's passages again, under new ids) written with POST /admin/documents in
   batches of BATCH, one writer: documents acknowledged per second (each batch fsynced);
4. the same searches again with the live segment full, then in turns with a second server on
   the same index without live documents (the machine's drift falls on both alike), then over
   ROUNDS fresh processes of each, one at a time, alternating (a restart replays the live
   documents from the log): the median of the rounds' p50 ratios, so that what one process's
   memory layout does to the encoder falls on both alike too;
5. POST /admin/index/compact: the compaction's time (build of frozen + live, switch) and /search
   p50/p99 at concurrency 1 while it runs (every answer must be a 200), then after it.

Prints a Markdown table and writes bench/out/live_corpus.json.

    python3 bench/live_corpus.py --index /work/bench/dl19-index --encoder assets/encoders/minilm \\
        --corpus ../shared/data/dl19-sample/corpus.jsonl \\
        --queries ../shared/data/marco-dev-queries/queries.tsv [--live 10000] [--batch 64]
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(url, body=None, token=None, method=None):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)


def corpus(path):
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            yield d.get("title", "") or "", d["text"]


def search_latency(base, queries):
    """Client-side latency and the server's own search stage (frozen + live), which the
    encoder's time does not blur."""
    times, stages = [], {}
    for q in queries:
        t = time.perf_counter()
        answer = call(f"{base}/search", {"query": q, "k": 10})
        times.append(time.perf_counter() - t)
        for name, ms in answer["timings_ms"].items():
            if isinstance(ms, (int, float)):
                stages.setdefault(name, []).append(ms)
    times.sort()
    return {"p50_ms": 1e3 * statistics.median(times),
            "p99_ms": 1e3 * times[int(0.99 * (len(times) - 1))],
            "search_stage_p50_ms": statistics.median(stages["search"]),
            "stages_p50_ms": {k: statistics.median(v) for k, v in stages.items()}}


def interleaved_latency(with_live, without, queries):
    """p50 at concurrency 1 of two servers asked the same queries in turns (which goes first
    alternates), so that what the shared machine does meanwhile falls on both alike."""
    times = {with_live: [], without: []}
    for n, q in enumerate(queries):
        for base in ((with_live, without) if n % 2 == 0 else (without, with_live)):
            t = time.perf_counter()
            call(f"{base}/search", {"query": q, "k": 10})
            times[base].append(time.perf_counter() - t)
    p50 = {b: 1e3 * statistics.median(v) for b, v in times.items()}
    return {"with_live_p50_ms": p50[with_live], "without_p50_ms": p50[without],
            "ratio": p50[with_live] / p50[without], "searches_each": len(queries)}


def restarted_latency(args, live_data, plain_data, queries, rounds):
    """p50 at concurrency 1 over `rounds` fresh server processes with the live documents (the
    log in `live_data` replayed at each start) and as many without, one process at a time, in
    alternating order: each process's own luck (where its memory landed, which core it got)
    falls on both sides alike, as does the machine's drift."""
    per_round = []
    for r in range(rounds):
        p50 = {}
        for name in (("live", "plain") if r % 2 == 0 else ("plain", "live")):
            data = live_data if name == "live" else plain_data
            server, base = start_server(args, data, free_port(), free_port())
            try:
                search_latency(base, queries[:50])  # warm-up
                p50[name] = search_latency(base, queries)
            finally:
                server.terminate()
                server.wait(timeout=60)
        per_round.append({"live_p50_ms": p50["live"]["p50_ms"],
                          "plain_p50_ms": p50["plain"]["p50_ms"],
                          "ratio": p50["live"]["p50_ms"] / p50["plain"]["p50_ms"],
                          "search_stage_p50_ms": [p50["live"]["search_stage_p50_ms"],
                                                  p50["plain"]["search_stage_p50_ms"]]})
    ratios = sorted(r["ratio"] for r in per_round)
    return {"rounds": per_round, "median_ratio": statistics.median(ratios),
            "min_ratio": ratios[0], "max_ratio": ratios[-1],
            "live_p50_ms": statistics.median(r["live_p50_ms"] for r in per_round),
            "plain_p50_ms": statistics.median(r["plain_p50_ms"] for r in per_round),
            "searches_each": len(queries)}


def start_server(args, data, port, admin_port):
    server = subprocess.Popen(
        [args.capot, "serve", "--index", args.index, "--encoder", args.encoder,
         "--data-dir", data, "--addr", f"127.0.0.1:{port}",
         "--admin-addr", f"127.0.0.1:{admin_port}", "--grpc-addr", "off",
         "--compact-live-documents", "0", "--compact-log-bytes", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while True:
        try:
            urllib.request.urlopen(f"{base}/ready", timeout=2)
            return server, base
        except Exception:
            if time.time() > deadline or server.poll() is not None:
                server.kill()
                raise
            time.sleep(0.2)


def compact_under_load(base, admin, token, queries):
    """Starts a compaction and searches at concurrency 1 until it has ended."""
    started = time.perf_counter()
    call(f"{admin}/admin/index/compact", {}, token)
    times, failed, i = [], 0, 0
    while True:
        q = queries[i % len(queries)]
        i += 1
        t = time.perf_counter()
        try:
            call(f"{base}/search", {"query": q, "k": 10})
            times.append(time.perf_counter() - t)
        except Exception:
            failed += 1
        if i % 10 == 0:
            status = call(f"{admin}/admin/index", token=token)
            if status["compaction"]["state"] != "running":
                break
    wall = time.perf_counter() - started
    times.sort()
    c = status["compaction"]
    return {"state": c["state"], "seconds": c.get("seconds"), "wall_seconds": wall,
            "documents": c.get("documents"), "version": status["version"],
            "searches": len(times), "failed_searches": failed,
            "p50_ms": 1e3 * statistics.median(times),
            "p99_ms": 1e3 * times[int(0.99 * (len(times) - 1))]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--capot", default=os.path.join(ROOT, "target/release/capot"))
    ap.add_argument("--index", required=True)
    ap.add_argument("--encoder", required=True)
    ap.add_argument("--corpus", required=True, help="corpus.jsonl: build input and live texts")
    ap.add_argument("--queries", required=True, help="TSV qid<TAB>text")
    ap.add_argument("--live", type=int, default=10000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--search-queries", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=6,
                    help="fresh processes with and without live documents, alternating")
    args = ap.parse_args()
    texts = list(corpus(args.corpus))
    with open(args.queries) as f:
        queries = [line.rstrip("\n").split("\t")[1] for line in f][: args.search_queries]
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        built = os.path.join(tmp, "index")
        t = time.perf_counter()
        subprocess.run([args.capot, "index", "build", "--doc-encoder", args.encoder,
                        "--corpus", args.corpus, "--out", built],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        total = time.perf_counter() - t
        with open(os.path.join(built, "index.json")) as f:
            graph = json.load(f)["build_seconds"]
        out["build"] = {"documents": len(texts), "seconds": total, "graph_and_files_seconds": graph,
                        "encode_docs_per_s": len(texts) / (total - graph)}

        data = os.path.join(tmp, "data")
        port, admin_port = free_port(), free_port()
        server, base = start_server(args, data, port, admin_port)
        admin = f"http://127.0.0.1:{admin_port}"
        try:
            token = open(os.path.join(data, "admin-token")).read().strip()
            search_latency(base, queries[:50])  # warm-up
            out["search_without_live"] = search_latency(base, queries)
            t = time.perf_counter()
            written = 0
            while written < args.live:
                n = min(args.batch, args.live - written)
                docs = [{"id": f"live-{written + i}", "title": texts[(written + i) % len(texts)][0],
                         "text": texts[(written + i) % len(texts)][1]} for i in range(n)]
                call(f"{admin}/admin/documents", {"documents": docs}, token)
                written += n
            seconds = time.perf_counter() - t
            out["ingest"] = {"documents": written, "batch": args.batch, "seconds": seconds,
                             "docs_per_s": written / seconds}
            out["search_with_live"] = search_latency(base, queries)
            # The same comparison in turns against a second server without live documents.
            plain, plain_base = start_server(args, os.path.join(tmp, "data-plain"), free_port(),
                                             free_port())
            try:
                search_latency(plain_base, queries[:50])  # warm-up
                out["interleaved"] = interleaved_latency(base, plain_base, queries)
            finally:
                plain.terminate()
                plain.wait(timeout=60)
            out["corpus"] = call(f"{admin}/admin/index", token=token)
            server.terminate()
            server.wait(timeout=60)
            out["restarts"] = restarted_latency(args, data, os.path.join(tmp, "data-plain"),
                                                queries, args.rounds)
            admin_port = free_port()
            server, base = start_server(args, data, free_port(), admin_port)
            admin = f"http://127.0.0.1:{admin_port}"
            token = open(os.path.join(data, "admin-token")).read().strip()  # new at each start
            out["compaction"] = compact_under_load(base, admin, token, queries)
            out["search_after_compaction"] = search_latency(base, queries)
        finally:
            server.terminate()
            server.wait(timeout=60)
    out["ingest_vs_build_encode"] = out["ingest"]["docs_per_s"] / out["build"]["encode_docs_per_s"]
    out["search_p50_with_vs_without"] = (out["search_with_live"]["p50_ms"]
                                         / out["search_without_live"]["p50_ms"])
    os.makedirs(os.path.join(ROOT, "bench/out"), exist_ok=True)
    with open(os.path.join(ROOT, "bench/out/live_corpus.json"), "w") as f:
        json.dump(out, f, indent=2)
    b, i = out["build"], out["ingest"]
    w, l = out["search_without_live"], out["search_with_live"]
    print("| | figure |\n|---|---|")
    print(f"| `capot index build` encode rate ({b['documents']} docs) | {b['encode_docs_per_s']:.1f} docs/s |")
    print(f"| ingest, batches of {i['batch']}, acknowledged (fsynced, searchable) | {i['docs_per_s']:.1f} docs/s "
          f"(**{out['ingest_vs_build_encode']:.2f}×** build) |")
    print(f"| /search c=1, no live documents | p50 {w['p50_ms']:.2f} ms, p99 {w['p99_ms']:.2f} ms; "
          f"search stage p50 {w['search_stage_p50_ms']:.3f} ms |")
    print(f"| /search c=1, {i['documents']} live documents | p50 {l['p50_ms']:.2f} ms, p99 {l['p99_ms']:.2f} ms "
          f"(p50 **{out['search_p50_with_vs_without']:.2f}×**); search stage p50 {l['search_stage_p50_ms']:.3f} ms |")
    c, a = out["compaction"], out["search_after_compaction"]
    print(f"| compaction ({c['state']}): frozen + {i['documents']} live into version {c['version']} "
          f"({c['documents']} documents) | {c['seconds']:.1f} s |")
    print(f"| /search c=1 while it runs ({c['searches']} searches, {c['failed_searches']} failed) | "
          f"p50 {c['p50_ms']:.2f} ms, p99 {c['p99_ms']:.2f} ms |")
    print(f"| /search c=1 after it | p50 {a['p50_ms']:.2f} ms, p99 {a['p99_ms']:.2f} ms; "
          f"search stage p50 {a['search_stage_p50_ms']:.3f} ms |")
    il = out["interleaved"]
    print(f"| /search c=1 in turns with a second server without live documents "
          f"({il['searches_each']} searches each) | p50 {il['with_live_p50_ms']:.2f} / "
          f"{il['without_p50_ms']:.2f} ms (**{il['ratio']:.2f}×**) |")
    rs = out["restarts"]
    print(f"| /search c=1 over {args.rounds} fresh processes each, one at a time, alternating "
          f"({rs['searches_each']} searches each) | p50 {rs['live_p50_ms']:.2f} / "
          f"{rs['plain_p50_ms']:.2f} ms; ratio per round median **{rs['median_ratio']:.2f}×** "
          f"({rs['min_ratio']:.2f}–{rs['max_ratio']:.2f}×) |")
    print(f"| stage p50s without / with live documents (ms) | "
          + ", ".join(f"{k} {w['stages_p50_ms'][k]:.3f} / {l['stages_p50_ms'].get(k, float('nan')):.3f}"
                      for k in w["stages_p50_ms"]) + " |")
    print(f"| live segment memory | {out['corpus']['memory_bytes'] / 2**20:.1f} MiB; log {out['corpus']['log_bytes'] / 2**20:.1f} MiB |")


if __name__ == "__main__":
    main()
