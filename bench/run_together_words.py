"""Three words run together: generate them, repair them, count (standard library only).

    python3 bench/run_together_words.py --capot BIN --index DIR [--params JSON ...]
        [--queries FILE] [--lexicon FILE] [--count 1500] [--seed 1]

In each clean query (TSV `qid<TAB>text`, MS MARCO dev by default) of three words or more, three
adjacent words of letters only, drawn at random, lose the two spaces between them (`bank of
america` → `bankofamerica`, `how to make` → `howtomake`), as web queries typed in a hurry or
copied from an address are; a run that makes a word of the general word list is skipped.
`--count` of those queries are drawn at random. Each `--params` runs `capot repair` once on them
and prints how many came back exactly clean, how many changed to something else, and the runs
most often left. Generated errors, not people's: they say what the three-word split reaches, the
clean queries (`capot repair eval`) what it costs (docs/repair.md, the twenty-sixth round).
"""

import random
import sys

from repair_runs import arguments, tally


def main():
    ap = arguments(__doc__)
    ap.add_argument("--count", type=int, default=1500)
    a = ap.parse_args()

    known = {line.split()[0] for line in open(a.lexicon, encoding="utf-8") if line.strip()}
    rng = random.Random(a.seed)
    cases = []
    for line in open(a.queries, encoding="utf-8"):
        qid, _, text = line.rstrip("\n").partition("\t")
        words = text.split(" ")
        starts = [
            i
            for i in range(len(words) - 2)
            if all(w.isascii() and w.isalpha() for w in words[i : i + 3]) and "".join(words[i : i + 3]).lower() not in known
        ]
        if not starts:
            continue
        i = rng.choice(starts)
        run = "".join(words[i : i + 3])
        typed = words[:i] + [run] + words[i + 3 :]
        cases.append((qid, " ".join(typed), text, run))
    rng.shuffle(cases)
    cases = cases[: a.count]
    tally(a.capot, a.index, cases, a.params, lambda x, y: x.lower() == y.lower(), lambda c: c[3].lower(), a.dump)
    return 0


if __name__ == "__main__":
    sys.exit(main())
