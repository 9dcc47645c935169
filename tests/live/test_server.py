"""kit.server against the real tinyserve engine: load phases, health wait, crash with the log tail,
graceful and forced stop, stop on exceptions and KeyboardInterrupt, a profile captured through the
engine's own endpoint, and the same over SSH (real sshd). Every test checks with ps that nothing
is left running."""
from __future__ import annotations

import gzip
import io
import json
import tarfile
import time

import pytest

import kit
from kit.errors import ServerError
from tests.live.conftest import ENGINE, engine_procs, free_port


def test_start_follows_phases_and_stops_gracefully(tiny, tmp_path, capsys, monkeypatch):
    cmd, env, marker = tiny
    # stderr under capsys is no terminal: say a bar is wanted, as in a terminal (otherwise the bar would depend on
    # whether an earlier test loaded ipykernel)
    monkeypatch.setattr("kit.live._server.progress_wanted", lambda: True)
    t0 = time.monotonic()
    with kit.server("local", cmd, env=env, port=free_port(), session=tmp_path, name="srv") as s:
        assert s.ready_s is not None and time.monotonic() - t0 < 20
        assert list(s.phases) == ["loading weights", "KV cache", "graph capture", "HTTP server", "ready"]
        assert s.phases["loading weights"] <= s.phases["KV cache"] <= s.phases["ready"]
        assert s.phases["ready"] >= 0.3  # the slow start phase was waited for, not skipped
        assert engine_procs(marker), "the engine should be running"
        assert kit.bench.list_models(s.url) == [marker]
    assert s.stopped == "terminated"
    assert not engine_procs(marker)
    log = (tmp_path / "logs" / "srv.log").read_text()
    assert "Load weight begin" in log and "fired up and ready to roll" in log
    assert "shutting down gracefully" in log and "Server stopped." in log
    prov = kit.session.open(tmp_path).provenance("logs/srv.log")
    assert prov.is_measured and prov.host == "local" and marker in prov.note
    err = capsys.readouterr().err  # the tqdm bar named the phases as they came
    assert "phases" in err and "srv:" in err


def test_crash_while_loading_fails_early_with_the_log_tail(tiny, tmp_path):
    cmd, env, marker = tiny
    t0 = time.monotonic()
    with pytest.raises(ServerError) as err:
        kit.server("local", cmd, env=dict(env, TINYSERVE_CRASH="load"), port=free_port(), session=tmp_path,
                   name="crash", progress=False, ready_timeout=120)
    assert time.monotonic() - t0 < 15, "a dead server must be reported at once, not at the timeout"
    msg = str(err.value)
    assert "died during loading weights" in msg and "\n" not in msg
    assert "CUDA error: out of memory" in err.value.tail
    assert "server process exited with status 1" in err.value.tail


def test_not_ready_in_time_is_stopped(tiny, tmp_path):
    cmd, env, marker = tiny
    with pytest.raises(ServerError, match="not ready after 0.8 s"):
        kit.server("local", cmd.replace("--load-seconds 0.4", "--load-seconds 30"), env=env, port=free_port(),
                   session=tmp_path, progress=False, ready_timeout=0.8)
    assert not engine_procs(marker)


def test_stopped_on_exception_and_keyboard_interrupt(tiny, tmp_path):
    cmd, env, marker = tiny
    with pytest.raises(KeyboardInterrupt):
        with kit.server("local", cmd, env=env, port=free_port(), session=tmp_path, progress=False):
            assert engine_procs(marker)
            raise KeyboardInterrupt
    assert not engine_procs(marker)
    with pytest.raises(ZeroDivisionError):
        with kit.server("local", cmd, env=env, port=free_port(), session=tmp_path, progress=False):
            1 / 0  # noqa: B018
    assert not engine_procs(marker)


def test_forced_stop_when_sigterm_is_ignored(tiny, tmp_path):
    cmd, env, marker = tiny
    s = kit.server("local", cmd, env=dict(env, TINYSERVE_IGNORE_SIGTERM="1"), port=free_port(), session=tmp_path,
                   progress=False, grace=1.0)
    assert s.stop() == "killed"
    assert s.stop() == "killed"  # idempotent
    assert not engine_procs(marker)
    assert "ignored (TINYSERVE_IGNORE_SIGTERM=1)" in s.tail(5)


def _trace_steps(path) -> list[str]:
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    return [e["name"] for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]


def test_profile_through_the_engine_endpoint(tiny, tmp_path):
    cmd, env, marker = tiny
    with kit.server("local", cmd, env=env, port=free_port(), session=tmp_path, name="p", progress=False) as s:
        prof = s.profile(steps=8, name="eight")
        files = sorted((tmp_path / "traces" / "eight").iterdir())
        assert [f.name for f in files] == ["rank0.trace.json.gz"]
        assert _trace_steps(files[0]) == [f"ProfilerStep#{i}" for i in range(8)]
        assert prof.ranks == [0] and len(prof.annotations) >= 8
        assert any("no GPU kernels" in w for w in prof.warnings)  # the CPU runner has none: said, not hidden
        assert kit.session.open(tmp_path).provenance("traces/eight").is_measured
        paths = s.profile(seconds=0.5, name="timed", parse=False)
        assert len(_trace_steps(paths[0])) >= 5  # ~5 ms steps for 0.5 s under load
        assert "Profiling done. Traces are saved to" in s.tail(40)
    with pytest.raises(ServerError, match="not running"):
        s.profile(steps=1)


def test_vllm_profile_takes_seconds_only(tmp_path):
    s = kit.live.Server("local", "vllm serve m", engine="vllm", session=tmp_path)
    assert s.env["VLLM_TORCH_PROFILER_DIR"].endswith("-profiles") and s.port == 8000
    with pytest.raises(ServerError, match="use seconds="):
        s.profile(steps=3)


@pytest.mark.ssh
def test_server_over_ssh(sshd, tmp_path):
    marker = f"kit-ssh-{int(time.time() * 1000) % 10**9}"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(ENGINE / "tinyserve", arcname="tinyserve", filter=lambda t: None if "__pycache__" in t.name else t)
    local_tar = tmp_path / "engine.tar.gz"
    local_tar.write_bytes(buf.getvalue())
    with sshd.connect() as host:
        remote = f"{sshd.tmp}/live"
        host.run(f"mkdir -p {remote}/engine", check=True)
        host.put(str(local_tar), f"{remote}/engine.tar.gz")
        host.run(f"tar -xzf {remote}/engine.tar.gz -C {remote}/engine", check=True)
        cmd = f"python3 -m tinyserve.launch_server --served-model-name {marker} --token-ms 5 --load-seconds 0.3"
        with kit.server(host, cmd, env={"PYTHONPATH": f"{remote}/engine"}, port=free_port(), session=tmp_path,
                        name="ssh", workdir=f"{remote}/kit-live", progress=False) as s:
            assert s.url.startswith("http://127.0.0.1:")
            assert "ready" in s.phases
            res = s.bench(requests=2, warmup=0, repeats=1, concurrency=(1,), max_tokens=8)
            assert res.summary()[0]["requests_ok"] == 2
            prof = s.profile(steps=4, name="ssh-prof")
            assert prof.ranks == [0]
            pid = s.job.pid
        assert s.stopped == "terminated"
        left = host.run(f"ps -ww -eo pid,args | grep -F {marker} | grep -v grep").stdout.strip()
        assert left == ""
        procs = host.run("ps -eo sid=,stat=").stdout.splitlines()
        # nothing of the engine's session is left but zombies (this container's PID 1 does not reap)
        assert not [p for p in procs if p.split()[0] == str(pid) and not p.split()[1].startswith("Z")]
    assert "fired up" in (tmp_path / "logs" / "ssh.log").read_text()
    steps = _trace_steps(tmp_path / "traces" / "ssh-prof" / "rank0.trace.json.gz")
    assert steps == [f"ProfilerStep#{i}" for i in range(4)]
    assert not engine_procs(marker)
