"""Leftovers a user meets at the command line and in library calls (issue 25), each pinned by a test
that failed before its fix."""
from __future__ import annotations

import argparse
import re
import subprocess
import sys

import pytest

import kit
from kit.cli import build_parser, main
from kit.errors import KitError
from tests.conftest import ROOT, SAMPLE, TEST_DATA


def _kit(*args: str) -> list[str]:
    return [sys.executable, "-m", "kit", *args]


def test_output_piped_to_head_ends_quietly(tmp_path):
    """``kit ... | head -1``: the reader goes away; no BrokenPipeError traceback, exit 141 like grep.
    The output (~400 KB) is larger than a pipe's buffer, so the writer is still writing when it goes."""
    log = tmp_path / "long.log"
    log.write_text((SAMPLE / "logs" / "sglang_0.5.9_tp8_eagle3.log").read_text() * 10)
    proc = subprocess.Popen(_kit("logs", "parse", str(log), "--json"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT)
    proc.stdout.readline()
    proc.stdout.close()  # what head does after its first line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_every_cli_option_has_help():
    missing = []

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> None:
        for a in parser._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sub in a.choices.items():
                    walk(sub, [*path, name])
            elif not a.help and not isinstance(a, argparse._HelpAction):
                missing.append(" ".join(path) + " " + (a.option_strings[-1] if a.option_strings else a.dest))

    walk(build_parser(), ["kit"])
    assert not missing, f"options without help text: {missing}"


def test_logs_spec_on_a_log_without_speculation_fails_with_one_line(capsys):
    log = str(SAMPLE / "logs" / "sglang_0.5.9_tp8_default.log")
    assert main(["logs", "spec", log]) == 1
    out, err = capsys.readouterr()
    assert "nan" not in out.lower() and "no speculative-decoding lines" in err and len(err.splitlines()) == 1
    assert main(["logs", "spec", str(SAMPLE / "logs" / "sglang_0.5.9_tp8_eagle3.log")]) == 0


def test_bench_parse_says_when_the_engine_is_a_guess(capsys):
    assert main(["bench", "parse", str(TEST_DATA / "logs" / "vllm_bench_serve_0.34.txt"), "--json"]) == 0
    out, err = capsys.readouterr()
    assert '"engine_inferred": true' in out and "guessed from the block's labels (no Backend line)" in err
    assert main(["bench", "parse", str(TEST_DATA / "logs" / "sglang_bench_serving_0.5.9.txt")]) == 0
    out, err = capsys.readouterr()
    assert "sglang?" not in out and "warning" not in err  # this block names its backend


def test_source_grep_takes_greps_order_and_the_old_one(tmp_path, capsys):
    f = tmp_path / "a.py"
    f.write_text("x = 1\nNEEDLE = 2\n")
    assert main(["source", "grep", "NEEDLE", str(f)]) == 0  # grep's and rg's order
    grep_order = capsys.readouterr().out
    assert main(["source", "grep", str(f), "NEEDLE"]) == 0  # kit.source.grep's order: only f exists
    assert capsys.readouterr().out == grep_order and "NEEDLE = 2" in grep_order


def test_overlapping_grep_contexts_print_each_line_once(tmp_path):
    from kit import source

    f = tmp_path / "b.py"
    f.write_text("".join(f"line{i} = {'hit' if i in (3, 5) else i}\n" for i in range(1, 10)))
    with kit.connect("local") as host:
        matches = source.grep(host, str(f), "hit", context=2)
    assert len(matches) == 2
    text = str(matches)
    numbers = [int(n) for n in re.findall(r"b\.py[:-](\d+)[:-]", text)]
    assert numbers == list(range(1, 8)), text  # 1-7 once each; before the fix 3..5 twice
    assert [int(n) for n in re.findall(r"b\.py[:-](\d+)[:-]", repr(matches))] == list(range(1, 8))
    assert re.findall(r"(?:<b>|#6e7781'>)(\d+)<", matches._repr_html_()) == [str(n) for n in range(1, 8)]


def test_a_relative_glob_with_a_host_is_a_kit_error():
    import kit.profile

    with kit.connect("local") as host:
        with pytest.raises(KitError, match="relative"):
            kit.profile.load("traces/*/rank*.trace.json.gz", host=host)


def test_gpu_memory_is_shown_with_its_unit():
    text = (SAMPLE / "server" / "nvidia-smi-query-gpu.csv").read_text()
    gpus = kit.env.parse_gpu_query(text)
    assert "memory.total [MiB]" in kit.env.with_units(gpus).columns
    nounits = kit.env.parse_gpu_query("0, NVIDIA H200, 143771, 9.0, 580.1\n",
                                      fields=["index", "name", "memory.total", "compute_cap", "driver_version"])
    assert "memory.total [MiB]" in kit.env.with_units(nounits).columns


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_a_command_line_imports_only_the_module_of_its_command():
    """``kit profile summary`` builds the parser of ``profile`` alone (no SSH layer imported); the table
    that says which module registers what must match what the modules register."""
    from kit.cli._main import COMMANDS

    full = _commands(build_parser())
    assert set(full) == set(COMMANDS)
    for name in COMMANDS:
        only = _commands(build_parser([name, "--help"]))
        assert set(only) == {c for c, m in COMMANDS.items() if m == COMMANDS[name]}
        assert only[name].format_help() == full[name].format_help()
    code = ("import sys; from kit.cli import main\n"
            "try:\n    main(['profile', 'summary', '--help'])\nexcept SystemExit:\n    pass\n")
    code += "print('kit.remote' in sys.modules, 'pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.stdout.strip().endswith("False False"), out.stdout + out.stderr


@pytest.mark.parametrize("args, code", [(["logs", "parse", "LOG", "--json"], 0), (["logs", "spec", "MISSING"], 1)])
def test_the_program_exit_flushes_output_runs_atexit_and_keeps_the_code(tmp_path, args, code):
    """``run()`` ends the process without the interpreter's teardown: what was printed must all be
    there, ``atexit`` handlers must have run and the exit code must be the command's."""
    log = str(SAMPLE / "logs" / "sglang_0.5.9_tp8_eagle3.log")
    argv = [log if a == "LOG" else str(tmp_path / "missing.log") if a == "MISSING" else a for a in args]
    marker = tmp_path / "atexit-ran"
    prog = ("import atexit, sys\n"
            f"atexit.register(lambda: open({str(marker)!r}, 'w').write('ran'))\n"
            f"sys.argv = ['kit', *{argv!r}]\n"
            "from kit.cli import run\nrun()\n")
    out = tmp_path / "out.json"
    with open(out, "wb") as f:
        p = subprocess.run([sys.executable, "-c", prog], stdout=f, stderr=subprocess.PIPE, cwd=ROOT, timeout=120)
    assert p.returncode == code, p.stderr
    assert marker.read_text() == "ran"
    if code == 0:
        import json

        assert json.loads(out.read_text())   # complete JSON: the buffered tail was flushed
    else:
        assert p.stderr.decode().count("\n") == 1 and "missing.log" in p.stderr.decode()


def test_compare_reads_its_options_after_the_traces():
    """``kit profile compare A -- B --reference-a REF``: the options after the traces are read, and an option's
    value is never taken as a trace (``--reference-a``'s was)."""
    from kit.cli._profile import _split

    args = build_parser(["profile"]).parse_args(["profile", "compare", "a.json"])
    got = _split(["a.json", "--", "b.json", "--reference-a", "ref.json", "--step-ms", "1", "2", "--json"], args)
    assert got == (["a.json"], ["b.json"])
    assert (args.reference_a, args.step_ms, args.json) == ("ref.json", [1.0, 2.0], True)
