"""One hnswlib graph searched by hnswlib and by capot: separates "whose graph is better" from
"whose search is faster", which bench/ann.py (each library searching its own graph) cannot.

    python bench/same_graph.py --capot BIN --index DIR --queries-vectors FILE --out DIR
        [--hnswlib-seed 100] [--ef 512,1024,2048]

hnswlib builds a graph over the index's vectors.f32 with the manifest's M and ef_construction
(or `--hnswlib-index` loads one saved before) and saves it; the graph is converted into capot's
graph.bin layout (src/index/graph.rs, ids = hnswlib's labels = rows) in OUT/index, a capot index
whose other files are hard links to DIR's. Then, per ef, alternating: hnswlib searching its graph,
capot searching the same graph (`capot bench ann`), and capot searching DIR's own graph.
Single thread, recall@10 against exact search (NumPy). The query vectors are float32 rows, as
bench/ann.py writes them (OUT/ann-queries.f32). Reads hnswlib 0.8's saved-index layout.
Needs numpy, hnswlib and blake3 (the manifest carries graph.bin's BLAKE3).
"""

import argparse
import json
import os
import struct
import subprocess
import sys
import time

import blake3
import hnswlib
import numpy as np

K = 10
# src/index/graph.rs: magic, layout version, header size in u32 words.
MAGIC = np.frombuffer(b"CAPOTHNW", dtype="<u4")
LAYOUT_VERSION = 1
HEADER_WORDS = 16


def read_hnswlib(path):
    """Layer 0, levels and upper lists of a saved hnswlib index, in label space."""
    with open(path, "rb") as f:
        head = f.read(96)
        _, _, count, per_element, label_offset, _ = struct.unpack_from("<6Q", head, 0)
        top, entry = struct.unpack_from("<iI", head, 48)
        m_upper, m0, m = struct.unpack_from("<3Q", head, 56)
        base = f.tell()
        level0 = np.memmap(path, dtype=np.uint8, mode="r", offset=base,
                           shape=(count, per_element))
        labels = level0[:, label_offset:label_offset + 8].copy().view("<u8").ravel()
        if not np.array_equal(np.sort(labels), np.arange(count)):
            sys.exit("same_graph.py: the hnswlib index's labels are not 0..count-1")
        links0 = level0[:, :4 + 4 * m0].copy().view("<u4")
        f.seek(base + count * per_element)
        levels = np.zeros(count, dtype=np.int64)
        upper = [None] * count
        for i in range(count):
            (size,) = struct.unpack("<I", f.read(4))
            if size:
                levels[i] = size // (4 * (1 + m_upper))
                upper[i] = np.frombuffer(f.read(size), dtype="<u4").reshape(-1, 1 + m_upper)
    label = labels.astype(np.uint32)
    internal = np.empty(count, dtype=np.int64)
    internal[label] = np.arange(count)
    # Layer 0 in label order; a list's count is the low 16 bits of its first word.
    counts = links0[internal, 0] & 0xFFFF
    layer0 = np.zeros((count, 1 + m0), dtype="<u4")
    layer0[:, 0] = counts
    ids = label[links0[internal, 1:]]
    slot = np.arange(m0)[None, :] < counts[:, None]
    layer0[:, 1:] = np.where(slot, ids, 0)
    node_levels = levels[internal]
    lists = []
    for node in np.nonzero(node_levels)[0]:
        u = upper[internal[node]].copy()
        for row in u:
            n = row[0] & 0xFFFF
            row[0] = n
            row[1:1 + n] = label[row[1:1 + n]]
            row[1 + n:] = 0
        lists.append(u)
    uppers = np.vstack(lists) if lists else np.zeros((0, 1 + m_upper), "<u4")
    return dict(m=m, m0=m0, count=count, entry=int(label[entry]), top=top,
                layer0=layer0, levels=node_levels, uppers=uppers.astype("<u4"))


def write_capot_graph(g, path):
    """Writes graph.bin in layout 1; returns its size and BLAKE3."""
    offsets = np.zeros(g["count"] + 1, dtype="<u4")
    offsets[1:] = np.cumsum(g["levels"])
    head = np.zeros(HEADER_WORDS, dtype="<u4")
    head[0:2] = MAGIC
    head[2:9] = [LAYOUT_VERSION, g["m"], g["m0"], g["count"], g["entry"], g["top"],
                 int(offsets[-1])]
    h = blake3.blake3()
    size = 0
    with open(path, "wb") as out:
        for part in (head, g["layer0"], offsets, g["uppers"]):
            data = np.ascontiguousarray(part).tobytes()
            out.write(data)
            h.update(data)
            size += len(data)
    return {"bytes": size, "blake3": h.hexdigest()}


def capot_index_with_graph(src, g, out):
    """A capot index at `out`: hard links to `src`'s files but graph.bin, which is `g`."""
    os.makedirs(out)
    for name in os.listdir(src):
        if name not in ("graph.bin", "index.json"):
            os.link(os.path.join(src, name), os.path.join(out, name))
    manifest = json.load(open(os.path.join(src, "index.json")))
    manifest["files"]["graph.bin"] = write_capot_graph(g, os.path.join(out, "graph.bin"))
    manifest["hnsw"]["top_level"] = g["top"]
    manifest["hnsw"]["library"] += " (graph converted from hnswlib)"
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(manifest, f, indent=2)


def capot_bench(capot, index, queries, ef):
    res = subprocess.run([capot, "bench", "ann", "--index", index, "--queries-vectors", queries,
                          "--ef", str(ef), "--k", str(K), "--rounds", "2"],
                         capture_output=True, text=True, check=True)
    r = json.loads(res.stdout)["results"][0]
    return r["recall"], r["queries_per_second"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--capot", required=True, help="capot binary")
    ap.add_argument("--index", required=True, help="capot index (float32 vectors)")
    ap.add_argument("--queries-vectors", required=True, help="float32 query rows")
    ap.add_argument("--out", required=True, help="new directory for the results")
    ap.add_argument("--hnswlib-seed", type=int, default=100)
    ap.add_argument("--hnswlib-index", help="a saved hnswlib index over the same vectors")
    ap.add_argument("--ef", default="512,1024,2048")
    a = ap.parse_args()
    efs = [int(x) for x in a.ef.split(",")]
    meta = json.load(open(os.path.join(a.index, "index.json")))
    n, dim = meta["count"], meta["dimension"]
    docs = np.fromfile(os.path.join(a.index, "vectors.f32"), dtype="<f4").reshape(n, dim)
    queries = np.fromfile(a.queries_vectors, dtype="<f4").reshape(-1, dim)
    os.makedirs(a.out)
    saved = a.hnswlib_index or os.path.join(a.out, "hnswlib.bin")
    h = hnswlib.Index(space="ip", dim=dim)
    if a.hnswlib_index:
        h.load_index(saved, max_elements=n)
    else:
        print(f"building hnswlib (M={meta['hnsw']['m']}, seed {a.hnswlib_seed}) over {n} vectors",
              file=sys.stderr)
        h.init_index(max_elements=n, M=meta["hnsw"]["m"],
                     ef_construction=meta["hnsw"]["ef_construction"], random_seed=a.hnswlib_seed)
        h.add_items(docs, np.arange(n))
        h.save_index(saved)
    converted = os.path.join(a.out, "index")
    capot_index_with_graph(a.index, read_hnswlib(saved), converted)
    exact = []
    for s in range(0, len(queries), 100):
        scores = queries[s:s + 100] @ docs.T
        exact.extend(np.argpartition(-scores, K, axis=1)[:, :K].tolist())
    del docs
    rows = []
    for ef in efs:
        h.set_ef(max(ef, K))
        best = 0.0
        for _ in range(2):
            t = time.perf_counter()
            labels = h.knn_query(queries, k=K, num_threads=1)[0]
            best = max(best, len(queries) / (time.perf_counter() - t))
        recall = float(np.mean([len(set(f) & set(e)) / K for f, e in zip(labels.tolist(), exact)]))
        same = capot_bench(a.capot, converted, a.queries_vectors, ef)
        own = capot_bench(a.capot, a.index, a.queries_vectors, ef)
        rows.append({"ef": ef, "hnswlib": [recall, best], "capot_same_graph": list(same),
                     "capot_own_graph": list(own)})
        print(f"ef {ef}: hnswlib {recall:.4f}/{best:.0f}, capot same graph "
              f"{same[0]:.4f}/{same[1]:.0f}, capot own graph {own[0]:.4f}/{own[1]:.0f}",
              file=sys.stderr, flush=True)
    with open(os.path.join(a.out, "same_graph.json"), "w") as f:
        json.dump({"documents": n, "m": meta["hnsw"]["m"], "queries": len(queries),
                   "hnswlib_seed": a.hnswlib_seed, "results": rows}, f, indent=2)
    print(f"#### One hnswlib graph, two searches ({n} vectors, M={meta['hnsw']['m']}, "
          f"{len(queries)} queries, single thread); recall@{K} / q/s\n")
    print("| ef | hnswlib on its graph | capot on hnswlib's graph | capot / hnswlib q/s "
          "| capot on its own graph |")
    print("|---|---|---|---|---|")
    for r in rows:
        hr, hq = r["hnswlib"]
        sr, sq = r["capot_same_graph"]
        orr, oq = r["capot_own_graph"]
        print(f"| {r['ef']} | {hr:.4f} / {hq:.0f} | {sr:.4f} / {sq:.0f} | {sq / hq:.2f} "
              f"| {orr:.4f} / {oq:.0f} |")


if __name__ == "__main__":
    main()
