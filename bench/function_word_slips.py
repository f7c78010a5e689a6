"""Real-word slips of function words: generate them, repair them, count (standard library only).

    python3 bench/function_word_slips.py --capot BIN --index DIR [--params JSON ...]
        [--queries FILE] [--lexicon FILE] [--count 1500] [--seed 1] [--unknown | --swapped-two]

In each clean query (TSV `qid<TAB>text`, MS MARCO dev by default) one function word of three
letters or more (capot's stopword list, read from src/index/vocab.rs) is replaced by a word of
the general word list one slip of the hand away: two letters swapped, a key next to the right
one (QWERTY), or a letter left out (`does` → `dose`, `from` → `fro`, `how` → `hoe`); with
`--unknown`, by a slip that makes no listed word (`the` → `rhe`, `how` → `hiw`); with
`--swapped-two`, a two-letter function word by its two letters swapped where that makes no
listed word (`to` → `ot`, `is` → `si`, `of` → `fo`), wherever it stands in the query. Queries
with no such word are skipped; `--count` of the rest are drawn at random. Each `--params` runs
`capot repair` once on them and prints how many came back exactly clean, how many changed to
something else, and the slips most often left. Generated errors, not people's: they say what a
rule reaches, the clean queries (`capot repair eval`) what it costs.
"""

import os
import random
import re
import sys

from repair_runs import ROOT, arguments, tally

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEYS = ["qwertyuiop", "asdfghjkl", "zxcvbnm"]
POS = {c: (r, i) for r, row in enumerate(KEYS) for i, c in enumerate(row)}


def adjacent(a, b):
    """Keys next to each other on a QWERTY keyboard (rows offset by half a key)."""
    if a == b or a not in POS or b not in POS:
        return False
    (r1, i1), (r2, i2) = POS[a], POS[b]
    return abs(r1 - r2) <= 1 and abs((i1 + 0.5 * r1) - (i2 + 0.5 * r2)) <= 1


def slips(word, known, unknown):
    out = set()
    for i in range(len(word) - 1):
        out.add(word[:i] + word[i + 1] + word[i] + word[i + 2:])
    for i in range(len(word)):
        out.add(word[:i] + word[i + 1:])
        for c in "abcdefghijklmnopqrstuvwxyz":
            if adjacent(word[i], c):
                out.add(word[:i] + c + word[i + 1:])
    return sorted(o for o in out if o != word and len(o) >= 3 and (o in known) != unknown)


def main():
    ap = arguments(__doc__)
    ap.add_argument("--count", type=int, default=1500)
    ap.add_argument("--unknown", action="store_true", help="slips that make no listed word (`rhe`, `hiw`) instead")
    ap.add_argument("--swapped-two", action="store_true", help="two-letter function words with their letters swapped (`ot`, `si`) instead")
    a = ap.parse_args()

    known = {line.split()[0] for line in open(a.lexicon, encoding="utf-8") if line.strip()}
    source = open(os.path.join(ROOT, "src/index/vocab.rs"), encoding="utf-8").read()
    listed = re.search(r"pub const STOPWORDS: &\[&str\] = &\[(.*?)\];", source, re.S)
    stop = set(re.findall(r'"([^"]+)"', listed.group(1)))

    rng = random.Random(a.seed)
    cases = []
    for line in open(a.queries, encoding="utf-8"):
        qid, _, text = line.rstrip("\n").partition("\t")
        words = text.split(" ")
        if a.swapped_two:
            options = [(i, w[::-1]) for i, w in enumerate(words) if w in stop and len(w) == 2 and w[::-1] not in known]
        else:
            options = [(i, s) for i, w in enumerate(words) if w in stop and len(w) >= 3 for s in slips(w, known, a.unknown)]
        if not options:
            continue
        i, slip = rng.choice(options)
        typed = words[:i] + [slip] + words[i + 1:]
        cases.append((qid, " ".join(typed), text, words[i], slip))
    rng.shuffle(cases)
    cases = cases[: a.count]
    tally(a.capot, a.index, cases, a.params, lambda x, y: x == y, lambda c: f"{c[4]} for {c[3]}", a.dump)
    return 0


if __name__ == "__main__":
    sys.exit(main())
