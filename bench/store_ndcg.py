"""nDCG@10 of a running capot on a BEIR dataset through /search (bench/store.sh).

    python bench/store_ndcg.py BASE_URL DATASET_DIR

Every query of DATASET_DIR/queries.jsonl that has judgements in qrels/test.tsv, k 10, repair
off, ef 1000 (exact on a corpus of 5,000, so the stores are compared, not their graphs) and at
the server's default ef; graded gains, log2 discount. Prints JSON {exact, default, queries}.
"""
import http.client
import json
import math
import sys
from urllib.parse import urlparse


def ndcg(ranked, judged, k=10):
    dcg = sum(judged.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(judged.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def main():
    base, dataset = sys.argv[1], sys.argv[2]
    qrels = {}
    with open(f"{dataset}/qrels/test.tsv", encoding="utf-8") as f:
        next(f)
        for line in f:
            q, d, g = line.rstrip("\n").split("\t")
            qrels.setdefault(q, {})[d] = int(g)
    queries = [json.loads(l) for l in open(f"{dataset}/queries.jsonl", encoding="utf-8")]
    queries = [q for q in queries if q["_id"] in qrels]
    u = urlparse(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    out = {"queries": len(queries)}
    for name, ef in (("exact", 1000), ("default", None)):
        scores = []
        for q in queries:
            body = {"query": q["text"], "k": 10, "repair": "off"}
            if ef:
                body["ef"] = ef
            conn.request("POST", "/search", json.dumps(body), {"content-type": "application/json"})
            r = conn.getresponse()
            hits = json.loads(r.read())["results"]
            scores.append(ndcg([h["id"] for h in hits], qrels[q["_id"]]))
        out[name] = sum(scores) / len(scores)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
