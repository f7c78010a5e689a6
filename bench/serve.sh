#!/usr/bin/env bash
# The search service measured on this machine, one command: capot serve `/search` against
#   (a) the floor: the same queries encoded and searched in-process, no server (`capot bench search`),
#   (b) what a user would write instead: FastAPI + uvicorn + onnxruntime + hnswlib
#       (bench/baseline_fastapi.py) on the same model.onnx, vectors and HNSW parameters,
# plus capot's graph against hnswlib and faiss on the same vectors (bench/ann.py). Prints Markdown tables
# with ratios (also in bench/out/report.md) and writes bench/out/latency-c1.svg.
#
#   bench/serve.sh                 (needs scripts/setup's assets: ONNX Runtime, MiniLM)
#
# Environment: SECONDS_PER_POINT (default 20), CONCURRENCIES (default "8 16 32"), CAPOT_CONFIGS (the
# capot services to measure, each SESSIONSxTHREADS[-int8]: encoder worker sessions × ONNX Runtime
# threads each, float32 or the `capot encoder quantize` int8 bundle; default "1x2"), WORKERS (FastAPI
# uvicorn workers to measure, default "1 2 2nagle": 2nagle = 2 workers without the TCP_NODELAY
# fix, see bench/baseline_fastapi.py; a -int8 suffix, e.g. "2-int8", serves the int8 bundle's
# model.onnx, for int8/int8 ratios), BENCH_WORK (bundle + index, default /tmp/bench),
# CORPUS (default ../shared/data/dl19-sample), INDEX (default $BENCH_WORK/dl19-index), QUERIES (default MS MARCO dev queries), SKIP_ANN=1.
# Services listen on 127.0.0.1 only, one at a time; wrk runs with one thread; every run is bounded.
set -euo pipefail
cd "$(dirname "$0")/.."
S=${SECONDS_PER_POINT:-20}
CONCURRENCIES=${CONCURRENCIES:-8 16 32}
CAPOT_CONFIGS=${CAPOT_CONFIGS:-1x2}
WORKERS=${WORKERS:-1 2 2nagle}
WORK=${BENCH_WORK:-/tmp/bench}
CORPUS=${CORPUS:-../shared/data/dl19-sample}
QUERIES=${QUERIES:-../shared/data/marco-dev-queries/queries.tsv}
PORT_CAPOT=${PORT_CAPOT:-18081}
PORT_FASTAPI=${PORT_FASTAPI:-18082}
OUT=bench/out
mkdir -p "$OUT" "$WORK"
rm -f "$OUT"/wrk-*.json "$OUT"/hist-*.txt "$OUT"/timings-*.json "$OUT"/floor*.json
[ "${SKIP_ANN:-0}" = 1 ] || rm -f "$OUT/ann.md" "$OUT/ann.json"   # ann-queries.f32 is kept: the query vectors

command -v wrk >/dev/null || { echo "serve.sh: needs wrk (apt-get install -y wrk)" >&2; exit 1; }
venv=bench/.venv
py=$venv/bin/python
if ! "$py" -c 'import fastapi, uvicorn, hnswlib, faiss, onnxruntime, tokenizers' 2>/dev/null; then
  [ -x "$py" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check onnxruntime==1.31.1 tokenizers==0.23.3 \
    numpy==2.4.6 fastapi==0.165.0 uvicorn==0.54.0 hnswlib==0.8.0 faiss-cpu==1.15.1
fi
cargo build --release --locked --quiet
bin=${CARGO_TARGET_DIR:-target}/release/capot
export ORT_DYLIB_PATH=${ORT_DYLIB_PATH:-$PWD/assets/onnxruntime/lib/libonnxruntime.so}
bundle=$WORK/minilm
index=${INDEX:-$WORK/$(basename "$CORPUS" | sed 's/-sample$//')-index}
[ -f "$bundle/encoder.json" ] || "$bin" encoder import assets/models/all-MiniLM-L6-v2 --out "$bundle" --name minilm >/dev/null
[ -f "$index/index.json" ] || "$bin" index build --doc-encoder "$bundle" --corpus "$CORPUS" --out "$index"
"$bin" index upgrade "$index" 2>/dev/null  # cached from an older capot: no-op when current
case " $CAPOT_CONFIGS $WORKERS " in *-int8*)
  "$bin" encoder quantize "$bundle" --out "$WORK/minilm-int8" --force >/dev/null ;;
esac
"$py" bench/report.py bodies "$QUERIES" "$OUT/bodies.jsonl" 10

loads=()
note_load() { loads+=("$(cut -d' ' -f1 /proc/loadavg)"); }
pid=
stop() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; fi; }
trap stop EXIT
wait_ready() { # url
  for _ in $(seq 1 240); do
    curl -sf "$1" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || { echo "serve.sh: the service exited" >&2; return 1; }
    sleep 0.5
  done
  echo "serve.sh: $1 not ready after 120 s" >&2; return 1
}
load_runs() { # name url
  local name=$1 url=$2
  BODIES=$OUT/bodies.jsonl timeout 30 wrk -t1 -c4 -d3s --timeout 10s -s bench/search.lua "$url" >/dev/null # warm-up
  note_load
  BODIES=$OUT/bodies.jsonl HIST=$OUT/hist-$name-c1.txt timeout $((S + 30)) \
    wrk -t1 -c1 -d"${S}s" --timeout 10s -s bench/search.lua "$url" | sed -n 's/^JSON //p' > "$OUT/wrk-$name-c1.json"
  timeout 120 "$py" bench/report.py timings "$url" "$OUT/bodies.jsonl" 300 "$OUT/timings-$name.json"
  for c in $CONCURRENCIES; do
    note_load
    BODIES=$OUT/bodies.jsonl timeout $((S + 30)) \
      wrk -t1 -c"$c" -d"${S}s" --timeout 10s -s bench/search.lua "$url" | sed -n 's/^JSON //p' > "$OUT/wrk-$name-c$c.json"
  done
  echo "serve.sh: $name done ($(cat "$OUT/wrk-$name-c1.json"))" >&2
}

note_load
echo "serve.sh: in-process floor" >&2
# Latency: batch 1, one call at a time. Throughput: the best of batches of 1, 8, 32 from 1 or 2 threads.
timeout $((7 * S + 120)) "$bin" bench search --index "$index" --encoder "$bundle" --queries "$QUERIES" \
  --batch-sizes 1,8,32 --concurrency 1,2 --seconds "$S" > "$OUT/floor.json"

for cfg in $CAPOT_CONFIGS; do
  sessions=${cfg%%x*}; threads=${cfg#*x}; threads=${threads%-int8}
  enc=$bundle; [ "${cfg%-int8}" = "$cfg" ] || enc=$WORK/minilm-int8
  echo "serve.sh: capot serve ($sessions session(s) × $threads thread(s), $(basename "$enc")) on 127.0.0.1:$PORT_CAPOT" >&2
  rm -rf "$WORK/data"
  "$bin" serve --index "$index" --encoder "$enc" --addr "127.0.0.1:$PORT_CAPOT" --data-dir "$WORK/data" \
    --encoder-workers "$sessions" --threads "$threads" --log warn >"$OUT/capot-serve-$cfg.log" 2>&1 &
  pid=$!
  wait_ready "http://127.0.0.1:$PORT_CAPOT/ready"
  load_runs "capot-$cfg" "http://127.0.0.1:$PORT_CAPOT/search"
  stop
done

for w in $WORKERS; do
  # "2" = 2 workers with the TCP_NODELAY fix; "2nagle" = 2 workers as uvicorn 0.54 comes; a
  # "-int8" suffix runs the same int8 model.onnx as capot's int8 configurations.
  wp=${w%-int8}; enc=$bundle; [ "$wp" = "$w" ] || enc=$WORK/minilm-int8
  n=${wp%nagle}; extra=(); [ "$n" = "$wp" ] || extra=(--keep-nagle)
  echo "serve.sh: FastAPI baseline, $w uvicorn worker(s), $(basename "$enc"), on 127.0.0.1:$PORT_FASTAPI" >&2
  "$py" bench/baseline_fastapi.py --index "$index" --encoder "$enc" --port "$PORT_FASTAPI" --workers "$n" \
    "${extra[@]}" >"$OUT/fastapi-w$w.log" 2>&1 &
  pid=$!
  wait_ready "http://127.0.0.1:$PORT_FASTAPI/health"
  # /health answers once one worker is up; wait until a search succeeds on each (a few tries).
  for _ in $(seq 1 $((10 * n))); do curl -sf -H 'content-type: application/json' -d '{"query":"warm up","k":10}' \
    "http://127.0.0.1:$PORT_FASTAPI/search" >/dev/null || sleep 1; done
  load_runs "fastapi-w$w" "http://127.0.0.1:$PORT_FASTAPI/search"
  stop
done

if [ "${SKIP_ANN:-0}" != 1 ]; then
  echo "serve.sh: capot vs hnswlib vs faiss" >&2
  note_load
  timeout 900 "$py" bench/ann.py --capot "$bin" --index "$index" --encoder "$bundle" \
    --queries "$CORPUS/queries.jsonl" "$QUERIES" --out "$OUT" --rounds 2 --ef 10,16,24,32,48,64,96,128 > "$OUT/ann.md"
fi
note_load

loadlist=$(IFS=,; echo "${loads[*]}")
max=$(printf '%s\n' "${loads[@]}" | sort -g | tail -1)
printf '{"load_during": "%s", "load_max": %s, "cores": %s, "seconds_per_point": %s, "date": "%s"}\n' \
  "$loadlist" "$max" "$(nproc)" "$S" "$(date -u +%FT%TZ)" > "$OUT/meta.json"
{
  echo "Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); 1-minute load average at each step: $loadlist (max $max); ${S} s per point; $(date -u +%FT%TZ)"
  echo
  "$py" bench/report.py tables "$OUT"
  if [ "${SKIP_ANN:-0}" != 1 ] && [ -f "$OUT/ann.md" ]; then echo; cat "$OUT/ann.md"; fi
} | tee "$OUT/report.md"
