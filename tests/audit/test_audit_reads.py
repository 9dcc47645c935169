"""``kit audit`` says what it read each run as: the engine ``kit logs parse`` finds in a log (none was
shown for a log without an argument dump) and what a benchmark file holds (it said "nothing about
settings")."""
from __future__ import annotations

import kit
from tests.conftest import ROOT

LOGS = ROOT / "tests" / "data" / "logs"


def test_the_engine_and_the_benchmark_results_are_shown():
    a = kit.audit.audit([LOGS / "sglang_0.4.6_decode.log", LOGS / "vllm_bench_serve_0.34.txt"])
    runs = {k.rsplit("/", 1)[-1]: v for k, v in a.runs.items()}
    assert runs["sglang_0.4.6_decode.log"].engine == kit.logs.read(LOGS / "sglang_0.4.6_decode.log").engine == "sglang"
    bench = runs["vllm_bench_serve_0.34.txt"]
    assert bench.engine == "vllm" and "1 benchmark result(s) of vllm" in str(bench.sources)
    text = repr(a)
    assert "run sglang_0.4.6_decode.log: engine sglang" in text and "nothing about settings (" not in text
