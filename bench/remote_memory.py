"""Memory and speed of long command streams and large stdin over SSH (``kit run`` / ``%%remote`` path).

Starts the loopback sshd the tests use (kit.testing.SSHServer) and measures, in this one run:
- a streamed ``SSHHost.run("head -c N /dev/zero", stream=True)`` for N = 100 MB ... 2 GB, each in a
  fresh process writing to a counting ``sys.stdout``: wall time, throughput, peak RSS and its growth
  over the RSS before the stream (peak reset with /proc/self/clear_refs after a warm-up);
- anchor: the OpenSSH client streaming the same 2 GB to /dev/null (``ssh host head -c N /dev/zero``);
- stdin: ``run("wc -c", input=40 MB)`` on SSHHost and LocalHost, and, as the anchor for what the kit
  did before, paramiko's ``Channel.sendall`` of the same 40 MB buffer (every packet copied the remainder).
Prints one Markdown section (stdout); progress on stderr.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import kit
from kit.testing import STREAM_PROBE, SSHServer

ROOT = Path(__file__).resolve().parent.parent

SIZES_MB = [int(x) for x in os.environ.get("KIT_BENCH_STREAM_MB", "100,500,1000,2000").split(",")]
MB = 1_000_000
STDIN_MB = int(os.environ.get("KIT_BENCH_STDIN_MB", "40"))

_CHILD = STREAM_PROBE


def _stream(server: SSHServer, size: int) -> dict:
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(server.connect_options()), server.target,
                           str(size)], capture_output=True, text=True, timeout=1900, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    if proc.returncode != 0:
        raise SystemExit(f"streamed run of {size} bytes failed: {proc.stderr[-2000:]}")
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    if got["chars"] != size or got["exit"] != 0:
        raise SystemExit(f"streamed run of {size} bytes: got {got}")
    return got


def _ssh_anchor(server: SSHServer, size: int) -> float:
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as null:
        subprocess.run(["ssh", *server.ssh_args(), server.ssh_dest, f"head -c {size} /dev/zero"], stdout=null,
                       check=True, timeout=1800)
    return time.perf_counter() - t0


def _sendall_anchor(server: SSHServer, size: int) -> float:
    """What ``run(input=...)`` did before: one ``Channel.sendall`` of the whole buffer."""
    host = server.connect()
    try:
        chan = host._client.get_transport().open_session()
        chan.exec_command("cat > /dev/null")
        data = b"z" * size
        t0 = time.perf_counter()
        chan.sendall(data)
        chan.shutdown_write()
        chan.recv_exit_status()
        took = time.perf_counter() - t0
        chan.close()
        return took
    finally:
        host.close()


def main() -> int:
    rows = []
    with SSHServer() as server:
        for mb in SIZES_MB:
            got = _stream(server, mb * MB)
            rows.append((mb, got))
            print(f"bench: stream {mb} MB: {got['wall']:.1f} s, peak RSS {got['peak'] / 2**20:.0f} MiB",
                  file=sys.stderr, flush=True)
        top = SIZES_MB[-1] * MB
        ssh_s = _ssh_anchor(server, top)
        print(f"bench: ssh binary {SIZES_MB[-1]} MB: {ssh_s:.1f} s", file=sys.stderr, flush=True)
        data = b"y" * (STDIN_MB * MB)
        stdin = {}
        for label, host in (("SSHHost", server.connect()), ("LocalHost", kit.connect("local"))):
            t0 = time.perf_counter()
            res = host.run("wc -c", input=data, timeout=600)
            stdin[label] = time.perf_counter() - t0
            assert res.stdout.strip() == str(len(data)), res
            host.close()
        old = _sendall_anchor(server, STDIN_MB * MB)
        print(f"bench: stdin {stdin}, former sendall path {old:.1f} s", file=sys.stderr, flush=True)

    first, last = rows[0][1], rows[-1][1]
    growth = [(g["peak"] - g["rss_before"]) / 2**20 for _, g in rows]
    lines = [
        "## Remote streams and stdin: memory and speed (`bench/remote_memory.py`)",
        "",
        "Loopback OpenSSH `sshd` started by `kit.testing.SSHServer` (default re-key settings), "
        "`SSHHost.run(\"head -c N /dev/zero\", stream=True)` in a fresh process per size, output going to a "
        "counting `sys.stdout`. Peak RSS = `VmHWM` of that process, reset after a 4 MB warm-up run; growth = "
        f"peak − RSS just before the stream. All figures from this one run; 1-minute load average "
        f"{os.getloadavg()[0]:.1f} at the end (2 shared cores: compare ratios, not absolute times).",
        "",
        "| streamed bytes | wall (s) | MB/s | RSS before (MiB) | peak RSS (MiB) | growth (MiB) "
        "| key exchanges during the stream |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (mb, g), gr in zip(rows, growth):
        lines.append(f"| {mb} MB | {g['wall']:.1f} | {mb / g['wall']:.0f} | {g['rss_before'] / 2**20:.0f} | "
                     f"{g['peak'] / 2**20:.0f} | {gr:.1f} | {g['kex']} |")
    ssh_mbs = SIZES_MB[-1] / ssh_s
    kit_mbs = SIZES_MB[-1] / last["wall"]
    lines += [
        f"| {SIZES_MB[-1]} MB, anchor: OpenSSH `ssh` client to /dev/null | {ssh_s:.1f} | {ssh_mbs:.0f} | | | | |",
        "",
        f"Throughput: kit {kit_mbs:.0f} MB/s = {kit_mbs / ssh_mbs:.2f}x the OpenSSH client on {SIZES_MB[-1]} MB "
        "(paramiko decrypts in Python-driven packets; both share the same 2 cores with sshd).",
        "",
        "| stdin | wall (s) |",
        "|---|---:|",
        f"| `SSHHost.run(\"wc -c\", input={STDIN_MB} MB)` | {stdin['SSHHost']:.2f} |",
        f"| `LocalHost.run(\"wc -c\", input={STDIN_MB} MB)` | {stdin['LocalHost']:.2f} |",
        f"| anchor, the former path: paramiko `Channel.sendall` of the whole {STDIN_MB} MB buffer | {old:.2f} |",
        "",
        "| target | measured | result |",
        "|---|---|---|",
    ]
    flat = growth[-1] <= max(1.5 * growth[0], growth[0] + 16)
    lines.append(f"| peak RSS flat from {SIZES_MB[0]} MB to {SIZES_MB[-1]} MB streamed (growth within 1.5x or "
                 f"+16 MiB) | {growth[0]:.1f} -> {growth[-1]:.1f} MiB growth; peak {first['peak'] / 2**20:.0f} -> "
                 f"{last['peak'] / 2**20:.0f} MiB | {'met' if flat else 'NOT met'} |")
    lines.append(f"| streams of any length: {SIZES_MB[-1]} MB streamed completely | all bytes counted | met |")
    faster = old / stdin["SSHHost"]
    lines.append(f"| {STDIN_MB} MB of stdin over SSH >= 5x faster than the former path | "
                 f"{faster:.1f}x ({stdin['SSHHost']:.2f} s vs {old:.2f} s; SSH/local "
                 f"{stdin['SSHHost'] / stdin['LocalHost']:.1f}x) | {'met' if faster >= 5 else 'NOT met'} |")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
