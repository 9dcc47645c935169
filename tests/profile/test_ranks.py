"""Many ranks of one job (kit.profile.ranks): a real single-rank trace (sdpa_flash, recorded with module
frames on an H200) replayed as 12 ranks with per-rank jitter and one planted straggler (the attention
kernel of layer 2 four times slower on rank 7), spread over three real sshd hosts started here."""
from __future__ import annotations

import json
import os
import shutil

import pytest

import kit.profile
from kit.profile.reading._remote import _RAW, Frames
from kit.testing import SSHServer, replay_trace
from tests.conftest import TEST_DATA

SRC = TEST_DATA / "traces" / "sdpa_flash" / "trace.json.gz"
RANKS, STRAGGLER, HOSTS = 12, 7, 3


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    d = tmp_path_factory.mktemp("job")
    return [replay_trace(SRC, d / f"rank{r}.json.gz", steps=12, jitter=0.02, seed=r, rank=r, world_size=RANKS,
                         slow={"flash_fwd#2": 4.0} if r == STRAGGLER else None) for r in range(RANKS)]


def test_the_planted_straggler_and_its_layer_are_found_locally(job):
    v = kit.profile.ranks([str(p) for p in job], progress=False)
    assert list(v.per_rank["rank"]) == list(range(RANKS))
    assert v.straggler["decided"] and v.straggler["rank"] == STRAGGLER, v.straggler
    s = v.straggler
    assert (s["at"], s["layer"], s["kernel"]) == ("layer 2: pytorch_flash::flash_fwd_kernel", "layer 2",
                                                  "pytorch_flash::flash_fwd_kernel"), v.where
    assert v.where["excess_us"].iloc[0] > 0.8 * s["excess_us"]
    assert not v.collective_skew["measurable"] and any("collective" in w for w in v.warnings)
    assert "rank 7 computes" in repr(v)


def test_no_straggler_is_named_when_none_was_planted(job, tmp_path):
    clean = [replay_trace(SRC, tmp_path / f"c{r}.json.gz", steps=12, jitter=0.02, seed=100 + r, rank=r,
                          world_size=6) for r in range(6)]
    v = kit.profile.ranks([str(p) for p in clean], progress=False)
    assert not v.straggler["decided"] and v.straggler["rank"] is None and v.where.empty
    assert "no rank stands out" in v.straggler["reason"]


@pytest.mark.ssh
def test_ranks_on_three_ssh_hosts_equal_the_local_view(job, sshd):
    servers = [sshd] + [SSHServer() for _ in range(HOSTS - 1)]
    hosts = []
    try:
        for s in servers[1:]:
            s.start()
        spread = {}
        for i, s in enumerate(servers):
            h = s.connect()
            hosts.append(h)
            d = os.path.join(s.tmp, f"job{i}")
            os.makedirs(d, exist_ok=True)
            os.chmod(d, 0o755)
            for p in job[i::HOSTS]:
                shutil.copy(p, os.path.join(d, p.name))
                os.chmod(os.path.join(d, p.name), 0o644)
            spread[h] = [f"{d}/rank*.json.gz"]
        remote = kit.profile.ranks(spread, progress=False)
        local = kit.profile.ranks([str(p) for p in job], progress=False)
        assert list(remote.per_rank["rank"]) == list(range(RANKS))
        cols = ["steps", "step_us", "compute_us", "comm_us"]
        assert remote.per_rank[cols].round(6).equals(local.per_rank[cols].round(6))
        assert remote.straggler["rank"] == STRAGGLER
        assert remote.straggler["at"] == "layer 2: pytorch_flash::flash_fwd_kernel"
        assert set(remote.per_rank["host"]) == {h.name for h in hosts} and set(local.per_rank["host"]) == {"local"}
        assert list(remote.per_rank.groupby("host").size()) == [RANKS // HOSTS] * HOSTS
    finally:
        for h in hosts:
            h.close()
        for s in servers[1:]:
            s.stop()


def test_the_stream_is_cut_into_files_keeping_one_at_a_time():
    """The collector holds at most one rank's bytes of a host's stream: memory does not grow with ranks."""
    files = [os.urandom(5000 + 997 * i) for i in range(20)]
    stream = b"".join(_RAW + json.dumps({"path": f"r{i}", "ok": True, "len": len(f)}).encode() + b"\n" + f
                      for i, f in enumerate(files))
    got, peak = [], [0]
    cut = Frames(lambda head, payload: got.append((head["path"], payload)))
    for i in range(0, len(stream), 4096):
        cut.feed(stream[i:i + 4096])
        peak[0] = max(peak[0], len(cut.buf))
    assert [p for _, p in got] == files and [h for h, _ in got] == [f"r{i}" for i in range(20)]
    assert peak[0] < max(len(f) for f in files) + 4096 + 200


def test_kit_profile_ranks_cli_prints_and_records_the_view(job, tmp_path, monkeypatch, capsys):
    from kit import runs
    from kit.cli import main

    monkeypatch.setenv("KIT_RUNS", "on")
    monkeypatch.setenv("KIT_RUNS_DIR", str(tmp_path / "store"))
    assert main(["profile", "ranks", *map(str, job), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["straggler"]["rank"] == STRAGGLER and len(got["per_rank"]) == RANKS
    facts = runs.query("SELECT name, value FROM facts WHERE kind = 'ranks'")
    assert dict(zip(facts["name"], facts["value"]))["straggler"] == str(STRAGGLER)


def test_a_file_the_reader_failed_on_carries_no_payload_and_the_stream_goes_on():
    """The reader's answer for a file it could not parse is a head without ``len``: one ``emit`` for it, and
    the next file is read whole (``load(host=)`` and ``ranks`` share this reader)."""
    bad = _RAW + json.dumps({"path": "r0", "ok": False, "message": "r0: not a trace"}).encode() + b"\n"
    good = _RAW + json.dumps({"path": "r1", "ok": True, "len": 3}).encode() + b"\nabc"
    got = []
    Frames(lambda head, payload: got.append((head["path"], head["ok"], payload))).feed(bad + good)
    assert got == [("r0", False, b""), ("r1", True, b"abc")]
