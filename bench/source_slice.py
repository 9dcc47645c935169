"""Benchmark: kit.source slicing over SSH vs. `ssh host sed -n` through a warmed OpenSSH ControlMaster.

The investigation pattern the kit replaces is a loop of `ssh gpu 'sed -n "A,Bp" .../server_args.py'`.
Here, on a loopback OpenSSH sshd (kit.testing.SSHServer, as the tests use), one ~250 KB Python file is
generated deterministically (tinyserve's server_args.py repeated with numbered class names) and read:

- kit: `kit.source` over one SSHHost, cache cleared first (so the one transfer and the one
  `ast.parse` are inside the timing): 20 `slice` calls on different ranges + 5 `find` calls.
- anchor: 20 `ssh ... sed -n 'A,Bp' FILE` processes through a ControlMaster that was warmed (one
  `ssh ... true`) before timing, the fastest way to shell out to OpenSSH.

Each workload runs 5 times alternately; the table reports medians. Target: kit total <= 0.5x the
ControlMaster loop. Progress goes to stderr, the Markdown section to stdout.
"""
from __future__ import annotations

import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kit import source
from kit.testing import SSHServer  # noqa: E402

SEED_FILE = ROOT / "notebooks" / "sample" / "engine" / "tinyserve" / "srt" / "server_args.py"
TARGET_BYTES = 250_000
REPEATS = 7
N_SLICES = 20
FIND_SYMBOLS = ("attention_backend", "sm100_default_attention_backend", "moe_runner_backend", "page_size",
                "speculative_algorithm")
TARGET_RATIO = 0.5


def log(msg: str) -> None:
    print(f"source_slice: {msg}", file=sys.stderr, flush=True)


def make_big_file(directory: Path) -> Path:
    """tinyserve's server_args.py repeated, class renamed per copy, until >= 250 KB (deterministic)."""
    seed = SEED_FILE.read_text()
    parts, i = [], 0
    while sum(len(p) for p in parts) < TARGET_BYTES:
        parts.append(seed.replace("ServerArgs", f"ServerArgs{i}").replace("def prepare_server_args",
                                                                          f"def prepare_server_args_{i}")
                     .replace("def resolved_defaults", f"def resolved_defaults_{i}")
                     .replace("def _default_mem_fraction", f"def _default_mem_fraction_{i}")
                     .replace("def _env_flag", f"def _env_flag_{i}"))
        i += 1
    path = directory / "big_server_args.py"
    path.write_text("\n".join(parts))
    path.chmod(0o644)
    return path


def ranges(total_lines: int) -> list[tuple[int, int]]:
    step = max(total_lines // N_SLICES, 40)
    return [(1 + k * step, 1 + k * step + 30) for k in range(N_SLICES)]


def run_kit(host, path: str, spans: list[tuple[int, int]]) -> tuple[float, object]:
    source.cache_clear()
    t0 = time.perf_counter()
    for a, b in spans:
        source.slice(host, path, a, b)
    for sym in FIND_SYMBOLS:
        source.find(host, path, sym)
    took = time.perf_counter() - t0
    return took, source.cache_info()


def run_kit_warm(host, path: str, spans: list[tuple[int, int]]) -> float:
    """Same calls with the file already cached: only the 25 stats cross the wire."""
    t0 = time.perf_counter()
    for a, b in spans:
        source.slice(host, path, a, b)
    for sym in FIND_SYMBOLS:
        source.find(host, path, sym)
    return time.perf_counter() - t0


def run_controlmaster(ssh: list[str], dest: str, path: str, spans: list[tuple[int, int]]) -> float:
    t0 = time.perf_counter()
    for a, b in spans:
        proc = subprocess.run([*ssh, dest, f"sed -n '{a},{b}p' {shlex.quote(path)}"], capture_output=True,
                              text=True, timeout=60)
        if proc.returncode != 0 or not proc.stdout:
            raise RuntimeError(f"ssh sed failed: {proc.stderr.strip()}")
    return time.perf_counter() - t0


def main() -> int:
    with SSHServer() as server, tempfile.TemporaryDirectory(dir=server.tmp) as tmp:
        Path(tmp).chmod(0o755)
        big = make_big_file(Path(tmp))
        size = big.stat().st_size
        total = len(big.read_text().splitlines())
        spans = ranges(total)
        log(f"sshd at {server.target}; file {size} bytes, {total} lines")
        cm_dir = tempfile.mkdtemp(prefix="kit-cm-")
        ssh = ["ssh", *server.ssh_args(), "-o", "ControlMaster=auto", "-o", f"ControlPath={cm_dir}/cm-%C",
               "-o", "ControlPersist=120"]
        host = server.connect()
        try:
            warm = subprocess.run([*ssh, server.ssh_dest, "true"], capture_output=True, text=True, timeout=60)
            if warm.returncode != 0:
                raise RuntimeError(f"could not warm the ControlMaster: {warm.stderr.strip()}")
            host.run("true", timeout=30)  # the SSH session is open before timing, as the master is
            # The outputs must agree before anything is timed.
            a, b = spans[3]
            ref = subprocess.run([*ssh, server.ssh_dest, f"sed -n '{a},{b}p' {shlex.quote(str(big))}"],
                                 capture_output=True, text=True, timeout=60).stdout
            assert "\n".join(source.slice(host, str(big), a, b).lines) + "\n" == ref, "kit slice != sed -n"
            kit_t, cm_t, warm_t, infos = [], [], [], []
            for r in range(REPEATS):
                took, info = run_kit(host, str(big), spans)
                kit_t.append(took)
                infos.append(info)
                warm_t.append(run_kit_warm(host, str(big), spans))
                cm_t.append(run_controlmaster(ssh, server.ssh_dest, str(big), spans))
                log(f"repeat {r + 1}/{REPEATS}: kit {took * 1e3:.1f} ms, kit warm {warm_t[-1] * 1e3:.1f} ms, "
                    f"ControlMaster {cm_t[-1] * 1e3:.1f} ms")
        finally:
            host.close()
            subprocess.run([*ssh, "-O", "exit", server.ssh_dest], capture_output=True, timeout=30)
            subprocess.run(["rm", "-rf", cm_dir], check=False)
    kit_med, cm_med, warm_med = (statistics.median(x) for x in (kit_t, cm_t, warm_t))
    info = infos[-1]
    ratio = kit_med / cm_med
    met = "met" if ratio <= TARGET_RATIO else "NOT met"
    print("## Source slicing over SSH (`bench/source_slice.py`)\n")
    print(f"One generated Python file of {size / 1024:.0f} KiB ({total} lines: tinyserve's `server_args.py` "
          "repeated with numbered class names, written to a temp dir) on a loopback OpenSSH sshd "
          "(`kit.testing.SSHServer`). kit: 20 `kit.source.slice` (31 lines each, spread over the file) + 5 "
          "`kit.source.find` over one `SSHHost`, cache cleared before each run so the transfer and the AST "
          "parse are timed. Anchor: 20 `ssh host sed -n 'A,Bp' FILE` through a ControlMaster warmed before "
          f"timing. Medians of {REPEATS} alternating runs; connection set-up excluded on both sides.\n")
    print("| workload | median total | per call | host round trips |")
    print("|---|---|---|---|")
    print(f"| kit, cold cache (20 slices + 5 finds) | {kit_med * 1e3:.1f} ms | {kit_med / 25 * 1e3:.2f} ms | "
          f"{info.stats} stats + {info.transfers} transfer ({info.bytes_transferred / 1024:.0f} KiB), "
          f"{info.parses} AST parse |")
    print(f"| kit, file already cached (same 25 calls) | {warm_med * 1e3:.1f} ms | {warm_med / 25 * 1e3:.2f} ms | "
          "25 stats |")
    print(f"| anchor: 20 × `ssh host sed -n` via ControlMaster | {cm_med * 1e3:.1f} ms | "
          f"{cm_med / N_SLICES * 1e3:.2f} ms | 20 ssh processes |")
    print()
    print(f"- Ratio kit (cold) / ControlMaster loop: **{ratio:.2f}x** (target <= {TARGET_RATIO}x: **{met}**).")
    print(f"- Ratio kit (cached) / ControlMaster loop: {warm_med / cm_med:.2f}x.")
    print("- The kit side also did 5 `find`s (AST walks) that the anchor does not do at all.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
