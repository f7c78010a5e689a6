#!/usr/bin/env python3
"""Overhead of alignment jobs, local runner against Ray runner, side by side in one run.

For each runner, starts `capot serve` (MiniLM, the built-in corpus) on 127.0.0.1 with that runner
(and, for Ray, a Ray head on loopback started here), submits RUNS short jobs one after another
through the admin API and reads each job's `overhead` record:

- submit → first step: from POST /admin/jobs to the first training step starting (queueing,
  process start, model load, anchor vectors of the training queries);
- training end → registered: from the training command exiting to the encoder loaded in the
  registry (bundle move, ONNX Runtime session, warm-up), evaluation excluded.

Prints a Markdown table (medians, and Ray / local ratios) and writes bench/out/jobs.json.

    python3 bench/jobs.py [--runs 3] [--queries 256] [--capot target/release/capot]

Needs scripts/setup's assets and, for Ray, the test virtualenv's `ray` (.venv/bin/ray, installed by
scripts/test). Every server and the Ray head listen on 127.0.0.1 and are stopped at the end.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(method, url, token=None, body=None, timeout=60):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, None


def wait_until(pred, limit, what):
    deadline = time.time() + limit
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    sys.exit(f"jobs.py: {what} not reached within {limit} s")


def start_ray(workdir):
    ray = os.path.join(ROOT, ".venv/bin/ray")
    if not os.path.exists(ray):
        sys.exit("jobs.py: .venv/bin/ray is missing (scripts/test installs tests/requirements.txt)")
    temp = tempfile.mkdtemp(prefix="capot-ray-", dir="/tmp")
    ports = [free_port() for _ in range(6)]
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
               RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S="0", AUTOSCALER_METRIC_PORT=str(ports[4]),
               DASHBOARD_METRIC_PORT=str(ports[5]))
    env.pop("RAY_ADDRESS", None)
    log = open(os.path.join(workdir, "ray-start.log"), "w")
    proc = subprocess.Popen(
        [ray, "start", "--head", "--block", "--node-ip-address", "127.0.0.1",
         f"--port={ports[0]}", f"--ray-client-server-port={ports[1]}",
         f"--dashboard-agent-listen-port={ports[2]}", "--include-dashboard", "true",
         "--dashboard-host", "127.0.0.1", f"--dashboard-port={ports[3]}", "--num-cpus", "1",
         "--num-gpus", "0", f"--object-store-memory={200 << 20}", "--disable-usage-stats",
         f"--temp-dir={temp}"],
        env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    address = f"http://127.0.0.1:{ports[3]}"
    wait_until(lambda: call("GET", f"{address}/api/jobs/", timeout=5)[0] == 200
               if proc.poll() is None else sys.exit("jobs.py: the Ray head exited"), 120,
               "the Ray head")
    return proc, address, temp


def stop(proc, limit=30, group=False):
    """SIGTERM (to the process group for the Ray head), then SIGKILL after `limit` seconds."""
    if proc is None:
        return
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(limit)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if group:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def serve(capot, bundle, index, data, extra):
    port, admin = free_port(), free_port()
    proc = subprocess.Popen(
        [capot, "serve", "--index", index, "--encoder", bundle, "--data-dir", data,
         "--addr", f"127.0.0.1:{port}", "--admin-addr", f"127.0.0.1:{admin}", "--grpc-addr", "off",
         "--threads", "1", *extra],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(data, "serve.log"), "w"))
    wait_until(lambda: call("GET", f"http://127.0.0.1:{port}/ready", timeout=5)[0] == 200
               if proc.poll() is None else sys.exit("jobs.py: capot serve exited"), 120,
               "the service ready")
    token = open(os.path.join(data, "admin-token")).read().strip()
    return proc, f"http://127.0.0.1:{admin}", token


def run_jobs(base, token, runs, queries, variants, tag):
    out = []
    for i in range(runs):
        body = {"name": f"bench-{tag}-{i}", "base_encoder": "minilm", "queries": queries,
                "variants": [variants], "steps": 2, "batch_size": 8, "threads": 1,
                "checkpoint_every": 1000}
        code, v = call("POST", f"{base}/admin/jobs", token, body)
        if code != 202:
            sys.exit(f"jobs.py: POST /admin/jobs: {code} {v}")
        job_id = v["id"]
        job = wait_until(
            lambda: (lambda j: j if j["status"] in ("succeeded", "failed", "cancelled") else None)(
                call("GET", f"{base}/admin/jobs/{job_id}", token)[1]), 600, f"job {job_id} ending")
        if job["status"] != "succeeded":
            sys.exit(f"jobs.py: job {job_id} {job['status']}: {job.get('error')}")
        out.append(job["overhead"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--queries", type=int, default=256, help="training queries (anchors computed)")
    ap.add_argument("--capot", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release/capot"))
    ap.add_argument("--runners", default="local,ray")
    args = ap.parse_args()
    os.environ.setdefault("ORT_DYLIB_PATH", os.path.join(ROOT, "assets/onnxruntime/lib/libonnxruntime.so"))
    work = tempfile.mkdtemp(prefix="capot-bench-jobs-")
    procs, heads = [], []
    try:
        bundle, index = os.path.join(work, "minilm"), os.path.join(work, "index")
        subprocess.run([args.capot, "encoder", "import", os.path.join(ROOT, "assets/models/all-MiniLM-L6-v2"),
                        "--out", bundle, "--name", "minilm"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([args.capot, "index", "build", "--doc-encoder", bundle, "--corpus",
                        os.path.join(ROOT, "data/default-corpus"), "--out", index], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        marco = os.path.join(ROOT, "../shared/data/marco-dev-queries")
        queries, variants = os.path.join(work, "train.tsv"), os.path.join(work, "train.typo1.tsv")
        with open(os.path.join(marco, "queries.tsv")) as f:
            lines = f.readlines()[: args.queries]
        open(queries, "w").writelines(lines)
        ids = {l.split("\t", 1)[0] for l in lines}
        with open(os.path.join(marco, "queries.typo1.tsv")) as f:
            open(variants, "w").writelines(l for l in f if l.split("\t", 1)[0] in ids)
        results = {}
        for runner in args.runners.split(","):
            data = os.path.join(work, f"data-{runner}")
            os.makedirs(data)
            extra = []
            if runner == "ray":
                head, address, _ = start_ray(work)
                procs.append(head)
                heads.append(head)
                extra = ["--jobs-runner", "ray", "--jobs-ray-address", address]
            server, base, token = serve(args.capot, bundle, index, data, extra)
            procs.append(server)
            results[runner] = run_jobs(base, token, args.runs, queries, variants, runner)
            stop(server)
        keys = [("submit_to_first_step_seconds", "submit → first step"),
                ("start_to_first_step_seconds", "command start → first step"),
                ("training_end_to_registered_seconds", "training end → registered"),
                ("align_seconds", "training command, wall (2 steps)")]
        med = {r: {k: statistics.median(o[k] for o in runs) for k, _ in keys}
               for r, runs in results.items()}
        names = list(results)
        print(f"Job overhead, median of {args.runs} jobs per runner ({args.queries} training "
              f"queries, MiniLM, 2 steps of batch 8), seconds:\n")
        header = "| | " + " | ".join(names) + (" | ray / local |" if "ray" in med and "local" in med else " |")
        print(header)
        print("|---" * (len(names) + 1 + ("ray" in med and "local" in med)) + "|")
        for k, label in keys:
            row = f"| {label} | " + " | ".join(f"{med[n][k]:.2f}" for n in names)
            if "ray" in med and "local" in med:
                row += f" | {med['ray'][k] / med['local'][k]:.2f}×" if med['local'][k] > 0 else " | –"
            print(row + " |")
        os.makedirs(os.path.join(ROOT, "bench/out"), exist_ok=True)
        with open(os.path.join(ROOT, "bench/out/jobs.json"), "w") as f:
            json.dump({"runs": results, "median": med, "queries": args.queries}, f, indent=2)
    finally:
        for p in reversed(procs):
            stop(p, group=p in heads)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
