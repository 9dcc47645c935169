"""The house rules that keep ``kit/`` walkable: the public API is pinned, there is no import cycle
inside the package, and no module reaches into another package's private files."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from tests.conftest import ROOT

KIT = ROOT / "kit"

# The public surface. Adding a name is a decision: add it here in the same change.
PUBLIC_API = {
    'kit.session': ['Captures', 'Evidence', 'KINDS', 'LAYOUT', 'Provenance', 'Session', 'StepTimes', 'caption', 'open', 'provenance_of'],
    'kit': ['Host', 'Job', 'Result', '__version__', 'audit', 'bench', 'connect', 'env', 'errors', 'experiment', 'explorer', 'hosts', 'ledger', 'live', 'load_ipython_extension', 'logs', 'models', 'plots', 'profile', 'provenance', 'remote', 'report', 'server', 'session', 'source', 'runs', 'investigate', 'investigation'],
    'kit.engines': ['Engine', 'GraphOff', 'StepMarker', 'engine', 'engines', 'guess', 'names', 'refresh', 'step_markers'],
    'kit.provenance': ['Evidence', 'KINDS', 'MANIFEST', 'Provenance', 'UNKNOWN', 'caption', 'lookup', 'provenance_of', 'read_manifest', 'relative', 'sniff'],
    'kit.bench': ['BenchResult', 'DEFINITIONS', 'PARTS', 'Reconciliation', 'reconcile', 'LoadResult', 'RequestTiming', 'list_models', 'load_test', 'make_prompts', 'mean_ci', 'single_stream', 'stream_request', 'sweep', 'welch', 'pareto_sweep', 'saturation', 'read_result', 'OTLPReceiver', 'otlp_receiver'],
    'kit.live': ['Experiment', 'PHASES', 'ReferenceCommand', 'Server', 'experiment', 'plan', 'reference_command',
                 'server'],
    'kit.remote': ['Fetched', 'FileStat', 'Forward', 'GroupResult', 'HOST_OPTIONS', 'Host', 'HostGroup', 'Job', 'LocalHost', 'Result', 'SSHHost', 'Transfer', 'TransferReport', 'add_host_options', 'connect', 'connect_options', 'hosts'],
    'kit.source': ['CacheInfo', 'Definition', 'Match', 'Matches', 'Scope', 'Slice', 'SourceDiff', 'Symbol', 'Symbols', 'cache_clear', 'cache_info', 'definition', 'diff', 'enclosing', 'evaluate', 'find', 'grep', 'module_path', 'slice'],
    'kit.profile': ['AttributionCheck', 'Comparison', 'PHASES', 'Prefetch', 'Profile', 'Summary', 'category_colours', 'check_attribution',
                    'compare', 'default_rules', 'load', 'prefetch', 'roofline', 'StructuralDiff', 'diff_structure', 'RankView', 'ranks'],
    'kit.audit': ['Audit', 'CLOCK_QUERY', 'ClockSampler', 'DEBUG_VARIABLES', 'Decider', 'Effect', 'Effects', 'Finding', 'SEVERITIES', 'Validity', 'audit', 'capture_settings', 'check_run', 'decider', 'effect', 'experiment_effects', 'parse_clocks', 'throttle'],
    'kit.logs': ['DECODE_COLUMNS', 'KINDS', 'NCCL_COLUMNS', 'PREFILL_COLUMNS', 'THROUGHPUT_COLUMNS', 'read_lines', 'LogData', 'SettingEvidence', 'Settings', 'SpecSummary', 'nccl_summary', 'parse_bench', 'parse_nccl', 'parse_server_args', 'parse_sglang', 'parse_vllm', 'read', 'settings', 'spec_summary', 'StepRecords', 'step_records', 'LEVELS', 'LogFormat', 'RecordSource', 'TAKEN', 'columns', 'is_kit_result', 'kit_requests', 'kit_rows', 'normalise_kit_result', 'read_kit_result', 'otlp_json'],
    'kit.models': ['AllReduceCost', 'DecodeFloor', 'GPUSpec', 'HYBRID_TYPES', 'LINKS', 'LinkModel', 'Mixer', 'ModelShape', 'SpecEstimate', 'WEIGHT_FORMATS', 'decode_floor', 'gpu_spec', 'gpu_specs', 'model_shape', 'acceptance_for_length', 'allreduce_cost', 'allreduce_time_us', 'break_even', 'drafter_cost', 'expected_tokens', 'fit', 'link', 'spec_estimate', 'spec_from_summary', 'speedup', 'speedup_curves'],
    'kit.env': ['Fingerprint', 'GPU_FIELDS', 'Topology', 'fingerprint', 'link_rank', 'parse_cpu_model', 'parse_environ', 'parse_gpu_query', 'parse_nccl_version', 'parse_nvcc_version', 'parse_nvidia_smi_header', 'parse_os_release', 'parse_topology', 'strip_ansi', 'with_units'],
    'kit.ledger': ['Hypothesis', 'LEDGER_ENV', 'Ledger', 'VERDICTS', 'confirmed_if'],
    'kit.plots': ['CATEGORY_COLORS', 'MAX_WIDTH_IN', 'MIN_FONT_PT', 'ab_plot', 'fit_text', 'compare_families', 'compare_waterfall', 'concurrency_scaling', 'latency_cdf', 'throughput_latency', 'acceptance_over_time', 'acceptance_per_position', 'category_shares', 'link_matrix_plot', 'module_time', 'speedup_curves', 'step_timeline', 'throughput_over_time', 'top_kernels', 'itl_waterfall', 'structure_waterfall'],
    'kit.mcp': ['Policy', 'TOOLS', 'Tool', 'available', 'build_server', 'serve_http', 'serve_stdio'],
    'kit.report': ['DEFAULT_CELL_TIMEOUT', 'MARKER', 'NotebookRun', 'Report', 'build', 'discover', 'execute_notebook', 'Table', 'table'],
    'kit.redact': ['MASK', 'SECRET_MASK', 'find_secrets', 'mask_secrets', 'notebook_secrets', 'redact_html', 'redact_json_text', 'redact_notebook', 'redact_text', 'secret_name'],
    'kit.errors': ['AuthError', 'BenchError', 'CommandFailed', 'CommandTimeout', 'ConnectError', 'ExperimentError', 'HostKeyError', 'KitError', 'LedgerError', 'LogFormatError', 'ModelError', 'NotebookFailed', 'ParseError', 'RemoteError', 'RemoteFileError', 'ReportError', 'ServerError', 'SessionError', 'SourceError', 'TraceError', 'UsageError', 'CacheError'],
    'kit.runs': ['BenchGate', 'Gate', 'Recorded', 'baseline', 'baselines', 'bench_gate', 'bench_rows', 'compact', 'connect', 'export', 'failures', 'file_hash', 'gate', 'get',
                 'prehash', 'profile_gate', 'query', 'record', 'record_call', 'rows', 'recorded', 'runs', 'set_baseline', 'set_command', 'store_dir', 'table'],
    'kit.investigation': ['Cause', 'Experiment', 'Investigation', 'Step', 'investigate'],
    'kit.explorer': ['category_plot', 'category_time', 'explore', 'top_kernels'],
    'kit.magics': ['RemoteMagics', 'load_ipython_extension'],
    'kit.testing': ['SSHServer', 'STREAM_PROBE', 'TEST_USER', 'find_sshd', 'replay_trace', 'sshd'],
}


@pytest.mark.parametrize("module", sorted(PUBLIC_API))
def test_public_api_is_pinned(module):
    mod = importlib.import_module(module)
    assert sorted(mod.__all__) == sorted(PUBLIC_API[module])
    for name in mod.__all__:
        assert getattr(mod, name) is not None, f"{module}.{name}"


def _public_names(module: str, path: Path) -> set[str]:
    """Names a module makes public: defined or assigned at its top level, or re-exported from its own
    package's private files, without a leading underscore."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(package + "._"):
            out |= {a.asname or a.name for a in node.names}
    return {n for n in out if not n.startswith("_")}


@pytest.mark.parametrize("module", sorted(PUBLIC_API))
def test_everything_public_is_in_all(module):
    """Both ways: ``__all__`` names only public names, and every public name is in ``__all__``."""
    path = _modules()[module]
    public = _public_names(module, path)
    mod = importlib.import_module(module)
    assert not [n for n in mod.__all__ if n.startswith("_") and n != "__version__"]
    assert sorted(public - set(mod.__all__)) == [], f"{module}: public but not in __all__ (rename with _ or list it)"


@pytest.mark.parametrize("module", sorted(m for m in PUBLIC_API if m.count(".") == 1))
def test_classes_report_their_public_module(module):
    mod = importlib.import_module(module)
    for name in mod.__all__:
        obj = getattr(mod, name)
        if isinstance(obj, type) and obj.__module__.startswith("kit"):
            assert not any(part.startswith("_") for part in obj.__module__.split(".")), \
                f"{module}.{name} reports {obj.__module__}"


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted(KIT.rglob("*.py")):
        if "_vendor" in p.parts or "_host" in p.parts:   # programs run elsewhere (a host, a child), never imported
            continue
        rel = p.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _top_level_imports(path: Path, name: str, is_pkg: bool, inside_functions: bool = False) -> list[tuple[str, list[str]]]:
    """(module, names) imported when ``path`` is imported: module-level statements only, skipping
    ``if TYPE_CHECKING:`` blocks; with ``inside_functions`` also the imports in function and class
    bodies (they run later, but two modules that call into each other that way are still a knot)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []

    def visit(stmts):
        for node in stmts:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, ast.Import):
                out.extend((a.name, []) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level:
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    mod = ".".join(base + ([mod] if mod else []))
                out.append((mod, [a.name for a in node.names]))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if inside_functions:
                    visit(node.body)
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    for child in getattr(node, field, []) or []:
                        visit([child] if not isinstance(child, ast.ExceptHandler) else child.body)
    visit(tree.body)
    return out


def _package_of(module: str, modules: dict[str, Path]) -> str:
    parts = module.split(".")
    if len(parts) >= 2 and (KIT / parts[1]).is_dir():
        return "kit." + parts[1]
    return module


def _import_graph(modules: dict[str, Path], inside_functions: bool = False) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for m, path in modules.items():
        for target, names in _top_level_imports(path, m, path.name == "__init__.py", inside_functions):
            if not target.startswith("kit"):
                continue
            subs = {f"{target}.{n}" for n in names if f"{target}.{n}" in modules}
            # ``from pkg import _sub`` inside pkg loads only the submodule
            deps = subs if subs and len(subs) == len(names) else {target} | subs
            # ``from kit import models`` is ``import kit.models``: kit's own __init__ runs first for any kit
            # module, so it is no arrow to the top
            if target == "kit" and subs and len(subs) == len(names):
                deps = subs
            # importing a package's submodule from outside first runs the package's __init__
            elif _package_of(target, modules) != _package_of(m, modules):
                deps.add(_package_of(target, modules))
            graph[m] |= {d for d in deps if d in modules and d != m}
    return graph


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (module -> modules it imports), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(graph[u]):
            if state.get(v) == 1:
                return stack[stack.index(v):] + [v]
            if v not in state:
                found = dfs(v)
                if found:
                    return found
        stack.pop()
        state[u] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = dfs(m)
            if found:
                return found
    return None


def test_no_import_cycle_inside_kit():
    cycle = _find_cycle(_import_graph(_modules()))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])
    cycle = _find_cycle(_import_graph(_modules(), inside_functions=True))
    assert cycle is None, "import cycle through in-function imports: " + " -> ".join(cycle or [])


def _private_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Imports anywhere in a module (functions included) between the private modules of one package."""
    graph = _import_graph(modules, inside_functions=True)
    return {m: {d for d in deps if _package_of(d, modules) == _package_of(m, modules) and d.rsplit(".", 1)[-1].startswith("_")
                and not d.endswith("__init__") and d != _package_of(m, modules)}
            for m, deps in graph.items() if m.rsplit(".", 1)[-1].startswith("_")}


def test_no_import_cycle_between_private_modules_even_inside_functions():
    """A package's private files form a tree of calls: no two of them import each other, not even
    inside functions (``_profile`` -> ``_remote`` -> ``_profile`` was such a knot)."""
    cycle = _find_cycle(_private_graph(_modules()))
    assert cycle is None, "import cycle through in-function imports: " + " -> ".join(cycle or [])


def test_the_cycle_check_sees_imports_inside_functions(tmp_path):
    """The check above must fail on a cycle made only of in-function imports."""
    pkg = tmp_path / "kit" / "pkg"
    pkg.mkdir(parents=True)
    (tmp_path / "kit" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "_a.py").write_text("def f():\n    from kit.pkg._b import g\n    return g\n")
    (pkg / "_b.py").write_text("def g():\n    from kit.pkg import _a\n    return _a\n")
    (pkg / "_c.py").write_text("import os\n")
    modules = {"kit": tmp_path / "kit" / "__init__.py", "kit.pkg": pkg / "__init__.py",
               **{f"kit.pkg.{n}": pkg / f"{n}.py" for n in ("_a", "_b", "_c")}}
    global KIT
    saved, KIT = KIT, tmp_path / "kit"
    try:
        assert _find_cycle(_import_graph(modules)) is None           # load time: no cycle
        cycle = _find_cycle(_private_graph(modules))
    finally:
        KIT = saved
    assert cycle is not None and set(cycle) == {"kit.pkg._a", "kit.pkg._b"}


# The floors of the house, bottom first: a package may import its own floor and the floors below, never
# one above (function imports included). Data flows up: hosts -> parsers -> analyses -> figures,
# sessions and experiments -> reports and the command line.
FLOORS = [
    ["kit.errors", "kit.util", "kit.provenance", "kit.redact", "kit.stats"],
    ["kit.remote", "kit.ledger", "kit.engines"],
    ["kit.source", "kit.env", "kit.models", "kit.testing", "kit.magics"],
    ["kit.logs", "kit.profile"],
    ["kit.audit", "kit.plots", "kit.bench"],
    ["kit.session", "kit.live", "kit.explorer"],
    ["kit.investigation"],
    ["kit.report", "kit.runs", "kit.mcp", "kit.cli", "kit", "kit.__main__"],
]


def _package_graph(modules: dict[str, Path]) -> tuple[dict[str, set[str]], dict[tuple[str, str], str]]:
    """package -> packages it imports (anywhere in its modules, functions included), and for each arrow
    one module that draws it."""
    graph: dict[str, set[str]] = {}
    why: dict[tuple[str, str], str] = {}
    for m, deps in _import_graph(modules, inside_functions=True).items():
        a = _package_of(m, modules)
        graph.setdefault(a, set())
        for d in deps:
            b = _package_of(d, modules)
            if a != b:
                graph[a].add(b)
                why.setdefault((a, b), f"{m} -> {d}")
    for deps in list(graph.values()):
        for b in deps:
            graph.setdefault(b, set())
    return graph, why


def test_no_circle_between_packages_even_inside_functions():
    graph, why = _package_graph(_modules())
    cycle = _find_cycle(graph)
    assert cycle is None, "circle between packages: " + " -> ".join(cycle or []) + " (" + "; ".join(
        why[(a, b)] for a, b in zip(cycle or [], (cycle or [])[1:])) + ")"


def test_no_arrow_back_up():
    floor = {p: i for i, ps in enumerate(FLOORS) for p in ps}
    graph, why = _package_graph(_modules())
    assert set(graph) <= set(floor), f"packages on no floor of FLOORS: {sorted(set(graph) - set(floor))}"
    up = [f"{why[(a, b)]} (floor {floor[a]} -> {floor[b]})" for a, deps in sorted(graph.items()) for b in sorted(deps)
          if floor[b] > floor[a]]
    assert up == []


def test_the_package_check_finds_a_planted_circle(tmp_path):
    """session -> audit -> logs -> session, each arrow an import inside a function: found."""
    root = tmp_path / "kit"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "session.py").write_text("def f():\n    from kit.audit import audit\n    return audit\n")
    for pkg, body in (("audit", "def audit():\n    from kit.logs import settings\n    return settings\n"),
                      ("logs", "def settings():\n    from kit.session import f\n    return f\n")):
        (root / pkg).mkdir()
        (root / pkg / "__init__.py").write_text(f"from kit.{pkg}._x import *  # noqa\n")
        (root / pkg / "_x.py").write_text(body)
    modules = {"kit": root / "__init__.py", "kit.session": root / "session.py",
               **{f"kit.{p}{s}": root / p / f for p in ("audit", "logs")
                  for s, f in (("", "__init__.py"), ("._x", "_x.py"))}}
    global KIT
    saved, KIT = KIT, root
    try:
        assert _find_cycle(_import_graph(modules)) is None            # load time: no circle
        graph, _ = _package_graph(modules)
    finally:
        KIT = saved
    cycle = _find_cycle(graph)
    assert cycle is not None and set(cycle) == {"kit.session", "kit.audit", "kit.logs"}


def test_no_private_name_used_across_packages():
    modules = _modules()
    offences = []
    for m, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kit") and not node.level:
                targets = [(node.module, a.name) for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [(a.name, "") for a in node.names if a.name.startswith("kit")]
            else:
                continue
            for mod, attr in targets:
                if _package_of(mod, modules) == _package_of(m, modules):
                    continue
                private = [p for p in mod.split(".")[1:] + ([attr] if attr else []) if p.startswith("_")]
                if private and attr != "__version__":
                    offences.append(f"{m}: {mod} {attr}".strip())
    assert offences == []


def test_module_docstrings_cite_nothing_outside_the_repository():
    bad = [str(p.relative_to(ROOT)) for p in _modules().values()
           if (ast.get_docstring(ast.parse(p.read_text(encoding="utf-8"))) or "").find("../") >= 0]
    assert bad == []


def test_every_package_init_is_thin_and_documented():
    for init in sorted(KIT.glob("*/__init__.py")):
        if "_vendor" in init.parts:
            continue
        tree = ast.parse(init.read_text(encoding="utf-8"))
        doc = ast.get_docstring(tree) or ""
        assert len(doc) > 100, f"{init.parent.name}: the docstring says what the area does"
        defs = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        assert set(defs) <= {"__getattr__", "__dir__"}, f"{init.parent.name}/__init__.py holds work: {defs}"


def _kit_areas() -> list[str]:
    """Every package (``kit/<name>/``) and one-concern module (``kit/<name>.py``) of the library."""
    found = [p.name for p in KIT.iterdir() if p.is_dir() and (p / "__init__.py").is_file()]
    found += [p.stem for p in KIT.glob("*.py") if not p.stem.startswith("_")]
    return sorted(found)


def test_readme_layout_names_every_package_and_module():
    readme = (ROOT / "README.md").read_text()
    layout = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    missing = [name for name in _kit_areas() if f"`{name}`" not in layout]
    assert not missing, f"README's layout paragraph does not name: {missing}"
    packages = layout.split("one sub-package per area", 1)[1].split("plus", 1)[0]
    modules = layout.split("one-concern modules", 1)[1].split(";", 1)[0]
    for name in _kit_areas():
        is_package = (KIT / name).is_dir()
        assert f"`{name}`" in (packages if is_package else modules), \
            f"README calls {name} a {'module' if is_package else 'package'}"


def test_contributing_map_names_every_package_and_module():
    text = (ROOT / "CONTRIBUTING.md").read_text()
    house = text.split("## Map of the house", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in house.splitlines() if line.startswith("| `kit/")]
    named = " ".join(r.split("|")[1] for r in rows)
    missing = [name for name in _kit_areas()
               if f"`kit/{name}/`" not in named and f"`kit/{name}.py`" not in named]
    assert not missing, f"CONTRIBUTING.md's map of the house lacks: {missing}"


def test_size_rule_exemptions_only_shrink():
    """pyproject's per-file-ignores list today's offenders of the size rules (E501, C901, PLR0912,
    PLR0915); an entry a file no longer needs fails here, so the list only ever shrinks."""
    import json
    import shutil
    import subprocess
    import sys

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    ignores = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]["per-file-ignores"]
    proc = subprocess.run([ruff, "check", "--config", "lint.per-file-ignores = {}", "--output-format", "json",
                           "--exit-zero", *ignores], cwd=ROOT, capture_output=True, text=True, timeout=120)
    found: dict[str, set[str]] = {}
    for v in json.loads(proc.stdout):
        found.setdefault(Path(v["filename"]).resolve().relative_to(ROOT).as_posix(), set()).add(v["code"])
    stale = {f: sorted(set(rules) - found.get(f, set())) for f, rules in ignores.items()}
    stale = {f: r for f, r in stale.items() if r}
    assert not stale, f"remove these from [tool.ruff.lint.per-file-ignores] in pyproject.toml: {stale}"


# A cell that records or revises a verdict may be long: the statement, the test, the evidence and
# the numbers of a hypothesis are read there, side by side, on purpose.
_VERDICT_CALLS = ("ledger.record(", "ledger.revise(", ".decide(ledger")
MAX_CELL_LINES = 15


def test_notebooks_narrate_and_call():
    """Notebooks call the library and say what it found: no code cell over 15 lines except ledger
    verdicts and the parameters cell (what a longer cell computes belongs in kit, where it is tested)."""
    import nbformat

    long = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
            if cell.cell_type != "code":
                continue
            lines = cell.source.splitlines()
            if "parameters" in cell.metadata.get("tags", []):
                continue  # the papermill parameters: declarations with their comments, one cell by rule
            if len(lines) > MAX_CELL_LINES and not any(c in cell.source for c in _VERDICT_CALLS):
                long.append(f"{path.name} cell {i}: {len(lines)} lines")
    assert not long, f"code cells over {MAX_CELL_LINES} lines (move the computation into kit): {long}"


# Python programs still kept as string constants (shipped to hosts); move each to its package's
# ``_host/`` folder as a real .py file (kit.util.host_program) and remove it here.
PROGRAMS_IN_STRINGS = {"kit/remote/_base.py:_PY_DRIVER", "kit/profile/reading/_remote.py:_MAIN",
                       "kit/profile/reading/_remote.py:_FALLBACK"}


def test_programs_shipped_to_hosts_are_real_py_files():
    """A program the kit ships to a host is a .py file under ``kit/<package>/_host/`` (linted, read,
    packaged as package data), not a string constant; each such file compiles on its own."""
    found = set()
    for path in sorted(KIT.rglob("*.py")):
        if "_host" in path.parts or "_vendor" in path.parts:
            continue
        for node in ast.parse(path.read_text()).body:
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str) and node.value.value.count("\n") >= 5):
                continue
            try:
                ast.parse(node.value.value)
            except SyntaxError:
                continue  # shell scripts, CSS, config templates
            if "import " in node.value.value:
                found |= {f"{path.relative_to(ROOT).as_posix()}:{t.id}" for t in node.targets if isinstance(t, ast.Name)}
    assert found <= PROGRAMS_IN_STRINGS, f"programs kept in strings: {sorted(found - PROGRAMS_IN_STRINGS)}"
    assert not PROGRAMS_IN_STRINGS - found, f"moved already, remove from the list: {PROGRAMS_IN_STRINGS - found}"
    data = (ROOT / "pyproject.toml").read_text()
    for prog in KIT.rglob("_host/*.py"):
        compile(prog.read_text(), str(prog), "exec")
        package = ".".join(prog.parent.parent.relative_to(ROOT).parts)
        assert f'"{package}" = ["_host/*.py"]' in data, f"{prog}: not in [tool.setuptools.package-data]"


def test_every_slow_entry_matches_a_test():
    """An entry of ``SLOW`` (tests/conftest.py) that names no file or no test any more marks nothing:
    a renamed test would silently run in ``make test-fast``. Each entry must match a file (or folder)
    and, with ``::name``, a test function of that file whose name starts with it."""
    from tests.conftest import SLOW

    stale = []
    for entry in SLOW:
        path, _, name = entry.partition("::")
        p = ROOT / path
        if not p.exists():
            stale.append(f"{entry} (no such file)")
            continue
        if not name:
            continue
        tree = ast.parse(p.read_text(encoding="utf-8"))
        tests = [n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and n.name.startswith("test")]
        if not any(t.startswith(name) for t in tests):
            stale.append(f"{entry} (no such test)")
    assert stale == []


def test_the_slow_check_fails_on_a_stale_entry(monkeypatch):
    import tests.conftest as conftest

    monkeypatch.setattr(conftest, "SLOW", ("tests/test_house.py::test_no_such_thing",))
    with pytest.raises(AssertionError, match="no such test"):
        test_every_slow_entry_matches_a_test()


# -- names referenced nowhere, deferred imports with a reason, no one-letter module aliases ------------------
# Names defined at a module's top level that nothing mentions (kit, tests, bench, tools, notebooks, data files):
# owned by another area's change in flight; the list only shrinks (an entry that is referenced or gone fails).
KNOWN_UNREFERENCED: dict[str, set[str]] = {}
_REFERENCE_FILES = ("kit/**/*.py", "kit/**/*.toml", "tests/**/*.py", "bench/**/*.py", "tools/**/*.py",
                    "notebooks/**/*.ipynb", "Makefile", "pyproject.toml")


def _words(root: Path) -> "dict[str, int]":
    import collections
    import re

    words: collections.Counter = collections.Counter()
    for pattern in _REFERENCE_FILES:
        for p in root.glob(pattern):
            if "_vendor" not in p.parts and ".venv" not in p.parts and p.name != "test_house.py":  # lists them
                words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", p.read_text(encoding="utf-8", errors="replace")))
    return words


def _unreferenced(root: Path) -> dict[str, set[str]]:
    """module path -> its top-level names whose only mention anywhere is their definition."""
    words = _words(root)
    out: dict[str, set[str]] = {}
    for p in sorted((root / "kit").rglob("*.py")):
        if "_vendor" in p.parts:
            continue
        for n in ast.parse(p.read_text(encoding="utf-8")).body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [n.name]
            elif isinstance(n, ast.Assign):
                names = [t.id for t in n.targets if isinstance(t, ast.Name)]
            elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
                names = [n.target.id]
            else:
                continue
            for name in names:
                if not name.startswith("__") and words[name] <= 1:
                    out.setdefault(str(p.relative_to(root)), set()).add(name)
    return out


def test_no_name_is_referenced_nowhere():
    found = _unreferenced(ROOT)
    new = {f: sorted(n - KNOWN_UNREFERENCED.get(f, set())) for f, n in found.items()}
    assert {f: n for f, n in new.items() if n} == {}, "defined, used nowhere: delete them"
    stale = {f: sorted(n - found.get(f, set())) for f, n in KNOWN_UNREFERENCED.items()}
    assert {f: n for f, n in stale.items() if n} == {}, "KNOWN_UNREFERENCED names a name that is used or gone"


def test_the_unreferenced_check_finds_a_planted_name(tmp_path):
    (tmp_path / "kit").mkdir()
    (tmp_path / "kit" / "a.py").write_text("def used():\n    return 1\n\n\ndef forgotten_helper():\n    return used()\n")
    assert _unreferenced(tmp_path) == {"kit/a.py": {"forgotten_helper"}}


# Imports inside functions: each says on its line why it is deferred (``# deferred: start-up``, ``# optional
# dependency``, ``# the host side`` ...). Per file name (robust to a file moving between packages), how many do not
# say it yet: a file may not exceed its entry; lower the entry as reasons are given (the list only shrinks).
# DEFERRED_BUDGET: all deferred imports of kit/ (main at 380fb17: 339, at 9df5df2: 389; after issues 44-50 merged: 387;
# after the second round of 47: 160, each with its reason; after the third (command modules and packages loaded on
# demand import their work at the top): 68; issue 47's target: 120).
DEFERRED_BUDGET = 68
DEFERRED_WITHOUT_REASON: dict[str, int] = {}
# One-letter module aliases (``import _summary as S``) say nothing where they are used; the ones left, by file name.
KNOWN_ONE_LETTER_ALIASES: dict[str, int] = {}


def _deferred_imports(path: Path) -> tuple[int, int]:
    """(imports inside functions, those without a comment on their line) of one module."""
    lines = path.read_text(encoding="utf-8").split("\n")
    seen: set[int] = set()
    total = bare = 0
    for fn in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for n in ast.walk(fn):
                if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in seen:
                    seen.add(id(n))
                    total += 1
                    bare += "#" not in lines[n.lineno - 1] and "#" not in lines[n.end_lineno - 1]
    return total, bare


def test_deferred_imports_say_why_and_stay_within_the_budget():
    import collections

    total, bare = 0, collections.Counter()
    for p in (ROOT / "kit").rglob("*.py"):
        if "_vendor" not in p.parts:
            t, b = _deferred_imports(p)
            total += t
            bare[p.name] += b
    over = {f: f"{n} > {DEFERRED_WITHOUT_REASON.get(f, 0)}" for f, n in bare.items()
            if n > DEFERRED_WITHOUT_REASON.get(f, 0)}
    assert over == {}, "imports inside functions without a reason comment on their line"
    assert total <= DEFERRED_BUDGET, f"{total} imports inside functions in kit/ (budget {DEFERRED_BUDGET})"


def test_the_deferred_import_check_counts_a_bare_one(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("def f():\n    import json\n    import os  # deferred: start-up\n    return json, os\n")
    assert _deferred_imports(p) == (2, 1)


def test_no_new_one_letter_module_alias():
    import collections

    found: collections.Counter = collections.Counter()
    for p in (ROOT / "kit").rglob("*.py"):
        if "_vendor" in p.parts:
            continue
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                found[p.name] += sum(1 for a in n.names if a.asname and len(a.asname) == 1)
    over = {f: n for f, n in found.items() if n > KNOWN_ONE_LETTER_ALIASES.get(f, 0)}
    assert over == {}, "one-letter module aliases: name the module (records.clip, not R.clip)"
