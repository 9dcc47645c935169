"""Record the runs a latency reconciliation reads: tinyserve with its step and request records, the kit's
client at concurrency 1 and 16, and a profiled run at concurrency 1 (whose trace splits the forward).

Run from the repository root (kit and tinyserve importable; on a GPU machine with torch for
``--device cuda``)::

    python tools/record_reconcile.py OUT_DIR [--device cpu|cuda] [--modes graph,eager]

For each mode (``graph``: CUDA graphs on; ``eager``: ``--disable-cuda-graph``) it writes
``OUT_DIR/<mode>/engine.log`` (tinyserve's log with ``TINYSERVE_STEP_RECORDS=1``), ``c1.json`` and
``c16.json`` (``kit.bench.load_test`` results, unprofiled), ``profiled.json`` and ``trace/`` (a run
at concurrency 1 while ``/start_profile`` records ``--profile-steps`` steps), and ``OUT_DIR/run.json``
(what ran where). Everything is measured through the kit's public client; nothing here computes a figure.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def _wait(url: str, limit: float) -> None:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"record_reconcile: {url} did not answer /health within {limit:.0f} s")


def _post(url: str, path: str, body: dict) -> str:
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.read().decode()


def record_mode(out: Path, mode: str, args) -> dict:
    import kit

    out.mkdir(parents=True, exist_ok=True)
    engine = Path(args.engine_path).resolve()
    cmd = [sys.executable, "-m", "tinyserve.launch_server", "--device", args.device, "--port", str(args.port),
           "--model-shape", args.shape, "--token-ms", str(args.token_ms), "--load-seconds", "0.2",
           "--max-running-requests", "16", "--cuda-graph-bs", "1,2,4,8,16"]
    if mode == "eager":
        cmd.append("--disable-cuda-graph")
    env = dict(os.environ, PYTHONPATH=str(engine), TINYSERVE_STEP_RECORDS="1")
    url = f"http://127.0.0.1:{args.port}"
    with open(out / "engine.log", "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            _wait(url, 300)
            for conc, n in ((1, 6), (16, 32)):
                kit.bench.load_test(url, concurrency=conc, requests=n, max_tokens=args.max_tokens, warmup=2,
                                    prompt_tokens=32, save=out / f"c{conc}.json")
            (out / "trace").mkdir(exist_ok=True)
            _post(url, "/start_profile", {"output_dir": str(out / "trace"), "num_steps": args.profile_steps})
            kit.bench.load_test(url, concurrency=1, requests=2, max_tokens=args.max_tokens, warmup=0,
                                prompt_tokens=32, save=out / "profiled.json")
            end = time.monotonic() + 120
            while not list((out / "trace").glob("*.trace.json.gz")) and time.monotonic() < end:
                time.sleep(0.2)
        finally:
            proc.terminate()
            proc.wait(60)
    return {"mode": mode, "command": " ".join(cmd), "env": {"TINYSERVE_STEP_RECORDS": "1"}}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--engine-path", default="notebooks/sample/engine")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--shape", default="llama-3.2-1b")
    ap.add_argument("--modes", default="graph,eager")
    ap.add_argument("--port", type=int, default=30177)
    ap.add_argument("--token-ms", type=float, default=10.0, help="CPU runner only: base per-token time")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--profile-steps", type=int, default=10)
    args = ap.parse_args()
    out = Path(args.out)
    runs = [record_mode(out / mode, mode, args) for mode in args.modes.split(",")]
    gpu = "none (tinyserve's CPU runner: sleeps for known step times)"
    if args.device == "cuda":
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
    (out / "run.json").write_text(json.dumps({"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                              "gpu": gpu,
                                              "device": args.device, "shape": args.shape, "runs": runs},
                                             indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
