#!/usr/bin/env bash
# Filtered search at scale, one command (docs/benchmarks.md "Filtered search"):
#
#   bench/filter.sh [N]          # default N=100000; OUT=/tmp/filter, BENCH_WORK=/tmp/bench
#
# N derived document vectors and passages (bench/derive_vectors.py, bench/derive_corpus.py, as
# bench/scale.sh makes them; an index already built at $INDEX is reused), 1,000 MS MARCO dev
# queries encoded by MiniLM, then `capot bench filter` (generated metadata: a Zipfian keyword of
# 1,000 values, a year, a tenant key of 10,000 values, filters admitting 0.1% to 100% of the
# documents independent of, correlated with and anti-correlated with the queries) and
# bench/filter_peers.py (hnswlib's filtered knn_query on the same vectors, admitted sets and exact
# answers). EF sets the walk's ef (default: the index's ef_search). Writes $OUT/filter.json,
# $OUT/filter.md and $OUT/peers.json.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-100000}
WORK=${BENCH_WORK:-/tmp/bench}
OUT=${OUT:-/tmp/filter}
QUERIES=../shared/data/marco-dev-queries/queries.tsv
mkdir -p "$OUT" "$WORK"
py=bench/.venv/bin/python
if ! "$py" -c 'import numpy, hnswlib' 2>/dev/null; then
  [ -x "$py" ] || python3 -m venv bench/.venv
  bench/.venv/bin/pip install --quiet --disable-pip-version-check numpy==2.4.6 hnswlib==0.8.0
fi
cargo build --release --locked --quiet
bin=${CARGO_TARGET_DIR:-target}/release/capot
bundle=$WORK/minilm
small=$WORK/dl19-index
[ -f "$bundle/encoder.json" ] || "$bin" encoder import assets/models/all-MiniLM-L6-v2 --out "$bundle" --name minilm >/dev/null
[ -f "$small/index.json" ] || "$bin" index build --doc-encoder "$bundle" --corpus ../shared/data/dl19-sample --out "$small"

index=${INDEX:-$WORK/index-$N}
if [ ! -f "$index/index.json" ]; then
  corpus=$WORK/corpus-$N
  [ -f "$corpus/corpus.jsonl" ] || python3 bench/derive_corpus.py "$corpus" "$N" \
    ../shared/data/dl19-sample/corpus.jsonl ../shared/data/dbpedia-sample/corpus.jsonl
  vectors=$WORK/vectors-$N.npy
  [ -f "$vectors" ] || "$py" bench/derive_vectors.py "$small" "$N" "$vectors" > "$OUT/derive.json"
  "$bin" index build --doc-encoder "$bundle" --corpus "$corpus" --vectors "$vectors" \
    --check-vectors 0 --out "$index" 2> "$OUT/build.err"
fi

qvec=$WORK/queries-1000.f32
if [ ! -f "$qvec" ]; then
  head -n 1000 "$QUERIES" | "$py" -c 'import json,sys
for l in sys.stdin:
    print(json.dumps({"text": l.rstrip("\n").split("\t", 1)[1]}))' \
    | "$bin" encode --encoder "$bundle" \
    | "$py" -c 'import json,sys,numpy as np
np.array([json.loads(l)["embedding"] for l in sys.stdin if l.strip()], dtype="<f4").tofile(sys.argv[1])' "$qvec"
fi

rm -rf "$OUT/cells"
"$bin" bench filter --index "$index" --queries-vectors "$qvec" --queries "${QUERIES_N:-300}" ${EF:+--ef "$EF"} \
  --export "$OUT/cells" > "$OUT/filter.json" 2> "$OUT/filter.md"
tail -n 25 "$OUT/filter.md"
"$py" bench/filter_peers.py --index "$index" --queries-vectors "$qvec" --cells "$OUT/cells" \
  --bench "$OUT/filter.json" --out "$OUT/peers.json"
