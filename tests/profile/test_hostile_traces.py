"""Odd and hostile traces (issue 34): one over-long number or string is a one-line error naming the event
and the field, never a "truncated trace"; invalid UTF-8 and lone surrogates are replaced and counted (no
UnicodeEncodeError in the summary, the check or the Python API); a gzip bomb stops within seconds at
bounded memory; kernel events of a phase other than 'X' are counted in the warnings."""
from __future__ import annotations

import gzip
import json
import os
import resource
import struct
import subprocess
import sys
import time
import zlib

import pytest

import kit.profile
from kit.errors import TraceError
from kit.profile.reading import _io
from tests.conftest import ROOT

TRACE = ROOT / "tests" / "data" / "traces" / "hf_llama_plain" / "trace.json.gz"
pytestmark = pytest.mark.usefixtures("kit_cache_dir")


@pytest.fixture(scope="module")
def base():
    doc = json.loads(gzip.decompress(TRACE.read_bytes()))
    text = json.dumps(doc)
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    gpu = sum(e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") for e in doc["traceEvents"])
    return text, kernels, gpu


def _variant(tmp_path, base, name: str, edit) -> tuple:
    text, kernels, gpu = base
    e = kernels[3]
    old = json.dumps(e)
    new = edit(old, e)
    assert new != old
    p = tmp_path / f"{name}.json"
    data = text.replace(old, new, 1) if isinstance(new, str) else text.encode().replace(old.encode(), new, 1)
    (p.write_text if isinstance(data, str) else p.write_bytes)(data)
    return p, gpu


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kit", *args], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))


def test_a_5000_digit_number_is_one_line_naming_event_and_field(tmp_path, base):
    p, _ = _variant(tmp_path, base, "bignum", lambda s, e: s.replace(f'"dur": {json.dumps(e["dur"])}',
                                                                    '"dur": ' + "9" * 5000))
    with pytest.raises(TraceError) as err:
        kit.profile.load(p)
    msg = str(err.value)
    assert "5000 digits" in msg and "'dur'" in msg and "'kernel'" in msg and "truncated" not in msg
    assert str(p) in msg and "\n" not in msg


def test_invalid_utf8_is_replaced_and_counted_not_truncation(tmp_path, base):
    p, n = _variant(tmp_path, base, "badutf8", lambda s, e: s.replace(e["name"], e["name"] + "Q", 1)
                    .encode().replace(b'Q"', b'\xff"', 1))
    prof = kit.profile.load(p)
    assert len(prof.kernels) == n and not any("truncated" in w for w in prof.warnings)
    assert any("1 invalid UTF-8 byte replaced" in w for w in prof.warnings)
    assert prof.kernels["name"].str.contains("\ufffd").sum() == 1


def test_a_lone_surrogate_is_no_unicode_error_anywhere(tmp_path, base):
    p, n = _variant(tmp_path, base, "surrogate",
                    lambda s, e: s.replace(json.dumps(e["name"]), json.dumps(e["name"])[:-1] + '\\ud800"', 1))
    prof = kit.profile.load(p)
    assert len(prof.kernels) == n and any("lone UTF-16 surrogate" in w for w in prof.warnings)
    for text in (repr(prof.summary()), repr(prof.health()), prof.kernels.to_string(), repr(prof)):
        text.encode("utf-8")
    assert len(kit.profile.load(p).kernels) == n  # and again from the cache it wrote
    for cmd in (["profile", "summary", str(p)], ["profile", "check", str(p)], ["profile", "summary", str(p), "--json"]):
        res = _cli(*cmd)
        assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-1500:]


def test_kernel_events_of_another_phase_are_counted(tmp_path, base):
    p, n = _variant(tmp_path, base, "phase", lambda s, e: s.replace('"ph": "X"', '"ph": "B"'))
    prof = kit.profile.load(p)
    assert len(prof.kernels) == n - 1
    assert any("1 kernel event of phase 'B' dropped" in w for w in prof.warnings)


def _bomb(path, gib: int = 3) -> None:
    """A gzip file of one JSON event whose name is ``gib`` GiB of 'A' (about 3 MB for 3 GiB): each
    1 MiB block compressed once after a full flush (so every block's bytes are the same) and repeated."""
    head = b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "'
    tail = b'", "ts": 1, "dur": 1}]}'
    a = b"A" * (1 << 20)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = c.compress(head) + c.flush(zlib.Z_FULL_FLUSH)
    blk = c.compress(a) + c.flush(zlib.Z_FULL_FLUSH)
    assert c.compress(a) + c.flush(zlib.Z_FULL_FLUSH) == blk
    crc = zlib.crc32(head)
    for _ in range(gib << 10):
        crc = zlib.crc32(a, crc)
    crc = zlib.crc32(tail, crc)
    size = len(head) + (gib << 30) + len(tail)
    with open(path, "wb") as f:
        f.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + first)
        for _ in range(gib << 10):
            f.write(blk)
        f.write(c.compress(tail) + c.flush() + struct.pack("<II", crc & 0xFFFFFFFF, size & 0xFFFFFFFF))


def test_a_gzip_bomb_stops_within_seconds_at_bounded_memory(tmp_path):
    bomb = tmp_path / "bomb.json.gz"
    _bomb(bomb)
    assert bomb.stat().st_size < 8 << 20
    t0 = time.monotonic()
    res = _cli("profile", "summary", str(bomb), "--no-cache")
    took = time.monotonic() - t0
    rss_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "longer than 64 MiB" in res.stderr and "'name'" in res.stderr and str(bomb) in res.stderr
    assert took < 60 and rss_mib < 1024, (took, rss_mib)  # before: > 300 s at 2.6-3.4 GB
    with pytest.raises(TraceError, match="decompression bomb"):  # the byte reader (nsys text) watches the ratio
        _io.read_bytes(bomb, "gzip")
