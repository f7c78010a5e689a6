#!/usr/bin/env python3
"""Derive a large BEIR corpus from small real ones, for scale benchmarks (query repair's
vocabulary, the index) where no large corpus can be fetched.

    bench/derive_corpus.py OUT_DIR N_PASSAGES CORPUS.jsonl [CORPUS.jsonl ...] [--seed S]

How: the source documents are split into sentences. Each derived passage is a window of 1-4
consecutive sentences of one source document; then every word is, with probability 0.3, replaced
by a word drawn from the whole token stream of the sources (so word frequencies stay Zipfian and
new word pairs appear across passages, as in a larger corpus), and with probability 0.002 by a new
word (a source word with a random three-letter suffix), so the vocabulary keeps growing with the
corpus (about 0.1 new words per passage) instead of saturating at the sources'. Seeded: the same
arguments give the same file. Writes OUT_DIR/corpus.jsonl (`_id`, `title`, `text`).
"""
import json
import random
import re
import sys
from pathlib import Path


def main() -> None:
    args = sys.argv[1:]
    seed = 0
    if "--seed" in args:
        i = args.index("--seed")
        seed = int(args[i + 1])
        del args[i : i + 2]
    if len(args) < 3:
        sys.exit(__doc__)
    out, n, sources = Path(args[0]), int(args[1]), args[2:]
    rng = random.Random(seed)
    docs = []
    for src in sources:
        with open(src, encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                text = (d.get("title", "") + ". " + d.get("text", "")).strip(". ")
                sentences = [s for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]
                if sentences:
                    docs.append(sentences)
    stream = [w for sentences in docs for s in sentences for w in s.split()]
    letters = "abcdefghijklmnopqrstuvwxyz"
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as f:
        for i in range(n):
            sentences = rng.choice(docs)
            start = rng.randrange(len(sentences))
            window = " ".join(sentences[start : start + rng.randint(1, 4)])
            words = []
            for w in window.split():
                r = rng.random()
                if r < 0.002:
                    base = re.sub(r"\W", "", rng.choice(stream)) or "x"
                    w = base + "".join(rng.choice(letters) for _ in range(3))
                elif r < 0.302:
                    w = rng.choice(stream)
                words.append(w)
            f.write(json.dumps({"_id": f"p{i}", "title": "", "text": " ".join(words)}) + "\n")


if __name__ == "__main__":
    main()
