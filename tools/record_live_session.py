"""Record the sample session's live part on a GPU machine: tinyserve on a real model shape with torch.

Run from the repository root on the GPU machine (kit and tinyserve importable)::

    python tools/record_live_session.py OUT_DIR [--engine-path notebooks/sample/engine] [--shape llama-3.2-1b]

What it does, all through the kit's own public API (nothing here measures by itself):

1. ``kit.server`` starts tinyserve (``--device cuda``, random weights of ``--shape``, CUDA graphs,
   SDPA attention) on this machine, follows its log, waits for ``/health``;
2. ``Server.bench`` runs ``kit.bench.single_stream`` (batch 1 and concurrency 2 and 4, 3 repeats);
3. ``Server.profile(steps=20)`` captures a torch profile through ``POST /start_profile``;
4. ``kit.experiment`` runs one factor at a time: CUDA graph on/off, attention backend SDPA vs
   explicit matmul-softmax (``torch_native``), torch.compile off/on; 3 repeats each, a 10-step
   profile of each variant;
5. the provenance of everything is recorded in the session's ``provenance.json`` with the GPU's
   name as the host, and the session is packed into ``OUT_DIR/live_session.tar.gz``.

Parsing and tables happen later, on the development machine; this script needs only torch and the kit.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
import traceback
from pathlib import Path


def gpu_label() -> str:
    try:
        name = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=30).stdout.strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        name = "unknown GPU"
    return f"{name} (a cloud GPU machine)"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--engine-path", default="notebooks/sample/engine")
    ap.add_argument("--shape", default="llama-3.2-1b")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--port", type=int, default=30123)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--python", default="python3", help="the Python (with torch) that runs tinyserve")
    ap.add_argument("--tag", default="h200", help="prefix of the stored names (h200_live_server, ...)")
    ap.add_argument("--token-ms", type=float, default=10.0, help="CPU runner only: base per-token time")
    ap.add_argument("--deadline", type=float, default=480.0, help="start no new variant after this many seconds")
    args = ap.parse_args()

    import kit
    from kit.session import Provenance

    out = Path(args.out).resolve()
    sess_dir = out / "session"
    sess_dir.mkdir(parents=True, exist_ok=True)
    session = kit.session.open(sess_dir)
    # relative PYTHONPATH: the servers run in the repository root (cwd)
    env = {"PYTHONPATH": args.engine_path, "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
           "NVSHMEM_DISABLE_NVLS": "1"}
    base = (f"{args.python} -m tinyserve.launch_server --device {args.device} --model-shape {args.shape} "
            f"--context-length 1024 --max-running-requests 8"
            + (f" --token-ms {args.token_ms:g}" if args.device == "cpu" else ""))
    label = gpu_label() if args.device == "cuda" else \
        "the development machine (tinyserve's CPU runner: sleeps for known per-token times, no model)"
    status: dict = {"gpu": label, "shape": args.shape, "steps": {}}
    t_all = time.time()

    def step(name, fn):
        t0 = time.time()
        try:
            fn()
            status["steps"][name] = {"ok": True, "s": round(time.time() - t0, 1)}
        except BaseException as exc:  # keep going: a later step may still produce data
            status["steps"][name] = {"ok": False, "s": round(time.time() - t0, 1),
                                     "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-3000:]}
            print(f"[record] {name} failed: {exc}", flush=True)
            if isinstance(exc, KeyboardInterrupt):
                raise

    def main_server():
        d = session.path("experiments", f"{args.tag}_live_server")
        cmd = f"{base} --attention-backend sdpa --cuda-graph-bs 1,2,4"
        with kit.server("local", cmd, env=env, port=args.port, engine="sglang", session=session,
                        cwd=os.getcwd(), name=f"tinyserve_{args.tag}", progress=False, ready_timeout=300,
                        log=d / "server.log") as s:
            opts = dict(requests=8, warmup=3, repeats=args.repeats, concurrency=(1, 2, 4),
                        max_tokens=args.max_tokens, prompt_tokens=32)
            kit.bench.single_stream(s.url, save=d / "single_stream.json", **opts)
            session.record(d / "single_stream.json", Provenance.measured(
                host="local", how=f"kit.bench.single_stream {json.dumps(opts)}", note=f"server: {cmd}"))
            s.profile(steps=20, name=f"{args.tag}_live_server", parse=False, max_tokens=args.max_tokens,
                      into=d / "traces")
            status["main_server"] = s.describe()
        (d / "server.json").write_text(json.dumps(s.describe(), indent=1) + "\n")

    def pack():
        with tarfile.open(out / "live_session.tar.gz.tmp", "w:gz") as tar:
            tar.add(sess_dir, arcname="session")
        os.replace(out / "live_session.tar.gz.tmp", out / "live_session.tar.gz")

    class OutOfTime(Exception):
        pass

    def after_variant(variant, result):
        print(f"[record] {variant['label']}: {result['status']} {result.get('error', '')[:200]}", flush=True)
        pack()
        if time.time() - t_all > args.deadline:
            raise OutOfTime(f"deadline {args.deadline:g} s reached after variant {variant['label']}")

    def sweep():
        exp = kit.experiment(base + " --cuda-graph-bs 1", flags={"--disable-cuda-graph": [False, True],
                                          "--attention-backend": ["sdpa", "torch_native"],
                                          "--enable-torch-compile": [False, True]},
                             env=env, port=args.port + 1, engine="sglang", session=session, cwd=os.getcwd(),
                             name=f"{args.tag}_graph_backend_compile", repeats=args.repeats, profile=True,
                             profile_steps=10, progress=False, ready_timeout=400,
                             bench={"requests": 6, "warmup": 3, "max_tokens": args.max_tokens, "prompt_tokens": 32},
                             on_variant=after_variant)
        status["experiment"] = repr(exp)

    def env_capture():
        d = session.path("env")
        d.mkdir(exist_ok=True)
        info = {}
        try:
            import torch

            info = {"torch": torch.__version__, "cuda": torch.version.cuda,
                    "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
                    "capability": list(torch.cuda.get_device_capability()) if torch.cuda.is_available() else None}
        except ImportError:
            info = {"torch": None}
        info["python"] = sys.version.split()[0]
        (d / "live_recording.json").write_text(json.dumps(info, indent=1) + "\n")

    step("env", env_capture)
    step("main_server", main_server)
    pack()
    step("experiment", sweep)
    status["total_s"] = round(time.time() - t_all, 1)

    # The servers ran on "local" (this machine): name the machine in the provenance.
    prov = sess_dir / "provenance.json"
    manifest = json.loads(prov.read_text()) if prov.is_file() else {}
    for key, p in (manifest.get("artefacts") or {}).items():
        if p.get("kind") == "measured" and p.get("host") == "local":
            session.record(key, Provenance.measured(host=label, how=f"tools/record_live_session.py: {p.get('how')}",
                                                    when=p.get("when"), note=p.get("note")))
    session.record("env/live_recording.json",
                   Provenance.measured(host=label, how="tools/record_live_session.py (torch)"))
    (out / "status.json").write_text(json.dumps(status, indent=1, default=str) + "\n")
    pack()
    print(json.dumps({k: v for k, v in status.items() if k != "main_server"}, indent=1, default=str)[:6000])
    return 0 if all(s["ok"] for s in status["steps"].values()) else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
