#!/usr/bin/env bash
# The precision of the vectors the graph walk reads (`capot index build --graph-vectors`), side by
# side in one run: float32, float16 and int8 indexes of the same dl19-sample vectors (5,000 real
# MiniLM vectors; hits re-scored in float32 in every case):
#   - nDCG@10 clean and on the dl19 typo files, searched through HNSW at ef 64 (`capot eval --ef`),
#   - recall@10 against exact search and single-thread queries/s per ef (`capot bench ann`),
#   - bytes the walk reads (the copy, or vectors.f32) beside the graph.
# With INDEXES_1M="dir dir ..." (1M indexes built by bench/scale.sh and `--graph-vectors`), their
# recall and queries/s per ef too, on the same query vectors.
#
#   bench/graph_vectors.sh        (needs scripts/setup; OUT default /tmp/graph-vectors)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/graph-vectors}
WORK=${BENCH_WORK:-/tmp/bench}
DATASET=../shared/data/dl19-sample
QUERIES=../shared/data/marco-dev-queries/queries.tsv
EFS=${EFS:-16,32,64,128,256}
mkdir -p "$OUT" "$WORK"
cargo build --release --locked --quiet
bin=${CARGO_TARGET_DIR:-target}/release/capot
bundle=$WORK/minilm
[ -f "$bundle/encoder.json" ] || "$bin" encoder import assets/models/all-MiniLM-L6-v2 --out "$bundle" --name minilm >/dev/null

# One encoding of the corpus, three indexes from it.
f32=$OUT/index-float32
[ -f "$f32/index.json" ] || "$bin" index build --doc-encoder "$bundle" --corpus "$DATASET" --out "$f32" \
  --encoder-workers auto --threads 1
python3 - "$f32/vectors.f32" "$OUT/vectors.npy" <<'PY'
import struct, sys
src, dst = sys.argv[1:]
data = open(src, "rb").read()
n = len(data) // (4 * 384)
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, 384), }" % n
header += " " * (63 - (10 + len(header)) % 64) + "\n"
open(dst, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)
PY
for p in float16 int8; do
  "$bin" index build --doc-encoder "$bundle" --corpus "$DATASET" --vectors "$OUT/vectors.npy" \
    --graph-vectors "$p" --out "$OUT/index-$p" --force 2>/dev/null
done

# Query vectors: 1,000 MS MARCO dev queries.
if [ ! -f "$OUT/queries.f32" ]; then
  head -n 1000 "$QUERIES" | python3 -c 'import json, sys
for l in sys.stdin:
    print(json.dumps({"text": l.rstrip("\n").split("\t", 1)[1]}))' |
    "$bin" encode --encoder "$bundle" | python3 -c 'import json, struct, sys
out = open(sys.argv[1], "wb")
for l in sys.stdin:
    e = json.loads(l)["embedding"]
    out.write(struct.pack("<%df" % len(e), *e))' "$OUT/queries.f32"
fi

variants=()
for f in "$DATASET"/queries.typo*.tsv; do variants+=(--variants "$f"); done
for p in float32 float16 int8; do
  "$bin" bench ann --index "$OUT/index-$p" --queries-vectors "$OUT/queries.f32" --ef "$EFS" \
    --rounds 3 > "$OUT/ann-$p.json"
  "$bin" eval --dataset "$DATASET" --index "$OUT/index-$p" --encoder "$bundle" --ef 64 \
    "${variants[@]}" --out "$OUT/eval-$p" >/dev/null 2>&1
done
for dir in ${INDEXES_1M:-}; do
  "$bin" bench ann --index "$dir" --queries-vectors "$OUT/queries.f32" --ef "${EFS_1M:-64,256,1024}" \
    > "$OUT/ann-1m-$(basename "$dir").json"
done

python3 - "$OUT" ${INDEXES_1M:-} <<'PY'
import json, os, sys
out, big = sys.argv[1], sys.argv[2:]

def ndcg(p, noisy):
    e = json.load(open(f"{out}/eval-{p}/report.json"))["encoders"][0]
    return next(c["metrics"]["ndcg@10"] for c in e["conditions"] if c["kind"] == ("mean" if noisy else "clean"))

def walk_bytes(d):
    m = json.load(open(f"{d}/index.json"))
    name = {"float32": "vectors.f32", "float16": "vectors.f16", "int8": "vectors.i8"}[m.get("graph_vectors", "float32")]
    return m["files"][name]["bytes"], m["files"]["graph.bin"]["bytes"]

print("#### dl19-sample, 5,000 documents: quality, memory and speed per graph-walk precision\n")
print("| precision | walk reads (MB) | graph (MB) | nDCG@10 clean (ef 64) | Δ | typo-files mean | Δ | "
      + " | ".join(f"recall@10 ef {r['ef']}" for r in json.load(open(f"{out}/ann-float32.json"))["results"])
      + " | q/s at ef 64 | × float32 |")
print("|---|---|---|---|---|---|---|" + "---|" * len(json.load(open(f"{out}/ann-float32.json"))["results"]) + "---|---|")
base = {}
for p in ("float32", "float16", "int8"):
    res = json.load(open(f"{out}/ann-{p}.json"))["results"]
    c, n = ndcg(p, False), ndcg(p, True)
    qps = next(r["queries_per_second"] for r in res if r["ef"] == 64)
    if p == "float32":
        base = {"c": c, "n": n, "qps": qps}
    w, g = walk_bytes(f"{out}/index-{p}")
    print(f"| {p} | {w / 1e6:.1f} | {g / 1e6:.1f} | {c:.4f} | {100 * (c / base['c'] - 1):+.2f}% | {n:.4f} | "
          f"{100 * (n / base['n'] - 1):+.2f}% | " + " | ".join(f"{r['recall']:.4f}" for r in res)
          + f" | {qps:.0f} | {qps / base['qps']:.2f} |")
if big:
    print("\n#### 1M documents: recall@10 and single-thread queries/s per ef\n")
    print("| index | precision | walk reads (MB) | ef | recall@10 | q/s |")
    print("|---|---|---|---|---|---|")
    for d in big:
        m = json.load(open(f"{d}/index.json"))
        w, _ = walk_bytes(d)
        for r in json.load(open(f"{out}/ann-1m-{os.path.basename(d)}.json"))["results"]:
            print(f"| {os.path.basename(d)} | {m.get('graph_vectors', 'float32')} | {w / 1e6:.0f} | {r['ef']} | "
                  f"{r['recall']:.4f} | {r['queries_per_second']:.0f} |")
PY
