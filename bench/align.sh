#!/usr/bin/env bash
# Training speed of `capot align --objective capot` against its PyTorch (CPU) twin
# bench/align_torch.py: same model (all-MiniLM-L6-v2), same queries and typo variants, same seed
# (so the same length-bucketed batches and negatives), same threads, one side after the other,
# at batch 32 and 256. Prints a Markdown table with the ratios capot/torch.
#
#   bench/align.sh [STEPS_AT_32] [STEPS_AT_256]      (timed steps; one warm-up step more is run)
#
# Environment: THREADS (2), N (2048 first clean queries), BATCHES ("32 256"), FREEZE=1 for
# --freeze-embeddings on both sides, OUT (bench/out) for the raw results, BUILD=0 to use the
# existing release binary as it is (no cargo build).
#
# Torch is Debian's python3-torch (apt-get install -y python3-torch), used from a
# --system-site-packages venv bench/.venv-torch that adds `tokenizers`. Debian's torch links the
# reference (netlib) BLAS; the script unpacks Debian's OpenBLAS (apt-get download, no install)
# into bench/.venv-torch/openblas-root and align_torch.py puts it first on LD_LIBRARY_PATH
# with OMP_WAIT_POLICY=PASSIVE (TORCH_BLAS=system to measure with the reference BLAS instead).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS_32=${1:-12}
STEPS_256=${2:-4}
THREADS=${THREADS:-2}
N=${N:-2048}
BATCHES=${BATCHES:-32 256}
FREEZE=${FREEZE:-0}
OUT=${OUT:-bench/out}
TORCH_BLAS=${TORCH_BLAS:-auto}
DATA=../shared/data/marco-dev-queries
mkdir -p "$OUT"

# --- torch side: venv over Debian's python3-torch, plus tokenizers and a private OpenBLAS -----
venv=bench/.venv-torch
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "error: Debian's python3-torch is missing: apt-get install -y python3-torch" >&2
  exit 1
fi
if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  echo '*' > "$venv/.gitignore"
  "$venv/bin/pip" install --quiet --disable-pip-version-check tokenizers==0.23.3
fi
if [ ! -d "$venv/openblas-root" ]; then
  dl=$(mktemp -d)
  if (cd "$dl" && apt-get download libopenblas0-pthread >/dev/null 2>&1); then
    dpkg -x "$dl"/libopenblas0-pthread_*.deb "$venv/openblas-root"
  else
    echo "note: could not fetch Debian's OpenBLAS; torch runs on the system BLAS" >&2
  fi
  rm -rf "$dl"
fi

# --- capot side ------------------------------------------------------------------------------
bin=${CARGO_TARGET_DIR:-target}/release/capot
[ "${BUILD:-1}" = 0 ] || cargo build --release --locked --quiet
export ORT_DYLIB_PATH=${ORT_DYLIB_PATH:-$PWD/assets/onnxruntime/lib/libonnxruntime.so}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$bin" encoder import assets/models/all-MiniLM-L6-v2 --out "$WORK/minilm" --name minilm >/dev/null

# The same data for both: the first N clean queries, and the typo1 variants of those ids only.
head -n "$N" "$DATA/queries.tsv" > "$WORK/queries.tsv"
awk -F'\t' 'NR==FNR { want[$1] = 1; next } ($1 in want)' "$WORK/queries.tsv" \
  "$DATA/queries.typo1.tsv" > "$WORK/variants.tsv"

freeze=()
[ "$FREEZE" = 1 ] && freeze=(--freeze-embeddings)
for b in $BATCHES; do
  if [ "$b" -ge 256 ]; then steps=$STEPS_256; else steps=$STEPS_32; fi
  echo "batch $b: capot, $((steps + 1)) steps (first is warm-up)" >&2
  /usr/bin/time -v -o "$OUT/align-capot-$b.time" "$bin" align --base "$WORK/minilm" \
    --queries "$WORK/queries.tsv" --variants "$WORK/variants.tsv" --out "$WORK/aligned-$b" \
    --objective capot --batch-size "$b" --steps "$((steps + 1))" --max-length 28 \
    --threads "$THREADS" --seed 0 "${freeze[@]}" --progress json --force \
    2> "$OUT/align-capot-$b.jsonl" >/dev/null
  cp "$WORK/aligned-$b/training.json" "$OUT/align-capot-$b.training.json"
  rm -rf "$WORK/aligned-$b"
  echo "batch $b: torch, $((steps + 1)) steps (first is warm-up)" >&2
  /usr/bin/time -v -o "$OUT/align-torch-$b.time" "$venv/bin/python" bench/align_torch.py \
    --queries "$WORK/queries.tsv" --variants "$WORK/variants.tsv" --limit 0 \
    --batch-size "$b" --steps "$steps" --warmup 1 --threads "$THREADS" --max-length 28 \
    --seed 0 --blas "$TORCH_BLAS" "${freeze[@]}" --json "$OUT/align-torch-$b.json" \
    > "$OUT/align-torch-$b.log"
done

/usr/bin/python3 - "$OUT" "$THREADS" "$FREEZE" $BATCHES <<'PY'
import json, os, re, sys

out, threads, freeze, batches = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4:]
L, H, A, I = 6, 384, 12, 1536


def forward_flops(n, s):  # the same count as bench/align_torch.py
    return L * (2 * n * s * (4 * H * H + 2 * H * I) + 4 * n * A * s * s * (H // A))


def peak_rss_mib(path):
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(path).read())
    return int(m.group(1)) / 1024


def capot(b):
    events = []
    for line in open(f"{out}/align-capot-{b}.jsonl"):
        line = line.strip()
        if line.startswith("{"):
            ev = json.loads(line)
            if ev.get("event") == "step":
                events.append(ev)
    curve = json.load(open(f"{out}/align-capot-{b}.training.json"))["curve"]
    assert [e["step"] for e in events] == [c["step"] for c in curve]
    timed = curve[1:]  # the first step is the warm-up
    secs = sum(c["seconds"] for c in timed)
    return {
        "pairs_s": sum(c["pairs"] for c in timed) / secs,
        "step": secs / len(timed),
        "fwd": sum(c["forward_seconds"] for c in timed) / len(timed),
        "bwd": sum(c["backward_seconds"] for c in timed) / len(timed),
        "opt": sum(c["update_seconds"] for c in timed) / len(timed),
        "seq": sum(c["sequence"] for c in timed) / len(timed),
        "flops": 3 * sum(forward_flops(2 * c["pairs"], c["sequence"]) for c in timed) / secs,
        "rss": peak_rss_mib(f"{out}/align-capot-{b}.time"),
        "seqs": [c["sequence"] for c in curve],
        "loss1": curve[0]["loss"],
        "steps": len(timed),
    }


def torch(b):
    r = json.load(open(f"{out}/align-torch-{b}.json"))
    s = r["summary"]
    return {
        "pairs_s": s["pairs_per_second"],
        "step": s["mean_step_seconds"],
        "fwd": s["mean_forward_seconds"],
        "bwd": s["mean_backward_seconds"],
        "opt": s["mean_optimizer_seconds"],
        "seq": s["mean_padded_length"],
        "flops": s["flops_per_second"],
        "rss": peak_rss_mib(f"{out}/align-torch-{b}.time"),
        "seqs": [x["sequence"] for x in r["steps"]],
        "loss1": r["steps"][0]["loss"],
        "steps": s["timed_steps"],
        "torch": r["torch"],
        "blas": ", ".join(os.path.basename(x) for x in r["blas"]) or "?",
        "env": " ".join(f"{k}={v}" for k, v in (r.get("thread_env") or {}).items() if v),
        "golden": r["golden"]["max_abs_diff"] if r.get("golden") else None,
    }


print(f"\nMiniLM-L6 `capot` objective, {threads} threads, max length 28, word embeddings "
      f"{'frozen' if freeze else 'trainable'}; means over the timed steps (first step dropped).\n")
print("| batch | side | pairs/s | step s | forward / backward / update s | padded len | GFLOP/s | peak RSS MiB |")
print("|---|---|---|---|---|---|---|---|")
notes = []
for b in batches:
    c, t = capot(b), torch(b)
    for name, r in (("capot", c), ("torch", t)):
        print(f"| {b} | {name} | {r['pairs_s']:.1f} | {r['step']:.3f} | "
              f"{r['fwd']:.3f} / {r['bwd']:.3f} / {r['opt']:.3f} | {r['seq']:.1f} | "
              f"{r['flops'] / 1e9:.2f} | {r['rss']:.0f} |")
    print(f"| {b} | capot/torch | {c['pairs_s'] / t['pairs_s']:.2f} | {c['step'] / t['step']:.2f} | "
          f"{c['fwd'] / t['fwd']:.2f} / {c['bwd'] / t['bwd']:.2f} / {c['opt'] / t['opt']:.2f} | | "
          f"{c['flops'] / t['flops']:.2f} | {c['rss'] / t['rss']:.2f} |")
    same = "same" if c["seqs"] == t["seqs"] else f"DIFFERENT (capot {c['seqs']}, torch {t['seqs']})"
    notes.append(f"batch {b}: {c['steps']} timed steps each; padded lengths per step {same}; "
                 f"step-1 loss capot {c['loss1']:.6f}, torch {t['loss1']:.6f}")
print()
print("Ratios are capot ÷ torch: above 1 is capot faster for pairs/s and GFLOP/s, below 1 is "
      "capot faster for seconds.")
golden = f"; golden max abs diff {t['golden']:.2g}" if t.get("golden") is not None else ""
print(f"torch {t['torch']} (Debian python3-torch), BLAS: {t['blas']} ({t['env']}){golden}.")
print("GFLOP/s: training FLOPs = 3 x forward matmul FLOPs (2·m·n·k per linear, QKᵀ and PV matmul "
      "at the padded shapes) over the timed steps' wall time. Peak RSS: /usr/bin/time -v of the "
      "whole process (capot's includes the frozen anchor copy, the anchor pass and writing and "
      "smoke-loading the output bundle).")
for n in notes:
    print(f"- {n}")
PY
