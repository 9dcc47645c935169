"""Per-command latency of kit's persistent SSH host against the OpenSSH client, and 8-host fan-out.

Starts the same loopback sshd the tests use (kit.testing.SSHServer) and measures, in this one run:
(a) kit ``SSHHost.run("true")``, one persistent connection;
(b) ``ssh`` with ControlMaster/ControlPersist, master warmed before timing;
(c) a new ``ssh`` process (full handshake) per command;
(d) ``kit.hosts([...] * 8).run("true")``: 8 connections, one command each, in parallel.
Prints one Markdown section (stdout); progress on stderr. ``N`` commands per method (default 200).
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

import kit
from kit.testing import SSHServer

N = int(os.environ.get("KIT_BENCH_N", "200"))
FAN_ROUNDS = int(os.environ.get("KIT_BENCH_FAN_ROUNDS", "50"))


def _interleaved_ms(fns: dict, n: int) -> dict[str, float]:
    """Median ms of each function, run round-robin (one call of each per round) so that load from
    anything else on the machine falls on all methods alike."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(n):
        for label, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[label].append(time.perf_counter() - t0)
    out = {k: statistics.median(v) * 1000 for k, v in times.items()}
    for k, v in out.items():
        print(f"bench: {k}: median {v:.2f} ms over {n}", file=sys.stderr, flush=True)
    return out


def _ssh(args: list[str]) -> None:
    res = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    if res.returncode != 0:
        raise SystemExit(f"ssh failed ({res.returncode}): {res.stderr.decode(errors='replace').strip()}")


def _busy_cpu_s() -> float:
    """Machine-wide busy CPU seconds so far (all cores), from /proc/stat."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    with SSHServer() as sshd, tempfile.TemporaryDirectory(prefix="kit-cm-") as cm_dir:
        base = ["ssh", *sshd.ssh_args()]
        cm = base + ["-o", "ControlMaster=auto", "-o", f"ControlPath={cm_dir}/cm-%C", "-o", "ControlPersist=120"]
        host = sshd.connect()
        local = kit.connect("local")
        group = kit.hosts([sshd.target] * 8, **sshd.connect_options())
        try:
            host.run("true", check=True)  # warm
            _ssh(cm + [sshd.ssh_dest, "true"])  # start the master (not timed)
            warm = group.run("true")
            if not warm.ok:
                raise SystemExit(f"fan-out warm-up failed: {warm!r}")

            def fan() -> None:
                res = group.run("true")
                if not res.ok:
                    raise SystemExit(f"fan-out failed: {res!r}")

            seq = _interleaved_ms({
                "(a) kit SSHHost": lambda: host.run("true", check=True),
                "(b) ssh ControlMaster": lambda: _ssh(cm + [sshd.ssh_dest, "true"]),
                "(c) new ssh per command": lambda: _ssh(base + [sshd.ssh_dest, "true"]),
                "LocalHost": lambda: local.run("true", check=True),
            }, N)
            busy0, self0 = _busy_cpu_s(), time.process_time()
            par = _interleaved_ms({"(d) 8-host fan-out": fan,
                                   "single command": lambda: host.run("true", check=True)}, FAN_ROUNDS)
            busy = (_busy_cpu_s() - busy0) / (FAN_ROUNDS * 9) * 1000
            client = (time.process_time() - self0) / (FAN_ROUNDS * 9) * 1000
        finally:
            subprocess.run(cm + ["-O", "exit", sshd.ssh_dest], capture_output=True, timeout=30)
            group.close()
            host.close()
    a, b, c, loc = (seq[k] for k in ("(a) kit SSHHost", "(b) ssh ControlMaster", "(c) new ssh per command", "LocalHost"))
    d, single = par["(d) 8-host fan-out"], par["single command"]
    ratio_ab, ratio_ca, ratio_d = a / b, c / a, d / single
    cores = os.cpu_count() or 1
    floor = 8 * busy / cores  # the fan-out cannot finish faster than its CPU work spread over all cores
    ok = lambda met: "met" if met else "**not met**"  # noqa: E731
    print("## Remote command latency (`bench/remote_latency.py`)\n")
    print(f"Loopback OpenSSH `sshd` started by `kit.testing.SSHServer` (test user with a clean shell rc), "
          f"command `true`, median of {N} sequential runs per method, the methods taking turns (one call of "
          f"each per round) so that other load on the machine falls on all of them alike; fan-out: median of "
          f"{FAN_ROUNDS} rounds, alternating with the single command. All figures from this one run.\n")
    print("| method | median per command |")
    print("|---|---|")
    print(f"| (a) kit `SSHHost.run`, one persistent connection (TCP_NODELAY) | {a:.2f} ms |")
    print(f"| (b) `ssh` with ControlMaster/ControlPersist (warmed) | {b:.2f} ms |")
    print(f"| (c) new `ssh` process per command | {c:.2f} ms |")
    print(f"| (d) `kit.hosts([...]*8).run` — 8 connections, one command each, in parallel | {d:.2f} ms |")
    print(f"| single command on one kit connection (anchor for d, same rounds) | {single:.2f} ms |")
    print(f"| extra: `LocalHost.run` (subprocess) | {loc:.2f} ms |")
    print()
    print(f"CPU cost during the fan-out (machine-wide, from `/proc/stat`): {busy:.2f} CPU-ms per command, of which "
          f"{client:.2f} ms in the kit client process; with {cores} cores, 8 commands need at least "
          f"{floor:.2f} ms ({floor / single:.2f}x the single command) however they are scheduled. On loopback the "
          f"client and sshd share these cores, so the fan-out target measures CPU, not network waits; against "
          f"real hosts each command's round trip is spent waiting, which parallel connections overlap.\n")
    print("| target | measured | result |")
    print("|---|---|---|")
    print(f"| (a) <= 0.6x (b) | {ratio_ab:.2f}x | {ok(ratio_ab <= 0.6)} |")
    print(f"| (a) >= 30x faster than (c) | {ratio_ca:.1f}x | {ok(ratio_ca >= 30)} |")
    print(f"| 8-host fan-out <= 2x a single command | {ratio_d:.2f}x | {ok(ratio_d <= 2.0)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
