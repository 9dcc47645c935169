"""kit.remote.Transfer over the real sshd fixture: cut and resumed downloads, many files with failures
among them, hosts without zstd, flat memory, and hosts in parallel."""
from __future__ import annotations

import hashlib
import os
import shlex
import threading
import time
import tracemalloc

import pytest

import kit
from kit.errors import ConnectError, RemoteError, RemoteFileError
from kit.remote import Transfer, TransferReport

pytestmark = pytest.mark.ssh


@pytest.fixture
def host(sshd):
    h = sshd.connect()
    yield h
    h.close()


@pytest.fixture
def scratch(host, sshd):
    return host.run(f"mktemp -d -p {shlex.quote(sshd.tmp)} xfer.XXXXXX", check=True).stdout.strip()


def _json_text(n_bytes: int) -> bytes:
    """A Kineto-like JSON document of about ``n_bytes`` (compressible text, as real traces are)."""
    row = ('{"ph": "X", "cat": "kernel", "name": "void gemm_kernel<%d>(float*)", "pid": 0, "tid": 7, '
           '"ts": %d.125, "dur": %d.5, "args": {"device": 0, "stream": 7, "correlation": %d}},\n')
    parts, size, i = [b'{"traceEvents": [\n'], 0, 0
    while size < n_bytes:
        line = (row % (i % 97, 1_000_000 + 13 * i, i % 50, i)).encode()
        parts.append(line)
        size += len(line)
        i += 1
    parts.append(b'{"ph": "i", "name": "end", "ts": 0}]}\n')
    return b"".join(parts)


def _write_remote(sshd, path: str, data: bytes) -> None:
    # the fixture's tmp is on this machine: write directly, readable by the login user
    with open(path, "wb") as fh:
        fh.write(data)
    os.chmod(path, 0o644)


def _sha(path) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


@pytest.mark.parametrize("compress", [False, "zstd"])
def test_a_cut_download_resumes_from_what_arrived(sshd, host, scratch, tmp_path, compress, monkeypatch):
    import kit.remote._transfer as xfer

    real_out = xfer._Sink._out

    def slow_out(self, data):  # a slow network: ~20 MB/s, so the cut lands mid-transfer
        time.sleep(len(data) / 20e6)
        real_out(self, data)

    monkeypatch.setattr(xfer._Sink, "_out", slow_out)
    # text that compresses only ~2x (hex), so the compressed stream is far bigger than the SSH window
    data = os.urandom(12 << 20) if compress is False else b'{"blob": "%s"}\n' % os.urandom(8 << 20).hex().encode()
    remote = f"{scratch}/big {compress}.json"
    _write_remote(sshd, remote, data)
    local = tmp_path / "big.json"
    t = Transfer(host)
    box: dict = {}
    runner = threading.Thread(target=lambda: box.setdefault("row", t._get(remote, str(local), progress=False,
                                                                          resume=True, compress=compress)))
    runner.start()
    deadline = time.monotonic() + 60
    part = None
    while time.monotonic() < deadline and runner.is_alive():
        parts = [p for p in tmp_path.iterdir() if p.name.endswith(".part")]
        if parts and parts[0].stat().st_size > (1 << 20):
            part = parts[0]
            break
        time.sleep(0.002)
    assert part is not None, "the transfer finished before it could be cut; make the file bigger"
    sshd.drop_connections()  # the network goes away mid-transfer
    runner.join(60)
    row = box["row"]
    assert isinstance(row.error, ConnectError) and "connection lost" in str(row.error)
    assert not local.exists()
    cut_at = part.stat().st_size
    monkeypatch.setattr(xfer._Sink, "_out", real_out)
    assert 0 < cut_at < len(data)
    again = t._get(remote, str(local), progress=False, resume=True, compress=compress)
    assert again.ok, again.error
    assert again.resumed_from == cut_at and again.method == ("cat" if compress is False else "zstd")
    assert _sha(local) == hashlib.sha256(data).hexdigest()
    assert [p.name for p in tmp_path.iterdir()] == ["big.json"]  # the partial was renamed into place
    # same size and mtime as the remote file now: a third get is a no-op
    third = t._get(remote, str(local), progress=False, resume=True, compress=compress)
    assert third.method == "skipped" and third.wire_bytes == 0
    # a new version of the remote file is fetched again, and a stale partial of the old one is dropped
    (tmp_path / part.name).write_bytes(b"stale")
    _write_remote(sshd, remote, data[: len(data) // 2])
    os.utime(remote, (time.time() + 5, time.time() + 5))
    fourth = t._get(remote, str(local), progress=False, resume=True, compress=compress)
    assert fourth.ok and fourth.resumed_from == 0 and local.stat().st_size == len(data) // 2
    assert [p.name for p in tmp_path.iterdir()] == ["big.json"]


def test_text_artefacts_travel_compressed_and_binary_raw(sshd, host, scratch, tmp_path):
    text = _json_text(6 << 20)
    _write_remote(sshd, f"{scratch}/rank0.trace.json", text)
    _write_remote(sshd, f"{scratch}/weights.bin", os.urandom(3 << 20))
    rep = host.get_many([f"{scratch}/rank0.trace.json", f"{scratch}/weights.bin"], str(tmp_path), progress=False)
    assert rep.ok and [r.method for r in rep] == ["zstd", "cat"]
    assert rep[0].wire_bytes < len(text) / 5 and rep[1].wire_bytes == 3 << 20
    assert (tmp_path / "rank0.trace.json").read_bytes() == text
    assert host.read_bytes(f"{scratch}/rank0.trace.json") == text  # read_bytes takes the same path


def test_many_files_one_failing_does_not_lose_the_others(sshd, host, scratch, tmp_path):
    names = []
    for i in range(6):
        d = f"{scratch}/rank{i}"
        os.makedirs(d)
        os.chmod(d, 0o755)
        _write_remote(sshd, f"{d}/trace.json", _json_text(200_000 + i))
        names.append(f"{d}/trace.json")
    os.makedirs(f"{scratch}/adir/trace.json")  # a directory where a file is expected
    unreadable = f"{scratch}/secret.json"
    _write_remote(sshd, unreadable, b"{}")
    os.chmod(unreadable, 0o000)
    asked = names[:3] + [f"{scratch}/missing.json", f"{scratch}/adir/trace.json", unreadable] + names[3:]
    rep = host.get_many(asked, str(tmp_path / "out"), progress=False, workers=4)
    assert isinstance(rep, TransferReport) and len(rep) == len(asked) and not rep.ok
    assert [r.remote for r in rep] == asked
    bad = {r.remote: str(r.error) for r in rep.errors}
    assert set(bad) == {f"{scratch}/missing.json", f"{scratch}/adir/trace.json", unreadable}
    assert "no such file" in bad[f"{scratch}/missing.json"]
    assert "is a directory" in bad[f"{scratch}/adir/trace.json"]
    assert "permission denied" in bad[unreadable].lower()
    for msg in bad.values():
        assert host.name in msg
    # same base names from different directories keep their distinct parent
    assert sorted(os.path.relpath(f, tmp_path / "out") for f in rep.files) == [f"rank{i}/trace.json" for i in range(6)]
    for i in range(6):
        assert (tmp_path / "out" / f"rank{i}" / "trace.json").read_bytes() == _json_text(200_000 + i)
    frame = rep.to_frame()
    assert list(frame["error"].notna()) == [r.error is not None for r in rep]
    assert "errors=3" in repr(rep) and "<table>" in rep._repr_html_()
    # a glob pattern, matched over SFTP (never by a shell)
    rep2 = host.get_many(f"{scratch}/rank*/trace.json", str(tmp_path / "glob"), progress=False)
    assert rep2.ok and len(rep2) == 6 and all(r.method == "skipped" or r.size for r in rep2)
    with pytest.raises(RemoteFileError, match="no file matches"):
        host.get_many(f"{scratch}/nothing*", str(tmp_path / "none"))


def test_a_host_without_zstd_falls_back_to_gzip_then_to_raw(sshd, host, scratch, tmp_path):
    """PATH on the host side holds cat/tail (and gzip), not zstd: the codec probe sees what that host has."""
    bindir = f"{scratch}/bin"
    os.makedirs(bindir)
    os.chmod(bindir, 0o755)
    for tool in ("cat", "tail", "gzip", "bash"):
        os.symlink(host.run(f"command -v {tool}", check=True).stdout.strip(), f"{bindir}/{tool}")
    text = _json_text(3 << 20)
    _write_remote(sshd, f"{scratch}/server.log", text)
    no_zstd = Transfer(host, env={"PATH": bindir})
    assert no_zstd.codecs() == ("gzip",)
    row = no_zstd._get(f"{scratch}/server.log", str(tmp_path / "a.log"), progress=False, resume=False,
                       compress="auto")
    assert row.ok and row.method == "gzip" and row.wire_bytes < len(text) / 4
    assert (tmp_path / "a.log").read_bytes() == text
    with pytest.raises(RemoteError, match="zstd not available"):
        no_zstd.get(f"{scratch}/server.log", str(tmp_path / "b.log"), compress="zstd")
    os.unlink(f"{bindir}/gzip")
    bare = Transfer(host, env={"PATH": bindir})
    assert bare.codecs() == ()
    row = bare._get(f"{scratch}/server.log", str(tmp_path / "c.log"), progress=False, resume=False, compress="auto")
    assert row.ok and row.method == "cat" and (tmp_path / "c.log").read_bytes() == text


def test_download_memory_is_flat(sshd, host, scratch, tmp_path):
    size = 48 << 20
    _write_remote(sshd, f"{scratch}/blob.bin", os.urandom(size))
    tracemalloc.start()
    try:
        host.get(f"{scratch}/blob.bin", str(tmp_path / "blob.bin"), progress=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (tmp_path / "blob.bin").stat().st_size == size
    assert peak < 12 << 20, f"peak {peak / 2**20:.1f} MiB of Python allocations for a {size >> 20} MiB file"


def test_put_round_trip_skips_an_identical_copy(host, scratch, tmp_path):
    local = tmp_path / "up.bin"
    local.write_bytes(os.urandom(5 << 20))
    remote = f"{scratch}/up.bin"
    host.put(str(local), remote, progress=False)
    st = host.stat(remote)
    assert st.size == 5 << 20 and int(st.mtime) == int(local.stat().st_mtime)
    host.run(f"chmod u+w {shlex.quote(remote)}; touch -m -d @{int(st.mtime)} {shlex.quote(remote)}", check=True)
    host.put(str(local), remote, progress=False)  # same size and mtime: nothing sent
    assert host.run(f"ls -A {shlex.quote(scratch)}").stdout.split() == ["up.bin"]
    back = tmp_path / "back.bin"
    host.get(remote, str(back), progress=False)
    assert back.read_bytes() == local.read_bytes()


def test_a_put_continues_its_partial_upload(host, scratch, tmp_path):
    """A partial upload of the same local version (its ``.kit-*.part`` beside the target) is continued from
    its length, not sent again: the bytes already there are kept as they are."""
    local = tmp_path / "up.bin"
    data = os.urandom(3 << 20)
    local.write_bytes(data)
    host.put(str(local), f"{scratch}/first.bin", progress=False)
    host.run(f"mv {shlex.quote(scratch)}/first.bin {shlex.quote(scratch)}/up.bin", check=True)
    host.run(f"truncate -s 1M {shlex.quote(scratch)}/up.bin", check=True)
    st = os.stat(local)
    part = host.run(f"cd {shlex.quote(scratch)} && python3 -c 'import hashlib; print(hashlib.sha1(b\"up.bin\")"
                    f".hexdigest()[:12])'", check=True).stdout.strip()
    part = f"{scratch}/.kit-{part}-{st.st_size}-{int(st.st_mtime)}.part"
    host.run(f"mv {shlex.quote(scratch)}/up.bin {shlex.quote(part)}", check=True)
    host.run(f"printf XXXX | dd of={shlex.quote(part)} bs=1 seek=0 conv=notrunc 2>/dev/null", check=True)
    host.put(str(local), f"{scratch}/up.bin", progress=False)
    back = host.read_bytes(f"{scratch}/up.bin")
    assert len(back) == len(data) and back[:4] == b"XXXX" and back[4:] == data[4:]  # the first MiB was kept
    assert host.run(f"ls -A {shlex.quote(scratch)}").stdout.split() == ["up.bin"]


def test_a_host_without_a_posix_shell_reads_over_sftp(host, scratch, tmp_path, monkeypatch):
    """Without a POSIX shell on the host, files come over SFTP with a window of concurrent reads: whole
    (more than one window), resumed from a partial file, and as bytes."""
    monkeypatch.setattr(Transfer, "_probe", lambda self: (False, ()))
    data = os.urandom(20 << 20)
    remote = f"{scratch}/blob.bin"
    with open(remote, "wb") as fh:
        fh.write(data)
    row = host.get_many([remote], str(tmp_path / "a"), progress=False)[0]
    assert row.ok and row.method == "sftp" and _sha(row.local) == hashlib.sha256(data).hexdigest()
    st = host.stat(remote)
    part = tmp_path / "b" / (".kit-" + hashlib.sha1(b"blob.bin").hexdigest()[:12] + f"-{st.size}-{int(st.mtime)}.part")
    part.parent.mkdir()
    part.write_bytes(data[:5_000_000])
    row = host.get_many([remote], str(tmp_path / "b"), progress=False)[0]
    assert row.ok and row.resumed_from == 5_000_000 and _sha(row.local) == hashlib.sha256(data).hexdigest()
    assert host.read_bytes(remote) == data


def test_hosts_in_parallel_with_one_unreachable(sshd, scratch, tmp_path):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = f"{sshd.user}@127.0.0.1:{s.getsockname()[1]}"
    s.close()
    files = []
    for i in range(2):
        _write_remote(sshd, f"{scratch}/rank{i}.json", _json_text(100_000 * (i + 1)))
        files.append(f"{scratch}/rank{i}.json")
    with kit.hosts([sshd.target, sshd.target, dead], **sshd.connect_options(connect_timeout=3)) as group:
        rep = group.get(files, str(tmp_path))
    assert len(rep) == 6
    assert [r.ok for r in rep] == [True, True, True, True, False, False]
    assert all(isinstance(r.error, ConnectError) for r in rep.errors)
    names = sorted(os.path.relpath(f, tmp_path) for f in rep.files)
    t = sshd.target.replace("/", "_")
    assert names == sorted([f"{t}/rank0.json", f"{t}/rank1.json", f"{t}#2/rank0.json", f"{t}#2/rank1.json"])


def test_local_names_and_the_auto_codec_rule():
    from kit.remote._transfer import _auto_codec, local_names

    assert local_names(["/a/rank0/trace.json", "/a/rank1/trace.json", "/b/x.log"]) == [
        "rank0/trace.json", "rank1/trace.json", "x.log"]
    assert local_names(["/x/a/t.json", "/y/a/t.json"]) == ["x/a/t.json", "y/a/t.json"]
    big = 8 << 20
    assert _auto_codec("/t/rank0.pt.trace.json", big) and _auto_codec("/l/server.log.1", big)
    assert not _auto_codec("/t/rank0.pt.trace.json.gz", big) and not _auto_codec("/l/x.logs.tar.gz", big)
    assert not _auto_codec("/w/model.safetensors", big) and not _auto_codec("/t/small.json", 1000)


def test_get_into_a_directory_and_on_local_host(sshd, host, scratch, tmp_path):
    _write_remote(sshd, f"{scratch}/r.json", b'{"a": 1}')
    assert host.get(f"{scratch}/r.json", str(tmp_path)) == str(tmp_path / "r.json")
    assert (tmp_path / "r.json").read_bytes() == b'{"a": 1}'
    local = kit.connect("local")
    rep = local.get_many([f"{scratch}/r.json", f"{scratch}/nope"], str(tmp_path / "loc"))
    assert [r.ok for r in rep] == [True, False] and rep[0].method == "copy"
    assert (tmp_path / "loc" / "r.json").read_bytes() == b'{"a": 1}'


def test_ctrl_c_stops_get_many_within_a_second_and_the_next_call_resumes(sshd, host, scratch, tmp_path, monkeypatch):
    """Ctrl-C while 3 of 6 files stream: get_many raises KeyboardInterrupt within a second (before, it
    waited for every file), the streaming commands are gone from the host, the partial files stay,
    and the next get_many continues them from where they stopped."""
    import signal

    import kit.remote._transfer as xfer

    real_out = xfer._Sink._out

    def slow_out(self, data):  # ~16 MB/s per file: each 24 MB file would take 1.5 s
        time.sleep(len(data) / 16e6)
        real_out(self, data)

    monkeypatch.setattr(xfer._Sink, "_out", slow_out)
    data = {f"{scratch}/shard{i}.bin": os.urandom(24 << 20) for i in range(6)}
    for path, blob in data.items():
        _write_remote(sshd, path, blob)
    out = tmp_path / "out"
    box: dict = {}

    def press_ctrl_c() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            parts = [p for p in out.glob(".*.part")] if out.is_dir() else []
            if len(parts) == 3 and all(p.stat().st_size > (2 << 20) for p in parts):
                break
            time.sleep(0.005)
        box["pressed"] = time.monotonic()
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # Ctrl-C in the terminal

    threading.Thread(target=press_ctrl_c, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        host.get_many(list(data), str(out), progress=False, workers=3, compress=False)
    stopped = time.monotonic() - box["pressed"]
    print(f"get_many stopped {stopped:.3f} s after Ctrl-C")
    assert stopped < 1.0, f"get_many took {stopped:.2f} s to stop after Ctrl-C"
    parts = {p.name: p.stat().st_size for p in out.glob(".*.part")}
    assert len(parts) == 3 and all(0 < n < (24 << 20) for n in parts.values())
    assert not [p for p in out.iterdir() if not p.name.endswith(".part")]  # nothing half-written in place
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and _streaming(scratch):
        time.sleep(0.05)
    assert _streaming(scratch) == []  # the host-side readers were killed
    monkeypatch.setattr(xfer._Sink, "_out", real_out)
    rep = host.get_many(list(data), str(out), progress=False, workers=3, compress=False)
    assert rep.ok, rep.errors
    assert sorted(r.resumed_from for r in rep if r.resumed_from) == sorted(parts.values())
    for r in rep:
        assert (out / os.path.basename(r.remote)).read_bytes() == data[r.remote]
    assert not list(out.glob(".*.part"))


def _streaming(scratch: str) -> list[str]:
    import subprocess

    ps = subprocess.run(["ps", "-eo", "stat,args"], capture_output=True, text=True, timeout=30).stdout
    return [ln for ln in ps.splitlines() if scratch in ln and not ln.startswith("Z") and "ps -eo" not in ln]
