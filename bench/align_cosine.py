"""Where an aligned encoder puts noisy queries, against its base (standard library only).

    align_cosine.py [--limit N] [--new-seeds K] QUERIES BASE_BUNDLE BUNDLE [BUNDLE ...] \
        --variants FILE [FILE ...]

For each bundle (the base first, as the reference), the mean cosine between
- its clean query and the base's clean query ("clean": 1 means no drift),
- its noisy query from the variant files and the base's clean query ("files"),
- its noisy query from K new misspellings per query (`capot noise --kind typo`, seeds 101…)
  and the base's clean query ("new"): misspellings no training run has seen.
"files" against "new" tells whether a run learnt the misspellings it saw or typos in general.
QUERIES is a TSV `qid<TAB>text` or a BEIR queries.jsonl; only queries with a variant are used
(the first N with --limit). `capot` is taken from $CAPOT_BIN, else from PATH.
"""

import argparse
import json
import os
import subprocess


def read_queries(path):
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            if path.endswith((".jsonl", ".json")):
                d = json.loads(line)
                out[str(d["_id"])] = d["text"]
            else:
                qid, text = line.rstrip("\n").split("\t", 1)
                out[qid] = text
    return out


def capot(args, stdin):
    binary = os.environ.get("CAPOT_BIN", "capot")
    done = subprocess.run([binary, *args], input=stdin.encode(), capture_output=True)
    if done.returncode != 0:
        raise SystemExit(f"align_cosine.py: capot {args[0]} failed: {done.stderr.decode().strip()}")
    return done.stdout.decode().splitlines()


def encode(bundle, texts):
    lines = capot(["encode", "--encoder", bundle], "".join(json.dumps({"text": t}) + "\n" for t in texts))
    return [json.loads(line)["embedding"] for line in lines]


def new_misspellings(clean, ids, seeds):
    out = []
    for seed in seeds:
        stdin = "".join(f"{i}\t{clean[i]}\n" for i in ids)
        for row in capot(["noise", "--kind", "typo", "--seed", str(seed)], stdin)[1:]:
            qid, _kind, _variant, applied, text = row.split("\t", 4)
            if applied == "true":
                out.append((qid, text))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("queries")
    p.add_argument("bundles", nargs="+", help="the base first")
    p.add_argument("--variants", nargs="+", required=True)
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--new-seeds", type=int, default=1)
    a = p.parse_args()
    clean = read_queries(a.queries)
    noisy = []
    for path in a.variants:
        for qid, text in read_queries(path).items():
            if qid in clean and text.strip() != clean[qid].strip():
                noisy.append((qid, text))
    with_variant = {qid for qid, _ in noisy}
    ids = [qid for qid in clean if qid in with_variant]
    if a.limit:
        ids = ids[: a.limit]
        keep = set(ids)
        noisy = [(q, t) for q, t in noisy if q in keep]
    if not ids:
        raise SystemExit("align_cosine.py: no query has a variant that differs from it")
    new = new_misspellings(clean, ids, range(101, 101 + a.new_seeds))
    dot = lambda u, v: sum(x * y for x, y in zip(u, v))
    mean = lambda xs: sum(xs) / len(xs)
    base_clean = dict(zip(ids, encode(a.bundles[0], [clean[i] for i in ids])))
    print(f"{len(ids)} queries, {len(noisy)} variant-file texts, {len(new)} new misspellings\n")
    print("| bundle | clean | files | new |\n|---|---|---|---|")
    for bundle in a.bundles:
        own_clean = encode(bundle, [clean[i] for i in ids])
        files = encode(bundle, [t for _, t in noisy])
        fresh = encode(bundle, [t for _, t in new])
        row = [
            mean([dot(v, base_clean[i]) for v, i in zip(own_clean, ids)]),
            mean([dot(v, base_clean[q]) for v, (q, _) in zip(files, noisy)]),
            mean([dot(v, base_clean[q]) for v, (q, _) in zip(fresh, new)]),
        ]
        print(f"| {bundle} | " + " | ".join(f"{x:.3f}" for x in row) + " |")


if __name__ == "__main__":
    main()
