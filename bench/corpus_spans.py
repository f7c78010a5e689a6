"""Random word spans of a BEIR corpus as pseudo-queries (standard library only).

    corpus_spans.py OUT_TSV N SEED CORPUS_JSONL[:QRELS_TSV] [CORPUS_JSONL[:QRELS_TSV] ...]

Writes N lines `span<i><TAB><3 to 8 consecutive lower-cased words>`, each from a document drawn
uniformly from the corpora (documents of fewer than 8 words skipped; with `:QRELS_TSV`, the
documents judged in those qrels are skipped too). Appended to a queries TSV and trained with
`capot align --noise typo`, they put the corpus's vocabulary, in context, into alignment — the
experiment in docs/alignment.md ("Vocabulary in context").
"""

import json
import random
import re
import sys

WORD = re.compile(r"[A-Za-z][A-Za-z'\-]*")
DBPEDIA_TAIL = re.compile(r"@en\s*<http\S*>?")


def documents(spec):
    path, _, qrels = spec.partition(":")
    judged = set()
    if qrels:
        with open(qrels, encoding="utf-8") as f:
            judged = {line.split("\t")[1] for line in f if "\t" in line}
    with open(path, encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            if doc["_id"] in judged:
                continue
            text = DBPEDIA_TAIL.sub(" ", doc.get("title", "") + ". " + doc.get("text", ""))
            words = WORD.findall(text)
            if len(words) >= 8:
                yield words


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    out, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    docs = [w for spec in sys.argv[4:] for w in documents(spec)]
    if not docs:
        sys.exit("corpus_spans.py: no document of at least 8 words")
    rng = random.Random(seed)
    with open(out, "w", encoding="utf-8") as f:
        for i in range(n):
            words = rng.choice(docs)
            k = rng.randint(3, 8)
            start = rng.randint(0, len(words) - k)
            f.write(f"span{i}\t{' '.join(words[start:start + k]).lower()}\n")
    print(f"{n} spans from {len(docs)} documents → {out}")


if __name__ == "__main__":
    main()
