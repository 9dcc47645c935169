"""Write the malformed-input corpus into a directory and return what each file must give.

``python tests/data/malformed/make_corpus.py DIR`` writes it for a look; the tests call
:func:`build` into a temporary directory. Each :class:`Case` names its file, the parser family
that reads it (``trace``: ``kit.profile.load`` / ``kit profile summary``; ``log``: ``kit.logs.read``
/ ``kit logs parse``; ``bench``: ``kit.logs.parse_bench`` / ``kit bench parse``; ``env-*``: the
``kit.env`` text parsers) and the expected outcome:

- ``ok``: these figures, and no warning matching ``dropped|repaired|truncated``;
- ``warn``: these figures, plus a warning matching ``warn`` (it counts what was dropped/repaired);
- ``error``: one ``kit.errors`` exception whose message names the file and matches ``error``.

Figures for traces are the kernel count and the summed kernel time (us) that a correct reading
of the valid events gives. Every file is also fed to every other entry point: whatever they do,
it must be a result or a ``kit.errors`` exception, never another exception.
"""
from __future__ import annotations

import gzip
import json
import sqlite3
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Case:
    name: str
    family: str
    expect: str  # ok | warn | error
    figures: dict[str, Any] = field(default_factory=dict)
    warn: str = ""
    error: str = ""


N = 20  # kernels in the base trace, 10 us each, 20 us apart


def _kernel(i: int, **over: Any) -> dict:
    e = {"ph": "X", "cat": "kernel", "name": f"triton_poi_fused_add_{i % 3}", "pid": 0, "tid": 7,
         "ts": 1_000_000 + 20 * i, "dur": 10,
         "args": {"device": 0, "stream": 7, "correlation": 100 + i}}
    e.update(over)
    return e


def _launch(i: int) -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
            "ts": 1_000_000 + 20 * i - 5, "dur": 3, "args": {"correlation": 100 + i}}


def _trace(kernels: list[dict], extra: list[dict] | None = None) -> dict:
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
               "ts": 999_990, "dur": 20 * N + 20}]
    events += [_launch(i) for i in range(N)] + kernels + (extra or [])
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}],
            "traceEvents": events, "baseTimeNanoseconds": 1_700_000_000_000_000_000}


def _dump(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def _trace_cases(d: Path) -> list[Case]:
    cases: list[Case] = []

    def put(name: str, data: bytes, case: Case) -> None:
        (d / name).write_bytes(data)
        cases.append(case)

    base = [_kernel(i) for i in range(N)]
    put("k_ok.json", _dump(_trace(base)), Case("k_ok.json", "trace", "ok", {"kernels": N, "kernel_us": 10.0 * N}))
    put("k_ok.json.gz", gzip.compress(_dump(_trace(base))),
        Case("k_ok.json.gz", "trace", "ok", {"kernels": N, "kernel_us": 10.0 * N}))
    neg = [_kernel(i, dur=-5) if i in (3, 4) else _kernel(i) for i in range(N)]
    put("k_negative_dur.json", _dump(_trace(neg)), Case("k_negative_dur.json", "trace", "warn",
        {"kernels": N - 2, "kernel_us": 10.0 * (N - 2)}, warn=r"2 kernel events .*negative duration.* dropped"))
    no_ts = [{k: v for k, v in _kernel(i).items() if k != "ts"} if i < 3 else _kernel(i) for i in range(N)]
    put("k_missing_ts.json", _dump(_trace(no_ts)), Case("k_missing_ts.json", "trace", "warn",
        {"kernels": N - 3, "kernel_us": 10.0 * (N - 3)}, warn=r"3 kernel events .*no usable timestamp.* dropped"))
    most = [{k: v for k, v in _kernel(i).items() if k != "ts"} if i < N - 1 else _kernel(i) for i in range(N)]
    put("k_most_missing_ts.json", _dump(_trace(most)), Case("k_most_missing_ts.json", "trace", "error",
        error=r"19 of 20 kernel events .*no usable timestamp"))
    put("k_duplicated.json", _dump(_trace(base + [dict(e) for e in base])), Case("k_duplicated.json", "trace", "warn",
        {"kernels": N, "kernel_us": 10.0 * N}, warn=r"20 duplicated kernel events dropped"))
    txt = _dump(_trace(base)).replace(b'"ts": 1000100, "dur": 10', b'"ts": 1000100, "dur": NaN')
    assert b"NaN" in txt
    put("k_nan_dur.json", txt, Case("k_nan_dur.json", "trace", "warn",
        {"kernels": N - 1, "kernel_us": 10.0 * (N - 1)}, warn=r"1 kernel event .*(NaN|not finite).* dropped"))
    put("k_nan_dur.json.gz", gzip.compress(txt), Case("k_nan_dur.json.gz", "trace", "warn",
        {"kernels": N - 1, "kernel_us": 10.0 * (N - 1)}, warn=r"1 kernel event .*(NaN|not finite).* dropped"))
    txt = _dump(_trace(base)).replace(b'"ts": 1000200,', b'"ts": NaN,')
    put("k_nan_ts.json", txt, Case("k_nan_ts.json", "trace", "warn",
        {"kernels": N - 1, "kernel_us": 10.0 * (N - 1)}, warn=r"1 kernel event .*no usable timestamp.* dropped"))
    txt = _dump(_trace(base)).replace(b'"ts": 1000200, "dur": 10', b'"ts": 1000200, "dur": Infinity')
    put("k_inf_dur.json", txt, Case("k_inf_dur.json", "trace", "warn",
        {"kernels": N - 1, "kernel_us": 10.0 * (N - 1)}, warn=r"1 kernel event .*(NaN|not finite).* dropped"))
    unit = [_kernel(i, dur="12.5us") if i == 5 else _kernel(i) for i in range(N)]
    put("k_dur_with_unit.json", _dump(_trace(unit)), Case("k_dur_with_unit.json", "trace", "warn",
        {"kernels": N, "kernel_us": 10.0 * (N - 1) + 12.5}, warn=r"1 .*given as text.* repaired"))
    ms = [_kernel(i, dur="0.0125 ms") if i == 5 else _kernel(i) for i in range(N)]
    put("k_dur_ms_text.json", _dump(_trace(ms)), Case("k_dur_ms_text.json", "trace", "warn",
        {"kernels": N, "kernel_us": 10.0 * (N - 1) + 12.5}, warn=r"1 .*given as text.* repaired"))
    garbage = [_kernel(i, dur="fast") if i == 5 else _kernel(i) for i in range(N)]
    put("k_dur_garbage.json", _dump(_trace(garbage)), Case("k_dur_garbage.json", "trace", "warn",
        {"kernels": N - 1, "kernel_us": 10.0 * (N - 1)}, warn=r"1 kernel event .*unreadable duration.* dropped"))
    ts_text = [_kernel(i, ts=str(1_000_000 + 20 * i)) if i == 6 else _kernel(i) for i in range(N)]
    put("k_ts_text.json", _dump(_trace(ts_text)), Case("k_ts_text.json", "trace", "warn",
        {"kernels": N, "kernel_us": 10.0 * N}, warn=r"1 .*given as text.* repaired"))
    odd = [_kernel(i, args="device 0") if i == 2 else _kernel(i, cat=["kernel"]) if i == 3 else _kernel(i)
           for i in range(N)]
    put("k_odd_types.json", _dump(_trace(odd)), Case("k_odd_types.json", "trace", "warn",
        {"kernels": N - 1, "kernel_us": 10.0 * (N - 1)}, warn=r"1 event .*category that is not a string.* dropped"))
    deep = _dump(_trace(base[:10])).replace(b'"args": {"device": 0, "stream": 7, "correlation": 105}',
                                             b'"args": {"device": 0, "stream": 7, "correlation": 105, "x": '
                                             + b"[" * 100_000 + b"]" * 100_000 + b"}")
    put("k_deep_args.json", deep, Case("k_deep_args.json", "trace", "warn", {"kernels": 9, "kernel_us": 90.0},
        warn=r"1 event .*nested .*deep.* dropped"))
    full = _dump(_trace(base))
    put("k_truncated.json", full[: len(full) - 300], Case("k_truncated.json", "trace", "warn", warn=r"truncated trace"))
    put("k_not_json.json", b"{this is not json at all",
        Case("k_not_json.json", "trace", "error", error=r"not valid JSON"))
    put("k_empty.json", b"", Case("k_empty.json", "trace", "error", error=r"empty file"))
    put("k_events_not_array.json", b'{"traceEvents": 5}', Case("k_events_not_array.json", "trace", "error",
        error=r"not an array"))
    put("k_deep_array.json", b"[" * 100_000 + b"]" * 100_000, Case("k_deep_array.json", "trace", "error",
        error=r"not a Kineto JSON trace, and no nsys kernel table"))
    put("k_binary.json.gz", b"\x1f\x8b\x08\x00garbagegarbage", Case("k_binary.json.gz", "trace", "error",
        error=r"corrupt gzip"))
    return cases


_CSV_HEAD = "Start (ns),Duration (ns),CorrId,GrdX,GrdY,GrdZ,BlkX,BlkY,BlkZ,Device,Strm,Name\n"


def _csv_rows(durs: list[str]) -> str:
    return "".join(f"{1_000_000_000 + 20_000 * i},{d},{100 + i},1,1,1,128,1,1,NVIDIA H200 (0),7,k{i % 3}\n"
                   for i, d in enumerate(durs))


def _nsys_cases(d: Path) -> list[Case]:
    cases = []

    def put(name: str, text: str, case: Case) -> None:
        (d / name).write_text(text)
        cases.append(case)

    put("n_trace_ok.csv", _CSV_HEAD + _csv_rows(["10000"] * N), Case("n_trace_ok.csv", "trace", "ok",
        {"kernels": N, "kernel_us": 10.0 * N}))
    put("n_trace_negative.csv", _CSV_HEAD + _csv_rows(["10000"] * (N - 1) + ["-4000"]),
        Case("n_trace_negative.csv", "trace", "warn", {"kernels": N - 1, "kernel_us": 10.0 * (N - 1)},
             warn=r"1 kernel event .*negative duration.* dropped"))
    put("n_trace_text_dur.csv", _CSV_HEAD + _csv_rows(["10000"] * (N - 1) + ["12.5us"]),
        Case("n_trace_text_dur.csv", "trace", "warn", {"kernels": N - 1, "kernel_us": 10.0 * (N - 1)},
             warn=r"1 kernel event .*unreadable duration.* dropped"))
    put("n_trace_duplicated.csv", _CSV_HEAD + _csv_rows(["10000"] * N) * 2,
        Case("n_trace_duplicated.csv", "trace", "warn", {"kernels": N, "kernel_us": 10.0 * N},
             warn=r"20 duplicated kernel events dropped"))
    put("n_no_table.csv", "Time,Calls\n1,2\n", Case("n_no_table.csv", "trace", "error", error=r"no nsys kernel table"))
    return cases


def _sqlite(path: Path, rows: list[tuple]) -> None:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
    con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId INTEGER, streamId INTEGER, "
                "correlationId INTEGER, demangledName INTEGER, shortName INTEGER)")
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(1, "k_gemm"), (2, "k_norm")])
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 7, ?, ?, ?)",
                    [(s, e, 100 + i, 1 + i % 2, 1 + i % 2) for i, (s, e) in enumerate(rows)])
    con.commit()
    con.close()


def _sqlite_cases(d: Path) -> list[Case]:
    ok = [(1_000_000_000 + 20_000 * i, 1_000_000_000 + 20_000 * i + 10_000) for i in range(N)]
    _sqlite(d / "s_ok.sqlite", ok)
    text = [(str(s), str(e)) if i == 4 else (s, e) for i, (s, e) in enumerate(ok)]
    _sqlite(d / "s_text_numbers.sqlite", text)
    junk = [("12:00:01.5", e) if i == 4 else (s, e) for i, (s, e) in enumerate(ok)]
    _sqlite(d / "s_text_timestamp.sqlite", junk)
    null_end = [(s, None) if i == 4 else (s, e) for i, (s, e) in enumerate(ok)]
    _sqlite(d / "s_null_end.sqlite", null_end)
    backwards = [(e, s) if i == 4 else (s, e) for i, (s, e) in enumerate(ok)]
    _sqlite(d / "s_end_before_start.sqlite", backwards)
    (d / "s_corrupt.sqlite").write_bytes(b"SQLite format 3\x00" + b"\x00\x01garbage" * 200)
    con = sqlite3.connect(d / "s_no_kernels.sqlite")
    con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
    con.commit()
    con.close()
    return [
        Case("s_ok.sqlite", "trace", "ok", {"kernels": N, "kernel_us": 10.0 * N}),
        Case("s_text_numbers.sqlite", "trace", "warn", {"kernels": N, "kernel_us": 10.0 * N},
             warn=r"2 .*given as text.* repaired"),
        Case("s_text_timestamp.sqlite", "trace", "warn", {"kernels": N - 1, "kernel_us": 10.0 * (N - 1)},
             warn=r"1 kernel event .*no usable timestamp.* dropped"),
        Case("s_null_end.sqlite", "trace", "warn", {"kernels": N - 1, "kernel_us": 10.0 * (N - 1)},
             warn=r"1 kernel event .*unreadable duration.* dropped"),
        Case("s_end_before_start.sqlite", "trace", "warn", {"kernels": N - 1, "kernel_us": 10.0 * (N - 1)},
             warn=r"1 kernel event .*negative duration.* dropped"),
        Case("s_corrupt.sqlite", "trace", "error", error=r"SQLite"),
        Case("s_no_kernels.sqlite", "trace", "error", error=r"without CUPTI_ACTIVITY_KIND_KERNEL"),
    ]


_DECODE = ("[2025-06-01 10:00:{s:02d}] Decode batch. #running-req: 1, #token: {t}, token usage: 0.00, "
           "gen throughput (token/s): {g:.2f}, #queue-req: 0\n")


def _log_cases(d: Path) -> list[Case]:
    cases = []
    lines = "".join(_DECODE.format(s=i, t=100 + i, g=60.0 + i) for i in range(10))
    (d / "l_sglang_ok.log").write_text(lines)
    cases.append(Case("l_sglang_ok.log", "log", "ok", {"decode": 10, "gen_throughput_mean": 64.5}))
    torn = lines.splitlines(keepends=True)
    torn[4] = torn[4][:70] + torn[4][80:]  # a writer cut into line 5: the tail of its numbers is gone
    (d / "l_sglang_torn.log").write_text("".join(torn))
    cases.append(Case("l_sglang_torn.log", "log", "warn", {"decode": 9, "gen_throughput_mean": 64.555556},
                      warn=r"1 torn line"))
    (d / "l_latin1.log").write_bytes(lines.encode() + "caf\xe9 r\xe9sum\xe9\n".encode("latin-1"))
    cases.append(Case("l_latin1.log", "log", "ok", {"decode": 10, "gen_throughput_mean": 64.5}))
    (d / "l_deep.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    cases.append(Case("l_deep.json", "log", "error", error=r"not a serving log"))  # '[[': not JSON-shaped
    (d / "l_deep_obj.json").write_bytes(b'{"a":' * 100_000 + b"1" + b"}" * 100_000)
    cases.append(Case("l_deep_obj.json", "log", "error", error=r"nested|deep"))
    (d / "l_empty.log").write_bytes(b"")
    cases.append(Case("l_empty.log", "log", "error", error=r"empty"))
    (d / "l_binary.log").write_bytes(b"\x00\x01\x02binary\x00" * 50)
    cases.append(Case("l_binary.log", "log", "error", error=r"binary"))
    return cases


_SPEC_DECODE = ("[2025-06-01 10:00:{s:02d}] Decode batch. #running-req: 1, #token: {t}, token usage: 0.00, "
                "accept len: {a}, gen throughput (token/s): {g:.2f}, #queue-req: 0\n")
_ACCEPT = [1.5, 1.7, 1.8, 1.6, 1.75, 1.65, 1.7, 1.72, 1.68, 1.7]  # mean 1.68
_VLLM_SPEC = ("(APIServer pid=7) INFO 09-09 11:51:{s:02d} [metrics.py:96] SpecDecoding metrics: Draft acceptance "
              "rate: 60.0%, Mean acceptance length: {a}, Accepted throughput: 4.37 tokens/s, Drafted throughput: "
              "4.92 tokens/s, Accepted: 240 tokens, Drafted: 400 tokens, Per-position acceptance rate: 0.800, "
              "0.700, 0.500, 0.400\n")


def _value_cases(d: Path) -> list[Case]:
    """Values that parse as numbers but cannot be one: negative lengths and throughputs, 10**400, text."""
    cases = []
    ok = "".join(_SPEC_DECODE.format(s=i, t=100 + i, a=f"{a:.2f}", g=60.0 + i) for i, a in enumerate(_ACCEPT))
    (d / "l_sglang_accept_ok.log").write_text(ok)
    cases.append(Case("l_sglang_accept_ok.log", "log", "ok",
                      {"decode": 10, "gen_throughput_mean": 64.5, "accept_len_mean": 1.68, "spec": 10}))
    neg = "".join(_SPEC_DECODE.format(s=i, t=100 + i, a="-1.00" if i == 3 else f"{a:.2f}", g=60.0 + i)
                  for i, a in enumerate(_ACCEPT))
    (d / "l_sglang_negative_accept.log").write_text(neg)
    cases.append(Case("l_sglang_negative_accept.log", "log", "warn",
                      {"decode": 10, "gen_throughput_mean": 64.5, "accept_len_mean": (16.8 - 1.6) / 9, "spec": 9},
                      warn=r"1 decode value.* accept_len dropped: negative \(first at line 4"))
    neg_g = "".join(_SPEC_DECODE.format(s=i, t=100 + i, a=f"{a:.2f}", g=-62.0 if i == 9 else 60.0 + i)
                    for i, a in enumerate(_ACCEPT))
    (d / "l_sglang_negative_throughput.log").write_text(neg_g)
    cases.append(Case("l_sglang_negative_throughput.log", "log", "warn",
                      {"decode": 10, "gen_throughput_mean": 64.0, "accept_len_mean": 1.68, "spec": 10},
                      warn=r"1 decode value.* gen_throughput dropped: negative"))
    big = "".join(_SPEC_DECODE.format(s=i, t=("1" + "0" * 400) if i == 0 else 100 + i, a=f"{a:.2f}", g=60.0 + i)
                  for i, a in enumerate(_ACCEPT))
    (d / "l_sglang_huge_count.log").write_text(big)
    cases.append(Case("l_sglang_huge_count.log", "log", "warn",
                      {"decode": 10, "gen_throughput_mean": 64.5, "accept_len_mean": 1.68, "spec": 10},
                      warn=r"1 decode value.* token dropped: (not finite|beyond any physical range)"))
    vl = [_VLLM_SPEC.format(s=i, a="-2.50" if i == 2 else "2.50") for i in range(4)]
    (d / "l_vllm_negative_accept_len.log").write_text("".join(vl))
    cases.append(Case("l_vllm_negative_accept_len.log", "log", "warn", {"decode": 0, "spec": 3, "spec_len_mean": 2.5},
                      warn=r"1 vLLM acceptance record.* printed_accept_len dropped: negative"))
    vl = [_VLLM_SPEC.format(s=i, a="2.50").replace("rate: 60.0%", "rate: 160.0%" if i == 1 else "rate: 60.0%")
          for i in range(4)]
    (d / "l_vllm_rate_above_1.log").write_text("".join(vl))
    cases.append(Case("l_vllm_rate_above_1.log", "log", "warn", {"decode": 0, "spec": 3, "spec_len_mean": 2.5},
                      warn=r"1 vLLM acceptance record.* printed_accept_rate dropped: above 1"))
    block = ("============ Serving Benchmark Result ============\n"
             "Backend:                                 sglang-oai\n"
             "Successful requests:                     5\n"
             "Benchmark duration (s):                  44.20\n"
             "Output token throughput (tok/s):         {out}\n"
             "Total token throughput (tok/s):          {tot}\n"
             "---------------Time per Output Token (excl. 1st token)------------\n"
             "Median TPOT (ms):                        {tpot}\n"
             "==================================================\n")
    runs = {"b_negative_tok_s.txt": ("-62", "226.24", "8.50", r"1 bench value.* output_throughput dropped: negative"),
            "b_huge_value.txt": ("113.12", "1" + "0" * 400, "8.50",
                                 r"1 bench value.* total_throughput dropped: beyond any physical range"),
            "b_text_value.txt": ("113.12", "226.24", "ab", r"1 bench value.* median_tpot_ms dropped: not a number")}
    good = block.format(out="113.12", tot="226.24", tpot="8.50")
    for name, (out, tot, tpot, warn) in runs.items():
        (d / name).write_text(good + block.format(out=out, tot=tot, tpot=tpot))
        cases.append(Case(name, "bench", "warn", {"rows": 2, "output_throughput": 113.12, "total_throughput": 226.24,
                                                  "median_tpot_ms": 8.5}, warn=warn))
    row = {"completed": 5, "duration": 44.2, "output_throughput": 113.12, "total_token_throughput": 226.24,
           "median_tpot_ms": 8.5, "model_id": "m"}
    (d / "b_json_bad_values.jsonl").write_text(
        json.dumps(row) + "\n" + json.dumps({**row, "output_throughput": -62.0}) + "\n"
        + json.dumps({**row, "median_tpot_ms": "ab"}) + "\n"
        + json.dumps(row).replace("226.24", "1" + "0" * 400) + "\n")
    cases.append(Case("b_json_bad_values.jsonl", "bench", "warn", {"rows": 4, "output_throughput": 113.12,
                                                                   "total_throughput": 226.24, "median_tpot_ms": 8.5},
                      warn=r"1 bench value.* output_throughput dropped: negative"))
    return cases


def _bench_cases(d: Path) -> list[Case]:
    row = {"run_name": "r", "batch_size": 1, "input_len": 1024, "output_len": 256, "prefill_latency": 0.01,
           "median_decode_latency": 0.005, "median_decode_throughput": 200.0, "total_latency": 0.06,
           "overall_throughput": 1100.0}
    (d / "b_ok.jsonl").write_text(json.dumps(row) + "\n" + json.dumps({**row, "run_name": "s"}) + "\n")
    (d / "b_deep.jsonl").write_bytes(json.dumps(row).encode() + b"\n" + b"[" * 100_000 + b"]" * 100_000 + b"\n")
    (d / "b_deep.json").write_bytes(b'{"a":' * 100_000 + b"1" + b"}" * 100_000)
    (d / "b_nan.jsonl").write_text(json.dumps(row) + "\n"
                                   + json.dumps({**row, "median_decode_throughput": float("nan")}) + "\n")
    (d / "b_list_of_numbers.json").write_text("[1, 2, 3]")
    return [
        Case("b_ok.jsonl", "bench", "ok", {"rows": 2, "output_throughput": 200.0}),
        Case("b_deep.jsonl", "bench", "error", error=r"nested|deep"),
        Case("b_deep.json", "bench", "error", error=r"nested|deep"),
        Case("b_nan.jsonl", "bench", "ok", {"rows": 2, "output_throughput": 200.0}),
        Case("b_list_of_numbers.json", "bench", "error", error=r"not a serving log"),
    ]


def _env_cases(d: Path) -> list[Case]:
    (d / "e_query_gpu_junk.csv").write_text("index, name, memory.total [MiB]\n0, NVIDIA H200, lots\n1, NVIDIA H200\n")
    (d / "e_topo_ragged.txt").write_text("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV18\nGPU1\tNV18\n")
    (d / "e_environ_binary.bin").write_bytes(b"NCCL_DEBUG=INFO\x00NCCL_\xff\xfe=\x00garbage\x00\x00=x")
    return [
        Case("e_query_gpu_junk.csv", "env-gpu", "any"),
        Case("e_topo_ragged.txt", "env-topo", "any"),
        Case("e_environ_binary.bin", "env-environ", "any"),
    ]


def build(directory: str | Path) -> list[Case]:
    """Write every corpus file into ``directory``; return the cases (file name, family, expectation)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    return (_trace_cases(d) + _nsys_cases(d) + _sqlite_cases(d) + _log_cases(d) + _value_cases(d) + _bench_cases(d)
            + _env_cases(d))


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "malformed-corpus")
    for c in build(out):
        print(f"{c.name:<28} {c.family:<12} {c.expect:<5} {c.figures or ''} {c.warn or c.error}")
