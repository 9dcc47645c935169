"""Format edge cases of the trace readers: gzip sniffing, truncation salvage, clocks, old/odd Kineto,
zero-duration kernels, bad input, and nsys stats CSV / SQLite written to the documented formats
(traces.md §4; no real nsys output is available to the project: nsys could not make reports on the
device machine)."""
from __future__ import annotations

import gzip
import json
import sqlite3

import numpy as np
import orjson
import pytest

from kit import profile
from kit.errors import TraceError
from tests.conftest import SAMPLE

GRAPH = SAMPLE / "traces" / "tp1_graph" / "rank0.trace.json.gz"


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_CACHE_DIR", str(tmp_path / "cache"))


def _json_bytes() -> bytes:
    return gzip.decompress(GRAPH.read_bytes())


def _kernel_keys(p):
    return set(zip(p.kernels["name"].astype(str), p.kernels["correlation"], p.kernels["dur_us"]))


@pytest.mark.gpu_fixture
def test_gzip_is_sniffed_not_guessed_from_suffix(tmp_path):
    a = tmp_path / "plain_but_named.json.gz"
    a.write_bytes(_json_bytes())
    b = tmp_path / "gzipped_but_named.json"
    b.write_bytes(GRAPH.read_bytes())
    c = tmp_path / "trace.bin"
    c.write_bytes(GRAPH.read_bytes())
    ref = profile.load(GRAPH)
    for f in (a, b, c):
        p = profile.load(f)
        assert _kernel_keys(p) == _kernel_keys(ref)
        assert not p.warnings


@pytest.mark.gpu_fixture
@pytest.mark.parametrize("fraction", [0.3, 0.77])
def test_truncated_json_keeps_every_complete_event_and_says_what_was_lost(tmp_path, fraction):
    data = _json_bytes()
    cut = int(len(data) * fraction)
    f = tmp_path / "cut.json"
    f.write_bytes(data[:cut])
    p = profile.load(f)
    # independently: walk the cut text event by event with the stdlib decoder until one is incomplete
    text = data[:cut].decode("utf-8", errors="ignore")
    dec = json.JSONDecoder()
    i = text.index("[", text.index('"traceEvents"')) + 1
    expect = 0
    while True:
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        try:
            e, i = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            break
        expect += e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    assert len(p.kernels) == expect > 0
    assert _kernel_keys(p) <= _kernel_keys(profile.load(GRAPH))
    w = [x for x in p.warnings if "truncated trace" in x]
    assert len(w) == 1 and "cut.json" in w[0] and "events lost" in w[0] and "GPU time lost" in w[0]


@pytest.mark.gpu_fixture
def test_truncated_gzip_stream_is_salvaged(tmp_path):
    raw = GRAPH.read_bytes()
    f = tmp_path / "cut.json.gz"
    f.write_bytes(raw[: len(raw) // 2])
    p = profile.load(f)
    assert 0 < len(p.kernels) < len(profile.load(GRAPH).kernels)
    assert any("gzip stream ends early" in w for w in p.warnings)
    assert any("truncated trace" in w for w in p.warnings)


def _mini(events, **top):
    return json.dumps({"schemaVersion": 1, **top, "traceEvents": events}).encode()


def _k(name, ts, dur, stream=7, corr=1, pid=0):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": pid, "tid": stream, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": stream, "correlation": corr}}


def test_base_time_nanoseconds_aligns_relative_and_absolute_ranks(tmp_path):
    base_ns = 1_767_189_312_000_000_000
    rel = [_k("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 1000.5, 10.0), _k("nvjet_x", 1020.5, 5.0, corr=2)]
    absolute = [_k("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", base_ns / 1000 + 1002.5, 8.0),
                _k("nvjet_x", base_ns / 1000 + 1020.5, 5.0, corr=2)]
    a = tmp_path / "rank0.json"
    a.write_bytes(_mini(rel, baseTimeNanoseconds=base_ns, distributedInfo={"rank": 0}))
    b = tmp_path / "rank1.json"
    b.write_bytes(_mini(absolute, distributedInfo={"rank": 1}))
    p = profile.load([a, b])
    k = p.kernels.sort_values(["rank", "start_us"])
    assert list(k["start_us"]) == pytest.approx([0.0, 20.0, 2.0, 20.0], abs=0.5)
    assert not any("clock" in w for w in p.warnings)
    s = p.summary()
    assert s.allreduce_spread["spread_us"] == pytest.approx(2.0)


def test_ranks_on_different_clock_bases_are_flagged(tmp_path):
    a = tmp_path / "rank0.json"
    a.write_bytes(_mini([_k("nvjet_x", 1_700_000_000_000_000, 5.0)], distributedInfo={"rank": 0}))
    b = tmp_path / "rank1.json"
    b.write_bytes(_mini([_k("nvjet_x", 1_700_000_900_000_000, 5.0)], distributedInfo={"rank": 1}))
    p = profile.load([a, b])
    assert any("do not overlap" in w and "clock" in w for w in p.summary().warnings)


def test_relative_timestamps_without_base_are_flagged(tmp_path):
    a = tmp_path / "rank0.json"
    a.write_bytes(_mini([_k("nvjet_x", 100.0, 5.0)]))
    assert any("no baseTimeNanoseconds" in w for w in profile.load(a).warnings)


def test_string_pids_bare_array_and_no_metadata(tmp_path):
    events = [
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 0, "dur": 100},
        {"ph": "i", "cat": "user_annotation", "name": "Iteration Start: PyTorch Profiler", "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": 1, "s": "g"},
        {"ph": "X", "cat": "kernel", "name": "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 2>(vllm::RankData*)", "pid": "0", "tid": "stream 7 ", "ts": 10, "dur": 4},
        {"ph": "X", "cat": "kernel", "name": "nvjet_tst_64x8", "pid": 0, "tid": 7, "ts": 15, "dur": 6},
    ]
    f = tmp_path / "arr.json"
    f.write_bytes(json.dumps(events).encode())
    p = profile.load(f)
    assert list(p.kernels["stream"]) == [7, 7] and list(p.kernels["device"]) == [0, 0]
    s = p.summary()
    assert s.share("allreduce") == pytest.approx(0.4)
    assert p.meta["ranks"][0]["device_properties"] == []


@pytest.mark.shared_data
def test_old_capitalised_categories(shared_data):
    p = profile.load(shared_data / "traces/hta/trace_file_list/inference_rank_1.json.gz")
    assert len(p.kernels) == 4
    assert p.meta["ranks"][1]["rank_from"] == "distributedInfo"


@pytest.mark.shared_data
def test_cpu_only_trace_warns_no_gpu_events(shared_data):
    p = profile.load(shared_data / "traces/hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")
    s = p.summary()
    assert s.kernel_time_us == 0 and any("no GPU kernels" in w for w in s.warnings)


@pytest.mark.gpu_fixture
def test_zero_duration_graph_kernels_say_breakdown_unavailable(tmp_path):
    doc = orjson.loads(_json_bytes())
    graph_corr = {e["args"]["correlation"] for e in doc["traceEvents"]
                  if e.get("cat") == "cuda_runtime" and e["name"] == "cudaGraphLaunch"}
    n = 0
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and e["args"].get("correlation") in graph_corr:
            e["dur"] = 0
            n += 1
    f = tmp_path / "zero.json"
    f.write_bytes(orjson.dumps(doc))
    s = profile.load(f).summary("decode")
    w = [x for x in s.warnings if "zero duration" in x]
    assert len(w) == 1 and f"{n:,} of" in w[0] and "breakdown is unavailable" in w[0]


@pytest.mark.gpu_fixture
def test_zero_duration_graph_kernels_are_not_reported_as_gpu_idle(tmp_path):
    """Kernels recorded without duration would otherwise turn the whole graph replay into 'idle'."""
    doc = orjson.loads(_json_bytes())
    graph_corr = {e["args"]["correlation"] for e in doc["traceEvents"]
                  if e.get("cat") == "cuda_runtime" and e["name"] == "cudaGraphLaunch"}
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and e["args"].get("correlation") in graph_corr:
            e["dur"] = 0
    f = tmp_path / "zero.json"
    f.write_bytes(orjson.dumps(doc))
    s = profile.load(f).summary("decode")
    ref = profile.load(GRAPH).summary("decode")
    assert "idle" not in set(s.categories["category"])
    assert np.isnan(s.per_rank["idle_us"].iloc[0]) and np.isnan(s.per_rank["exposed_comm_us"].iloc[0])
    assert any("GPU idle and exposed communication cannot be measured" in w for w in s.warnings)
    # category times are unavailable, never 0 ms
    assert s.categories_unavailable and "without duration" in s.categories_unavailable
    assert s.categories["time_us"].isna().all() and np.isnan(s.kernel_time_us)
    # the graph-level time stays: the steps' GPU spans
    assert s.wall_time_us == pytest.approx(ref.wall_time_us, rel=0.05)


@pytest.mark.parametrize("content,needle", [
    (b"", "empty file"),
    (b"\x00\x01\x02\x03binary\x00\xff" * 10, "binary data"),
    (b'{"hello": "world"}', "without 'traceEvents'"),
    (b'{"traceEvents": {"a": 1}}', "'traceEvents' is not an array"),
    (b"just some text\nwith lines\n", "not a Kineto JSON trace"),
    (b'{"schemaVersion": 1, "deviceProp', "not valid JSON"),
    (b"\x1f\x8bgarbage, not a deflate stream", "corrupt gzip data"),
])
def test_bad_input_is_one_line_naming_the_file(tmp_path, content, needle):
    f = tmp_path / "input.json"
    f.write_bytes(content)
    with pytest.raises(TraceError) as ei:
        profile.load(f)
    msg = str(ei.value)
    assert needle in msg and str(f) in msg and "\n" not in msg


def test_directory_and_missing_file(tmp_path):
    with pytest.raises(TraceError, match="is a directory"):
        profile.load(tmp_path)
    with pytest.raises(TraceError, match="no such file"):
        profile.load(tmp_path / "nope.json.gz")


# ---------------------------------------------------------------- nsys

NSYS_STDOUT = """Generating SQLite file report1.sqlite from report1.nsys-rep
Processing [report1.sqlite] with [/opt/nvidia/nsight-systems/2024.6.2/host-linux-x64/reports/cuda_api_sum.py]...

 ** CUDA API Summary (cuda_api_sum):

Time (%),Total Time (ns),Num Calls,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name
60.0,3000000,100,30000.0,30000.0,1000,90000,100.0,cudaLaunchKernel

Processing [report1.sqlite] with [/opt/nvidia/nsight-systems/2024.6.2/host-linux-x64/reports/cuda_gpu_kern_sum.py]...

 ** CUDA GPU Kernel Summary (cuda_gpu_kern_sum):

Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name
51.5,5150000,640,8046.9,8000.0,7000,12000,300.0,"void sglang::cross_device_reduce_1stage<__nv_bfloat16, 8>(sglang::RankData*, sglang::Signal*, int, int)"
30.0,3000000,320,9375.0,9300.0,9000,11000,200.0,nvjet_sm90_tst_128x8_64x12_2x1_v_bz_TNT
15.0,1500000,40,37500.0,37000.0,36000,40000,500.0,"void flashinfer::BatchDecodeWithPagedKVCacheKernel<(flashinfer::PosEncodingMode)0, 2u, 4u>(flashinfer::paged_kv_t<__nv_bfloat16, int>)"
3.5,350000,40,8750.0,8700.0,8000,9500,100.0,"void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long, c10::BFloat16*)"

Processing [report1.sqlite] with [/opt/nvidia/nsight-systems/2024.6.2/host-linux-x64/reports/cuda_gpu_mem_time_sum.py]...
SKIPPED: report1.sqlite does not contain GPU memory data.
"""


def test_nsys_stats_multi_report_stdout(tmp_path):
    f = tmp_path / "nsys_stats.txt"
    f.write_text(NSYS_STDOUT)
    p = profile.load(f)
    s = p.summary()
    assert len(p.kernels) == 4 and p.kernels["count"].sum() == 1040
    assert s.kernel_time_us == pytest.approx(10000.0)
    assert s.share("allreduce") == pytest.approx(0.515)
    assert s.share("attention") == pytest.approx(0.15)
    assert "idle" not in set(s.categories["category"])
    assert any("no timeline" in w for w in s.warnings)
    assert any("SKIPPED" in w for w in s.warnings)
    assert s.to_dict()["wall_time_us"] is None


def test_nsys_per_report_file_and_old_gpukernsum_text(tmp_path):
    f = tmp_path / "prefix_cuda_gpu_kern_sum.csv"
    f.write_text(NSYS_STDOUT.split(" ** CUDA GPU Kernel Summary (cuda_gpu_kern_sum):\n\n")[1].split("\n\n")[0] + "\n")
    assert profile.load(f).summary().share("allreduce") == pytest.approx(0.515)
    old = tmp_path / "gpukernsum.txt"
    old.write_text(
        "CUDA Kernel Statistics (nanoseconds)\n\n"
        "Time(%)  Total Time  Instances  Average  Minimum  Maximum  Name\n"
        "-------  ----------  ---------  -------  -------  -------  ----\n"
        "   75.0     7500000        300  25000.0    20000    30000  ncclKernel_AllReduce_RING_LL_Sum_half(ncclWorkElem)\n"
        "   25.0     2500000        100  25000.0    20000    30000  volta_h884gemm_64x64_ldg8_nn\n")
    s = profile.load(old).summary()
    assert s.kernel_time_us == pytest.approx(10000.0)
    assert s.share("allreduce") == pytest.approx(0.75) and s.share("gemm") == pytest.approx(0.25)


def test_nsys_without_kernel_data_is_an_error(tmp_path):
    f = tmp_path / "empty_stats.txt"
    f.write_text("Processing [r.sqlite] with [/x/reports/cuda_gpu_kern_sum.py]...\n"
                 "SKIPPED: r.sqlite does not contain CUDA kernel data.\n")
    with pytest.raises(TraceError, match="cuda-graph-trace=node"):
        profile.load(f)


def test_nsys_sqlite_export(tmp_path):
    """A database with the tables/columns nsys export --type sqlite writes (StringIds, CUPTI_ACTIVITY_KIND_*,
    NVTX_EVENTS with eventType 59 = push/pop range)."""
    f = tmp_path / "report.sqlite"
    con = sqlite3.connect(f)
    con.executescript("""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER,
            contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER,
            shortName INTEGER, mangledName INTEGER, gridX INTEGER, blockX INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER,
            contextId INTEGER, streamId INTEGER, correlationId INTEGER, bytes INTEGER, copyKind INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER,
            globalTid INTEGER, correlationId INTEGER, nameId INTEGER, returnValue INTEGER);
        CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
            category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER,
            domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER,
            int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT);
        INSERT INTO StringIds VALUES (1, 'ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)'),
            (2, 'nvjet_sm90_tst_128x8'), (3, 'cudaLaunchKernel'), (4, 'decode_step_0'), (5, 'decode_step_1');
    """)
    rows = []
    for step in range(2):
        t = step * 1_000_000
        rows += [(t + 1000, t + 201000, 0, 1, 7, 10 * step + 1, 1, 2, 2, 2, 1, 1),
                 (t + 202000, t + 302000, 0, 1, 13, 10 * step + 2, 1, 1, 1, 1, 1, 1)]
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", rows)
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,?,?,?)",
                    [(r[0] - 500, r[0] - 400, 1, 99, r[5], 3, 0) for r in rows])
    con.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, textId) VALUES (?,?,?,?,?,?)",
                    [(s * 1_000_000, s * 1_000_000 + 400_000, 59, None, 99, 4 + s) for s in range(2)])
    con.commit()
    con.close()
    p = profile.load(f)
    assert list(p.steps["name"]) == ["decode_step_0", "decode_step_1"]
    s = p.summary("decode")
    assert s.steps == 2
    assert s.kernel_time_us == pytest.approx(600.0)
    assert s.share("allreduce") == pytest.approx(200.0 / 600.0)
    assert s.wall_time_us == pytest.approx(2 * 301.0)
    assert s.per_rank["exposed_comm_us"].iloc[0] == pytest.approx(200.0)


def test_not_an_nsys_sqlite(tmp_path):
    f = tmp_path / "other.sqlite"
    con = sqlite3.connect(f)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    with pytest.raises(TraceError, match="CUPTI_ACTIVITY_KIND_KERNEL"):
        profile.load(f)


@pytest.mark.gpu_fixture
def test_steps_from_cuda_graph_launches_when_no_annotations(tmp_path):
    """Without record_function ranges, each cudaGraphLaunch is a decode step (its kernels share the
    launch's correlation id): the real graph trace with its annotations removed gives the same steps."""
    doc = orjson.loads(_json_bytes())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") not in ("user_annotation", "gpu_user_annotation")]
    f = tmp_path / "no_annotations.json"
    f.write_bytes(orjson.dumps(doc))
    p = profile.load(f)
    ref = profile.load(GRAPH)
    dec = ref.steps[ref.steps["phase"] == "decode"]
    assert set(p.steps["source"]) == {"cuda-graph"} and set(p.steps["phase"]) == {"decode"}
    assert len(p.steps) == len(dec) == 16
    assert list(p.steps["kernels"]) == list(dec["kernels"])
    assert list(p.steps["wall_us"]) == pytest.approx(list(dec["wall_us"]))
    # the eager prefill kernels belong to no graph launch
    prefill = ref.steps.loc[ref.steps["phase"] == "prefill", "kernels"].sum()
    assert (p.kernels["step"] == -1).sum() == (ref.kernels["step"] == -1).sum() + prefill


@pytest.mark.shared_data
def test_steps_from_gaps_when_nothing_else(shared_data):
    p = profile.load(shared_data / "traces/hta/trace_file_list/inference_rank_1.json.gz")
    assert list(p.steps["source"]) == ["gaps"] and (p.kernels["step"] == 0).all()


def test_nsys_cuda_gpu_trace_csv_has_a_timeline(tmp_path):
    """The per-kernel cuda_gpu_trace report (columns as its usage text lists them) gives real steps and idle."""
    head = ("Start (ns),Duration (ns),CorrId,GrdX,GrdY,GrdZ,BlkX,BlkY,BlkZ,Reg/Trd,StcSMem (MB),DymSMem (MB),"
            "Bytes (MB),Throughput (MBps),SrcMemKd,DstMemKd,Device,Ctx,Strm,Name\n")
    rows = []
    for step in range(3):
        t = 1_000_000 + step * 5_000_000          # 5 ms apart: three bursts
        rows.append(f"{t},200000,{10 * step + 1},1,1,1,1,1,1,32,0,0,,,,,NVIDIA H200 (0),1,7,nvjet_sm90_tst_128x8")
        rows.append(f"{t + 250000},100000,{10 * step + 2},1,1,1,1,1,1,32,0,0,,,,,NVIDIA H200 (0),1,13,"
                    f"\"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)\"")
    f = tmp_path / "trace_cuda_gpu_trace.csv"
    f.write_text(head + "\n".join(rows) + "\n")
    p = profile.load(f)
    assert list(p.kernels["device"].unique()) == [0] and sorted(p.kernels["stream"].unique()) == [7, 13]
    s = p.summary()
    assert s.steps == 3 and set(p.steps["source"]) == {"gaps"}
    assert s.wall_time_us == pytest.approx(3 * 350.0)
    assert s.share("idle", of="wall") == pytest.approx(50.0 / 350.0)
    assert s.share("allreduce") == pytest.approx(1 / 3)
    assert not any("no timeline" in w for w in s.warnings)
