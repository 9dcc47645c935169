"""Issue 45's hostile inputs on the run catalogue (round 4), each on the input the issue describes:
truncated Parquet files, compactions killed half way, debris of kills, a planted input-hash memo,
permissions under a umask, store paths with glob characters, hostile run ids, a negative limit."""
from __future__ import annotations

import os
import time

import pyarrow.parquet as pq
import pytest

from kit import runs
from kit.cli import main
from kit.errors import UsageError
from kit.runs import _store


@pytest.fixture
def store(tmp_path, monkeypatch):
    root = tmp_path / "store"
    monkeypatch.setenv("KIT_RUNS", "on")
    monkeypatch.setenv("KIT_RUNS_DIR", str(root))
    monkeypatch.setenv("KIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KIT_RUNS_SHARED", raising=False)
    getattr(_store, "_warned", set()).clear()
    return root


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _run(i: int, root=None):
    return runs.record("bench", figures={"p99_itl_ms": float(i)}, label=f"run {i}", root=root)


def test_a_truncated_parquet_file_is_skipped_with_a_warning_naming_it(store, tmp_path, monkeypatch, capsys):
    """One truncated run file in one's own store and one in a shared store: ``kit runs list``, ``compact``
    and the MCP ``runs_list`` answer with every other run and a warning naming each bad file; past 64
    loose files each later run is recorded without 'run not recorded'."""
    good = [_run(i) for i in range(3)]
    bad = _run(99)
    _truncate(bad.path)
    shared = tmp_path / "shared"
    theirs = _run(7, root=shared)
    _truncate(theirs.path)
    _run(8, root=shared)
    monkeypatch.setenv("KIT_RUNS_SHARED", str(shared))
    assert main(["runs", "list", "--json"]) == 0
    out = capsys.readouterr()
    assert all(r.run_id in out.out for r in good) and bad.run_id not in out.out
    assert str(bad.path) in out.err and str(theirs.path) in out.err and "Traceback" not in out.err
    assert len(runs.runs(limit=100)) == 4
    for i in range(_store.COMPACT_AT + 2):
        _run(100 + i)
    err = capsys.readouterr().err
    assert "not recorded" not in err and "Traceback" not in err
    assert len(runs.runs(limit=1000)) == 4 + _store.COMPACT_AT + 2
    assert bad.path.exists()   # left where it is, never packed
    import anyio

    from kit.mcp import Policy, available
    from kit.mcp._server import call

    p = Policy(roots=(tmp_path,))
    listed = anyio.run(call, p, {t.name: t for t in available(p)}, "runs_list", {"limit": 1000})
    assert listed["ok"] and len(listed["result"]["runs"]) == 4 + _store.COMPACT_AT + 2


def test_a_compaction_killed_after_its_pack_counts_each_run_once_and_debris_is_swept(store):
    """The state ``kill -9`` leaves between writing the pack and deleting the loose files: every run is
    counted once (figures too), the next compaction deletes the loose copies instead of writing a second
    pack; ``.tmp`` files and table directories of runs never written are swept once an hour old, fresh
    ones (a writer at work) are left."""
    import pyarrow as pa

    recs = [_run(i) for i in range(5)]
    loose = [r.path for r in recs]
    merged = pa.concat_tables([pq.read_table(p) for p in loose])
    pq.write_table(merged, store / "runs" / "pack-killed.parquet")   # written; the deletes never came
    assert len(runs.runs(limit=100)) == 5
    assert runs.query("SELECT count(*) AS n, sum(value) AS s FROM figures WHERE name = 'p99_itl_ms'").iloc[0].tolist() \
        == [5, 10.0]
    old = time.time() - 2 * _store.SWEEP_AGE_S
    debris = [store / "runs" / ".2026.parquet.x1.tmp", store / "tables" / "20260101T000000-deadbeef" / "t.parquet"]
    fresh = [store / "runs" / ".2027.parquet.x2.tmp", store / "tables" / "20260101T000001-feedbeef" / "t.parquet"]
    for f in debris + fresh:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"x")
    for f in debris:
        os.utime(f, (old, old))
        os.utime(f.parent, (old, old))
    _run(5)
    runs.compact()
    packs = [p for p in _store.run_files(store) if p.name.startswith("pack-")]
    ids = [i for p in packs for i in pq.read_table(p).column("run_id").to_pylist()]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == 5 and len(packs) == 1   # no second pack
    assert not any(p.exists() for p in loose) and len(runs.runs(limit=100)) == 6
    assert not debris[0].exists() and not debris[1].parent.exists()
    assert all(f.exists() for f in fresh)


def test_the_catalogue_is_private_and_the_hash_memo_is_owner_checked(store, tmp_path):
    """Under umask 022 the store's directories are 0700 and its files 0600; a memo planted by another
    user (and one reached through a symlinked ``hashes`` directory) is not trusted: the input's real hash
    is recorded, and nothing is written through the symlink."""
    import hashlib

    from kit.runs._record import _hash_dir, file_hash

    old = os.umask(0o022)
    try:
        r = runs.record("bench", figures={"x": 1.0}, tables={"t": __import__("pandas").DataFrame({"a": [1]})})
    finally:
        os.umask(old)
    for d, _, files in os.walk(store):
        assert os.stat(d).st_mode & 0o077 == 0, d
        for f in files:
            assert os.stat(os.path.join(d, f)).st_mode & 0o077 == 0, f
    assert r.path.stat().st_mode & 0o777 == 0o600

    data = tmp_path / "input.bin"
    data.write_bytes(b"real bytes")
    real = hashlib.sha256(b"real bytes").hexdigest()
    st = data.stat()
    ident = f"{data.resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}"
    hashes = _hash_dir()
    hashes.mkdir(parents=True, mode=0o700)
    memo = hashes / hashlib.sha256(ident.encode()).hexdigest()[:32]
    memo.write_text("0" * 64)
    os.chown(memo, 65534, 65534)   # another user's file
    assert file_hash(data) == real
    os.unlink(memo)
    elsewhere = tmp_path / "theirs"
    elsewhere.mkdir()
    hashes.rmdir()
    hashes.symlink_to(elsewhere)
    assert file_hash(data) == real and list(elsewhere.iterdir()) == []


def test_store_paths_with_glob_characters_and_hostile_run_ids(tmp_path, monkeypatch, capsys):
    """A store at ``st[1]`` is read; one at ``a*`` reads only itself, not ``ab``; a planted run whose id
    is ``../../escape`` is skipped (with a warning), so ``export`` writes nothing outside its destination
    and ``table`` reads no other file; ``kit runs list --limit -1`` is one line, exit 1."""
    import pyarrow as pa

    monkeypatch.setenv("KIT_RUNS", "on")
    monkeypatch.delenv("KIT_RUNS_SHARED", raising=False)
    getattr(_store, "_warned", set()).clear()
    bracket, star, sibling = tmp_path / "st[1]", tmp_path / "a*", tmp_path / "ab"
    _run(1, root=bracket)
    _run(2, root=star)
    _run(3, root=sibling)
    assert len(runs.runs(stores=[bracket])) == 1
    assert len(runs.runs(stores=[star])) == 1
    good = _run(4, root=sibling)
    row = pq.read_table(good.path).to_pylist()[0]
    row["run_id"] = "../../escape"
    row["tables"] = ["../../../../etc/passwd"]
    planted = sibling / "runs" / "2099.parquet"
    pq.write_table(pa.Table.from_pylist([row], schema=pq.read_table(good.path).schema), planted)
    (sibling / "tables" / "../../escape").mkdir(parents=True, exist_ok=True)
    dest = tmp_path / "out" / "dest"
    assert runs.export(dest, stores=[sibling]) == 2
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["dest"]
    assert "run id the kit does not make" in capsys.readouterr().err
    with pytest.raises(UsageError):
        runs.get("../../escape", stores=[sibling])
    monkeypatch.setenv("KIT_RUNS_DIR", str(sibling))
    assert main(["runs", "list", "--limit", "-1"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "limit" in err and "Traceback" not in err
