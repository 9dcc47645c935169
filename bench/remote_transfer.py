"""File transfer throughput, parallel fetches, memory, and remote trace summaries (``kit.remote.Transfer``).

Two loopback OpenSSH servers (``kit.testing.SSHServer``, the test fixture) stand for two GPU hosts.
Measured in this one run, on loopback and through ``bench/_delay_relay.py`` (5 ms each way, a 10 ms
round trip):

(a) ``host.get`` of a 500 MB incompressible file against ``scp`` of the same file (rounds interleaved,
    median); extra rows: a 62 MB JSON trace (auto-compressed) and paramiko's ``SFTPClient.get`` (the
    kit's previous transfer) for reference;
(b) 8 files (4 per host, 32 MB each) fetched one at a time with ``host.get`` against
    ``kit.hosts([a, b]).get(files)`` (hosts in parallel, 4 channels per connection);
(c) peak RSS of a fresh process running ``host.get`` of 100 MB, 500 MB and 2 GB files (loopback);
(d) ``kit.profile.load(..., host=)`` of the 8-rank dlrm_kineto trace set: bytes through the TCP
    connection (counted by a relay) against the traces' JSON bytes, and the summary against a local
    load.

Prints one Markdown section on stdout; progress on stderr. Big files live under /tmp and are deleted.
"""
from __future__ import annotations

import gzip
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import kit  # noqa: E402
import kit.profile  # noqa: E402
from kit.testing import SSHServer  # noqa: E402

MB = 1_000_000
DELAY_MS = 5.0
ROUNDS = int(os.environ.get("KIT_BENCH_ROUNDS", "3"))
SHARED = ROOT / ".." / "shared" / "data"
DLRM = SHARED / "traces" / "param" / "dlrm_kineto"
XDIT = SHARED / "traces" / "tracelens" / "inference" / "xdit_sd_3.5" / "profile_trace_rank_0.json.gz"


def say(*a) -> None:
    print("bench:", *a, file=sys.stderr, flush=True)


class Relay:
    """bench/_delay_relay.py in a subprocess: a TCP path with a fixed one-way delay to one sshd."""

    def __init__(self, sshd: SSHServer, delay_ms: float, workdir: str) -> None:
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "_delay_relay.py"), str(sshd.port),
                                      str(delay_ms)], stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline())
        self.known_hosts = os.path.join(workdir, f"kh-{self.port}")
        Path(self.known_hosts).write_text(f"[127.0.0.1]:{self.port} {sshd.host_key_pub}\n")
        self.target = f"{sshd.user}@127.0.0.1:{self.port}"
        self.opts = sshd.connect_options(known_hosts=self.known_hosts)

    def scp_args(self, sshd: SSHServer) -> list[str]:
        return scp_args(sshd, self.port, self.known_hosts)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


class Counter:
    """A plain TCP forwarder that counts the bytes it carries (both directions)."""

    def __init__(self, port: int) -> None:
        self.bytes = 0
        self._lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self._target = port
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            u = socket.create_connection(("127.0.0.1", self._target))
            for s in (c, u):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._pipe, args=(c, u), daemon=True).start()
            threading.Thread(target=self._pipe, args=(u, c), daemon=True).start()

    def _pipe(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while True:
                data = a.recv(1 << 16)
                if not data:
                    break
                with self._lock:
                    self.bytes += len(data)
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def scp_args(sshd: SSHServer, port: int, known_hosts: str) -> list[str]:
    return ["scp", "-q", "-F", os.devnull, "-P", str(port), "-i", sshd.key_path, "-o", "IdentitiesOnly=yes",
            "-o", f"UserKnownHostsFile={known_hosts}", "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes"]


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def make_file(path: str, size: int, random: bool = True) -> None:
    if random:
        subprocess.run(f"head -c {size} /dev/urandom > {path}", shell=True, check=True)
    else:
        with open(path, "wb") as fh:
            fh.truncate(size)  # sparse: zeros, free on disk; the transfer still moves every byte
    os.chmod(path, 0o644)


def throughput(host, sshd: SSHServer, scp: list[str], src: str, size: int, out: str, extra: dict) -> dict:
    """Median MB/s of kit get vs scp (and extras) over interleaved rounds."""
    times: dict[str, list[float]] = {"kit get": [], "scp": [], **{k: [] for k in extra}}
    for r in range(ROUNDS):
        for label in times:
            if os.path.exists(out):
                os.unlink(out)
            if label == "kit get":
                dt = timed(lambda: host.get(src, out, progress=False, resume=False))
            elif label == "scp":
                dt = timed(lambda: subprocess.run(scp + [f"{sshd.ssh_dest}:{src}", out], check=True))
            else:
                if r > 0 and extra[label][1]:
                    continue  # one round is enough for the slow reference
                dt = timed(extra[label][0])
            assert os.path.getsize(out) == size, (label, os.path.getsize(out), size)
            times[label].append(dt)
            say(f"{label}: {size / MB / dt:.0f} MB/s")
    if os.path.exists(out):
        os.unlink(out)
    return {k: size / MB / statistics.median(v) for k, v in times.items()}


def paramiko_get(host, src: str, out: str):
    def run():
        sftp = host._client.get_transport().open_sftp_client()
        try:
            sftp.get(src, out, max_concurrent_prefetch_requests=64)
        finally:
            sftp.close()
    return run


def fan(group_targets: list[tuple[str, dict]], files: list[str], dest: str) -> tuple[float, float]:
    """(one at a time, hosts in parallel) seconds for the 8 files (4 on each host)."""
    seq, par = [], []
    hosts = [kit.connect(t, **o) for t, o in group_targets]
    group = kit.hosts(hosts)
    try:
        for _ in range(ROUNDS):
            shutil.rmtree(dest, ignore_errors=True)
            os.makedirs(dest)

            def one_by_one():
                for i, h in enumerate(hosts):
                    for f in files:
                        h.get(f, os.path.join(dest, f"{i}-{os.path.basename(f)}"), progress=False, resume=False,
                              compress=False)
            seq.append(timed(one_by_one))
            shutil.rmtree(dest, ignore_errors=True)
            rep = None

            def parallel():
                nonlocal rep
                rep = group.get(files, dest, progress=False, resume=False, compress=False)
            par.append(timed(parallel))
            assert rep.ok and len(rep.files) == 2 * len(files), rep
            say(f"8 files: one at a time {seq[-1]:.2f} s, parallel {par[-1]:.2f} s")
    finally:
        group.close()
        shutil.rmtree(dest, ignore_errors=True)
    return statistics.median(seq), statistics.median(par)


RSS_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[4])
import kit
opts = json.loads(sys.argv[1])
host = kit.connect(sys.argv[2], **opts)
host.run("true")

def status(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])

with open("/proc/self/clear_refs", "w") as fh:  # peak RSS := current RSS (ru_maxrss survives exec)
    fh.write("5")
base = status("VmHWM")
t0 = time.perf_counter()
host.get(sys.argv[3], sys.argv[3] + ".got", progress=False, resume=False)
wall = time.perf_counter() - t0
print(json.dumps({"base_kib": base, "peak_kib": status("VmHWM"), "wall": wall}))
"""


def rss(sshd: SSHServer, path: str, size: int) -> dict:
    import json

    make_file(path, size, random=False)
    try:
        out = subprocess.run([sys.executable, "-c", RSS_CHILD, json.dumps(sshd.connect_options()), sshd.target, path,
                              str(ROOT)], capture_output=True, text=True, check=True, timeout=900)
        res = json.loads(out.stdout)
        assert os.path.getsize(path + ".got") == size
    finally:
        for p in (path, path + ".got"):
            if os.path.exists(p):
                os.unlink(p)
    say(f"RSS {size / MB:.0f} MB: {res}")
    return res


def remote_summary(sshd: SSHServer, through_port: int, known_hosts: str, remote_dir: str) -> dict:
    files = sorted(DLRM.glob("*.json.gz"))
    paths = []
    for f in files:
        dst = os.path.join(remote_dir, f.name)
        shutil.copy(f, dst)
        os.chmod(dst, 0o644)
        paths.append(dst)
    reset = kit.connect(sshd.target, **sshd.connect_options())
    reset.run("rm -f ~/.cache/decode-kit/kit-reader-*.pyz", check=True)  # so that "first use" pushes the reader
    reset.close()
    counter = Counter(through_port)
    kh = f"{known_hosts}-{counter.port}"
    Path(kh).write_text(f"[127.0.0.1]:{counter.port} {sshd.host_key_pub}\n")
    host = kit.connect(f"{sshd.user}@127.0.0.1:{counter.port}", **sshd.connect_options(known_hosts=kh))
    try:
        host.run("true")
        b0 = counter.bytes
        t0 = time.perf_counter()
        first = kit.profile.load(f"{remote_dir}/worker*.json.gz", host=host)
        t_first, b_first = time.perf_counter() - t0, counter.bytes - b0
        b0 = counter.bytes
        t0 = time.perf_counter()
        warm = kit.profile.load(f"{remote_dir}/worker*.json.gz", host=host)
        t_warm, b_warm = time.perf_counter() - t0, counter.bytes - b0
    finally:
        host.close()
        counter.sock.close()
    t0 = time.perf_counter()
    local = kit.profile.load(files, cache=False)
    t_local = time.perf_counter() - t0
    json_bytes = sum(local.meta["ranks"][r]["bytes"] for r in local.ranks)
    gz_bytes = sum(f.stat().st_size for f in files)
    same = all(_same_summary(p.summary(ph), local.summary(ph)) for p in (first, warm) for ph in ("all", "decode"))
    return {"json": json_bytes, "gz": gz_bytes, "first": b_first, "warm": b_warm, "t_first": t_first,
            "t_warm": t_warm, "t_local": t_local, "same": same, "engine": warm.meta["remote"][host.name]["json"]}


def _same_summary(a, b) -> bool:
    import pandas.testing as pdt

    try:
        for name in ("categories", "per_rank", "per_step", "top"):
            pdt.assert_frame_equal(getattr(a, name), getattr(b, name))
    except AssertionError:
        return False
    return (a.kernel_time_us, a.wall_time_us, a.allreduce_spread) == (b.kernel_time_us, b.wall_time_us,
                                                                      b.allreduce_spread)


def main() -> int:
    if not DLRM.is_dir() or not XDIT.is_file():
        raise SystemExit(f"shared trace data not found under {SHARED}")
    rows: dict = {}
    with SSHServer() as a, SSHServer() as b, tempfile.TemporaryDirectory(prefix="kit-bench-xfer-", dir="/tmp") as wd:
        big = os.path.join(a.tmp, "big.bin")
        make_file(big, 500 * MB)
        trace = os.path.join(a.tmp, "rank0.trace.json")
        with gzip.open(XDIT, "rb") as src, open(trace, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        os.chmod(trace, 0o644)
        tsize = os.path.getsize(trace)
        files = []  # the two servers run on this machine: both serve the same 4 paths
        for i in range(4):
            files.append(os.path.join(a.tmp, f"shard{i}.bin"))
            make_file(files[-1], 32 * MB)
        relays = {}
        try:
            for name, s in (("a", a), ("b", b)):
                relays[name] = Relay(s, DELAY_MS, wd)
            out = os.path.join(wd, "out.bin")
            for where in ("loopback", "relay"):
                if where == "loopback":
                    host = a.connect()
                    scp = scp_args(a, a.port, a.known_hosts)
                    targets = [(a.target, a.connect_options()), (b.target, b.connect_options())]
                else:
                    host = kit.connect(relays["a"].target, **relays["a"].opts)
                    scp = relays["a"].scp_args(a)
                    targets = [(relays["a"].target, relays["a"].opts), (relays["b"].target, relays["b"].opts)]
                try:
                    host.run("true")
                    say(f"{where}: 500 MB file")
                    extra = {"paramiko SFTPClient.get (previous kit get)": (paramiko_get(host, big, out), True)}
                    rows[(where, "big")] = throughput(host, a, scp, big, 500 * MB, out, extra)
                    say(f"{where}: {tsize / MB:.0f} MB JSON trace")
                    rows[(where, "trace")] = throughput(host, a, scp, trace, tsize, out, {})
                    comp = host.transfer._get(trace, out, progress=False, resume=False, compress="auto")
                    rows[(where, "trace_wire")] = (comp.method, comp.wire_bytes)
                    os.unlink(out)
                finally:
                    host.close()
                say(f"{where}: 8 files from 2 hosts")
                rows[(where, "fan")] = fan(targets, files, os.path.join(wd, "fan"))
                port, kh = (a.port, a.known_hosts) if where == "loopback" else (relays["a"].port,
                                                                                 relays["a"].known_hosts)
                rdir = os.path.join(a.tmp, f"dlrm-{where}")
                os.makedirs(rdir)
                os.chmod(rdir, 0o755)
                say(f"{where}: remote trace summary")
                rows[(where, "remote")] = remote_summary(a, port, kh, rdir)
        finally:
            for r in relays.values():
                r.close()
        for p in [big, trace] + files:
            if os.path.exists(p):
                os.unlink(p)
        say("peak RSS")
        mem = {size: rss(a, os.path.join(a.tmp, f"rss-{size}.bin"), size) for size in (100 * MB, 500 * MB, 2000 * MB)}
    report(rows, mem, tsize)
    return 0


def report(rows: dict, mem: dict, tsize: int) -> None:
    ok = lambda met: "met" if met else "**not met**"  # noqa: E731
    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    print("## Remote file transfer (`bench/remote_transfer.py`)\n")
    print(f"Two loopback OpenSSH `sshd` servers started by `kit.testing.SSHServer` stand for two GPU hosts; "
          f"\"relay\" rows go through `bench/_delay_relay.py` ({DELAY_MS:g} ms each way, {2 * DELAY_MS:g} ms round "
          f"trip; a Python asyncio relay, itself CPU-bound). Throughput: median of {ROUNDS} interleaved rounds "
          f"(one call of each method per round) on {cores} cores shared with other work (1-minute load {load:.1f} at "
          f"the end), MB = 10^6 bytes; file bytes per second (for compressed transfers, the file's bytes, not the "
          f"wire's). kit `get` streams the file over an exec channel (`cat`), text artefacts compressed with the "
          f"host's `zstd -1` and decompressed while written. All figures from this one run.\n")
    print("| path | file | kit `get` (MB/s) | `scp` (MB/s) | kit / scp | extra |")
    print("|---|---|---:|---:|---:|---|")
    for where in ("loopback", "relay"):
        big, tr = rows[(where, "big")], rows[(where, "trace")]
        method, wire = rows[(where, "trace_wire")]
        old = big.get("paramiko SFTPClient.get (previous kit get)")
        print(f"| {where} | 500 MB random (incompressible) | {big['kit get']:.0f} | {big['scp']:.0f} | "
              f"{big['kit get'] / big['scp']:.2f}x | paramiko `SFTPClient.get` (the previous kit `get`, 1 round): "
              f"{old:.0f} MB/s |")
        print(f"| {where} | {tsize / MB:.0f} MB Kineto JSON (xdit_sd_3.5 rank 0) | {tr['kit get']:.0f} | "
              f"{tr['scp']:.0f} | {tr['kit get'] / tr['scp']:.2f}x | sent as {method}: {wire / MB:.1f} MB on the "
              f"wire ({100 * wire / tsize:.1f}%) |")
    print()
    print("| path | 8 files x 32 MB, 4 on each of 2 hosts | one at a time (s) | `kit.hosts([a, b]).get` (s) "
          "| speed-up |")
    print("|---|---|---:|---:|---:|")
    for where in ("loopback", "relay"):
        seq, par = rows[(where, "fan")]
        print(f"| {where} | random data, `compress=False` | {seq:.2f} | {par:.2f} | {seq / par:.2f}x |")
    print()
    print("| file (sparse, zeros; raw transfer), fresh process, loopback | wall (s) | RSS before the get (MiB) "
          "| peak RSS during it (MiB) | growth (MiB) |")
    print("|---|---:|---:|---:|---:|")
    for size, m in mem.items():
        print(f"| {size / MB:.0f} MB | {m['wall']:.1f} | {m['base_kib'] / 1024:.0f} | {m['peak_kib'] / 1024:.0f} | "
              f"{(m['peak_kib'] - m['base_kib']) / 1024:.1f} |")
    print()
    print("| path | dlrm_kineto, 8 ranks: remote `kit.profile.load(..., host=)` | bytes through the connection | "
          "% of JSON bytes | wall (s) | summary equal to a local load |")
    print("|---|---|---:|---:|---:|---|")
    for where in ("loopback", "relay"):
        r = rows[(where, "remote")]
        print(f"| {where} | first use (reader pushed) | {r['first']:,} | {100 * r['first'] / r['json']:.2f}% | "
              f"{r['t_first']:.2f} | {'yes' if r['same'] else '**no**'} |")
        print(f"| {where} | reader cached on the host | {r['warm']:,} | {100 * r['warm'] / r['json']:.2f}% | "
              f"{r['t_warm']:.2f} | {'yes' if r['same'] else '**no**'} |")
    r0 = rows[("loopback", "remote")]
    print(f"\nThe 8 traces hold {r0['json']:,} bytes of JSON ({r0['gz']:,} bytes gzipped on disk); a local load of "
          f"the same files took {r0['t_local']:.2f} s. The host's Python parsed them with: {r0['engine']}. Bytes "
          f"through the connection are counted by a TCP forwarder between kit and sshd (both directions, SSH "
          f"framing included, connection set-up excluded).\n")
    print("| target | measured | result |")
    print("|---|---|---|")
    for where in ("loopback", "relay"):
        big = rows[(where, "big")]
        ratio = big["kit get"] / big["scp"]
        print(f"| {where}: `get` >= 0.7x `scp` throughput, 500 MB file | {ratio:.2f}x | {ok(ratio >= 0.7)} |")
    for where in ("loopback", "relay"):
        seq, par = rows[(where, "fan")]
        print(f"| {where}: 8 files from 2 hosts in parallel >= 1.5x one at a time | {seq / par:.2f}x | "
              f"{ok(seq / par >= 1.5)} |")
    growth = [(m["peak_kib"] - m["base_kib"]) / 1024 for m in mem.values()]
    flat = max(growth) <= max(64.0, 1.5 * min(growth))
    print(f"| peak RSS flat from 100 MB to 2 GB (growth during the get within 64 MiB, or 1.5x) | "
          f"{' / '.join(f'{g:.1f}' for g in growth)} MiB | {ok(flat)} |")
    for where in ("loopback", "relay"):
        r = rows[(where, "remote")]
        share = 100 * r["warm"] / r["json"]
        first = 100 * r["first"] / r["json"]
        print(f"| {where}: remote-summarised 8-rank trace set moves < 5% of its JSON bytes, same summary | "
              f"{share:.2f}% (first use {first:.2f}%), summary {'equal' if r['same'] else 'DIFFERENT'} | "
              f"{ok(first < 5 and r['same'])} |")


if __name__ == "__main__":
    sys.exit(main())
