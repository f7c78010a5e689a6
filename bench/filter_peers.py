#!/usr/bin/env python3
"""hnswlib's filtered search on the same vectors, filters and exact answers as `capot bench
filter` (bench/filter.sh runs both): an hnswlib graph is built from the index's vectors.f32 with
the index's M and ef_construction (inner product on the normalised vectors), and each cell's
admitted ids are passed to `knn_query(..., filter=...)`, hnswlib's filtered search (a Python
callback per visited node, single thread). Recall@k against the exact filtered answers capot
exported; hits returned; queries/s. Prints a Markdown table beside capot's, writes --out JSON.

    bench/filter_peers.py --index DIR --queries-vectors FILE --cells DIR --bench filter.json --out peers.json
"""
import argparse
import json
import os
import time

import hnswlib
import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", required=True)
    ap.add_argument("--queries-vectors", required=True)
    ap.add_argument("--cells", required=True)
    ap.add_argument("--bench", required=True, help="capot bench filter's JSON")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    manifest = json.load(open(os.path.join(args.index, "index.json")))
    dim, n = manifest["dimension"], manifest["count"]
    docs = np.fromfile(os.path.join(args.index, "vectors.f32"), dtype="<f4").reshape(n, dim)
    bench = json.load(open(args.bench))
    k, ef, nq = bench["k"], bench["ef"], bench["queries"]
    queries = np.fromfile(args.queries_vectors, dtype="<f4").reshape(-1, dim)[:nq]
    started = time.time()
    p = hnswlib.Index(space="ip", dim=dim)
    p.init_index(max_elements=n, M=manifest["hnsw"]["m"], ef_construction=manifest["hnsw"]["ef_construction"], random_seed=1)
    p.set_num_threads(2)
    p.add_items(docs, np.arange(n))
    build = time.time() - started
    p.set_num_threads(1)
    p.set_ef(ef)
    rows = []
    for cell in bench["cells"]:
        name = cell["name"]
        ids_path = os.path.join(args.cells, name + ".ids")
        truth = json.load(open(os.path.join(args.cells, name + ".truth.json")))["truth"]
        if name == "tenant":
            continue  # a different tenant per query: only the first query's set was exported
        admitted = np.fromfile(ids_path, dtype="<u4")
        mask = np.zeros(n, dtype=bool)
        mask[admitted] = True
        allowed = mask.tolist()
        found = hits = 0
        started = time.time()
        for q, want in zip(queries, truth):
            try:
                labels, _ = p.knn_query(q, k=min(k, len(admitted)) or 1, filter=lambda i: allowed[i])
                got = [int(x) for x in labels[0]]
            except RuntimeError:
                got = []  # hnswlib raises when it finds fewer than k
            hits += len(got)
            found += len(set(got) & set(want)) if want else 0
        seconds = time.time() - started
        wanted = sum(len(w) for w in truth)
        rows.append({"name": name, "recall": found / wanted if wanted else 1.0,
                     "hits_mean": hits / len(truth), "queries_per_second": len(truth) / seconds,
                     "capot_recall": cell["recall"], "capot_queries_per_second": cell["queries_per_second"]})
    out = {"library": "hnswlib " + getattr(hnswlib, "__version__", "0.8.0"), "documents": n, "k": k, "ef": ef,
           "build_seconds_2_threads": build, "rows": rows}
    json.dump(out, open(args.out, "w"), indent=1)
    print(f"\n| filter | hnswlib recall@{k} | hnswlib hits | hnswlib q/s | capot recall@{k} | capot q/s | capot ÷ hnswlib q/s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {r['recall']:.3f} | {r['hits_mean']:.1f} | {r['queries_per_second']:.0f} | "
              f"{r['capot_recall']:.3f} | {r['capot_queries_per_second']:.0f} | "
              f"{r['capot_queries_per_second'] / r['queries_per_second']:.2f} |")


if __name__ == "__main__":
    main()
