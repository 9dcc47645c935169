"""Every parser entry point over the malformed-input corpus (tests/data/malformed/make_corpus.py):
correct figures, or correct figures plus a warning counting what was dropped or repaired, or one
``kit.errors`` error naming the file. Never a traceback, never a silent wrong number."""
from __future__ import annotations

import contextlib
import io
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kit.errors import KitError
from tests.data.malformed.make_corpus import Case, build

_SILENT = re.compile(r"dropped|repaired|truncated", re.I)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, list[Case]]:
    d = tmp_path_factory.mktemp("malformed")
    return d, build(d)


def _trace(path: Path) -> tuple[dict, list[str]]:
    from kit import profile

    p = profile.load([str(path)], cache=False)
    s = p.summary()
    return ({"kernels": len(p.kernels), "kernel_us": round(float(s.to_dict()["kernel_time_us"]), 6)},
            list(s.warnings))  # the summary's warnings include the profile's


def _log(path: Path) -> tuple[dict, list[str]]:
    from kit import logs

    d = logs.read(str(path))
    fig = {"decode": len(d.decode)}
    if len(d.decode):
        fig["gen_throughput_mean"] = round(float(d.decode["gen_throughput"].mean()), 6)
        if "accept_len" in d.decode and d.decode["accept_len"].notna().any():
            fig["accept_len_mean"] = round(float(d.decode["accept_len"].mean()), 6)
    if len(d.spec):
        fig["spec"] = len(d.spec)
        if d.engine == "vllm":
            fig["spec_len_mean"] = round(float(d.spec["printed_accept_len"].mean()), 6)
    return fig, list(d.warnings)


_BENCH_FIGURES = ("output_throughput", "total_throughput", "median_tpot_ms")


def _bench(path: Path) -> tuple[dict, list[str]]:
    from kit import logs

    df = logs.parse_bench(str(path))
    fig = {"rows": len(df)}
    for c in _BENCH_FIGURES:
        if c in df and df[c].notna().any():
            fig[c] = round(float(df[c].astype(float).mean()), 6)
    return fig, list(df.attrs.get("warnings", []))


def _env_gpu(path: Path) -> tuple[dict, list[str]]:
    from kit import env

    return {"rows": len(env.parse_gpu_query(path.read_text(errors="replace"), source=str(path)))}, []


def _env_topo(path: Path) -> tuple[dict, list[str]]:
    from kit import env

    return {"summary": env.parse_topology(path.read_text(errors="replace"), source=str(path)).summary}, []


def _env_environ(path: Path) -> tuple[dict, list[str]]:
    from kit import env

    return {"vars": len(env.parse_environ(path.read_bytes()))}, []


def _log_parsers(path: Path) -> tuple[dict, list[str]]:
    """The other kit.logs entry points, each on the path (and parse_server_args on the text)."""
    from kit import logs

    out = {}
    for name in ("parse_sglang", "parse_vllm", "parse_nccl", "spec_summary"):
        try:
            out[name] = repr(getattr(logs, name)(str(path)))[:40]
        except KitError:
            out[name] = "error"
    out["parse_server_args"] = repr(logs.parse_server_args(path.read_text(errors="replace")))[:40]
    return out, []


def _env_misc(path: Path) -> tuple[dict, list[str]]:
    from kit import env

    text = path.read_text(errors="replace")
    return {f: getattr(env, f)(text) for f in ("parse_nccl_version", "parse_nvidia_smi_header", "parse_nvcc_version",
                                               "parse_os_release", "parse_cpu_model")}, []


ENTRY = {"trace": _trace, "log": _log, "bench": _bench, "env-gpu": _env_gpu, "env-topo": _env_topo,
         "env-environ": _env_environ, "log-parsers": _log_parsers, "env-misc": _env_misc}
CLI = {"trace": ["profile", "summary", "--json", "--no-cache"], "log": ["logs", "parse", "--json"],
       "bench": ["bench", "parse", "--json"]}


def _cli(argv: list[str]) -> tuple[int, str, str]:
    from kit.cli._main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def _close(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        (math.isclose(a[k], b[k], rel_tol=1e-9, abs_tol=1e-6) if isinstance(b[k], float) else a[k] == b[k]) for k in b)


def test_the_corpus_covers_every_family(corpus):
    _, cases = corpus
    fams = {c.family for c in cases}
    assert {"trace", "log", "bench"} <= fams and len(cases) >= 45
    assert sum(c.expect == "warn" for c in cases) >= 15 and sum(c.expect == "error" for c in cases) >= 12


def test_each_file_gives_its_expected_outcome(corpus):
    d, cases = corpus
    wrong = []
    for c in cases:
        if c.expect == "any":
            continue
        path = d / c.name
        try:
            figures, warnings = ENTRY[c.family](path)
        except Exception as exc:  # noqa: BLE001 - a non-kit exception is a wrong outcome, listed below
            if not isinstance(exc, KitError):
                wrong.append(f"{c.name}: {type(exc).__name__}: {str(exc)[:200]}")
                continue
            msg = str(exc)
            said = msg.replace(str(path), "").replace(c.name, "")  # the expectation is about what it says
            if c.expect != "error" or not re.search(c.error, said) or c.name not in msg or "\n" in msg:
                wrong.append(f"{c.name}: expected {c.expect}, got error {msg[:300]!r}")
            continue
        if c.expect == "error":
            wrong.append(f"{c.name}: expected an error, got {figures} {warnings}")
            continue
        if c.figures and not _close(figures, c.figures):
            wrong.append(f"{c.name}: figures {figures}, expected {c.figures} (warnings {warnings})")
        hits = [w for w in warnings if c.warn and re.search(c.warn, w)]
        if c.expect == "warn" and not hits:
            wrong.append(f"{c.name}: no warning matching {c.warn!r} in {warnings}")
        if c.expect == "ok" and any(_SILENT.search(w) for w in warnings):
            wrong.append(f"{c.name}: unexpected warnings {warnings}")
    assert wrong == [], "\n".join(wrong)


def test_every_entry_point_on_every_file_gives_a_result_or_a_kit_error(corpus):
    d, cases = corpus
    tracebacks = []
    for c in cases:
        for fam, fn in ENTRY.items():
            try:
                fn(d / c.name)
            except KitError:
                pass
            except Exception as exc:  # noqa: BLE001 - this is what the test counts
                tracebacks.append(f"{fam} on {c.name}: {type(exc).__name__}: {str(exc)[:200]}")
    assert tracebacks == [], f"{len(tracebacks)} tracebacks:\n" + "\n".join(tracebacks)


def test_every_cli_command_on_every_file_exits_0_or_one_error_line(corpus):
    d, cases = corpus
    bad = []
    for c in cases:
        for fam, argv in CLI.items():
            path = str(d / c.name)
            try:
                rc, out, err = _cli(argv + [path])
            except Exception as exc:  # noqa: BLE001
                bad.append(f"kit {' '.join(argv[:2])} {c.name}: {type(exc).__name__}: {str(exc)[:200]}")
                continue
            lines = err.strip().splitlines()
            if rc == 1:
                if len(lines) != 1 or not lines[0].startswith("kit: error: ") or c.name not in lines[0]:
                    bad.append(f"kit {' '.join(argv[:2])} {c.name}: exit 1 with stderr {err[:300]!r}")
            elif rc != 0:
                bad.append(f"kit {' '.join(argv[:2])} {c.name}: exit {rc}")
            elif fam == c.family and c.expect == "error":
                bad.append(f"kit {' '.join(argv[:2])} {c.name}: exit 0 where an error was expected")
    assert bad == [], f"{len(bad)} bad CLI outcomes:\n" + "\n".join(bad)


@pytest.mark.parametrize("name, argv", [("k_nan_dur.json", CLI["trace"]), ("l_deep.json", CLI["log"]),
                                        ("s_text_timestamp.sqlite", CLI["trace"])])
def test_cli_process(corpus, name, argv):
    """The real process: exit status and stderr as a user sees them."""
    d, cases = corpus
    case = next(c for c in cases if c.name == name)
    proc = subprocess.run([sys.executable, "-m", "kit", *argv, str(d / name)], capture_output=True, text=True,
                          timeout=120)
    assert "Traceback" not in proc.stderr
    if case.expect == "error":
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and proc.stderr.startswith("kit: error: ")
    else:
        assert proc.returncode == 0, proc.stderr
        assert re.search(case.warn, proc.stdout), proc.stdout[-2000:]
