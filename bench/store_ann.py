"""pgvector's HNSW against exact search, beside capot's graph (bench/store_ann.sh).

    python bench/store_ann.py HOST PORT VECTORS.npy QUERIES.f32 CAPOT_ANN.json LOAD.log

Recall@10 and single-connection queries/s per ef (64, 256) for `ORDER BY embedding <#> q LIMIT
10` on the table `ann`; filtered recall at 1% (`bucket` = 7) and 10% (`bucket` < 10) with
`hnsw.iterative_scan` off and `relaxed_order`, and how many of the 10 hits came back; ranges
at 1% and 10% on the declared integer `bucket` (`--payload-index bucket:integer`) in capot's two
SQL forms: the SQL/JSON path alone, which HNSW walks (what capot ran before, and still runs when
it picks the walk), and the B-tree form scored exactly (no index scan: the B-tree bitmap, then a
sort); and which of the two capot's rule picks from PostgreSQL's estimate of the admitted rows
(exact when admitted² ≤ 2.5 · ef · rows; src/store/postgres/mod.rs). Exact
answers from numpy on the same (normalised) vectors. Prints Markdown with ratios; writes JSON
beside it (store-ann.json).
"""
import json
import os
import re
import sys
import time

import numpy as np
import psycopg

K = 10
# capot's rule (src/store/postgres/mod.rs, EXACT_BELOW): score the admitted rows exactly when
# admitted² ≤ 2.5 × ef × rows, else walk HNSW.
EXACT_BELOW = 2.5


def exact_is_cheaper(admitted, ef, rows):
    return admitted * admitted <= EXACT_BELOW * ef * rows


def main():
    host, port, vec_path, q_path, capot_path, load_log = sys.argv[1:7]
    docs = np.load(vec_path, mmap_mode="r").astype(np.float32)
    docs = docs / np.linalg.norm(docs, axis=1, keepdims=True)
    queries = np.fromfile(q_path, dtype="<f4").reshape(-1, docs.shape[1])
    queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    n = docs.shape[0]
    bucket = np.arange(n) % 100
    scores = queries @ docs.T

    def exact(mask):
        s = np.where(mask[None, :], scores, -np.inf)
        top = np.argpartition(-s, K, axis=1)[:, :K]
        return [set(int(j) for j in row if np.isfinite(s[qi, j])) for qi, row in enumerate(top)]

    conn = psycopg.connect(host=host, port=int(port), user="postgres", dbname="postgres", autocommit=True)
    stored = conn.execute("SELECT count(*) FROM ann").fetchone()[0]
    # The corpus ordinal of each id (row i of the vectors is the corpus's i-th document).
    ordinal = {}
    with open(os.path.join(os.path.dirname(vec_path), f"corpus-{n}-store", "corpus.jsonl"), encoding="utf-8") as f:
        for i, line in enumerate(f):
            ordinal[json.loads(line)["_id"]] = i
    assert len(ordinal) == n == stored, (len(ordinal), n, stored)

    # The range and keyword sections score up to 100,000 rows a query in their exact cells: at 1M
    # their first PLANNER_QUERIES queries only (environment; default all).
    planner_queries = int(os.environ.get("PLANNER_QUERIES", len(queries)))

    def run(ef, where="TRUE", iterative="off", limit=None):
        conn.execute(f"SET hnsw.ef_search = {ef}")
        conn.execute(f"SET hnsw.iterative_scan = {iterative}")
        sql = f"SELECT id FROM ann WHERE {where} ORDER BY embedding <#> %s::vector LIMIT {K}"
        got, started = [], time.perf_counter()
        for q in queries[:limit]:
            rows = conn.execute(sql, ("[" + ",".join(f"{x:.7g}" for x in q) + "]",)).fetchall()
            got.append({ordinal[r[0]] for r in rows})
        return got, len(got) / (time.perf_counter() - started)

    def recall(got, want):
        want = want[:len(got)]
        hit = sum(len(g & w) for g, w in zip(got, want))
        return hit / max(1, sum(len(w) for w in want)), sum(len(g) for g in got) / len(got)

    capot = {p["ef"]: p for p in json.load(open(capot_path))["results"]}
    want_all = exact(np.ones(n, dtype=bool))
    out = {"documents": n, "queries": len(queries), "unfiltered": [], "filtered": []}
    lines = [f"| {n:,} documents, 1,000 queries, M 16, ef_construction 200 | capot recall@10 | capot q/s | pgvector recall@10 | pgvector q/s | pgvector / capot q/s |",
             "|---|---|---|---|---|---|"]
    for ef in (64, 256):
        got, qps = run(ef)
        r, _ = recall(got, want_all)
        c = capot[ef]
        out["unfiltered"].append({"ef": ef, "pgvector_recall": r, "pgvector_qps": qps,
                                  "capot_recall": c["recall"], "capot_qps": c["queries_per_second"]})
        lines.append(f"| ef {ef} | {c['recall']:.3f} | {c['queries_per_second']:.0f} | {r:.3f} | {qps:.0f} | {qps / c['queries_per_second']:.2f}× |")
    lines += ["", "| filter (pgvector, ef 64 / 256) | iterative scan | recall@10 | hits per query | q/s |", "|---|---|---|---|---|"]
    for name, where, mask in (("1% (bucket = 7)", "metadata @? '$.bucket ? (@ == 7)'", bucket == 7),
                              ("10% (bucket < 10)", "metadata @? '$.bucket ? (@ < 10)'", bucket < 10)):
        want = exact(mask)
        for iterative in ("off", "relaxed_order"):
            for ef in (64, 256):
                got, qps = run(ef, where, iterative)
                r, hits = recall(got, want)
                out["filtered"].append({"filter": name, "iterative_scan": iterative, "ef": ef,
                                        "recall": r, "hits": hits, "qps": qps})
                lines.append(f"| {name}, ef {ef} | {iterative} | {r:.3f} | {hits:.1f} | {qps:.0f} |")
    # capot's translation of {"key": "bucket", "range": {"lt": X}} on a declared integer field:
    # the path alone, and the form a B-tree answers (as src/store/postgres/sql.rs writes it).
    value = "(metadata ->> 'bucket')::float8"
    num = (f"(CASE WHEN jsonb_typeof(metadata -> 'bucket') = 'number' "
           f"AND {value} = floor({value}) THEN {value} END)")

    def path_form(x):
        return ("metadata @? '$.\"bucket\" ? (@.type() == \"number\" && @.floor() == @ && @ < "
                f"{x})'")

    def btree_form(x):
        return (f"(({num} < {x}::float8) OR "
                f"((jsonb_typeof(metadata -> 'bucket') = 'array') AND {path_form(x)}))")

    conn.execute("ANALYZE ann")
    rows_estimate = conn.execute("SELECT reltuples::bigint FROM pg_class WHERE oid = 'ann'::regclass").fetchone()[0]

    def estimate(where):
        top = conn.execute(f"EXPLAIN SELECT 1 FROM ann WHERE {where}").fetchone()[0]
        return int(re.search(r"rows=(\d+)", top)[1])

    def steered(ef, where, setting):
        conn.execute(f"SET {setting} = off")
        try:
            return run(ef, where, "relaxed_order", planner_queries)
        finally:
            conn.execute(f"RESET {setting}")

    lines += ["", f"| range filter (iterative scans on, {planner_queries} queries) | ef | HNSW walk, path form (before): recall@10 / q/s | B-tree, exact: recall@10 / q/s | PostgreSQL's estimate | capot picks | picked ÷ before q/s |",
              "|---|---|---|---|---|---|---|"]
    for name, x in (("1% (bucket < 1)", 1), ("10% (bucket < 10)", 10)):
        want = exact(bucket < x)
        admitted = estimate(btree_form(x))
        for ef in (64, 256):
            path, qps_path = run(ef, path_form(x), "relaxed_order", planner_queries)
            ex, qps_ex = steered(ef, btree_form(x), "enable_indexscan")
            picks = "exact" if exact_is_cheaper(admitted, ef, rows_estimate) else "walk"
            row = {"filter": name, "ef": ef, "estimated_admitted": admitted, "picks": picks,
                   "walk": {"recall": recall(path, want)[0], "qps": qps_path},
                   "exact": {"recall": recall(ex, want)[0], "qps": qps_ex}}
            out.setdefault("ranges", []).append(row)
            chosen = row[picks]
            lines.append(f"| {name} | {ef} | {row['walk']['recall']:.3f} / {qps_path:.0f} | {row['exact']['recall']:.3f} / {qps_ex:.0f} | "
                         f"{admitted:,} rows | {picks} | {chosen['qps'] / qps_path:.2f}× |")
    # capot's translation of {"key": K, "match": {"value": V}} on a declared keyword field: the
    # path alone (before: left to PostgreSQL over the GIN index), and the B-tree form scored
    # exactly, with capot's choice between the exact plan and the walk from the estimate.
    def keyword_path(key, v):
        return f"metadata @? '$.\"{key}\" ? (@.type() == \"string\" && @ == \"{v}\")'"

    def keyword_btree(key, v):
        expr = (f"(CASE WHEN jsonb_typeof(metadata -> '{key}') = 'string' "
                f"THEN metadata ->> '{key}' END)")
        return (f"(({expr} = ANY(ARRAY['{v}']::text[])) OR "
                f"((jsonb_typeof(metadata -> '{key}') = 'array') AND {keyword_path(key, v)}))")

    idx = np.arange(n)
    lines += ["", f"| keyword filter (iterative scans on, {planner_queries} queries) | ef | path form, PostgreSQL's choice (before): recall@10 / q/s | B-tree, exact: recall@10 / q/s | PostgreSQL's estimate | capot picks | picked ÷ before q/s |",
              "|---|---|---|---|---|---|---|"]
    for name, key, v, mask in (("0.1% (tenant = t7)", "tenant", "t7", idx % 1000 == 7),
                               ("10% (cat = c3)", "cat", "c3", idx % 10 == 3)):
        want = exact(mask)
        admitted = estimate(keyword_btree(key, v))
        for ef in (64, 256):
            before, qps_before = run(ef, keyword_path(key, v), "relaxed_order", planner_queries)
            ex, qps_ex = steered(ef, keyword_btree(key, v), "enable_indexscan")
            if exact_is_cheaper(admitted, ef, rows_estimate):
                picks, picked = "exact", qps_ex
            else:
                # The walk: the path form with HNSW (as capot writes it when it walks).
                picks, picked = "walk", qps_before
            row = {"filter": name, "ef": ef, "estimated_admitted": admitted, "picks": picks,
                   "before": {"recall": recall(before, want)[0], "qps": qps_before},
                   "exact": {"recall": recall(ex, want)[0], "qps": qps_ex}}
            out.setdefault("keywords", []).append(row)
            lines.append(f"| {name} | {ef} | {row['before']['recall']:.3f} / {qps_before:.0f} | {row['exact']['recall']:.3f} / {qps_ex:.0f} | "
                         f"{admitted:,} rows | {picks} | {picked / qps_before:.2f}× |")
    m = re.search(r"COPY ([\d.]+)s \((\d+) docs/s\), HNSW index ([\d.]+)s", open(load_log).read())
    if m:
        out["load"] = {"copy_seconds": float(m[1]), "docs_per_second": int(m[2]), "hnsw_seconds": float(m[3])}
        lines += ["", f"Load: COPY {m[1]} s ({m[2]} documents/s, vectors given), pgvector HNSW build {m[3]} s."]
    print("\n".join(lines))
    json.dump(out, open(os.path.join(os.path.dirname(capot_path), "store-ann.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
