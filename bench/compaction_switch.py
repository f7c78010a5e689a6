#!/usr/bin/env python3
"""Writes' latency through a compaction whose switch meets a large write-ahead log (issue 43).

1. `capot serve` (CAPOT, or --capot) on INDEX with ENCODER, a fresh data directory, automatic
   compaction off;
2. live documents (new ids) of a passage's text and ~DOC_BYTES of metadata (CORPUS's passages
   strung together: logged, not encoded, so the log grows at the disk's pace) written with
   POST /admin/documents in batches of BATCH until the data directory holds LOG_MIB of log;
3. one writer posting one short document at a time, as fast as it is answered, for SETTLE
   seconds, then through POST /admin/index/compact until the compaction has ended, then SETTLE
   seconds more: every write's latency, and whether it was answered 200.

The compaction's switch runs with writes held back (the new version takes over, the log is cut
to the writes made since the snapshot): how long they wait is what the log costs there. Prints
JSON: writes before, during and after the compaction (count, p50, p99, max), the compaction's
own seconds, and the log's size.

    python3 bench/compaction_switch.py --capot target/release/capot --index /tmp/bench/dl19-index \\
        --encoder /tmp/bench/minilm --corpus ../shared/data/dl19-sample/corpus.jsonl [--log-mib 1024]
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from live_corpus import call, corpus, free_port, start_server  # noqa: E402


def data_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def summary(times):
    if not times:
        return {"writes": 0}
    times = sorted(times)
    return {"writes": len(times),
            "p50_ms": 1e3 * statistics.median(times),
            "p99_ms": 1e3 * times[int(0.99 * (len(times) - 1))],
            "max_ms": 1e3 * times[-1]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--capot", default=os.environ.get("CAPOT", "target/release/capot"))
    ap.add_argument("--index", required=True)
    ap.add_argument("--encoder", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--log-mib", type=int, default=1024)
    ap.add_argument("--doc-bytes", type=int, default=60000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--settle", type=float, default=3.0)
    args = ap.parse_args()
    texts = [t for _, t in corpus(args.corpus)]
    with tempfile.TemporaryDirectory() as data:
        # start_server reads args.capot, args.index and args.encoder.
        port, admin_port = free_port(), free_port()
        server, base = start_server(args, data, port, admin_port)
        try:
            with open(os.path.join(data, "admin-token")) as f:
                token = f.read().strip()
            return run(args, texts, data, f"http://127.0.0.1:{admin_port}", token)
        finally:
            server.terminate()
            server.wait(timeout=120)


def run(args, texts, data, admin, token):
    # 2. Fill the log.
    t0, n = time.perf_counter(), 0
    target = args.log_mib << 20
    strung = " ".join(texts)
    strung = strung * (1 + 2 * args.doc_bytes // max(1, len(strung)))
    while data_bytes(data) < target:
        docs = []
        for _ in range(args.batch):
            start = (n * 7919) % (len(strung) - args.doc_bytes)
            body = strung[start:start + args.doc_bytes]
            # The bulk rides in metadata, which is logged but not encoded: the log grows at
            # the disk's pace rather than the encoder's.
            docs.append({"id": f"big-{n}", "text": body[:400], "metadata": {"body": body}})
            n += 1
        call(f"{admin}/admin/documents", {"documents": docs}, token)
    fill = {"documents": n, "seconds": time.perf_counter() - t0, "data_bytes": data_bytes(data)}
    print(json.dumps({"filled": fill}), file=sys.stderr)

    # 3. One writer through the compaction.
    samples, failed, stop = [], [0], threading.Event()

    def writer():
        i = 0
        while not stop.is_set():
            doc = {"documents": [{"id": f"w-{i}", "text": texts[i % len(texts)]}]}
            i += 1
            t = time.perf_counter()
            try:
                call(f"{admin}/admin/documents", doc, token)
                samples.append((t, time.perf_counter() - t))
            except Exception:
                failed[0] += 1

    w = threading.Thread(target=writer)
    w.start()
    time.sleep(args.settle)
    started = time.perf_counter()
    call(f"{admin}/admin/index/compact", {}, token)
    while True:
        status = call(f"{admin}/admin/index", token=token)
        if status["compaction"]["state"] != "running":
            break
        time.sleep(0.1)
    ended = time.perf_counter()
    time.sleep(args.settle)
    stop.set()
    w.join()
    out = {
        "capot": args.capot,
        "log_mib": args.log_mib,
        "fill": fill,
        "compaction": {"state": status["compaction"]["state"],
                       "seconds": status["compaction"].get("seconds"),
                       "wall_seconds": ended - started},
        "before": summary([d for t, d in samples if t < started]),
        "during": summary([d for t, d in samples if started <= t < ended]),
        "after": summary([d for t, d in samples if t >= ended]),
        "failed_writes": failed[0],
    }
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
