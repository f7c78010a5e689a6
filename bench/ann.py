"""capot's HNSW graph against hnswlib and faiss (IndexHNSWFlat) on the SAME vectors: the
document vectors a capot index stores (vectors.f32) and query vectors encoded by capot. Same
HNSW parameters (the M and ef_construction in the index's manifest, inner product on normalised
vectors), single-threaded search, recall@k against exact search, a sweep over ef, and queries/s at equal recall.

    python bench/ann.py --capot BIN --index DIR [DIR...] --encoder BUNDLE --queries FILE [FILE...] --out DIR

capot is measured by `capot bench ann` (the graph capot built and serves, searched through
`Index::search`); hnswlib and faiss are built here from the same vectors. Every library answers
the whole query set in one call from a single thread (hnswlib `num_threads=1`, faiss
`omp_set_num_threads(1)`), so no Python loop is timed. Exact neighbours: NumPy brute force here,
capot's own exact search for capot (same vectors, same dot products up to rounding).
Writes OUT/ann.json and prints Markdown tables.

Near recall 0.99 the recall-per-ef curve is flat, so the ef a graph needs there (and the ratio
of two libraries' queries/s) moves with the build's random levels. Several `--index` directories
over the same vectors (built with `capot index build --seed`) and several `--hnswlib-seed` values
measure that spread: each graph is a column, and a last table compares the libraries' medians
over their seeds.
"""

import argparse
import json
import os
import subprocess
import sys
import time

import faiss
import hnswlib
import numpy as np

from curves import qps_at


def read_texts(path):
    texts = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                continue
            if path.endswith(".jsonl"):
                texts.append(json.loads(line)["text"])
            elif "\t" in line:
                texts.append(line.split("\t", 1)[1])
    return texts


def encode_queries(capot, bundle, files, out):
    """Query vectors from `capot encode` (JSON lines in, JSON lines out) → headerless f32 file."""
    texts = [t for f in files for t in read_texts(f)]
    stdin = "".join(json.dumps({"text": t}) + "\n" for t in texts)
    res = subprocess.run([capot, "encode", "--encoder", bundle], input=stdin, capture_output=True,
                         text=True, check=True)
    vecs = np.array([json.loads(l)["embedding"] for l in res.stdout.splitlines() if l.strip()], dtype="<f4")
    assert len(vecs) == len(texts), (len(vecs), len(texts))
    vecs.tofile(out)
    return vecs


def exact_top_k(docs, queries, k):
    out = []
    for s in range(0, len(queries), 1024):
        scores = queries[s:s + 1024] @ docs.T
        top = np.argpartition(-scores, k, axis=1)[:, :k]
        order = np.take_along_axis(scores, top, 1).argsort(axis=1)[:, ::-1]
        out.append(np.take_along_axis(top, order, 1))
    return np.vstack(out)


def recall(found, exact):
    k = exact.shape[1]
    return float(np.mean([len(set(f[:k]) & set(e)) / k for f, e in zip(found, exact)]))


def sweep(search, efs, exact, rounds):
    """search(ef) -> labels; best-of-`rounds` wall time over the whole query set."""
    rows = []
    for ef in efs:
        labels = search(ef)  # warm-up, and the recall
        best = float("inf")
        for _ in range(rounds):
            t = time.perf_counter()
            search(ef)
            best = min(best, time.perf_counter() - t)
        n = len(exact)
        rows.append({"ef": ef, "recall": recall(labels, exact), "queries_per_second": n / best,
                     "latency_ms_mean": best * 1e3 / n})
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--capot", required=True, help="capot binary")
    ap.add_argument("--index", nargs="+", required=True,
                    help="capot index directories over the same vectors (e.g. built with other --seed)")
    ap.add_argument("--encoder", required=True, help="bundle that encodes the queries")
    ap.add_argument("--queries", nargs="+", required=True, help="queries.jsonl / TSV files")
    ap.add_argument("--out", default="bench/out")
    ap.add_argument("--ef", default="10,16,24,32,48,64,96,128,192,256")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--targets", default="0.95,0.99")
    ap.add_argument("--peers", default="hnswlib,faiss", help="peer libraries to build and measure")
    ap.add_argument("--hnswlib-seed", default="100", help="hnswlib's random_seed, or several: 100,1,2")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    efs = [int(x) for x in a.ef.split(",")]
    metas = [json.load(open(os.path.join(d, "index.json"))) for d in a.index]
    meta = metas[0]
    n, dim = meta["count"], meta["dimension"]
    M, EF_CONSTRUCTION = meta["hnsw"]["m"], meta["hnsw"]["ef_construction"]
    for d, m in zip(a.index, metas):
        same = (m["files"]["vectors.f32"] == meta["files"]["vectors.f32"]
                and (m["hnsw"]["m"], m["hnsw"]["ef_construction"]) == (M, EF_CONSTRUCTION))
        if not same:
            sys.exit(f"{d}: other vectors or HNSW parameters than {a.index[0]}")
    hnswlib_seeds = [int(s) for s in a.hnswlib_seed.split(",")]
    capot_seeds = [m["hnsw"].get("seed", "default") for m in metas]
    if len(set(capot_seeds)) < len(capot_seeds) or len(set(hnswlib_seeds)) < len(hnswlib_seeds):
        sys.exit("the same seed twice: its graph would be measured twice")
    docs = np.fromfile(os.path.join(a.index[0], "vectors.f32"), dtype="<f4").reshape(n, dim)
    qpath = os.path.join(a.out, "ann-queries.f32")
    if os.path.exists(qpath):
        queries = np.fromfile(qpath, dtype="<f4").reshape(-1, dim)
    else:
        print(f"encoding the queries with capot into {qpath}", file=sys.stderr)
        queries = encode_queries(a.capot, a.encoder, a.queries, qpath)
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    exact = exact_top_k(docs, queries, a.k)
    print(f"{n} documents, {len(queries)} queries, dimension {dim}, k={a.k}", file=sys.stderr)

    # One column per graph: "capot" and "hnswlib" alone, "capot seed S" with several.
    def name(lib, seed, several):
        return f"{lib} seed {seed}" if several else lib

    libs, family = {}, {}
    for d, m in zip(a.index, metas):
        res = subprocess.run([a.capot, "bench", "ann", "--index", d, "--queries-vectors", qpath,
                              "--ef", ",".join(map(str, efs)), "--k", str(a.k), "--rounds", str(a.rounds)],
                             capture_output=True, text=True, check=True)
        col = name("capot", m["hnsw"].get("seed", "default"), len(a.index) > 1)
        libs[col], family[col] = json.loads(res.stdout)["results"], "capot"

    peers = a.peers.split(",")
    build = {}
    faiss.omp_set_num_threads(os.cpu_count() or 1)
    for seed in hnswlib_seeds if "hnswlib" in peers else []:
        col = name("hnswlib", seed, len(hnswlib_seeds) > 1)
        t = time.perf_counter()
        h = hnswlib.Index(space="ip", dim=dim)
        h.init_index(max_elements=n, M=M, ef_construction=EF_CONSTRUCTION, random_seed=seed)
        h.add_items(docs, np.arange(n))
        build[col] = time.perf_counter() - t

        def hnswlib_search(ef):
            h.set_ef(max(ef, a.k))
            return h.knn_query(queries, k=a.k, num_threads=1)[0]

        libs[col], family[col] = sweep(hnswlib_search, efs, exact, a.rounds), "hnswlib"
        del h
    if "faiss" in peers:
        t = time.perf_counter()
        f = faiss.IndexHNSWFlat(dim, M, faiss.METRIC_INNER_PRODUCT)
        f.hnsw.efConstruction = EF_CONSTRUCTION
        f.add(docs)
        build["faiss"] = time.perf_counter() - t
        faiss.omp_set_num_threads(1)

        def faiss_search(ef):
            f.hnsw.efSearch = max(ef, a.k)
            return f.search(queries, a.k)[1]

        libs["faiss"], family["faiss"] = sweep(faiss_search, efs, exact, a.rounds), "faiss"
        del f

    targets = [float(x) for x in a.targets.split(",")]
    equal = {}
    for tgt in targets:
        equal[str(tgt)] = {lib: dict(zip(("queries_per_second", "ef_lo", "ef_hi"), qps_at(rows, tgt)))
                           for lib, rows in libs.items()}
    report = {"documents": n, "queries": len(queries), "dimension": dim, "k": a.k, "m": M,
              "ef_construction": EF_CONSTRUCTION, "threads": 1, "rounds": a.rounds,
              "seeds": {"capot": [m["hnsw"].get("seed") for m in metas], "hnswlib": hnswlib_seeds},
              "versions": {"hnswlib": "0.8.0", "faiss": faiss.__version__},
              "build_seconds_python": build, "sweep": libs, "equal_recall": equal}

    print(f"#### Recall@{a.k} and queries/s per ef (single thread, {len(queries)} queries, {n} vectors, M={M})\n")
    print("| ef | " + " | ".join(f"{l} recall | {l} q/s" for l in libs) + " |")
    print("|---|" + "---|---|" * len(libs))
    for i, ef in enumerate(efs):
        cells = [f"{libs[l][i]['recall']:.4f} | {libs[l][i]['queries_per_second']:.0f}" for l in libs]
        print(f"| {ef} | " + " | ".join(cells) + " |")
    print(f"\n#### Queries/s at equal recall@{a.k} (interpolated between the ef values around it)\n")
    capot0 = next(iter(libs))
    others = [l for l in libs if family[l] != "capot"]
    print("| recall@10 | " + " | ".join(f"{l} q/s (ef)" for l in libs) + " | "
          + " | ".join(f"{capot0} / {l}" for l in others) + " |")
    print("|---|" + "---|" * (len(libs) + len(others)))
    ratio = lambda x, y: "–" if x is None or y is None else f"{x / y:.2f}"

    def cell(e):
        if e["queries_per_second"] is None:
            return "not reached"
        ef = e["ef_hi"] if e["ef_lo"] == e["ef_hi"] else f"{e['ef_lo']}–{e['ef_hi']}"
        return f"{e['queries_per_second']:.0f} ({ef})"

    for tgt in targets:
        e = equal[str(tgt)]
        q = {l: e[l]["queries_per_second"] for l in libs}
        print(f"| ≥ {tgt} | " + " | ".join(cell(e[l]) for l in libs) + " | "
              + " | ".join(ratio(q[capot0], q[l]) for l in others) + " |")
    print(f"\n(a target already passed at the smallest ef, ef = k = {a.k}, is credited with that ef's q/s)")

    families = sorted(set(family.values()), key=["capot", "hnswlib", "faiss"].index)
    if any(list(family.values()).count(f) > 1 for f in families):
        # A graph that never reaches the target counts as 0 q/s there.
        def median(fam, tgt):
            qs = [equal[str(tgt)][l]["queries_per_second"] or 0.0 for l in libs if family[l] == fam]
            return float(np.median(qs)), len(qs)

        print(f"\n#### Median over the seeds of queries/s at equal recall@{a.k}\n")
        print("| recall@10 | " + " | ".join(f"{f} median (graphs)" for f in families) + " | "
              + " | ".join(f"capot / {f}" for f in families if f != "capot") + " |")
        print("|---|" + "---|" * (2 * len(families) - 1))
        for tgt in targets:
            med = {f: median(f, tgt) for f in families}
            print(f"| ≥ {tgt} | " + " | ".join(f"{med[f][0]:.0f} ({med[f][1]})" for f in families) + " | "
                  + " | ".join(ratio(med["capot"][0], med[f][0] or None) for f in families if f != "capot")
                  + " |")
        equal["median"] = {str(t): {f: median(f, t)[0] for f in families} for t in targets}
    json.dump(report, open(os.path.join(a.out, "ann.json"), "w"), indent=2)


if __name__ == "__main__":
    main()
