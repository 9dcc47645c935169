"""Raw trace values that must never become numbers (issue 24): kernels without ``cat``, durations and
timestamps outside any physical range, negative, non-finite and non-numeric values. Synthetic edge
cases (small traces written here), read through both decoders and through ``kit.profile.load``."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from kit import profile
from kit.profile.reading import _kineto

DECODERS = [d for d in _kineto.DECODERS if d != "msgspec" or _kineto.msgspec is not None]
T0 = 1_000_000.0   # relative microseconds, as newer Kineto writes them


def _kernel(i: int, dur, *, cat="kernel", ts=None, **args) -> dict:
    e = {"ph": "X", "cat": cat, "name": f"gemm_kernel_{i % 3}", "pid": 0, "tid": 7,
         "ts": T0 + 100.0 * i if ts is None else ts, "dur": dur,
         "args": {"device": 0, "stream": 7, "correlation": 1000 + i, **args}}
    if cat is None:
        del e["cat"]
    return e


def _launch(i: int, name: str = "cudaLaunchKernel", dur=4.0) -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 11, "ts": T0 + 100.0 * i - 10.0,
            "dur": dur, "args": {"correlation": 1000 + i}}


def _write(tmp_path: Path, events: list, name: str = "t.json", raw: str | None = None) -> Path:
    p = tmp_path / name
    body = raw if raw is not None else json.dumps({"schemaVersion": 1, "baseTimeNanoseconds": 1_700_000_000_000_000_000,
                                                   "traceEvents": events})
    p.write_text(body)
    return p


def _read(path: Path, decoder: str) -> dict:
    return _kineto.read_kineto(path, decoder)


@pytest.mark.parametrize("decoder", DECODERS)
def test_kernels_without_cat_are_identified_by_their_gpu_fields(tmp_path, decoder):
    """The corpus case that lost 64,437 of 64,500 us: kernel events written without ``cat``. They carry
    ph X, a stream and a correlation id: kept, and the warning says how they were recognised."""
    evs = [_kernel(i, 10.0, cat=None) for i in range(20)] + [_launch(i) for i in range(20)]
    raw = _read(_write(tmp_path, evs), decoder)
    assert len(raw["kernels"]["name"]) == 20
    assert raw["kernels"]["kind"] == ["kernel"] * 20
    assert any("20 GPU events without a 'cat' field identified" in w for w in raw["warnings"])
    p = profile.load(_write(tmp_path, evs, "p.json"), cache=False)
    assert p.summary().kernel_time_us == pytest.approx(200.0)
    assert any("without a 'cat'" in w for w in p.warnings)


@pytest.mark.parametrize("decoder", DECODERS)
def test_events_without_cat_or_gpu_fields_are_dropped_and_the_warning_names_what_was_missing(tmp_path, decoder):
    evs = [_kernel(i, 10.0) for i in range(5)]
    anon = [{"ph": "X", "name": "mystery", "pid": 0, "tid": 7, "ts": T0 + i, "dur": 3.0, "args": {"device": 0}}
            for i in range(3)]
    raw = _read(_write(tmp_path, evs + anon), decoder)
    assert len(raw["kernels"]["name"]) == 5
    w = [x for x in raw["warnings"] if "without a 'cat' field dropped" in x]
    assert len(w) == 1 and w[0].startswith("t.json: 3 complete events") and "args.stream" in w[0]
    # metadata and instant events without cat are normal Kineto output: no warning for them
    meta = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}},
            {"ph": "i", "name": "x", "ts": T0}]
    assert not any("'cat'" in x for x in _read(_write(tmp_path, evs + meta, "m.json"), decoder)["warnings"])


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("bad, why", [
    ("1e18", "over an hour"),
    ("-5.0", "negative duration"),
    ("NaN", "unreadable duration"),
    ("Infinity", "unreadable duration"),
    ('"abc"', "unreadable duration"),
    ("1" + "0" * 400, "unreadable duration"),
    ("[1]", "unreadable duration"),
])
def test_a_kernel_duration_outside_any_physical_range_is_dropped_and_counted(tmp_path, decoder, bad, why):
    """``dur: 1e18`` made the kernel time 1e18 us with no warning; every unusable duration is dropped
    and counted, and the kernel time is that of the 9 good kernels."""
    good = ",".join(json.dumps(_kernel(i, 10.0)) for i in range(9))
    bad_ev = json.dumps(_kernel(9, 0.0)).replace('"dur": 0.0', f'"dur": {bad}')
    assert f'"dur": {bad}' in bad_ev
    p = _write(tmp_path, [], raw='{"traceEvents": [' + good + "," + bad_ev + "]}")
    raw = _read(p, decoder)
    assert len(raw["kernels"]["name"]) == 10   # the reader keeps it; the frame check decides
    prof = profile.load(p, cache=False)
    assert len(prof.kernels) == 9
    assert prof.summary().kernel_time_us == pytest.approx(90.0)
    w = [x for x in prof.warnings if "1 kernel event" in x and why in x and "dropped" in x]
    assert len(w) == 1, prof.warnings


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("ts", ["-3.0", "1e18", '"later"', "NaN", str(T0 + 200 * 86400e6)])
def test_a_timestamp_outside_any_recording_window_is_dropped_and_counted(tmp_path, decoder, ts):
    """Negative, after 2100, text, NaN, or 200 days away from every other event of the file."""
    good = ",".join(json.dumps(_kernel(i, 10.0)) for i in range(9))
    bad_ev = json.dumps(_kernel(9, 10.0, ts=0.5)).replace('"ts": 0.5', f'"ts": {ts}')
    p = _write(tmp_path, [], raw='{"traceEvents": [' + good + "," + bad_ev + "]}")
    _read(p, decoder)
    prof = profile.load(p, cache=False)
    assert len(prof.kernels) == 9
    assert prof.summary().kernel_time_us == pytest.approx(90.0)
    assert prof.summary().wall_time_us < 1e4    # the timeline is not stretched by the bad event
    assert any("1 kernel event with no usable timestamp" in w for w in prof.warnings), prof.warnings


def test_cpu_side_tables_drop_out_of_range_values_too(tmp_path):
    """A runtime call or CPU op of ``dur: 1e18`` would enclose every launch (wrong attribution): dropped."""
    evs = [_kernel(i, 10.0) for i in range(4)] + [_launch(i) for i in range(4)]
    evs.append(_launch(9, "cudaDeviceSynchronize", dur=1e18))
    evs.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 11, "ts": T0 - 50, "dur": -1.0})
    prof = profile.load(_write(tmp_path, evs), cache=False)
    assert "cudaDeviceSynchronize" not in set(prof.runtime["name"].astype(str))
    assert any("1 runtime call event" in w and "dropped" in w for w in prof.warnings)
    assert any("1 CPU op or module frame" in w and "dropped" in w for w in prof.warnings)


def test_runtime_and_driver_calls_survive_in_the_profile(tmp_path):
    """What the CPU-side analysis needs (issue 22): launches, graph launches, copies, synchronisation and
    ``aten::_local_scalar_dense`` with start, duration, thread and correlation id."""
    names = ["cudaLaunchKernel", "cuLaunchKernel", "cudaGraphLaunch", "cudaMemcpyAsync", "cudaMemsetAsync",
             "cudaDeviceSynchronize", "cudaStreamSynchronize"]
    evs = [_kernel(i, 10.0) for i in range(len(names))]
    evs += [_launch(i, n, dur=2.0 + i) for i, n in enumerate(names)]
    evs[len(names) + 1]["cat"] = "cuda_driver"   # cuLaunchKernel is a driver call
    evs.append({"ph": "X", "cat": "cpu_op", "name": "aten::_local_scalar_dense", "pid": 1, "tid": 11,
                "ts": T0 + 5000.0, "dur": 30.0, "args": {}})
    prof = profile.load(_write(tmp_path, evs), cache=False)
    rt = prof.runtime
    assert list(rt.columns) == ["rank", "name", "start_us", "dur_us", "tid", "correlation", "kind"]
    got = {str(r.name): r for r in rt.itertuples()}
    assert set(names) | {"aten::_local_scalar_dense"} <= set(got)
    assert got["cudaStreamSynchronize"].dur_us == pytest.approx(2.0 + 6) and got["cudaStreamSynchronize"].tid == "11"
    assert got["cudaGraphLaunch"].correlation == 1002
    assert got["aten::_local_scalar_dense"].kind == "op" and got["aten::_local_scalar_dense"].correlation == -1
    # on the profile's clock, like the kernels
    k0 = prof.kernels.sort_values("start_us").iloc[0]
    assert got["cudaLaunchKernel"].start_us == pytest.approx(k0.start_us - 10.0)


@pytest.mark.parametrize("decoder", DECODERS)
def test_a_malformed_piece_is_decided_by_the_repairing_path_with_the_same_result(tmp_path, decoder):
    """Text timestamps in one piece: the typed decoder hands that piece to the dict path, which
    repairs and counts; both decoders give the same tables and warnings."""
    evs = [_kernel(i, 10.0) for i in range(6)]
    evs[2]["ts"] = f"{T0 + 200.0}us"
    evs[3]["args"] = ["not", "an", "object"]
    raw = _read(_write(tmp_path, evs), decoder)
    other = _read(_write(tmp_path, evs, "o.json"), "orjson")
    assert raw["kernels"] == other["kernels"] or all(
        (a == b) or (isinstance(a, float) and math.isnan(a) and math.isnan(b))
        for c in raw["kernels"] for a, b in zip(raw["kernels"][c], other["kernels"][c]))
    assert [w.replace("o.json", "t.json") for w in other["warnings"]] == raw["warnings"]
    assert any("1 timestamp or duration given as text repaired" in w for w in raw["warnings"])


@pytest.mark.shared_data
def test_both_decoders_give_identical_tables_on_real_traces(shared_data):
    """The typed decoder skips what the kit does not read; it must not change what it does read."""
    files = [shared_data / "traces/tracelens/inference/xdit_sd_3.5/profile_trace_rank_0.json.gz",
             *sorted((shared_data / "traces/param/dlrm_kineto").glob("*.json.gz"))[:2]]
    files = [f for f in files if f.exists()]
    if len(DECODERS) < 2 or not files:
        pytest.skip("msgspec not installed, or the shared traces are absent")
    for f in files:
        a, b = _read(f, "msgspec"), _read(f, "orjson")
        for t in ("kernels", "annotations", "launches", "frames", "comms"):
            assert a[t] == b[t], (f.name, t)
        assert (a["meta"], a["warnings"], a["events"]) == (b["meta"], b["warnings"], b["events"])
