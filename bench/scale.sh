#!/usr/bin/env bash
# The index at scale, one command: N derived document vectors (bench/derive_vectors.py, from the
# real MiniLM vectors of the dl19 index) over N derived passages (bench/derive_corpus.py), then
#   - `capot index build --vectors` from the .npy: wall time and peak RSS (GNU time),
#   - `capot serve` on it: seconds to /ready (page cache warm, and cold when this user may drop
#     the page cache), RSS at ready and after the load runs (mapped pages count once touched), /search p50 at c=1 and q/s at c=16 against the 5,000 index,
#   - bench/ann.py: capot's graph against hnswlib on the same N vectors, recall@10 and single-thread
#     queries/s per ef, for QUERIES_ANN encoded MS MARCO dev queries.
# Prints what it measured (also OUT/scale.json and OUT/ann.md); docs/benchmarks.md keeps numbers.
#
#   bench/scale.sh [N]      (default 1000000; needs scripts/setup, wrk, /usr/bin/time)
#
# Environment: BENCH_WORK (default /tmp/bench: minilm bundle, dl19 index), OUT (default
# /tmp/scale), QUERIES_ANN (default 1000), PEERS (default hnswlib; add faiss), EFS (the ef sweep),
# SKIP_ANN=1, GRAPH_VECTORS (float32, float16 or int8: what the build writes), M (HNSW links,
# default 16), SEED (capot's level seed, `capot index build --seed`), HNSWLIB_SEED (hnswlib's
# random_seed, default 100), NICE (niceness of the build), INDEX (measure an index already built
# there instead of OUT/index-N).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
WORK=${BENCH_WORK:-/tmp/bench}
OUT=${OUT:-/tmp/scale}
PORT=${PORT:-18083}
QUERIES=../shared/data/marco-dev-queries/queries.tsv
mkdir -p "$OUT" "$WORK"
command -v wrk >/dev/null || { echo "scale.sh: needs wrk (apt-get install -y wrk)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "scale.sh: needs GNU time (apt-get install -y time)" >&2; exit 1; }
py=bench/.venv/bin/python
if ! "$py" -c 'import numpy, hnswlib, faiss, blake3' 2>/dev/null; then
  [ -x "$py" ] || python3 -m venv bench/.venv
  bench/.venv/bin/pip install --quiet --disable-pip-version-check numpy==2.4.6 hnswlib==0.8.0 faiss-cpu==1.15.1 blake3==1.0.11
fi
cargo build --release --locked --quiet
bin=${CARGO_TARGET_DIR:-target}/release/capot
bundle=$WORK/minilm
small=$WORK/dl19-index
[ -f "$bundle/encoder.json" ] || "$bin" encoder import assets/models/all-MiniLM-L6-v2 --out "$bundle" --name minilm >/dev/null
[ -f "$small/index.json" ] || "$bin" index build --doc-encoder "$bundle" --corpus ../shared/data/dl19-sample --out "$small"
"$bin" index upgrade "$small" 2>/dev/null  # cached from an older capot: no-op when current

index=${INDEX:-$OUT/index-$N}
corpus=$OUT/corpus-$N
[ -f "$index/index.json" ] || [ -f "$corpus/corpus.jsonl" ] || python3 bench/derive_corpus.py "$corpus" "$N" \
  ../shared/data/dl19-sample/corpus.jsonl ../shared/data/dbpedia-sample/corpus.jsonl
vectors=$OUT/vectors-$N.npy
[ -f "$index/index.json" ] || [ -f "$vectors" ] || "$py" bench/derive_vectors.py "$small" "$N" "$vectors" > "$OUT/derive.json"
[ -f "$index/index.json" ] && "$bin" index upgrade "$index"  # one cached from an older capot
if [ ! -f "$index/index.json" ]; then
  # GNU time's peak RSS counts the memory-mapped vectors' pages too; the sampler below records
  # the peak of RssAnon (the heap: what the build itself holds) once a second.
  /usr/bin/time -v -o "$OUT/build.time" nice -n "${NICE:-0}" "$bin" index build --doc-encoder "$bundle" \
    --corpus "$corpus" --vectors "$vectors" --check-vectors 0 --graph-vectors "${GRAPH_VECTORS:-float32}" \
    --m "${M:-16}" ${SEED:+--seed "$SEED"} --out "$index" 2> "$OUT/build.err" &
  tpid=$!
  peak_anon=0
  while kill -0 "$tpid" 2>/dev/null; do
    for cpid in $(pgrep -P "$tpid") $(pgrep -P "$(pgrep -P "$tpid" | head -n1)" 2>/dev/null); do
      a=$(awk '/^RssAnon:/ {print $2}' "/proc/$cpid/status" 2>/dev/null || echo 0)
      [ "${a:-0}" -gt "$peak_anon" ] && peak_anon=$a
    done
    sleep 1
  done
  wait "$tpid"
  echo "$peak_anon" > "$OUT/build.anon_kb"
fi
build_s=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$OUT/build.time" 2>/dev/null || true)
build_rss_kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$OUT/build.time" 2>/dev/null || true)
build_anon_kb=$(cat "$OUT/build.anon_kb" 2>/dev/null || true)
index_bytes=$(du -sbL "$index" | cut -f1)

pid=
stop() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; fi; }
trap stop EXIT
serve() { # index -> seconds to /ready in $ready; leaves the service running in $pid
  local t0; t0=$(date +%s.%N)
  rm -rf "$OUT/data"
  "$bin" serve --index "$1" --encoder "$bundle" --addr "127.0.0.1:$PORT" --data-dir "$OUT/data" \
    --log warn > "$OUT/serve.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 6000); do
    curl -sf "http://127.0.0.1:$PORT/ready" >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || { echo "scale.sh: the service exited" >&2; cat "$OUT/serve.log" >&2; exit 1; }
    sleep 0.05
  done
  ready=$(python3 -c "print(round($(date +%s.%N) - $t0, 2))")
}
rss_mb() { echo $(( $(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status") / 1024 )); }
load() { # name -> p50 ms at c=1, q/s at c=16
  local url=http://127.0.0.1:$PORT/search
  [ -f "$OUT/bodies.jsonl" ] || python3 bench/report.py bodies "$QUERIES" "$OUT/bodies.jsonl" 10
  BODIES=$OUT/bodies.jsonl timeout 30 wrk -t1 -c4 -d3s --timeout 10s -s bench/search.lua "$url" >/dev/null
  BODIES=$OUT/bodies.jsonl timeout 60 wrk -t1 -c1 -d10s --timeout 10s -s bench/search.lua "$url" | sed -n 's/^JSON //p' > "$OUT/wrk-$1-c1.json"
  BODIES=$OUT/bodies.jsonl timeout 60 wrk -t1 -c16 -d10s --timeout 10s -s bench/search.lua "$url" | sed -n 's/^JSON //p' > "$OUT/wrk-$1-c16.json"
}

cold=null
if sync && echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then
  serve "$index"; cold=$ready; stop
fi
serve "$index"; warm=$ready
rss_large=$(rss_mb)
load large
rss_large_after=$(rss_mb)
stop
serve "$small"; warm_small=$ready
rss_small=$(rss_mb)
load small
stop

if [ "${SKIP_ANN:-0}" != 1 ]; then
  head -n "${QUERIES_ANN:-1000}" "$QUERIES" > "$OUT/ann-queries.tsv"
  "$py" bench/ann.py --capot "$bin" --index "$index" --encoder "$bundle" --queries "$OUT/ann-queries.tsv" \
    --out "$OUT/ann-$N" --rounds 1 --ef "${EFS:-16,32,64,128,256,512,1024,2048}" --peers "${PEERS:-hnswlib}" --hnswlib-seed "${HNSWLIB_SEED:-100}" > "$OUT/ann.md"
fi

python3 - "$OUT" "$N" "$build_s" "$build_rss_kb" "$index_bytes" "$cold" "$warm" "$rss_large" "$warm_small" "$rss_small" "$rss_large_after" "${build_anon_kb:-}" <<'PY'
import json, sys
out, n, build_s, build_kb, index_bytes, cold, warm, rss_l, warm_s, rss_s, rss_la, anon_kb = sys.argv[1:]
w = lambda name, c: json.load(open(f"{out}/wrk-{name}-c{c}.json"))
res = {"documents": int(n), "build_wall": build_s or None,
       "build_peak_rss_mb": int(build_kb) // 1024 if build_kb else None,
       "build_peak_rss_anon_mb": int(anon_kb) // 1024 if anon_kb else None,
       "index_bytes_on_disk": int(index_bytes), "ready_seconds_cold": None if cold == "null" else float(cold),
       "ready_seconds_warm": float(warm), "rss_at_ready_mb": int(rss_l),
       "rss_after_load_mb": int(rss_la),
       "small": {"ready_seconds_warm": float(warm_s), "rss_at_ready_mb": int(rss_s)}}
for name in ("large", "small"):
    res.setdefault("search", {})[name] = {"p50_ms_c1": w(name, 1)["latency_ms_p50"],
                                         "qps_c16": w(name, 16)["requests_per_second"],
                                         "p99_ms_c16": w(name, 16)["latency_ms_p99"]}
json.dump(res, open(f"{out}/scale.json", "w"), indent=2)
print(json.dumps(res, indent=2))
PY
[ "${SKIP_ANN:-0}" = 1 ] || cat "$OUT/ann.md"
