"""The engine table (``kit/logs/_formats.py``): a log format is one file plus one row.

The toy format below is that file: its parsers, its table, its engine evidence, its version banner and
the settings evidence its lines carry. Adding it as one row of the table (here beside the kit's own rows;
an engine names its rows in its ``kit.engines`` module, ``tests/engines/test_toy_engine.py``) is all it takes for
``kit.logs.read`` (serial and parallel), ``kit.logs.settings`` (local and on a host) and the engine
detection to read it; the built-in formats read the same log as before.
"""
from __future__ import annotations

import re

import pytest

import kit
from kit.logs import _formats, _parallel
from kit.logs._records import TAKEN, LogFormat, clip, columns

# ----------------------------------------------------------------- the one new file: a toy engine's format
_STEP = re.compile(r"step=(\d+) running=(\d+) tok/s=([0-9.]+)")


def _step(line: str, lineno: int, st) -> int:
    m = _STEP.search(line)
    if m is None:
        return 0
    st.toy.add({"line": lineno, "step": int(m.group(1)), "running": int(m.group(2)), "tok_s": float(m.group(3))})
    st.hits["toyllm"] += 1
    return TAKEN


def _backend(line: str, lineno: int, st) -> bool:
    m = re.search(r"toy attention backend: (\w+)", line)
    if m is None:
        return False
    st.say(lineno, "value", ("attention_backend", m.group(1), clip(line)), "attention backend line")
    return True


TOY = LogFormat(
    "toyllm", engine=True, header=re.compile(r"\[toy\] "),
    take=(("step=", _step),), notes=(("toy attention", _backend),),
    banner=(("ToyLLM version",), re.compile(r"ToyLLM version (\d+\.\d+\.\d+)")),
    tables={"toy": columns()},
    build=lambda st, warnings: {"toy": st.toy.frame(("line", "step", "running", "tok_s"))},
    batches=lambda tables: (tables["toy"][["line", "running"]].assign(graph=None), "toy running={n}")
    if len(tables["toy"]) else None)


def _toy_log(path, steps: int):
    lines = ["[toy] ToyLLM version 1.2.3 starting", "[toy] loading weights", "[toy] toy attention backend: paged"]
    lines += [f"[toy] step={i} running={1 + i % 4} tok/s={100 + i % 7}.5" for i in range(steps)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def with_toy(monkeypatch):
    """The one table row."""
    monkeypatch.setattr(_formats, "OWN", (*_formats.OWN, TOY))


def test_a_toy_format_is_one_file_plus_one_row(tmp_path, with_toy):
    log = kit.logs.read(_toy_log(tmp_path / "toy.log", 40))
    assert log.engine == "toyllm" and log.version == "1.2.3" and not log.engine_inferred
    toy = log.tables["toy"]
    assert len(toy) == 40 and toy["step"].tolist() == list(range(40)) and toy["line"].iloc[0] == 4
    assert log.unknown_lines == 2 and log.counts == {"toy": 40}
    s = kit.logs.settings(tmp_path / "toy.log")
    assert s.engine == "toyllm"
    assert s.effective["attention_backend"] == "paged" and s.get("attention_backend").line == 3
    assert s.effective["decode_batch_max"] == 4 and s.get("decode_batch_max").line == 7   # step 3: running 4


def test_the_toy_format_on_a_host_and_in_parallel(tmp_path, with_toy, monkeypatch):
    path = _toy_log(tmp_path / "toy.log", 30000)
    serial = kit.logs.read(path).tables["toy"]
    monkeypatch.setattr(_parallel, "PARALLEL_MIN", 1)
    monkeypatch.setattr(_parallel, "PIECE", 200_000)
    monkeypatch.setenv("KIT_LOG_WORKERS", "2")
    assert len(_parallel.plan(str(path), path.stat().st_size)) > 2
    parallel = kit.logs.read(path).tables["toy"]
    assert parallel.equals(serial)
    s = kit.logs.settings(str(path), host=kit.connect("local"))
    assert s.effective["attention_backend"] == "paged"
    assert s.get("attention_backend").where == f"local:{path}:3"


def test_without_the_row_the_toy_log_is_not_a_log(tmp_path):
    with pytest.raises(kit.errors.LogFormatError, match="not a serving log"):
        kit.logs.read(_toy_log(tmp_path / "toy.log", 5))
