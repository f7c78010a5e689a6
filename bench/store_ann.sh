#!/usr/bin/env bash
# pgvector's HNSW beside capot's graph on the same vectors, one command, one run
# (docs/benchmarks.md "Stores"):
#
#   bench/store_ann.sh [N]        # default N=100000; OUT=/tmp/store-ann, BENCH_WORK=/tmp/bench
#
# The N derived passages and vectors bench/scale.sh and bench/filter.sh make (reused from
# $BENCH_WORK), loaded by `capot index build --store --vectors` into PostgreSQL 18 + pgvector 0.8
# (bench/pg.sh) with capot's index parameters (M 16, ef_construction 200), each document given
# `bucket` = its ordinal mod 100, `tenant` one of 1,000 and `cat` one of 10 (keywords); then 1,000 MS MARCO dev query vectors: recall@10 against exact
# search and single-connection queries/s per ef for pgvector (bench/store_ann.py), and
# `capot bench ann` for capot's graph on the same vectors; filtered recall at 1% and 10% with
# iterative scans off and on; ranges on the declared `bucket` through the SQL/JSON path and
# through capot's B-tree form; keyword matches on `tenant` (0.1%) and `cat` (10%) likewise. Prints Markdown; $OUT/store-ann.json. At 1M, give the HNSW build
# room: PG_MAINTENANCE_WORK_MEM=8GB (the default 2GB suits 100,000).
# PLANNER_QUERIES=100 runs the range and keyword sections' cells on the first 100 queries
# (their exact cells score up to 100,000 rows a query at 1M).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-100000}
WORK=${BENCH_WORK:-/tmp/bench}
OUT=${OUT:-/tmp/store-ann}
PORT_PG=${PORT_PG:-15433}
mkdir -p "$OUT"
py=bench/.venv/bin/python
"$py" -c 'import numpy, psycopg' 2>/dev/null || bench/.venv/bin/pip install --quiet \
  --disable-pip-version-check numpy==2.4.6 "psycopg[binary]==3.2.13"
cargo build --release --locked --quiet
bin=${CARGO_TARGET_DIR:-target}/release/capot
for f in "$WORK/index-$N/index.json" "$WORK/vectors-$N.npy" "$WORK/corpus-$N/corpus.jsonl" "$WORK/queries-1000.f32"; do
  [ -f "$f" ] || { echo "store_ann.sh: $f is missing: run bench/filter.sh $N first" >&2; exit 1; }
done
corpus=$WORK/corpus-$N-store
[ -f "$corpus/corpus.jsonl" ] || { mkdir -p "$corpus"; python3 - "$WORK/corpus-$N/corpus.jsonl" "$corpus/corpus.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], encoding="utf-8") as src, open(sys.argv[2], "w", encoding="utf-8") as out:
    for i, line in enumerate(src):
        doc = json.loads(line)
        doc["bucket"] = i % 100
        doc["tenant"] = f"t{i % 1000}"
        doc["cat"] = f"c{i % 10}"
        out.write(json.dumps(doc) + "\n")
PY
}
. bench/pg.sh
trap pg_stop EXIT
pg_start "$PORT_PG"
url="postgres://postgres@127.0.0.1:$PORT_PG/postgres?table=ann"
"$bin" index build --doc-encoder "$WORK/minilm" --corpus "$corpus" --vectors "$WORK/vectors-$N.npy" \
  --check-vectors 0 --store "$url" --m 16 --ef-construction 200 --chunk-size 8192 \
  --payload-index bucket:integer --payload-index tenant:keyword --payload-index cat:keyword \
  2> "$OUT/load.log"
tail -1 "$OUT/load.log"
"$bin" bench ann --index "$WORK/index-$N" --queries-vectors "$WORK/queries-1000.f32" --ef 64,256 \
  > "$OUT/capot-ann.json"
"$py" bench/store_ann.py "127.0.0.1" "$PORT_PG" "$WORK/vectors-$N.npy" "$WORK/queries-1000.f32" \
  "$OUT/capot-ann.json" "$OUT/load.log" > "$OUT/store-ann.md"
cat "$OUT/store-ann.md"
