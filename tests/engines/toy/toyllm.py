"""ToyLLM: an engine the kit was not written for, added as this one file (``KIT_ENGINE_PATH`` names its folder).

Its log format (step lines, a version banner, its logger's prefix, the attention backend it chose, one line
per finished request), its trace step marker (``toy_iteration#N``), its records for the ITL reconciliation
(per request, from those lines), its launch phases, port, graph-off flag and settings flag. Nothing else in
the kit names it: ``tests/engines/test_toy_engine.py`` checks that the kit reads it everywhere.
"""
from __future__ import annotations

import re

import pandas as pd

from kit.engines import Engine, GraphOff, StepMarker
from kit.logs import TAKEN, LogFormat, RecordSource, StepRecords, columns

_STEP = re.compile(r"step=(\d+) running=(\d+) tok/s=([0-9.]+)")
_REQUEST = re.compile(r"request id=(\S+) tokens=(\d+) decode_ms=([0-9.]+)")


def _step(line: str, lineno: int, st) -> int:
    m = _STEP.search(line)
    if m is None:
        return 0
    st.toy.add({"line": lineno, "step": int(m.group(1)), "running": int(m.group(2)), "tok_s": float(m.group(3))})
    st.hits["toyllm"] += 1
    return TAKEN


def _request(line: str, lineno: int, st) -> int:
    m = _REQUEST.search(line)
    if m is None:
        return 0
    st.toy_requests.add({"line": lineno, "id": m.group(1), "output_tokens": int(m.group(2)),
                         "decode": float(m.group(3)) / 1e3})
    st.hits["toyllm"] += 1
    return TAKEN


def _backend(line: str, lineno: int, st) -> bool:
    m = re.search(r"toy attention backend: (\w+)", line)
    if m is None:
        return False
    st.say(lineno, "value", ("attention_backend", m.group(1), line.strip()), "attention backend line")
    return True


FORMAT = LogFormat(
    "toyllm", engine=True, header=re.compile(r"\[toy\] "),
    take=(("step=", _step), ("request id=", _request)), notes=(("toy attention", _backend),),
    banner=(("ToyLLM version",), re.compile(r"ToyLLM version (\d+\.\d+\.\d+)")),
    tables={"toy": columns(), "toy_requests": columns()},
    build=lambda st, warnings: {"toy": st.toy.frame(("line", "step", "running", "tok_s")),
                                "toy_requests": st.toy_requests.frame(("line", "id"))},
    batches=lambda tables: (tables["toy"][["line", "running"]].assign(graph=None), "toy running={n}")
    if len(tables["toy"]) else None)


def _records(src: RecordSource) -> StepRecords | None:
    log = src.log
    t = log.tables.get("toy_requests") if log is not None else None
    if t is None or not len(t):
        return None
    return StepRecords(src.name, pd.DataFrame(), t.drop(columns=["line"]), [], "request", "toyllm",
                       source="ToyLLM request lines: decode time per request")


ENGINE = Engine(
    "toyllm", "ToyLLM", commands=("toyllm-serve",), log_formats=(FORMAT,),
    step_markers=(StepMarker(r"^toy_iteration#(\d+)", lambda m: "decode"),),
    records=(("request", _records, "its log's request lines"),),
    phases=(("loading weights", r"loading weights"), ("ready", r"ToyLLM ready")), port=7070,
    graph_off=(GraphOff(r"--toy-graphs", ("--no-toy-graphs",), True, "graphs off (--no-toy-graphs)"),),
    distributions=("toyllm",), settings={"toy_graphs": ("cuda_graph", "bool")})
