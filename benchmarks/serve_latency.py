"""Latency of ``treelm serve``'s parse endpoint: milliseconds from sending ``POST /api/parse`` with
a 20-word sentence to having read its whole answer, median and 95th percentile over N requests.

What is timed is what the page asks for a sentence: the levels ``d_f``, ``d_i`` of every ON-LSTM
layer (the sentence read alone as ``<eos> w_1 … w_n``, :mod:`treelm.syntax.levels`) and the tree
of every layer under both tree rules, as JSON, over HTTP/1.1 on one kept-alive connection from
this process to a server started as the user starts it (``treelm serve RUN --port P`` in a
subprocess, with this process's environment: ``OMP_NUM_THREADS`` sets its threads). Requests are
sent one after another (latency, not throughput), after ``--warmup`` untimed ones. The target of
issue 27 is a median of at most 100 ms for a ``configs/ptb-onlstm-cpu.yaml`` run on 2 cores; speed
does not depend on how long the run trained.

Usage::

    treelm train --config configs/ptb-onlstm-cpu.yaml --out /tmp/onlstm train.max_minutes=1
    OMP_NUM_THREADS=2 python benchmarks/serve_latency.py /tmp/onlstm --requests 200

Prints one JSON object and writes it to ``benchmarks/results/serve_latency-<YYYYMMDD>.json``
(or ``--out``), with the machine and the command.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from common import write_result  # noqa: E402

SENTENCE = ("the company said it expects to report a loss for the third quarter because of lower "
            "prices and higher costs")          # 20 PTB words


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sentence(words: int) -> str:
    base = SENTENCE.split()
    return " ".join((base * (words // len(base) + 1))[:words])


def wait_ready(port: int, server: subprocess.Popen, timeout: float) -> list[dict]:
    """The server's runs, once it answers; a one-line exit if it dies or never answers."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if server.poll() is not None:
            sys.exit(f"serve_latency: the server exited ({server.returncode}): "
                     f"{server.stderr.read().decode(errors='replace').strip()}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/api/runs")
            runs = json.loads(conn.getresponse().read())["runs"]
            conn.close()
            return runs
        except (OSError, http.client.HTTPException):
            time.sleep(0.2)
    sys.exit(f"serve_latency: no answer from the server within {timeout:.0f} s")


def percentile(values: list[float], q: float) -> float:
    """The q-quantile by linear interpolation between order statistics (numpy's default)."""
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def measure(port: int, body: bytes, requests: int, warmup: int) -> list[float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Content-Type": "application/json"}
    times = []
    for i in range(warmup + requests):
        t0 = time.perf_counter()
        conn.request("POST", "/api/parse", body=body, headers=headers)
        r = conn.getresponse()
        data = r.read()
        dt = (time.perf_counter() - t0) * 1000.0
        if r.status != 200:
            sys.exit(f"serve_latency: {r.status} {data.decode(errors='replace')}")
        if i >= warmup:
            times.append(dt)
    conn.close()
    return times


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="a trained language-model run with ON-LSTM layers")
    p.add_argument("--requests", type=int, default=200, help="timed requests (default 200)")
    p.add_argument("--warmup", type=int, default=10, help="untimed requests first (default 10)")
    p.add_argument("--words", type=int, default=20, help="words in the sentence (default 20)")
    p.add_argument("--startup-timeout", type=float, default=300.0,
                   help="seconds to wait for the server to load the run (default 300)")
    p.add_argument("--out", help="result file (default benchmarks/results/"
                   "serve_latency-<YYYYMMDD>.json)")
    args = p.parse_args()
    if args.requests < 1 or args.warmup < 0 or args.words < 1:
        sys.exit("serve_latency: --requests and --words must be >= 1, --warmup >= 0")

    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    server = subprocess.Popen([sys.executable, "-m", "treelm.cli", "serve", args.run,
                               "--port", str(port)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    try:
        runs = wait_ready(port, server, args.startup_timeout)
        text = sentence(args.words)
        body = json.dumps({"run": runs[0]["name"], "sentence": text}).encode()
        times = measure(port, body, args.requests, args.warmup)
    finally:
        server.terminate()
        server.wait(timeout=30)

    median = statistics.median(times)
    cfg_path = Path(args.run) / "config.yaml"
    model = {}
    if cfg_path.exists():
        import yaml

        cfg = yaml.safe_load(cfg_path.read_text())
        model = {k: cfg.get("model", {}).get(k) for k in ("cell", "sizes")}
    result = {
        "run": str(Path(args.run).resolve()), "model": model, "layers": runs[0]["layers"],
        "words": args.words, "sentence": text, "requests": args.requests,
        "warmup": args.warmup, "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "median_ms": round(median, 2), "p95_ms": round(percentile(times, 0.95), 2),
        "mean_ms": round(statistics.fmean(times), 2), "min_ms": round(min(times), 2),
        "max_ms": round(max(times), 2), "target_median_ms": 100,
        "meets_target": median <= 100,
    }
    write_result("serve_latency", result, path=Path(args.out) if args.out else None)


if __name__ == "__main__":
    main()
