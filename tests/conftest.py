"""Shared test fixtures. The real-sshd fixture lives in kit.testing so users can reuse it."""
from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

from kit.testing import sshd  # noqa: F401  (session fixture: a real OpenSSH sshd on 127.0.0.1)

ROOT = Path(__file__).resolve().parent.parent
# A test run started in the background of a non-interactive shell (``make test &``) inherits Ctrl-C *ignored*, and
# so would every kit process a test starts and then interrupts (the kit keeps an ignored Ctrl-C ignored, as nohup
# asks): the tests give SIGINT back its default, so their children start with it too.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# Third-party real data, beside the checkout (never copied into the project).
SHARED_DATA = (ROOT / ".." / "shared" / "data").resolve()
SAMPLE = ROOT / "notebooks" / "sample"
TEST_DATA = ROOT / "tests" / "data"  # small project-made fixtures
# The run catalogue (kit.runs) records during the tests as it does for a user, into a temporary store removed
# at exit (never the user's own): every analysis a test makes is also a recording, so a result that cannot be
# recorded shows (one line on stderr, and counted in the summary below). Tests of the catalogue set their own
# store; subprocesses started by tests inherit this one.
RUNS_STORE = Path(tempfile.mkdtemp(prefix="kit-test-runs-"))
atexit.register(shutil.rmtree, RUNS_STORE, True)
os.environ["KIT_RUNS"] = "on"
os.environ["KIT_RUNS_DIR"] = str(RUNS_STORE)
import kit.runs  # noqa: E402,F401  loading the catalogue installs its writer: in-process calls are recorded too


def pytest_terminal_summary(terminalreporter):
    """How many runs the suite recorded, and how many it could not (``failures.jsonl`` of the store)."""
    from kit.runs import failures

    n = len(list((RUNS_STORE / "runs").glob("*.parquet"))) if (RUNS_STORE / "runs").is_dir() else 0
    lost = failures(RUNS_STORE)
    terminalreporter.write_line(f"run catalogue: {n} run files recorded during the tests, {len(lost)} not recorded"
                                + (f" (last: {lost[-1]['kind']}: {lost[-1]['error']})" if lost else ""))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"third-party test data not found at {SHARED_DATA}: these tests read real traces and logs "
                    "from ../shared/data beside the checkout")
    return SHARED_DATA


@pytest.fixture(scope="module", params=["local", pytest.param("ssh", marks=pytest.mark.ssh)])
def host(request):
    """Each test twice: on this machine and over SSH to the real sshd fixture (one connection per module)."""
    import kit

    h = kit.connect("local") if request.param == "local" else request.getfixturevalue("sshd").connect()
    yield h
    h.close()


@pytest.fixture
def kit_cache_dir(tmp_path, monkeypatch) -> Path:
    """A fresh, empty ``KIT_CACHE_DIR`` for one test: nothing parsed by another test is reused."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("KIT_CACHE_DIR", str(cache))
    return cache


def stage_readable(*rel_paths: str) -> Path:
    """Copies of checkout paths (relative to ROOT) in a fresh world-readable temporary tree, same
    layout, removed at exit. For tests whose SSH login user (not root) must read project files: the
    checkout may sit where that user cannot enter (a clone in root's 0700 home)."""
    base = Path(tempfile.mkdtemp(prefix="kit-stage-"))
    atexit.register(shutil.rmtree, base, True)
    for rel in rel_paths:
        src, dest = ROOT / rel, base / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", ".kit"))
        else:
            shutil.copy2(src, dest)
    for root, _dirs, files in os.walk(base):
        os.chmod(root, 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    return base


# The slowest tests, marked ``slow`` here in one list (``make test-fast`` runs ``-m "not slow"``): each
# runs the notebooks or a report in real kernels, starts engines, or reads the large third-party traces.
# Measured with ``pytest --durations`` on the 2-core development machine; a test file or a test
# (``file::name``, parameters included or not) that takes seconds belongs here.
SLOW = (
    "tests/runs/test_catalogue.py::test_kit_runs_cli",   # three `kit` processes
    "tests/engines/test_toy_engine.py::test_the_cli_and_mcp_offer_the_toy_engine",  # three `kit` processes, an MCP
    "tests/runs/test_gate.py::test_planted_regressions",  # 23 replayed traces parsed and gated
    "tests/runs/test_gate.py::test_eager_replays",        # 22 replayed eager traces gated (~100 s)
    "tests/profile/test_ranks.py",                        # 18 replayed rank traces, two more sshd hosts
    "tests/test_progress.py",                             # a real pseudo-terminal, three interpreters
    "tests/report/test_notebooks.py",               # the whole sample report, notebooks over SSH and live
    "tests/source/test_source_real_engines.py",     # SGLang and vLLM wheels, notebook 02 on them
    "tests/live/",                                  # engines started, benchmarked, profiled, swept
    "tests/bench/test_cli_run.py",                  # kit serve / bench run / profile capture: engines, kit processes
    "tests/investigation/test_live_pairs.py",       # tinyserve engines benchmarked per pair; the sample via the CLI
    "tests/investigation/test_investigate.py::test_runs_by_catalogue_id",  # five `kit` processes
    "tests/redact/test_secrets.py::test_report_run",  # a report with planted secrets
    # reports built in real kernels (the `tiny` report, timeouts, dead kernels, the CLI)
    "tests/report/test_report.py::test_runs_every_notebook", "tests/report/test_report.py::test_parameters_and",
    "tests/report/test_report.py::test_plots_are_embedded", "tests/report/test_report.py::test_planted_secrets",
    "tests/report/test_report.py::test_exported_pages", "tests/report/test_report.py::test_netlog_check",
    "tests/report/test_report.py::test_existing_report", "tests/report/test_report.py::test_failure_before_swap",
    "tests/report/test_report.py::test_cell_timeout", "tests/report/test_report.py::test_dead_kernel",
    "tests/report/test_report.py::test_cli_exits_nonzero", "tests/report/test_report.py::test_cli_rejects",
    "tests/report/test_report.py::test_the_pdf_is_redacted",  # every page printed by Chromium
    "tests/report/test_report_defects.py::test_a_figure_returned",
    "tests/report/test_report_defects.py::test_a_report_notebook_records",  # a real kernel
    "tests/report/test_report_defects.py::test_pages_00_and_02",            # notebooks 00, 02 in a real kernel
    # seconds each: 2 GiB streamed, process groups waiting out grace periods, pip, SSH round trips
    "tests/remote/test_streams.py::test_2gib", "tests/remote/test_runner.py::test_a_command_that_ignores_sigterm",
    "tests/remote/test_remote.py::test_wait_for_reports", "tests/remote/test_remote_ssh.py::test_cli_run_and_env",
    "tests/remote/test_magics.py", "tests/source/test_source.py::test_module_path_falls_back_to_pip_show",
    "tests/bench/test_bench.py::test_single_stream_measures",
    # multi-rank and module-frame traces, the malformed corpus through every entry point
    "tests/profile/test_compare.py::test_multi_rank", "tests/profile/test_compare.py::test_roofline",
    "tests/profile/test_attribution.py::test_module_plot_and_cli", "tests/test_malformed.py",
    "tests/profile/test_compare.py::test_identical_runs", "tests/profile/test_compare.py::test_repr_html_json",
    "tests/profile/test_compare.py::test_cli_compare_json",
    "tests/profile/test_remote_load.py::test_remote_load_equals",
    "tests/profile/test_profile.py::test_cli_json_equals", "tests/profile/test_profile.py::test_dlrm_8_ranks",
    "tests/profile/test_profile.py::test_parallel_and_sequential",
    "tests/profile/test_profile.py::test_prefetch_in_worker",
    "tests/source/test_source_defects.py::test_definition_in_a_lone_file",
    # load tests against real servers, and guidellm beside the kit (its venv is built on first use)
    "tests/bench/test_independent_client.py", "tests/bench/test_load.py",
    "tests/bench/test_load_prompts.py", "tests/bench/test_load_workloads.py",
    "tests/redact/test_cmdline_secrets.py::test_report_pages",
    "tests/redact/test_cmdline_secrets.py::test_a_bare_token",
    "tests/profile/test_attribution_cases.py::test_check_attribution_with_and_without",
    "tests/profile/test_attribution_cases.py::test_cli_check_attribution",
    # the attribution matrices: every recorded model twin, every trace with and without the prefilter
    "tests/profile/test_attribution_twins.py", "tests/profile/test_prefilter.py",
    # inter-token latency reconciled against tinyserve runs with injected delays (seconds each)
    "tests/bench/test_reconcile.py::test_each", "tests/bench/test_reconcile.py::test_the_delays",
    "tests/bench/test_reconcile.py::test_an_overlapping", "tests/bench/test_reconcile.py::test_a_co_scheduled",
    "tests/bench/test_reconcile.py::test_the_residual", "tests/bench/test_reconcile.py::test_a_planted",
    "tests/bench/test_reconcile.py::test_clocks_that", "tests/bench/test_reconcile.py::test_the_forward",
    "tests/bench/test_reconcile.py::test_saved_records",
    # kit mcp as a real process per test (stdio and HTTP): the investigation, a report, the hostile corpus
    "tests/mcp/test_mcp.py",
    "tests/mcp/test_hostile.py::test_http_needs", "tests/mcp/test_hostile.py::test_http_sessions",  # issue 45: HTTP
    "tests/report/test_interrupt.py", "tests/logs/test_interrupt.py",  # issue 45: Ctrl-C in a report, a 72 MB parse
    "tests/test_figures_detached.py",  # two sample traces compared
    # hostile inputs (issue 34): a 3 GiB gzip bomb, CLI runs over odd traces and the secret corpus, a dead SSH link
    "tests/profile/test_hostile_traces.py::test_a_gzip_bomb", "tests/profile/test_hostile_traces.py::test_a_lone",
    "tests/report/test_secrets_kit_outputs.py::test_cli_outputs",
    "tests/remote/test_forward.py::test_a_dead_ssh_connection",
    # placement by alignment: every twin and every recorded graph pair, with the CLI
    "tests/profile/test_place.py::test_eager_without_stack", "tests/profile/test_place.py::test_layers_by_repetition",
    "tests/profile/test_place.py::test_cli_reference", "tests/profile/test_place_graph.py",
    "tests/profile/test_attribution_held_out.py",   # issue 33: 16 held-out architectures, both twins
    # whole fixture sets parsed (every recorded trace's names; every hf twin), a report built for its decoys
    "tests/profile/test_rule_folding.py::test_packaged_rules_decide_alike_on_real_names",
    "tests/profile/test_precedence.py::test_no_hf_fixture_has_a_convolution_row",
    "tests/redact/test_cmdline_secrets.py::test_report_keeps_the_decoys",
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.nodeid.startswith(SLOW):
            item.add_marker(pytest.mark.slow)
