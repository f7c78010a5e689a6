#!/usr/bin/env bash
# int8 against float32 query encoders, in one run on one machine: `capot encoder quantize`, then
# texts/s and p50 per batch size (`capot bench encode`, the encoders measured in alternation),
# then nDCG@10 clean and on the ten dl19 typo files (`capot eval`, exact search). Prints Markdown
# tables with ratios (docs/benchmarks.md keeps the numbers).
#
#   bench/quantize.sh [SECONDS_PER_POINT]     (needs scripts/setup to have run)
#
# WORKERS × THREADS picks the pool (default 1 × 2: one session with both cores).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_POINT=${1:-5}
THREADS=${THREADS:-2}
WORKERS=${WORKERS:-1}
QUERIES=${QUERIES:-../shared/data/marco-dev-queries/queries.tsv}
DATASET=${DATASET:-../shared/data/dl19-sample}
BUNDLE=${BUNDLE:-assets/encoders/minilm}
OUT=${OUT:-bench/out/quantize}
mkdir -p "$OUT"

bin=${CARGO_TARGET_DIR:-target}/release/capot
cargo build --release --locked --quiet
[ -f "$BUNDLE/encoder.json" ] || "$bin" encoder import assets/models/all-MiniLM-L6-v2 --out "$BUNDLE" --name minilm >/dev/null
"$bin" encoder quantize "$BUNDLE" --out "$OUT/int8" --force --threads "$THREADS" >/dev/null
"$bin" encoder quantize "$BUNDLE" --out "$OUT/int8-7bit" --name "$(basename "$BUNDLE")-int8-7bit" \
  --reduce-range --force --threads "$THREADS" >/dev/null
[ -f "$OUT/index/index.json" ] && "$bin" index upgrade "$OUT/index" 2>/dev/null  # cached from an older capot
[ -f "$OUT/index/index.json" ] ||
  "$bin" index build --doc-encoder "$BUNDLE" --corpus "$DATASET" --out "$OUT/index" \
    --encoder-workers "$WORKERS" --threads "$THREADS" >/dev/null

"$bin" bench encode --encoder "$BUNDLE" --encoder "$OUT/int8" --encoder "$OUT/int8-7bit" \
  --queries "$QUERIES" --batch-sizes 1,8,32 --seconds "$SECONDS_PER_POINT" --rounds 2 \
  --encoder-workers "$WORKERS" --threads "$THREADS" > "$OUT/encode.json"

variants=()
for f in "$DATASET"/queries.typo*.tsv; do variants+=(--variants "$f"); done
"$bin" eval --dataset "$DATASET" --index "$OUT/index" --threads "$THREADS" \
  --encoder "$BUNDLE" --encoder "$OUT/int8" --encoder "$OUT/int8-7bit" \
  "${variants[@]}" --out "$OUT/eval" >/dev/null

python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
enc = json.load(open(f"{out}/encode.json"))
rows = enc["results"]
base = {r["batch_size"]: r for r in rows if r["precision"] == "float32"}
print(f"{enc['workers']} session(s) × {enc['threads']} thread(s), best of {enc['rounds']} rounds\n")
print("| encoder | precision | batch | texts/s | × float32 | p50 ms | p99 ms |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    b = base[r["batch_size"]]
    print(f"| {r['encoder']} | {r['precision']} | {r['batch_size']} | {r['texts_per_second']:.0f} | "
          f"{r['texts_per_second'] / b['texts_per_second']:.2f} | {r['latency_ms_p50']:.2f} | {r['latency_ms_p99']:.2f} |")
report = json.load(open(f"{out}/eval/report.json"))
print()
print("| encoder | clean nDCG@10 | Δ vs float32 | typo-files mean nDCG@10 | Δ vs float32 |")
print("|---|---|---|---|---|")
def ndcg(e, noisy):
    # Clean row, or the mean row of the typo files.
    return next(c["metrics"]["ndcg@10"] for c in e["conditions"] if c["kind"] == ("mean" if noisy else "clean"))
encs = report["encoders"]
c0, n0 = ndcg(encs[0], False), ndcg(encs[0], True)
for e in encs:
    c, n = ndcg(e, False), ndcg(e, True)
    print(f"| {e['name']}@{e['version']} | {c:.4f} | {100 * (c / c0 - 1):+.2f}% | {n:.4f} | {100 * (n / n0 - 1):+.2f}% |")
PY
