"""Per-command latency of kit's persistent SSH host against the OpenSSH client, and 8-host fan-out.

Starts the same loopback sshd the tests use (kit.testing.SSHServer) and measures, in this one run:
(a) kit ``SSHHost.run("true")``, one persistent connection;
(b) ``ssh`` with ControlMaster/ControlPersist, master warmed before timing;
(c) a new ``ssh`` process (full handshake) per command;
(d) ``kit.hosts([...] * 8).run("true")``: 8 connections, one command each, in parallel;
and, as extra context, the single command and the fan-out through a relay that adds a network delay.
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
DELAY_MS = 5.0  # one-way latency added by bench/_delay_relay.py for the emulated-network rows


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


def _tree_cpu_s(root: int) -> float:
    """CPU seconds used by process ``root`` and all its live descendants, including the children they
    already reaped (cutime/cstime): for sshd that is every connection, session and command it ran."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        f = data[data.rfind(b")") + 2:].split()
        parent[int(entry)] = int(f[1])
        cpu[int(entry)] = sum(int(x) for x in f[11:15]) / tick
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0.0)
        todo.extend(p for p, pp in parent.items() if pp == pid)
    return total


def _emulated_network(sshd, workdir: str) -> dict[str, float]:
    """Single command vs 8-host fan-out through a relay adding DELAY_MS each way (a real host's RTT)."""
    relay = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "_delay_relay.py"),
                              str(sshd.port), str(DELAY_MS)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(relay.stdout.readline())
        kh = os.path.join(workdir, "known_hosts_relay")
        with open(kh, "w") as fh:
            fh.write(f"[127.0.0.1]:{port} {sshd.host_key_pub}\n")
        target = f"{sshd.user}@127.0.0.1:{port}"
        opts = sshd.connect_options(known_hosts=kh)
        host = kit.connect(target, **opts)
        group = kit.hosts([target] * 8, **opts)
        try:
            host.run("true", check=True)
            if not group.run("true").ok:
                raise SystemExit("fan-out through the delay relay failed")

            def fan() -> None:
                if not group.run("true").ok:
                    raise SystemExit("fan-out through the delay relay failed")
            rounds = max(10, FAN_ROUNDS // 2)
            return _interleaved_ms({"relay: single command": lambda: host.run("true", check=True),
                                    "relay: 8-host fan-out": fan}, rounds)
        finally:
            group.close()
            host.close()
    finally:
        relay.terminate()
        relay.wait(10)


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
            server0, self0 = _tree_cpu_s(sshd.pid), time.process_time()
            par = _interleaved_ms({"(d) 8-host fan-out": fan,
                                   "single command": lambda: host.run("true", check=True)}, FAN_ROUNDS)
            server = (_tree_cpu_s(sshd.pid) - server0) / (FAN_ROUNDS * 9) * 1000
            client = (time.process_time() - self0) / (FAN_ROUNDS * 9) * 1000
            busy = server + client
        finally:
            subprocess.run(cm + ["-O", "exit", sshd.ssh_dest], capture_output=True, timeout=30)
            group.close()
            host.close()
        wan = _emulated_network(sshd, cm_dir)
    a, b, c, loc = (seq[k] for k in ("(a) kit SSHHost", "(b) ssh ControlMaster", "(c) new ssh per command",
                                     "LocalHost"))
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
    print(f"CPU cost per command during the fan-out rounds (from `/proc`): {client:.2f} ms in the kit client "
          f"process + {server:.2f} ms in sshd and the commands it ran = {busy:.2f} CPU-ms. With {cores} cores "
          f"shared by client and server, 8 commands need at least {floor:.2f} ms of machine time "
          f"({floor / single:.2f}x the single command) however they are scheduled: on loopback the fan-out "
          f"target measures CPU, not network waits. Against real hosts each command is mostly a network round "
          f"trip spent waiting, which the parallel connections overlap.\n")
    ws, wd = wan["relay: single command"], wan["relay: 8-host fan-out"]
    print(f"Extra, not a target: the same single command and 8-host fan-out through a local TCP relay that "
          f"delays every byte by {DELAY_MS:g} ms each way ({2 * DELAY_MS:g} ms round trip, `bench/_delay_relay.py`; "
          f"the kernel here has no `netem`), i.e. hosts across a network: single command {ws:.2f} ms, "
          f"8-host fan-out {wd:.2f} ms, ratio {wd / ws:.2f}x.\n")
    print("| target | measured | result |")
    print("|---|---|---|")
    print(f"| (a) <= 0.6x (b) | {ratio_ab:.2f}x | {ok(ratio_ab <= 0.6)} |")
    print(f"| (a) >= 30x faster than (c) | {ratio_ca:.1f}x | {ok(ratio_ca >= 30)} |")
    print(f"| 8-host fan-out <= 2x a single command | {ratio_d:.2f}x | {ok(ratio_d <= 2.0)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
