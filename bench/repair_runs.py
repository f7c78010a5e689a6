"""Runs `capot repair` over generated queries, once per `--params` (standard library only).

Shared by the generated-error benchmarks (`function_word_slips.py`, `usage_word_typos.py`,
`run_together_words.py`).
"""

import argparse
import collections
import os
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# scripts/setup's assets: `$CAPOT_ASSETS`, as the setup script and the tests read it, else `assets/`.
ASSETS = os.environ.get("CAPOT_ASSETS") or os.path.join(ROOT, "assets")


def arguments(doc):
    """The options every generated-error benchmark takes: the binary and index, the settings to
    run, the clean queries, the general word list and the seed; the caller adds its own."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--capot", required=True)
    ap.add_argument("--index", required=True)
    ap.add_argument("--params", action="append", default=[])
    ap.add_argument("--queries", default=os.path.join(ROOT, "../shared/data/marco-dev-queries/queries.tsv"))
    ap.add_argument("--lexicon", default=os.path.join(ASSETS, "lexicon/frequency_dictionary_en_82_765.txt"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dump", metavar="FILE",
                    help="also write each case to FILE (TSV: params, outcome -- restored, left or "
                         "changed to something else --, label, typed, repaired, clean)")
    return ap


def repaired(capot, index, cases, params_list):
    """Yields `(params, {qid: repaired text})` for each settings string in `params_list`
    (`["{}"]` when empty), `cases` being `(qid, typed text, ...)` tuples."""
    with tempfile.NamedTemporaryFile("w", suffix=".tsv", delete=False) as f:
        f.writelines(f"{c[0]}\t{c[1]}\n" for c in cases)
        typed_file = f.name
    try:
        for params in params_list or ["{}"]:
            out = subprocess.run(
                [capot, "repair", "--no-vote", "--index", index, "--queries", typed_file, "--format", "tsv", "--params", params],
                check=True, capture_output=True, text=True,
            ).stdout
            yield params, dict(line.partition("\t")[::2] for line in out.splitlines())
    finally:
        os.unlink(typed_file)


def tally(capot, index, cases, params_list, same, label, dump=None):
    """Repairs `cases` (`(qid, typed text, clean text, ...)` tuples) once per settings string and
    prints how many came back clean (`same(repaired, clean)`), how many changed to something else,
    and the cases most often left, named by `label(case)`; with `dump`, a file name, writes every
    case there too, one TSV line each."""
    truth = {c[0]: c for c in cases}
    rows = []
    for params, out in repaired(capot, index, cases, params_list):
        restored = wrong = 0
        left = collections.Counter()
        for qid, text in out.items():
            case = truth[qid]
            typed, clean = case[1], case[2]
            if same(text, clean):
                restored += 1
                outcome = "restored"
            else:
                left[label(case)] += 1
                changed = not same(text, typed)
                wrong += changed
                outcome = "changed" if changed else "left"
            rows.append((params, outcome, label(case), typed, text, clean))
        n = len(cases)
        print(f"params {params}: {restored}/{n} restored ({100 * restored / n:.1f}%), {wrong} changed to something else")
        print("  most often left: " + ", ".join(f"{l} ({k})" for l, k in left.most_common(12)))
    if dump:
        with open(dump, "w") as f:
            f.write("params\toutcome\tlabel\ttyped\trepaired\tclean\n")
            f.writelines("\t".join(str(x).replace("\t", " ") for x in row) + "\n" for row in rows)
