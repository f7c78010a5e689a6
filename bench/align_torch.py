#!/usr/bin/env python3
"""PyTorch (CPU) twin of one `capot align --objective capot` training step, for speed comparisons.

Same network (all-MiniLM-L6-v2: BERT, 6 layers, hidden 384, 12 heads, intermediate 1536, GELU-erf,
mean pooling over the attention mask, L2 normalisation), same data (clean MS MARCO queries and one
typo'd variant each), same step:

  - B clean queries x and their noisy variants x+, one student forward pass over the 2B rows padded
    to the batch's longest (truncated at --max-length tokens, [CLS]/[SEP] included); batches are
    length-bucketed with capot's own RNG and plan (shuffle, sort by clean length, cut, shuffle the
    batch order), so the same queries, variants and --seed give exactly capot's batches;
  - anchors f_a(x) computed once before training by the frozen base (not part of the step);
  - loss = triplet + anchor + rank (docs/alignment.md, `capot` objective), negatives x- = clean query
    (i + r) mod B for one random shift r in 1..B-1 per step (no extra forward);
  - backward through every trainable parameter (word embeddings too unless --freeze-embeddings),
    AdamW (lr 5e-5, betas 0.9/0.999, eps 1e-8, no weight decay).

Torch must be Debian's `python3-torch` (no `transformers`); run it with the interpreter of
bench/.venv-torch (a --system-site-packages venv over /usr/bin/python3 with `tokenizers` added).
Debian's torch links the reference (netlib) BLAS through libblas.so.3; with --blas openblas (the
default when a private copy exists under bench/.venv-torch/openblas-root, see bench/align.sh) the
script re-executes itself with OpenBLAS first on LD_LIBRARY_PATH (and OMP_WAIT_POLICY=PASSIVE
unless set: OpenMP threads spinning after torch's parallel regions otherwise take the cores from
OpenBLAS's threads). The BLAS actually loaded and the thread settings are reported.

    bench/.venv-torch/bin/python bench/align_torch.py --batch-size 32 --steps 10 --warmup 2 \
        --threads 2 [--freeze-embeddings] [--max-length 28] [--json out.json]
"""

import argparse
import json
import os
import resource
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OPENBLAS_DIR = os.path.join(
    HERE, ".venv-torch", "openblas-root", "usr", "lib", "x86_64-linux-gnu", "openblas-pthread"
)
DATA = os.path.join(os.path.dirname(ROOT), "shared", "data", "marco-dev-queries")
MODEL = os.path.join(ROOT, "assets", "models", "all-MiniLM-L6-v2")
GOLDEN = os.path.join(os.path.dirname(ROOT), "shared", "golden", "minilm-l6-v2.json")

# Model shape (checked against config.json at load time).
LAYERS, HIDDEN, HEADS, INTER = 6, 384, 12, 1536
MASK_BIAS = -1e9  # as capot's BertModel: additive bias on padded keys


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch-size", type=int, default=32, help="clean queries per step (B)")
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps before the timed ones")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--max-length", type=int, default=28)
    p.add_argument("--freeze-embeddings", action="store_true")
    p.add_argument("--queries", default=os.path.join(DATA, "queries.tsv"))
    p.add_argument("--variants", default=os.path.join(DATA, "queries.typo1.tsv"))
    p.add_argument("--limit", type=int, default=2048, help="use the first N clean queries (0: all)")
    p.add_argument("--model", default=MODEL)
    p.add_argument("--golden", default=GOLDEN, help="golden embeddings ('' to skip the check)")
    p.add_argument("--seed", type=int, default=0, help="as capot align --seed (same batches)")
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument(
        "--blas",
        choices=["auto", "openblas", "system"],
        default="auto",
        help="auto: the private OpenBLAS under bench/.venv-torch when present, else the system's",
    )
    p.add_argument("--json", help="write the results here")
    return p.parse_args()


def maybe_reexec(args):
    """Puts the private OpenBLAS first on LD_LIBRARY_PATH (must happen before torch is loaded)."""
    want = args.blas
    if want == "auto":
        want = "openblas" if os.path.isdir(OPENBLAS_DIR) else "system"
    if want == "openblas" and not os.path.isdir(OPENBLAS_DIR):
        sys.exit(f"error: --blas openblas needs {OPENBLAS_DIR} (bench/align.sh sets it up)")
    if os.environ.get("ALIGN_TORCH_REEXEC") == "1":
        return
    env = dict(os.environ)
    env["ALIGN_TORCH_REEXEC"] = "1"
    env["OPENBLAS_NUM_THREADS"] = str(args.threads)
    env["OMP_NUM_THREADS"] = str(args.threads)
    if want == "openblas":
        # OpenBLAS (pthread build) runs its own threads beside torch's OpenMP pool; OpenMP's
        # default spin-waiting after each parallel region then takes the cores from OpenBLAS
        # (measured here: ~1.5x slower steps at batch 32). Let idle OpenMP threads sleep.
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        env["LD_LIBRARY_PATH"] = OPENBLAS_DIR + (
            ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else ""
        )
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def loaded_blas():
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if "blas" in os.path.basename(path) or "lapack" in os.path.basename(path):
                libs.add(path)
    return sorted(libs)


# ---------------------------------------------------------------------------------------------
# Weights: safetensors read by hand (8-byte LE header length, JSON header, raw LE data).

def read_safetensors(path):
    import numpy as np

    dtypes = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64}
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        blob = f.read()
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        a, b = meta["data_offsets"]
        arr = np.frombuffer(blob, dtype=dtypes[meta["dtype"]], count=(b - a) // np.dtype(dtypes[meta["dtype"]]).itemsize, offset=a)
        out[name] = arr.reshape(meta["shape"]).astype(np.float32)
    return out


def build_model(model_dir):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    assert (cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"],
            cfg["intermediate_size"]) == (LAYERS, HIDDEN, HEADS, INTER), cfg
    eps = cfg["layer_norm_eps"]
    raw = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    # Some exports prefix the names with "bert."; drop it, and the pooler (not used).
    weights = {}
    for k, v in raw.items():
        k = k[5:] if k.startswith("bert.") else k
        if not k.startswith("pooler."):
            weights[k] = v

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(HIDDEN, HIDDEN)
            self.k = nn.Linear(HIDDEN, HIDDEN)
            self.v = nn.Linear(HIDDEN, HIDDEN)
            self.o = nn.Linear(HIDDEN, HIDDEN)
            self.ln1 = nn.LayerNorm(HIDDEN, eps=eps)
            self.up = nn.Linear(HIDDEN, INTER)
            self.down = nn.Linear(INTER, HIDDEN)
            self.ln2 = nn.LayerNorm(HIDDEN, eps=eps)

        def forward(self, x, bias):
            n, s, h = x.shape
            d = h // HEADS

            def heads(t):
                return t.view(n, s, HEADS, d).transpose(1, 2)  # [n, heads, s, d]

            q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) * (d ** -0.5) + bias
            ctx = torch.matmul(scores.softmax(-1), v).transpose(1, 2).reshape(n, s, h)
            x = self.ln1(x + self.o(ctx))
            return self.ln2(x + self.down(F.gelu(self.up(x))))  # F.gelu: the erf form

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.word = nn.Embedding(cfg["vocab_size"], HIDDEN)
            self.pos = nn.Embedding(cfg["max_position_embeddings"], HIDDEN)
            self.typ = nn.Embedding(cfg["type_vocab_size"], HIDDEN)
            self.ln = nn.LayerNorm(HIDDEN, eps=eps)
            self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))

        def forward(self, ids, mask):
            """ids, mask: [n, s] int64 / float32 → pooled, L2-normalised [n, H]."""
            s = ids.shape[1]
            x = self.word(ids) + self.pos.weight[:s].unsqueeze(0) + self.typ.weight[0]
            x = self.ln(x)
            bias = ((1.0 - mask) * MASK_BIAS)[:, None, None, :]
            for layer in self.layers:
                x = layer(x, bias)
            m = mask.unsqueeze(-1)
            pooled = (x * m).sum(1) / m.sum(1).clamp_min(1e-9)
            return pooled / (pooled.pow(2).sum(-1, keepdim=True) + 1e-24).sqrt()

    model = Bert()
    names = {
        "word.weight": "embeddings.word_embeddings.weight",
        "pos.weight": "embeddings.position_embeddings.weight",
        "typ.weight": "embeddings.token_type_embeddings.weight",
        "ln.weight": "embeddings.LayerNorm.weight",
        "ln.bias": "embeddings.LayerNorm.bias",
    }
    per_layer = {
        "q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
        "o": "attention.output.dense", "ln1": "attention.output.LayerNorm",
        "up": "intermediate.dense", "down": "output.dense", "ln2": "output.LayerNorm",
    }
    for i in range(LAYERS):
        for ours, theirs in per_layer.items():
            for wb in ("weight", "bias"):
                names[f"layers.{i}.{ours}.{wb}"] = f"encoder.layer.{i}.{theirs}.{wb}"
    state = {ours: torch.from_numpy(weights.pop(theirs).copy()) for ours, theirs in names.items()}
    model.load_state_dict(state, strict=True)
    leftover = [k for k in weights if not k.endswith("position_ids")]
    assert not leftover, f"unused tensors: {leftover}"
    return model


# ---------------------------------------------------------------------------------------------
# Data and batch plan: a port of src/align/data.rs (its RNG, plan and per-step shift), so that
# with the same queries, variants and --seed both sides train on exactly the same batches.

M64 = (1 << 64) - 1


class CapotRng:
    """SplitMix64 seeded with FNV-1a over (seed, tag, n), as capot's `align::data::Rng`."""

    def __init__(self, seed, tag, n):
        h = 0xCBF29CE484222325
        for byte in seed.to_bytes(8, "little") + tag.encode() + n.to_bytes(8, "little"):
            h = ((h ^ byte) * 0x100000001B3) & M64
        self.state = h

    def next_u64(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & M64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    def below(self, n):
        return self.next_u64() % n

    def shuffle(self, v):
        for i in range(len(v) - 1, 0, -1):
            j = self.below(i + 1)
            v[i], v[j] = v[j], v[i]


def plan_epoch(clean_tokens, eligible, batch_size, seed, epoch):
    """Shuffle, stable sort by clean token length, cut, drop batches < 2, shuffle batch order."""
    rng = CapotRng(seed, "plan", epoch)
    order = list(eligible)
    rng.shuffle(order)
    order.sort(key=lambda i: len(clean_tokens[i]))
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    batches = [b for b in batches if len(b) >= 2]
    rng.shuffle(batches)
    return batches


def plan_steps(clean_tokens, eligible, batch_size, seed, total):
    steps, epoch = [], 0
    while len(steps) < total:
        batches = plan_epoch(clean_tokens, eligible, batch_size, seed, epoch)
        if not batches:
            sys.exit("error: no batch of at least 2 queries with a noisy variant")
        steps.extend(batches)
        epoch += 1
    return steps[:total]


def step_shift(seed, step, b):
    """The negative shift r in 1..b-1 of step `step` (0-based), as capot's `sample_step`."""
    return 1 + CapotRng(seed, "step", step).below(max(b - 1, 1))


def read_tsv(path, limit=0):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            qid, _, text = line.partition("\t")
            out.append((qid, text))
            if limit and len(out) == limit:
                break
    return out


def load_tokenizer(model_dir, max_length):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=max_length)
    return tok


def encode(tok, texts):
    return [e.ids for e in tok.encode_batch([t.strip() for t in texts])]


def pad(rows):
    import torch

    s = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), s, dtype=torch.int64)
    mask = torch.zeros(len(rows), s, dtype=torch.float32)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.int64)
        mask[i, : len(r)] = 1.0
    return ids, mask


# ---------------------------------------------------------------------------------------------

def forward_flops(n, s):
    """Matmul FLOPs of one forward over n rows padded to s: 2·m·n·k per linear and attention
    matmul (QKV, output, FFN up/down, QKᵀ, PV), all layers. Embeddings, layer norms, softmax,
    GELU and pooling are not counted."""
    linear = 2 * n * s * (4 * HIDDEN * HIDDEN + 2 * HIDDEN * INTER)
    attention = 2 * 2 * n * HEADS * s * s * (HIDDEN // HEADS)
    return LAYERS * (linear + attention)


def capot_loss(clean, noisy, anchor, neg, tau_pos=1.0, tau_neg=0.1, tau_anchor=2.0,
               tau_rank=0.7, margin=0.1, rank_margin=0.1):
    def sq(a, b):
        return (a - b).pow(2).sum(-1)

    triplet = (tau_pos * sq(clean, noisy) - tau_neg * sq(clean, clean[neg]) + margin).relu().mean()
    anchoring = tau_anchor * sq(clean, anchor).mean()
    rank = tau_rank * (sq(noisy, anchor) - sq(noisy, anchor[neg]) + rank_margin).relu().mean()
    return triplet + anchoring + rank, {
        "capot.triplet": triplet.item(),
        "capot.anchor": anchoring.item(),
        "capot.rank": rank.item(),
    }


def golden_check(model, model_dir, path):
    import torch

    with open(path) as f:
        golden = json.load(f)
    tok = load_tokenizer(model_dir, golden.get("max_length", 256))
    cases = golden["cases"]
    rows = encode(tok, [c["text"] for c in cases])
    ids_ok = all(r == c["input_ids"] for r, c in zip(rows, cases))
    ids, mask = pad(rows)
    with torch.no_grad():
        got = model(ids, mask)
    want = torch.tensor([c["embedding"] for c in cases], dtype=torch.float32)
    return {
        "cases": len(cases),
        "max_length": golden.get("max_length", 256),
        "input_ids_identical": ids_ok,
        "max_abs_diff": float((got - want).abs().max()),
        "note": "all cases in one padded batch; golden values are rounded to 7 decimals",
    }


def main():
    args = parse_args()
    maybe_reexec(args)

    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    blas = loaded_blas()  # torch is loaded by now
    thread_env = {k: os.environ.get(k) for k in
                  ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY")}
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()} "
          f"({' '.join(f'{k}={v}' for k, v in thread_env.items() if v)}), "
          f"BLAS {', '.join(os.path.basename(b) for b in blas) or '?'}"
          f" ({os.path.dirname(blas[0]) if blas else ''})", flush=True)

    t0 = time.perf_counter()
    model = build_model(args.model)
    load_seconds = time.perf_counter() - t0

    golden = None
    if args.golden:
        golden = golden_check(model, args.model, args.golden)
        print(f"golden check ({golden['cases']} texts, max_length {golden['max_length']}): "
              f"input ids identical: {golden['input_ids_identical']}, "
              f"max abs diff {golden['max_abs_diff']:.3g}", flush=True)
        if golden["max_abs_diff"] > 1e-4 or not golden["input_ids_identical"]:
            sys.exit("error: the torch model does not match the golden embeddings")

    # Data: clean queries (first --limit), one variant each; identical variants skipped.
    queries = read_tsv(args.queries, args.limit)
    variants = dict(read_tsv(args.variants))
    texts = [t for _, t in queries]
    noisy = [variants.get(q) for q, _ in queries]
    eligible = [i for i, v in enumerate(noisy) if v is not None and v.strip() != texts[i].strip()]
    tok = load_tokenizer(args.model, args.max_length)
    clean_tokens = encode(tok, texts)

    steps = plan_steps(clean_tokens, eligible, args.batch_size, args.seed, args.warmup + args.steps)

    # Anchors: frozen copy of the base, every clean query the run uses, once, before training.
    t0 = time.perf_counter()
    needed = sorted({i for b in steps for i in b}, key=lambda i: len(clean_tokens[i]))
    anchors = {}
    model.eval()
    with torch.no_grad():
        for c in range(0, len(needed), 64):
            chunk = needed[c : c + 64]
            ids, mask = pad([clean_tokens[i] for i in chunk])
            for i, v in zip(chunk, model(ids, mask)):
                anchors[i] = v.clone()
    anchor_seconds = time.perf_counter() - t0

    # Student = the same module (its weights start equal to the anchor's; anchors are cached).
    model.train()  # no dropout in this module: train() and eval() compute the same
    if args.freeze_embeddings:
        model.word.weight.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    n_params = sum(p.numel() for p in params)
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)

    print(f"{len(eligible)} queries with a variant (of {len(queries)}), {len(needed)} anchors in "
          f"{anchor_seconds:.1f} s; {n_params:,} trainable parameters"
          f"{' (word embeddings frozen)' if args.freeze_embeddings else ''}; "
          f"batch {args.batch_size}, max length {args.max_length}, "
          f"{args.warmup} warm-up + {args.steps} timed steps", flush=True)
    print("step  seq   forward  backward  optimizer     total  pairs/s   loss", flush=True)

    records = []
    for step, batch in enumerate(steps):
        b = len(batch)
        t0 = time.perf_counter()
        # Forward (incl. tokenizing the noisy rows, padding and the loss), as capot times it.
        noisy_tokens = encode(tok, [noisy[i] for i in batch])
        ids, mask = pad([clean_tokens[i] for i in batch] + noisy_tokens)
        vectors = model(ids, mask)
        clean_v, noisy_v = vectors[:b], vectors[b:]
        anchor_v = torch.stack([anchors[i] for i in batch])
        shift = step_shift(args.seed, step, b)
        neg = torch.tensor([(i + shift) % b for i in range(b)], dtype=torch.int64)
        loss, parts = capot_loss(clean_v, noisy_v, anchor_v, neg)
        loss_value = loss.item()
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        n, s = ids.shape
        rec = {
            "step": step + 1,
            "warmup": step < args.warmup,
            "pairs": b,
            "sequence": s,
            "forward_seconds": t1 - t0,
            "backward_seconds": t2 - t1,
            "optimizer_seconds": t3 - t2,
            "seconds": t3 - t0,
            "forward_flops": forward_flops(n, s),
            "loss": loss_value,
            "losses": parts,
        }
        records.append(rec)
        print(f"{rec['step']:>4} {s:>4} {rec['forward_seconds']:>8.3f}s {rec['backward_seconds']:>8.3f}s"
              f" {rec['optimizer_seconds']:>9.3f}s {rec['seconds']:>8.3f}s {b / rec['seconds']:>8.1f}"
              f"   {loss_value:.4f}{'  (warm-up)' if rec['warmup'] else ''}", flush=True)

    timed = [r for r in records if not r["warmup"]]

    def mean(key):
        return sum(r[key] for r in timed) / len(timed)

    seconds = sum(r["seconds"] for r in timed)
    flops = 3 * sum(r["forward_flops"] for r in timed)
    peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    summary = {
        "timed_steps": len(timed),
        "pairs_per_second": sum(r["pairs"] for r in timed) / seconds,
        "mean_step_seconds": mean("seconds"),
        "mean_forward_seconds": mean("forward_seconds"),
        "mean_backward_seconds": mean("backward_seconds"),
        "mean_optimizer_seconds": mean("optimizer_seconds"),
        "mean_padded_length": mean("sequence"),
        "flops_per_second": flops / seconds,
        "flops_convention": "training FLOPs = 3 x forward matmul FLOPs (2*m*n*k for every linear, "
                            "QK^T and PV matmul at the padded shapes; embeddings, norms, softmax, "
                            "GELU, pooling, loss and AdamW not counted), over the timed steps' "
                            "wall time",
        "peak_rss_mib": peak_rss_mib,
        "anchor_seconds": anchor_seconds,
        "model_load_seconds": load_seconds,
    }
    print(f"\nmean over {len(timed)} timed steps: {summary['pairs_per_second']:.1f} pairs/s, "
          f"step {summary['mean_step_seconds']:.3f} s = forward {summary['mean_forward_seconds']:.3f}"
          f" + backward {summary['mean_backward_seconds']:.3f} + optimizer "
          f"{summary['mean_optimizer_seconds']:.3f} s, padded length {summary['mean_padded_length']:.1f}")
    print(f"achieved {summary['flops_per_second'] / 1e9:.2f} GFLOP/s ({summary['flops_convention']})")
    print(f"peak RSS {peak_rss_mib:.0f} MiB")
    if args.json:
        out = {
            "tool": "torch",
            "torch": torch.__version__,
            "numpy": np.__version__,
            "blas": blas,
            "threads": torch.get_num_threads(),
            "thread_env": thread_env,
            "config": {
                "batch_size": args.batch_size, "steps": args.steps, "warmup": args.warmup,
                "max_length": args.max_length, "freeze_embeddings": args.freeze_embeddings,
                "queries": args.queries, "variants": args.variants, "limit": args.limit,
                "seed": args.seed, "lr": args.lr, "objective": "capot",
                "loss": {"tau_pos": 1.0, "tau_neg": 0.1, "tau_anchor": 2.0, "tau_rank": 0.7,
                         "margin": 0.1, "rank_margin": 0.1},
                "trainable_parameters": n_params,
                "queries_with_variant": len(eligible),
            },
            "golden": golden,
            "summary": summary,
            "steps": records,
        }
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
