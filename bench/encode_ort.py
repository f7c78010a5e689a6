"""The same encoding workload as `capot bench encode`, in Python onnxruntime on the same
model.onnx and tokenizer.json: what a user would write instead. Prints JSON like capot's."""
import argparse, json, time

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--encoder", required=True, help="capot encoder bundle directory")
    ap.add_argument("--queries", required=True, help="TSV qid<TAB>text")
    ap.add_argument("--batch-sizes", default="1,32")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    manifest = json.load(open(f"{a.encoder}/encoder.json"))
    tok = Tokenizer.from_file(f"{a.encoder}/tokenizer.json")
    tok.enable_truncation(manifest["max_length"])
    tok.enable_padding()
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if a.threads:
        opts.intra_op_num_threads = a.threads
    sess = ort.InferenceSession(f"{a.encoder}/model.onnx", opts, providers=["CPUExecutionProvider"])
    texts = [l.split("\t", 1)[1].strip() for l in open(a.queries, encoding="utf-8") if "\t" in l]

    def encode(batch):
        enc = tok.encode_batch(batch)
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        types = np.zeros_like(ids)
        hidden = sess.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)

    results = []
    for bs in [int(b) for b in a.batch_sizes.split(",")]:
        at = 0

        def next_batch():
            nonlocal at
            b = [texts[(at + i) % len(texts)] for i in range(bs)]
            at = (at + bs) % len(texts)
            return b

        warm = time.perf_counter() + 1.0
        while time.perf_counter() < warm:
            encode(next_batch())
        lat = []
        start = time.perf_counter()
        while time.perf_counter() - start < a.seconds:
            b = next_batch()
            t = time.perf_counter()
            encode(b)
            lat.append((time.perf_counter() - t) * 1e3)
        elapsed = time.perf_counter() - start
        lat.sort()
        pct = lambda p: lat[max(1, min(len(lat), int(np.ceil(p / 100 * len(lat))))) - 1]
        results.append({"batch_size": bs, "calls": len(lat), "texts_per_second": len(lat) * bs / elapsed,
                        "latency_ms_p50": pct(50), "latency_ms_p99": pct(99)})
    print(json.dumps({"runtime": f"python onnxruntime {ort.__version__}", "results": results}, indent=2))


if __name__ == "__main__":
    main()
