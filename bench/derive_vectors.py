#!/usr/bin/env python3
"""Derive N document vectors from the real vectors of a small index, for index scale benchmarks
(1M-10M documents) where encoding that many passages on this machine would take days.

    bench/derive_vectors.py INDEX_DIR N OUT.npy [--seed S] [--beta B]

How: every derived vector is a real document vector plus two real "topic offsets", renormalised:

    v = normalize(v_i + B * (v_j - mean) + B * (v_k - mean)),   i, j, k drawn uniformly

so the derived set stays on the real vectors' subspace (the offsets are differences of real
vectors, not isotropic noise, which would inflate the intrinsic dimension and make HNSW look
worse than on real text), each real document spawns a family of nearby variants (as sentence
windows of one document would, cf. bench/derive_corpus.py), and no two derived vectors are equal.
B = 0.35 puts a variant at cosine ~0.85-0.9 from its source. Reads INDEX_DIR/index.json (the
dimension) and INDEX_DIR/vectors.f32 (n x dim little-endian float32, unit rows). Writes a float32
.npy for `capot index build --vectors` in blocks (bounded memory beyond the output itself). Seeded.
"""
import json
import sys
from pathlib import Path

import numpy as np


def main() -> None:
    args = sys.argv[1:]
    seed, beta = 0, 0.35
    for flag in ("--seed", "--beta"):
        if flag in args:
            i = args.index(flag)
            value = args[i + 1]
            del args[i : i + 2]
            if flag == "--seed":
                seed = int(value)
            else:
                beta = float(value)
    if len(args) != 3:
        sys.exit(__doc__)
    index, n, out = Path(args[0]), int(args[1]), Path(args[2])
    dim = json.loads((index / "index.json").read_text())["dimension"]
    real = np.fromfile(index / "vectors.f32", dtype="<f4").reshape(-1, dim)
    mean = real.mean(axis=0)
    offsets = real - mean
    rng = np.random.default_rng(seed)
    out_arr = np.lib.format.open_memmap(out, mode="w+", dtype="<f4", shape=(n, dim))
    block = 100_000
    to_source = None
    for start in range(0, n, block):
        m = min(block, n - start)
        i, j, k = (rng.integers(0, len(real), m) for _ in range(3))
        v = real[i] + beta * offsets[j] + beta * offsets[k]
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        if to_source is None:
            to_source = float(np.mean(np.sum(v * real[i], axis=1)))
        out_arr[start : start + m] = v
    out_arr.flush()
    print(json.dumps({"vectors": n, "dimension": dim, "sources": len(real), "beta": beta,
                      "seed": seed, "mean_cosine_to_source": round(to_source or 0.0, 4)}))


if __name__ == "__main__":
    main()
