#!/usr/bin/env bash
# Encoding throughput and latency of the MiniLM bundle: capot against Python onnxruntime on the
# same model.onnx, same queries, same thread count, alternating in one run. Prints a Markdown
# table with ratios (docs/benchmarks.md keeps the numbers).
#
#   bench/encode.sh [SECONDS_PER_POINT]     (needs scripts/setup to have run)
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_POINT=${1:-10}
THREADS=${THREADS:-2}
QUERIES=${QUERIES:-../shared/data/marco-dev-queries/queries.tsv}
BUNDLE=${BUNDLE:-assets/encoders/minilm}
OUT=${OUT:-bench/out}
mkdir -p "$OUT"

venv=bench/.venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check onnxruntime==1.31.1 tokenizers==0.23.3 numpy==2.4.6
fi
bin=${CARGO_TARGET_DIR:-target}/release/capot
cargo build --release --locked --quiet
[ -f "$BUNDLE/encoder.json" ] || "$bin" encoder import assets/models/all-MiniLM-L6-v2 --out "$BUNDLE" --name minilm >/dev/null

export ORT_DYLIB_PATH=${ORT_DYLIB_PATH:-$PWD/assets/onnxruntime/lib/libonnxruntime.so}
for round in 1 2; do
  "$bin" bench encode --encoder "$BUNDLE" --queries "$QUERIES" --seconds "$SECONDS_PER_POINT" --threads "$THREADS" > "$OUT/encode-capot-$round.json"
  "$venv/bin/python" bench/encode_ort.py --encoder "$BUNDLE" --queries "$QUERIES" --seconds "$SECONDS_PER_POINT" --threads "$THREADS" > "$OUT/encode-python-$round.json"
done
python3 - "$OUT" <<'PY'
import json, sys, glob
out = sys.argv[1]
def best(kind):
    # Best of the two rounds per batch size (the machine is shared and noisy).
    runs = [json.load(open(f)) for f in sorted(glob.glob(f"{out}/encode-{kind}-*.json"))]
    by = {}
    for r in runs:
        for x in r["results"]:
            b = x["batch_size"]
            if b not in by or x["texts_per_second"] > by[b]["texts_per_second"]:
                by[b] = x
    return runs[0]["runtime"], by
cn, c = best("capot"); pn, p = best("python")
print(f"| batch | capot texts/s | {pn} texts/s | ratio | capot p50 ms | python p50 ms | capot p99 ms | python p99 ms |")
print("|---|---|---|---|---|---|---|---|")
for b in sorted(c):
    print(f"| {b} | {c[b]['texts_per_second']:.0f} | {p[b]['texts_per_second']:.0f} | {c[b]['texts_per_second']/p[b]['texts_per_second']:.2f} | "
          f"{c[b]['latency_ms_p50']:.2f} | {p[b]['latency_ms_p50']:.2f} | {c[b]['latency_ms_p99']:.2f} | {p[b]['latency_ms_p99']:.2f} |")
PY
