"""The profile cache against other users and bad luck (issue 34): an entry planted or edited by someone
without this user's key is not trusted; a cache directory of another user, or another user's symlink,
is refused with one line; this user's own too-open directory is tightened; category memos are checked;
a write that fails (a full disk) leaves no temporary folder."""
from __future__ import annotations

import json
import logging
import os
import pwd
import subprocess
import sys

import pytest

import kit.profile
from kit.errors import CacheError
from kit.profile.reading import _cache
from tests.conftest import ROOT

TRACE = ROOT / "tests" / "data" / "traces" / "hf_llama_plain" / "trace.json.gz"
AS_ROOT = os.geteuid() == 0


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("KIT_CACHE_DIR", str(d))
    getattr(_cache, "_checked", {}).clear()
    yield d
    getattr(_cache, "_checked", {}).clear()


def _other_uid() -> int:
    return next(p.pw_uid for p in pwd.getpwall() if p.pw_uid not in (0, os.getuid()) and p.pw_uid < 65534)


def test_a_planted_or_edited_entry_is_not_trusted(cache, caplog):
    truth = kit.profile.load(TRACE).summary().kernel_time_us
    entry = next((cache / "profile").glob("set-*"))
    k = _cache.read_table(entry / "kernels.arrow")
    k["dur_us"] = k["dur_us"] * 10  # what another user planted: ten times the kernel time
    _cache.write_table(k, entry / "kernels.arrow")
    with caplog.at_level(logging.WARNING, logger="kit.profile"):
        again = kit.profile.load(TRACE)
    assert again.summary().kernel_time_us == pytest.approx(truth)
    assert any("fails its keyed digest" in r.getMessage() for r in caplog.records)
    # an entry without a digest (an older kit's, or one written by someone without the key) is rebuilt too
    entry = next((cache / "profile").glob("set-*"))
    (entry / "digest").unlink()
    assert kit.profile.load(TRACE).summary().kernel_time_us == pytest.approx(truth)


def test_an_edited_category_memo_is_not_trusted(cache, caplog):
    first = kit.profile.load(TRACE, cache=True)
    cats = first.kernels.groupby("category", observed=True)["dur_us"].sum()
    memo = next((cache / "profile").glob("categories-*.json"))
    doc = json.loads(memo.read_text())
    top = cats.idxmax()
    other = next(c for c in cats.index if c != top)
    doc["map"] = {n: (other if c == top else c) for n, c in doc["map"].items()}  # a valid category, moved
    memo.write_text(json.dumps(doc))
    for entry in (cache / "profile").glob("set-*"):  # the profile entry holds categories too: make it re-assemble
        import shutil

        shutil.rmtree(entry)
    with caplog.at_level(logging.WARNING, logger="kit.profile"):
        again = kit.profile.load(TRACE)
    assert again.kernels.groupby("category", observed=True)["dur_us"].sum().to_dict() == cats.to_dict()
    assert any("category memo" in r.getMessage() for r in caplog.records)


def test_own_open_directory_is_tightened_and_its_entries_renewed(cache, caplog):
    truth = kit.profile.load(TRACE).summary().kernel_time_us
    os.chmod(cache, 0o777)
    getattr(_cache, "_checked", {}).clear()
    with caplog.at_level(logging.WARNING, logger="kit.profile"):
        assert kit.profile.load(TRACE).summary().kernel_time_us == pytest.approx(truth)
    assert os.stat(cache).st_mode & 0o777 == 0o700
    assert any("open to other users" in r.getMessage() for r in caplog.records)


@pytest.mark.skipif(not AS_ROOT, reason="another user's directory and symlink need root to make")
@pytest.mark.parametrize("plant", ["their-dir", "their-symlink"])
def test_another_users_cache_is_refused_in_one_line(tmp_path, monkeypatch, plant):
    uid = _other_uid()
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, uid, -1)
    d = theirs if plant == "their-dir" else tmp_path / "link"
    if plant == "their-symlink":
        bait = tmp_path / "bait"
        bait.mkdir(mode=0o777)
        os.symlink(bait, d)
        os.lchown(d, uid, -1)
    monkeypatch.setenv("KIT_CACHE_DIR", str(d))
    getattr(_cache, "_checked", {}).clear()
    with pytest.raises(CacheError, match=f"uid {uid}"):
        kit.profile.load(TRACE)
    if plant == "their-symlink":
        assert os.listdir(tmp_path / "bait") == []  # nothing written through it
    assert len(kit.profile.load(TRACE, cache=False).kernels) == 1098
    env = dict(os.environ, PYTHONPATH=str(ROOT), KIT_CACHE_DIR=str(d))
    res = subprocess.run([sys.executable, "-m", "kit", "profile", "summary", str(TRACE)], capture_output=True,
                         text=True, timeout=120, env=env)
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and ("not you" in res.stderr or "not yours" in res.stderr)


def test_a_full_disk_leaves_no_temporary_folder(cache):
    """RLIMIT_FSIZE makes every write past 64 KiB fail (EFBIG), as a full disk does (ENOSPC)."""
    code = ("import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
            "resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536)); import kit.profile; "
            f"p = kit.profile.load({str(TRACE)!r}); print(len(p.kernels))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert res.returncode == 0 and res.stdout.strip() == "1098", res.stderr[-2000:]
    left = [p.name for p in (cache / "profile").iterdir() if p.name.startswith(".tmp-")]
    assert left == []
