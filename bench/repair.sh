#!/usr/bin/env bash
# What query repair costs, one command: the vocabulary (build time, size, memory) and repair's
# time per query in-process (`capot bench repair`), then `capot serve` /search with
# --repair off against --repair auto (the default, fusion max) in one run: the `repair` stage and
# p50 at concurrency 1, and the throughput at saturation, on clean MS MARCO dev queries (few
# change) and on the dl19 typo queries (most change, so they are searched twice); a third
# server adds the index's vote (--repair-vote-documents, VOTE_DOCUMENTS, default 10).
#
#   bench/repair.sh            (needs scripts/setup's assets; writes bench/out/repair-*.json)
#
# Environment: SECONDS_PER_POINT (default 10), CONCURRENCY (saturation, default 16), BENCH_WORK
# (bundle + index, default /tmp/bench). Services listen on 127.0.0.1 only; every run is bounded.
set -euo pipefail
cd "$(dirname "$0")/.."
S=${SECONDS_PER_POINT:-10}
C=${CONCURRENCY:-16}
VOTE=${VOTE_DOCUMENTS:-10}
WORK=${BENCH_WORK:-/tmp/bench}
DATA=../shared/data
PORT=${PORT_CAPOT:-18083}
OUT=bench/out
mkdir -p "$OUT" "$WORK"
command -v wrk >/dev/null || { echo "repair.sh: needs wrk (apt-get install -y wrk)" >&2; exit 1; }
cargo build --release --locked --quiet
bin=${CARGO_TARGET_DIR:-target}/release/capot
export ORT_DYLIB_PATH=${ORT_DYLIB_PATH:-$PWD/assets/onnxruntime/lib/libonnxruntime.so}
bundle=$WORK/minilm
index=$WORK/dl19-index
[ -f "$bundle/encoder.json" ] || "$bin" encoder import assets/models/all-MiniLM-L6-v2 --out "$bundle" --name minilm >/dev/null
[ -f "$index/index.json" ] || "$bin" index build --doc-encoder "$bundle" --corpus "$DATA/dl19-sample" --out "$index"
"$bin" index upgrade "$index" 2>/dev/null  # cached from an older capot
grep -q vocab "$index/index.json" || "$bin" index vocab "$index" >/dev/null

typos=$OUT/dl19-typos.tsv
for i in $(seq 1 10); do sed "s/^/typo$i-/" "$DATA/dl19-sample/queries.typo$i.tsv"; done > "$typos"
"$bin" bench repair --corpus "$DATA/dl19-sample" --queries "$DATA/marco-dev-queries/queries.tsv" \
  --queries "$DATA/dl19-sample/queries.jsonl" --queries "$typos" > "$OUT/repair-bench.json"

python3 bench/report.py bodies "$DATA/marco-dev-queries/queries.tsv" "$OUT/bodies-clean.jsonl" 10
python3 bench/report.py bodies "$typos" "$OUT/bodies-typo.jsonl" 10
pid=
stop() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; fi; }
trap stop EXIT
url=http://127.0.0.1:$PORT
for mode in off auto vote; do
  # `vote`: auto with the index's vote (each query searched as typed first).
  case $mode in vote) flags=(--repair auto --repair-vote-documents "$VOTE");; *) flags=(--repair "$mode");; esac
  "$bin" serve --index "$index" --encoder "$bundle" --addr "127.0.0.1:$PORT" --grpc-addr off \
    --admin-addr 127.0.0.1:0 "${flags[@]}" --data-dir "$WORK/data-$mode" 2>"$OUT/serve-$mode.log" &
  pid=$!
  for _ in $(seq 1 240); do curl -sf "$url/ready" >/dev/null 2>&1 && break; sleep 0.5; done
  for set in clean typo; do
    BODIES=$OUT/bodies-$set.jsonl timeout 30 wrk -t1 -c4 -d3s --timeout 10s -s bench/search.lua "$url/search" >/dev/null
    BODIES=$OUT/bodies-$set.jsonl timeout $((S + 30)) wrk -t1 -c1 -d"${S}s" --timeout 10s -s bench/search.lua "$url/search" \
      | sed -n 's/^JSON //p' > "$OUT/repair-$mode-$set-c1.json"
    timeout 120 python3 bench/report.py timings "$url/search" "$OUT/bodies-$set.jsonl" 300 "$OUT/repair-timings-$mode-$set.json"
    BODIES=$OUT/bodies-$set.jsonl timeout $((S + 30)) wrk -t1 -c"$C" -d"${S}s" --timeout 10s -s bench/search.lua "$url/search" \
      | sed -n 's/^JSON //p' > "$OUT/repair-$mode-$set-c$C.json"
  done
  stop
done
python3 - "$OUT" "$C" <<'PY'
import json, sys
out, c = sys.argv[1], sys.argv[2]
b = json.load(open(f"{out}/repair-bench.json"))
v = b["vocab"]
print(f"vocabulary of {b['documents']} documents: {v['words']} words, {v['pairs']} pairs; "
      f"files {b['file_bytes']['words'] + b['file_bytes']['pairs']} bytes, heap {b['heap_bytes']} bytes, "
      f"built in {b['build_seconds']:.2f} s")
for r in b["repair"]:
    print(f"  repair() on {r['queries']}: p50 {r['p50_us']:.1f} µs, p99 {r['p99_us']:.1f} µs, changed {r['changed']} of {r['count']}")
print()
print(f"| queries | repair | stage `repair` mean ms | stage `vote` mean ms | total mean ms | p50 ms at c=1 | q/s at c={c} | errors |")
print("|---|---|---|---|---|---|---|---|")
for s in ["clean", "typo"]:
    for m in ["off", "auto", "vote"]:
        t = json.load(open(f"{out}/repair-timings-{m}-{s}.json"))["mean_ms"]
        w1 = json.load(open(f"{out}/repair-{m}-{s}-c1.json"))
        wc = json.load(open(f"{out}/repair-{m}-{s}-c{c}.json"))
        print(f"| {s} | {m} | {t.get('repair', 0):.3f} | {t.get('vote', 0):.3f} | {t['total']:.2f} | {w1['latency_ms_p50']:.2f} | {wc['requests_per_second']:.0f} | {wc['errors'] + wc['non_2xx']} |")
PY
