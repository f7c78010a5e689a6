"""Runs `capot repair` over generated queries, once per `--params` (standard library only).

Shared by the generated-error benchmarks (`function_word_slips.py`, `usage_word_typos.py`).
"""

import argparse
import os
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def arguments(doc):
    """The options every generated-error benchmark takes: the binary and index, the settings to
    run, the clean queries, the general word list and the seed; the caller adds its own."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--capot", required=True)
    ap.add_argument("--index", required=True)
    ap.add_argument("--params", action="append", default=[])
    ap.add_argument("--queries", default=os.path.join(ROOT, "../shared/data/marco-dev-queries/queries.tsv"))
    ap.add_argument("--lexicon", default=os.path.join(ROOT, "assets/lexicon/frequency_dictionary_en_82_765.txt"))
    ap.add_argument("--seed", type=int, default=1)
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
                [capot, "repair", "--index", index, "--queries", typed_file, "--format", "tsv", "--params", params],
                check=True, capture_output=True, text=True,
            ).stdout
            yield params, dict(line.partition("\t")[::2] for line in out.splitlines())
    finally:
        os.unlink(typed_file)
