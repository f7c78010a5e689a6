"""Runs `capot repair` over generated queries, once per `--params` (standard library only).

Shared by the generated-error benchmarks (`function_word_slips.py`, `usage_word_typos.py`).
"""

import os
import subprocess
import tempfile


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
