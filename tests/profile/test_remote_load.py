"""Traces read where they lie: kit.profile.load(..., host=) parses on the host (the real sshd fixture)
with the reader shipped there, and gives the same Profile as a local load."""
from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

import pandas as pd
import pandas.testing as pdt
import pytest

import kit.profile
from kit.errors import RemoteError, TraceError
from kit.profile.reading._remote import build_reader, ensure_reader, reader_files, split_spec

pytestmark = [pytest.mark.ssh]

DLRM = Path("traces") / "param" / "dlrm_kineto"


@pytest.fixture(scope="module")
def host(sshd):
    h = sshd.connect()
    yield h
    h.close()


@pytest.fixture
def remote_dir(sshd, host):
    d = host.run(f"mktemp -d -p {shlex.quote(sshd.tmp)} prof.XXXXXX", check=True).stdout.strip()
    os.chmod(d, 0o755)
    return d


def _copy_to_host(files, remote_dir: str) -> list[str]:
    out = []
    for f in files:  # the fixture's host is this machine: place the files where its user reads them
        dst = os.path.join(remote_dir, f.name)
        shutil.copy(f, dst)
        os.chmod(dst, 0o644)
        out.append(dst)
    return out


def _assert_same(remote: kit.profile.Profile, local: kit.profile.Profile) -> None:
    cols = [c for c in local.kernels.columns if c != "file"]
    pdt.assert_frame_equal(remote.kernels[cols], local.kernels[cols])
    pdt.assert_frame_equal(remote.annotations, local.annotations)
    pdt.assert_frame_equal(remote.steps, local.steps)
    pdt.assert_frame_equal(remote.runtime, local.runtime)
    assert remote.ranks == local.ranks and remote.warnings == local.warnings
    for phase in ("all", "decode"):
        a, b = remote.summary(phase), local.summary(phase)
        for name in ("categories", "per_rank", "per_step", "top", "rank_categories"):
            pdt.assert_frame_equal(getattr(a, name), getattr(b, name))
        assert (a.kernel_time_us, a.wall_time_us, a.steps, a.allreduce_spread, a.warnings) == \
               (b.kernel_time_us, b.wall_time_us, b.steps, b.allreduce_spread, b.warnings)


@pytest.mark.shared_data
def test_remote_load_equals_local_load_and_moves_only_tables(shared_data, host, remote_dir):
    files = sorted((shared_data / DLRM).glob("*.json.gz"))
    assert len(files) == 8
    _copy_to_host(files, remote_dir)
    remote = kit.profile.load(f"{remote_dir}/worker*.json.gz", host=host)
    local = kit.profile.load(files, cache=False)
    _assert_same(remote, local)
    info = remote.meta["remote"][host.name]
    assert info["files"] == 8
    json_bytes = sum(local.meta["ranks"][r]["bytes"] for r in local.ranks)
    assert info["received"] < 0.05 * json_bytes, info  # the tables, not the traces
    assert remote.files == [f"{host.name}:{remote_dir}/{f.name}" for f in files]
    again = kit.profile.load([f"{remote_dir}/{f.name}" for f in files], host=host)
    assert again.meta["remote"][host.name]["pushed"] == 0  # the reader is cached on the host by content hash
    _assert_same(again, local)


@pytest.mark.gpu_fixture
def test_remote_parsed_profiles_compare_by_op_like_local_ones(host, remote_dir):
    """The op links travel with the tables: a profile parsed on a host compares by op and gives the
    roofline's shapes exactly as a local load does (issue 21)."""
    from tests.conftest import SAMPLE

    files = [SAMPLE / "traces" / s / "rank0.trace.json.gz" for s in ("cmp_shapes_a", "tp1_eager")]
    remote = []
    for f in files:
        d = os.path.join(remote_dir, f.parent.name)
        os.makedirs(d, exist_ok=True)
        remote.append(_copy_to_host([f], d)[0])
    ra, rb = (kit.profile.load(p, host=host) for p in remote)
    la, lb = (kit.profile.load(f, cache=False) for f in files)
    _assert_same(ra, la)
    got, want = kit.profile.compare(ra, rb).to_dict(), kit.profile.compare(la, lb).to_dict()
    assert got["by_op"] and got["by_op"] == want["by_op"] and got["parts"] == want["parts"]
    cols = ["M", "N", "K", "kernels", "dur_us"]
    assert kit.profile.roofline(ra, phase="decode")[cols].equals(kit.profile.roofline(la, phase="decode")[cols])


@pytest.mark.shared_data
def test_host_python_without_orjson_falls_back_to_json(shared_data, host, remote_dir, sshd):
    """A host Python where ``import orjson`` fails: the shipped reader uses the json stand-in."""
    files = sorted((shared_data / DLRM).glob("*.json.gz"))[:2]
    _copy_to_host(files, remote_dir)
    poison = os.path.join(remote_dir, "noorjson")
    os.makedirs(poison)
    Path(poison, "orjson.py").write_text("raise ImportError('orjson hidden for this test')\n")
    wrapper = os.path.join(remote_dir, "python-no-orjson")
    Path(wrapper).write_text(f"#!/bin/sh\nPYTHONPATH={shlex.quote(poison)} exec python3 \"$@\"\n")
    os.chmod(poison, 0o755)
    os.chmod(os.path.join(poison, "orjson.py"), 0o644)
    os.chmod(wrapper, 0o755)
    remote = kit.profile.load([f"{remote_dir}/{f.name}" for f in files], host=host, python=wrapper)
    assert remote.meta["remote"][host.name]["json"].startswith("json")
    _assert_same(remote, kit.profile.load(files, cache=False))


def test_remote_errors_name_host_and_file(host, remote_dir):
    bad = os.path.join(remote_dir, "rank0.json")
    Path(bad).write_text('{"traceEvents": 5}')
    os.chmod(bad, 0o644)
    with pytest.raises(TraceError) as err:
        kit.profile.load(bad, host=host)
    assert host.name in str(err.value) and bad in str(err.value) and "not an array" in str(err.value)
    with pytest.raises(TraceError, match="no file matches"):
        kit.profile.load(f"{remote_dir}/nothing*.json", host=host)
    with pytest.raises(RemoteError, match="not found on the host"):
        kit.profile.load(bad, host=host, python="no-such-python3")


@pytest.mark.parametrize("damage", ["truncate", "edit"])
def test_a_corrupted_reader_on_the_host_is_sent_again(host, remote_dir, damage):
    """Issue 34: a ``kit-reader-*.pyz`` cut short or edited on the host was trusted for ever (by name):
    its SHA-256 is checked against the reader built here and a bad copy replaced."""
    remote, _ = ensure_reader(host)
    name, data = build_reader()
    cut = data[: len(data) // 2] if damage == "truncate" else data[:-40] + b"x" * 40
    Path(remote).write_bytes(cut)  # the fixture's host is this machine
    again, pushed = ensure_reader(host)
    assert again == remote and pushed == len(data) and Path(remote).read_bytes() == data
    assert ensure_reader(host) == (remote, 0)
    trace = Path(__file__).parent.parent / "data" / "traces" / "cpu_eager" / "trace.json.gz"
    Path(remote).write_bytes(cut)
    assert len(kit.profile.load(_copy_to_host([trace], remote_dir), host=host, cache=False).kernels) > 0


def test_reader_is_the_kits_own_source_and_stdlib_only():
    files = reader_files()
    root = Path(kit.profile.__file__).parent
    for name in ("_read.py", "_io.py", "_kineto.py", "_kineto_events.py", "_nsys.py"):
        assert files[f"kit/profile/reading/{name}"] == (root / "reading" / name).read_bytes()  # shipped as-is
    assert files["kit/errors.py"] == (root.parent / "errors.py").read_bytes()
    assert b"pandas" not in files["kit/__init__.py"] + files["kit/profile/__init__.py"] + \
        files["kit/profile/reading/__init__.py"]
    name, data = build_reader()
    assert name == build_reader()[0] and name.startswith("kit-reader-") and len(data) < 200_000


def test_spec_parsing(tmp_path):
    assert split_spec("gpu-box:/traces/rank0.json") == ("gpu-box", "/traces/rank0.json")
    assert split_spec("kit@10.0.0.2:2222:/t/r*.json.gz") == ("kit@10.0.0.2:2222", "/t/r*.json.gz")
    assert split_spec("/local/file.json") is None and split_spec("relative.json") is None
    odd = tmp_path / "a:"
    odd.mkdir()
    (odd / "b.json").write_text("{}")
    assert split_spec(str(odd / "b.json")) is None  # an existing local file wins


def test_local_frames_unchanged_by_round_trip():
    """The runner's encoding round-trips every column type exactly (NaN, None, ints, floats, strings)."""
    import json
    import zlib

    from kit.profile.reading._remote import decode_raw

    raw = {"kernels": {"name": ["a", "b", "a"], "ts": [1.5, float("nan"), 3.0], "collective": [None, "x", None],
                       "device": [0, 1, -1]},
           "annotations": {"name": []}, "launches": {"tid": ["1", "2", "1"]}, "meta": {"k": [1, 2]},
           "warnings": ["w"], "events": 3, "bytes": 10, "truncated": False}
    enc = dict(raw)
    enc["kernels"] = {"name": {"dict": ["a", "b"], "codes": [0, 1, 0]}, "ts": [1.5, float("nan"), 3.0],
                      "collective": {"dict": [None, "x"], "codes": [0, 1, 0]}, "device": [0, 1, -1]}
    back = decode_raw(zlib.compress(json.dumps(enc).encode()))
    assert back["kernels"]["name"] == raw["kernels"]["name"]
    assert back["kernels"]["collective"] == raw["kernels"]["collective"]
    assert pd.isna(back["kernels"]["ts"][1]) and back["kernels"]["device"] == [0, 1, -1]
