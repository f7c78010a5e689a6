"""What a user would write instead of capot: a FastAPI + uvicorn service with Python onnxruntime
and hnswlib, on the same model.onnx / tokenizer.json (a capot encoder bundle) and the same
document vectors (a capot index directory: vectors.f32, docs.bin), with the same HNSW parameters
(M=16, ef_construction=200, ef=64, inner product on normalised vectors).

It answers the same `POST /search` contract as capot for a single query:
`{"query": "...", "k": 10}` → `{"results": [{"id", "score", "rank", "title", "text"}],
"timings_ms": {"tokenize", "encode", "search", "total"}}`, so the load generator, the payload
sizes and the JSON work are the same.

    python bench/baseline_fastapi.py --index DIR --encoder BUNDLE --port 8082 [--workers N]

Configuration travels to uvicorn's worker processes through environment variables
(BASELINE_INDEX, BASELINE_ENCODER, BASELINE_ORT_THREADS, BASELINE_EF), since each worker imports
this module afresh. With N workers each ONNX Runtime session gets cores/N intra-op threads
(BASELINE_ORT_THREADS overrides), so the workers do not fight over the cores. With N > 1 the
listening socket is patched to keep TCP_NODELAY (see keep_tcp_nodelay; --keep-nagle to measure
uvicorn as it comes).
"""

import argparse
import json
import os
import struct
import time
from contextlib import asynccontextmanager

import hnswlib
import numpy as np
import onnxruntime as ort
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel
from tokenizers import Tokenizer

M, EF_CONSTRUCTION, EF_SEARCH = 16, 200, 64


def read_docs(path):
    """capot's docs.bin (src/index/store.rs): magic, count, blob_len, (3n+1) u64 offsets, in
    format 2 a u32 per document of the id order, then the blob."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] not in (b"CAPOTDS\x01", b"CAPOTDS\x02"):
        raise ValueError(f"{path}: not a capot document store")
    count, blob_len = struct.unpack_from("<QQ", data, 8)
    offsets = np.frombuffer(data, dtype="<u8", count=3 * count + 1, offset=24)
    by_id = 4 * count if data[:8] == b"CAPOTDS\x02" else 0
    blob = data[24 + 8 * (3 * count + 1) + by_id:]
    assert len(blob) == blob_len
    field = lambda j: blob[offsets[j]:offsets[j + 1]].decode("utf-8")
    return [(field(3 * i), field(3 * i + 1), field(3 * i + 2)) for i in range(count)]


class Searcher:
    def __init__(self, index_dir, bundle, ort_threads, ef):
        manifest = json.load(open(os.path.join(bundle, "encoder.json")))
        self.io = manifest["onnx"]
        self.tok = Tokenizer.from_file(os.path.join(bundle, "tokenizer.json"))
        self.tok.enable_truncation(manifest["max_length"])
        self.tok.no_padding()
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.intra_op_num_threads = ort_threads
        self.sess = ort.InferenceSession(os.path.join(bundle, "model.onnx"), opts,
                                         providers=["CPUExecutionProvider"])
        meta = json.load(open(os.path.join(index_dir, "index.json")))
        dim, n = meta["dimension"], meta["count"]
        vectors = np.fromfile(os.path.join(index_dir, "vectors.f32"), dtype="<f4").reshape(n, dim)
        self.docs = read_docs(os.path.join(index_dir, "docs.bin"))
        self.hnsw = hnswlib.Index(space="ip", dim=dim)
        self.hnsw.init_index(max_elements=n, M=M, ef_construction=EF_CONSTRUCTION, random_seed=100)
        self.hnsw.add_items(vectors, np.arange(n))
        self.hnsw.set_ef(ef)
        self.hnsw.set_num_threads(1)
        self.ef = ef

    def encode(self, text):
        e = self.tok.encode(text)
        ids = np.array([e.ids], dtype=np.int64)
        mask = np.array([e.attention_mask], dtype=np.int64)
        feeds = {self.io["input_ids"]: ids, self.io["attention_mask"]: mask}
        if self.io.get("token_type_ids"):
            feeds[self.io["token_type_ids"]] = np.zeros_like(ids)
        return ids, mask, feeds

    def search(self, text, k):
        t0 = time.perf_counter()
        _, mask, feeds = self.encode(text)
        t1 = time.perf_counter()
        hidden = self.sess.run([self.io["output"]], feeds)[0]
        m = mask[:, :, None].astype(np.float32)
        v = (hidden * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
        v /= np.clip(np.linalg.norm(v, axis=1, keepdims=True), 1e-12, None)
        t2 = time.perf_counter()
        self.hnsw.set_ef(max(self.ef, k))
        labels, distances = self.hnsw.knn_query(v, k=k)
        results = []
        for rank, (i, d) in enumerate(zip(labels[0], distances[0]), start=1):
            doc_id, title, body = self.docs[int(i)]
            results.append({"id": doc_id, "score": float(1.0 - d), "rank": rank, "title": title, "text": body})
        t3 = time.perf_counter()
        ms = lambda s: round(s * 1e3, 3)
        return {"results": results,
                "timings_ms": {"tokenize": ms(t1 - t0), "encode": ms(t2 - t1), "search": ms(t3 - t2),
                               "total": ms(t3 - t0)}}


class SearchRequest(BaseModel):
    query: str
    k: int = 10


_searcher = None


@asynccontextmanager
async def lifespan(_app):
    global _searcher
    workers = int(os.environ.get("BASELINE_WORKERS", "1"))
    threads = int(os.environ.get("BASELINE_ORT_THREADS", "0")) or max(1, (os.cpu_count() or 1) // workers)
    _searcher = Searcher(os.environ["BASELINE_INDEX"], os.environ["BASELINE_ENCODER"], threads,
                         int(os.environ.get("BASELINE_EF", EF_SEARCH)))
    yield


app = FastAPI(lifespan=lifespan)


@app.get("/health")
def health():
    return {"status": "ok"}


@app.post("/search")
def search(req: SearchRequest):
    if not req.query.strip():
        raise HTTPException(status_code=400, detail="query must not be empty")
    if not 1 <= req.k <= 1000:
        raise HTTPException(status_code=400, detail="k must be in 1..=1000")
    return _searcher.search(req.query, req.k)


def keep_tcp_nodelay(uvicorn):
    """uvicorn 0.54 with --workers > 1 binds the listening socket itself with proto 0; accepted
    connections inherit it and asyncio then skips TCP_NODELAY, so every keep-alive response after
    the first waits ~40 ms for the client's delayed ACK (Kludex/uvicorn#3149). Re-wrap the
    listener with proto IPPROTO_TCP, which the workers inherit. Single-worker runs are unaffected."""
    import socket
    original = uvicorn.config.Config.bind_socket

    def bind_socket(self):
        sock = original(self)
        if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.proto == 0:
            return socket.socket(sock.family, sock.type, socket.IPPROTO_TCP, fileno=sock.detach())
        return sock

    uvicorn.config.Config.bind_socket = bind_socket


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", required=True)
    ap.add_argument("--encoder", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8082)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--ef", type=int, default=EF_SEARCH)
    ap.add_argument("--keep-nagle", action="store_true",
                    help="with --workers > 1, leave uvicorn's listening socket as it is (Nagle stays on)")
    a = ap.parse_args()
    os.environ.update(BASELINE_INDEX=a.index, BASELINE_ENCODER=a.encoder, BASELINE_WORKERS=str(a.workers),
                      BASELINE_EF=str(a.ef))
    import uvicorn
    if a.workers > 1 and not a.keep_nagle:
        keep_tcp_nodelay(uvicorn)
    uvicorn.run("baseline_fastapi:app", app_dir=os.path.dirname(os.path.abspath(__file__)), host=a.host,
                port=a.port, workers=a.workers, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
