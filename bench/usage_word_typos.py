"""Typos in words only the usage list holds: generate them, repair them, count (standard library only).

    python3 bench/usage_word_typos.py --capot BIN --index DIR [--params JSON ...]
        [--queries FILE] [--usage FILE] [--lexicon FILE] [--least 100] [--seed 1]

The words a query repair can reach only through the usage list (wordfreq's, `#usage` first):
written at least `--least` times per billion words, of five letters or more, and absent from
the SymSpell word list — names, places, brands, drugs and the American spellings that list
lacks (`wenatchee`, `comcast`, `doxycycline`, `diarrhea`). In each clean query (TSV
`qid<TAB>text`, MS MARCO dev by default) that holds one, one such word, drawn at random, gets
one typo: a letter dropped, a letter added, a letter changed, or two letters swapped, never the
first. Each `--params` runs `capot repair` once on them and prints how many came back exactly
clean (case and spacing aside) and how many changed to something else. Generated errors, not
people's: they say what the candidates reach, the clean queries (`capot repair eval`) what it
costs (docs/repair.md, the twenty-second round).
"""

import os
import random
import re
import sys

from repair_runs import ASSETS, ROOT, arguments, tally

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def typo(word, rng):
    """One typo after the first letter, or None when it leaves the word as it was."""
    kind = rng.choice(["drop", "swap", "change", "add"])
    p = rng.randrange(1, len(word) - 1)
    if kind == "drop":
        out = word[:p] + word[p + 1:]
    elif kind == "swap":
        out = word[:p] + word[p + 1] + word[p] + word[p + 2:]
    elif kind == "change":
        out = word[:p] + rng.choice(LETTERS) + word[p + 1:]
    else:
        out = word[:p] + rng.choice(LETTERS) + word[p:]
    return None if out == word else out


def main():
    ap = arguments(__doc__)
    ap.add_argument("--usage", default=os.path.join(ASSETS, "lexicon/wordfreq_large_en.txt"))
    ap.add_argument("--least", type=int, default=100, help="writings per billion words a word needs")
    a = ap.parse_args()

    listed = {line.split()[0] for line in open(a.lexicon, encoding="utf-8") if line.strip()}
    only_written = set()
    with open(a.usage, encoding="utf-8") as f:
        next(f)  # `#usage`
        for line in f:
            word, _, count = line.rstrip("\n").partition(" ")
            if re.fullmatch(r"[a-z]+", word) and int(count) >= a.least and word not in listed:
                only_written.add(word)

    rng = random.Random(a.seed)
    cases = []
    for line in open(a.queries, encoding="utf-8"):
        qid, _, text = line.rstrip("\n").partition("\t")
        words = text.split()
        at = [i for i, w in enumerate(words) if w in only_written and len(w) >= 5]
        if not at:
            continue
        i = rng.choice(at)
        typed = typo(words[i], rng)
        if typed is None:
            continue
        cases.append((qid, " ".join(words[:i] + [typed] + words[i + 1:]), text, words[i]))
    same = lambda x, y: x.lower().split() == y.lower().split()
    tally(a.capot, a.index, cases, a.params, same, lambda c: c[3], a.dump)
    return 0


if __name__ == "__main__":
    sys.exit(main())
