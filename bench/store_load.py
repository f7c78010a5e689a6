"""Load for bench/store.sh: /search latency at concurrency 1 and throughput at concurrency 8.

    python bench/store_load.py BASE_URL QUERIES.tsv SECONDS

Each request is one MS MARCO dev query (k 10, repair off), sent with http.client over a kept-alive
connection per worker; prints JSON {c1: {p50_ms, p99_ms, qps, failed}, c8: {...}}.
"""
import http.client
import json
import sys
import threading
import time
from urllib.parse import urlparse


def run(base, queries, seconds, workers):
    u = urlparse(base)
    lat, failed, lock = [], [0], threading.Lock()
    stop = time.monotonic() + seconds

    def worker(offset):
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        i = offset
        while time.monotonic() < stop:
            body = json.dumps({"query": queries[i % len(queries)], "k": 10, "repair": "off"})
            t = time.perf_counter()
            try:
                conn.request("POST", "/search", body, {"content-type": "application/json"})
                r = conn.getresponse()
                r.read()
                ok = r.status == 200
            except OSError:
                ok = False
                conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
            dt = (time.perf_counter() - t) * 1e3
            with lock:
                if ok:
                    lat.append(dt)
                else:
                    failed[0] += 1
            i += workers

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(workers)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lat.sort()
    pick = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] if lat else float("nan")
    return {"p50_ms": pick(0.5), "p99_ms": pick(0.99), "qps": len(lat) / (time.monotonic() - started),
            "requests": len(lat), "failed": failed[0]}


def main():
    base, path, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    queries = [line.split("\t", 1)[1].strip() for line in open(path, encoding="utf-8") if "\t" in line]
    run(base, queries[:50], 2, 1)  # warm-up
    print(json.dumps({"c1": run(base, queries, seconds, 1), "c8": run(base, queries, seconds, 8)}))


if __name__ == "__main__":
    main()
