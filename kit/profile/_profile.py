"""Load, Profile and Summary: the public façade (documented in the package docstring)."""
from __future__ import annotations

import glob
import html
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Union

import numpy as np
import pandas as pd

from kit.errors import TraceError, UsageError
from kit.profile import _load
from kit.profile._assemble import assemble
from kit.profile._load import Prefetch
from kit.profile.analyses._summary import summarise
from kit.profile.attribution._categories import Rule, build_rules, default_rules
from kit.profile.attribution._evidence import module_table
from kit.profile.reading._remote import is_remote, read_remote
from kit.profile.steps import _cpu
from kit.util import call_settings, frame_figures, recorded

__all__ = ["load", "Profile", "Summary", "PHASES", "default_rules"]

PHASES = ("all", "decode", "prefill")


def load(paths: Union[str, os.PathLike, Iterable[Union[str, os.PathLike]]], *, rules=None, cache: bool = True,
         host=None, python: str = "python3", prefetched: Prefetch | None = None, reference=None,
         step_marker: str | None = None) -> "Profile":
    """Read trace files (one per rank) into a :class:`Profile`.

    ``paths``: a file or a list of files (Kineto JSON/gzip — detected by magic bytes — nsys stats
    CSV, nsys SQLite). ``rules``: extra category rules tried before the packaged table — a TOML file
    path (``replace = true`` in it replaces the table) or a list of ``(pattern, category)``.
    ``cache``: reuse/write the parsed tables under ``$KIT_CACHE_DIR`` (default
    ``~/.cache/decode-kit``), keyed by file identity.
    Traces on a host are read where they lie: ``"HOST:/path/rank*.json.gz"`` specs, or paths (globs
    allowed) with ``host=`` (a :class:`kit.remote.Host`): the kit's reader runs there with the host's
    ``python`` and only the raw tables come back (``_remote.py``); the Profile is the same.
    ``prefetched``: the parses :func:`kit.profile.prefetch` started for these paths (the CLI starts
    them before pandas is imported).
    ``reference``: a run of the same model and configuration with CPU ops, ideally ``with_stack=True``
    (trace paths or a :class:`Profile`): kernels without placement (CUDA-graph replays, traces without
    stack) take their counterpart's layer, module, op and category by alignment (``_place.py``;
    ``Profile.placement`` says what was placed, with its score, and what was not).
    ``step_marker``: the name of the range that is one step of the serving loop (numbers in names
    compare as any number: ``ProfilerStep`` finds ``ProfilerStep#3``; a module class finds its
    calls); by default the engines' known markers, else a repeated range that tiles the run,
    ``ProfilerStep#N``, graph launches, the model's forwards (``_windows.py``). The reference is read
    with the same rule, so that its steps correspond.
    """
    if not isinstance(paths, (str, os.PathLike)):
        paths = list(paths)
    rule_list = build_rules(rules)
    if is_remote(paths, host):
        files, names, parsed, stats = read_remote(paths, host=host, python=python)
        with _load.system_arrow_pool():
            d = assemble(names, parsed, rule_list, cache, step_marker)
        d["meta"]["remote"] = stats
    else:
        plist = _expand([paths] if isinstance(paths, (str, os.PathLike)) else paths)
        if not plist:
            raise TraceError("no trace files given")
        files = [str(p) for p in plist]
        d = _load.load(plist, rule_list, cache, prefetched, step_marker)
    prof = Profile.from_assembled(files, d, rule_list)
    if reference is not None:
        from kit.profile.attribution._place import place  # deferred: only with reference= (not on summary's path)

        place(prof, Profile.of(reference, rules=rules, cache=cache, host=host, python=python,
                               step_marker=step_marker))
    return prof


def _expand(paths) -> list[Path]:
    """Local paths with glob patterns (``rel/rank*.json.gz``) expanded, sorted; a pattern matching
    nothing is a TraceError saying so (a file that exists under a name with ``*`` is taken as named)."""
    out: list[Path] = []
    for p in paths:
        s = os.fspath(p)
        if glob.has_magic(s) and not os.path.exists(s):
            hits = sorted(glob.glob(s))
            if not hits:
                raise TraceError(f"{s}: no file matches this pattern (for traces on a host: 'HOST:{s}' or host=)",
                                 path=s)
            out += [Path(h) for h in hits]
        else:
            out.append(Path(s))
    return out


@dataclass(eq=False)
class Profile:
    """Parsed profile: ``kernels`` (rank, device, stream, name, category, decided_by, evidence, start_us,
    dur_us, correlation, step, phase, module, block, layer, graph, ...), ``annotations``, ``steps`` (one
    row per rank and step), ``comms`` (CPU-side collective calls: ``record_param_comms`` with collective
    name, group size, element counts, dtype), ``runtime`` (CUDA/HIP runtime and driver calls and the CPU
    ops that wait for the GPU: rank, name, start_us, dur_us, tid, correlation, kind), ``meta`` and
    ``warnings``. Each kernel row also carries its launch's ops (``op``, ``op_top``, ``op_call``,
    ``input_dims``, ``input_types``) so comparisons and rooflines never re-read the files."""

    files: list[str]
    kernels: pd.DataFrame
    annotations: pd.DataFrame
    steps: pd.DataFrame
    meta: dict
    warnings: list[str]
    rules: list[Rule] = field(repr=False, default_factory=list)
    comms: pd.DataFrame = field(repr=False, default_factory=pd.DataFrame)
    runtime: pd.DataFrame = field(repr=False, default_factory=pd.DataFrame)

    @classmethod
    def of(cls, x, reference=None, **load_args) -> "Profile":
        """``x`` as a Profile: ``x`` itself when it is one, else :func:`load` of its paths (with
        ``reference=`` and ``load_args``): the one place where an analysis's "a Profile or trace paths"
        becomes a Profile."""
        if isinstance(x, cls):
            return x
        return load(x, reference=reference, **load_args)

    @classmethod
    def from_assembled(cls, files: list[str], d: dict, rules: list[Rule]) -> "Profile":
        """The Profile of ``_assemble.assemble``'s tables (``d``) for ``files``: the one constructor the
        loader, the remote reader and ``ranks`` share."""
        return cls(files, d["kernels"], d["annotations"], d["steps"], d["meta"], list(d["warnings"]), rules,
                   d["comms"], d["runtime"])

    @property
    def ranks(self) -> list[int]:
        return sorted(self.meta.get("ranks", {}))

    @property
    def provenance(self):
        """Where the trace files came from (``kit.provenance.Provenance``, from the nearest session
        manifest or the files' marks); the first file's when they agree, else ``unknown`` with a note
        listing them."""
        from kit.provenance import Provenance, provenance_of  # deferred: not on kit profile summary's path

        found = []
        for f in self.files:
            pv = provenance_of(f)
            if pv not in found:
                found.append(pv)
        if len(found) == 1:
            return found[0]
        return Provenance("unknown", note="; ".join(p.label for p in found) or None)

    @recorded("summary")
    def summary(self, phase: str = "all", *, top: int = 5) -> "Summary":
        """Category breakdown of ``phase`` ('all', 'decode' or 'prefill'); see :class:`Summary`."""
        if phase not in PHASES:
            raise UsageError(f"Profile.summary: phase must be one of {', '.join(PHASES)}, not {phase!r}")
        d = summarise(self, phase, top)
        cpu = _cpu.cpu_side(self, d["phase"])
        return Summary(**d, verdict=cpu["verdict"], cpu=cpu["steps"], cpu_gaps=cpu["gaps"], cpu_ranks=cpu["per_rank"])

    def health(self):
        """Can this trace's numbers be trusted? Capture mode, linked shares, launch APIs, communication
        kernels, dropped events, mixed phases, profiler overhead, and per metric usable / degraded /
        unreliable with the reason and the capture that fixes it (``_health.py``)."""
        from kit.profile.analyses._health import health  # deferred: not on kit profile summary's path

        return health(self)

    @property
    def placement(self):
        """What ``load(..., reference=REF)`` placed (``_place.Placement``: score, placed and unplaced
        shares, per step and per layer), or None without a reference."""
        return self.meta.get("placement")

    def find_layers(self, assign: bool = True):
        """Layer boundaries from the repetition of the kernel sequence alone (``_layers.py``), for
        traces with no module frames and no reference; ``assign`` writes ``layer``/``layer_kind`` into
        the kernels that have none, so ``modules(by='layer')`` works. Returns the ``LayerGuess``
        (layers found, confidence, how), also ``meta['layers_found']``."""
        from kit.profile.attribution._layers import find_layers  # deferred: not on kit profile summary's path

        g = find_layers(self, assign=assign)
        self.meta["layers_found"] = g
        return g

    def modules(self, by: str = "module") -> pd.DataFrame:
        """Kernel time per module class (``by='module'``: layer child and innermost module; ``'block'``:
        the module inside the layer) or per layer index (``by='layer'``); empty without module frames
        (traces recorded without ``with_stack``)."""
        if by not in ("module", "block", "layer"):
            raise UsageError(f"Profile.modules: by must be 'module', 'block' or 'layer', not {by!r}")
        return module_table(self.kernels, by)

    def __repr__(self) -> str:
        ph = self.steps["phase"].value_counts().sort_index() if len(self.steps) else pd.Series(dtype=int)
        steps = ", ".join(f"{k} {v}" for k, v in ph.items())
        return (f"Profile(files={len(self.files)}, ranks={self.ranks}, kernels={len(self.kernels):,}, "
                f"steps={len(self.steps)}{f' ({steps})' if steps else ''}, warnings={len(self.warnings)})")

    def _repr_html_(self) -> str:
        w = "".join(f"<li>{html.escape(x)}</li>" for x in self.warnings)
        return (f"<div><b>{html.escape(repr(self))}</b><br>source: {self.provenance._repr_html_()}"
                f"{'<ul>' + w + '</ul>' if w else ''}</div>")


@dataclass(eq=False)
class Summary:
    """Category shares of one phase of a profile, with idle, per step/rank, comm and AllReduce spread.

    ``categories``: category, time_us, calls, share_of_kernel, share_of_wall (+ an ``idle`` row).
    ``per_rank``: kernel/wall/idle time, total and exposed communication, AllReduce time and calls.
    ``per_step``: one row per rank and step with wall, kernel time and time per category.
    ``allreduce_spread``: per-rank AllReduce time and its max-min spread (a long all-reduce on one
    rank is often waiting for another). ``top``: top kernels per category. ``warnings``: what the
    numbers cannot show. ``rank_categories``: time per category (columns, plus ``idle``) per rank.
    """

    phase: str
    files: list[str]
    ranks: list[int]
    steps: int
    kernel_time_us: float
    wall_time_us: float
    categories: pd.DataFrame
    per_rank: pd.DataFrame
    per_step: pd.DataFrame
    allreduce_spread: dict
    top: pd.DataFrame
    warnings: list[str]
    rank_categories: pd.DataFrame = field(default_factory=pd.DataFrame)
    evidence: pd.DataFrame = field(default_factory=pd.DataFrame)
    modules: pd.DataFrame = field(default_factory=pd.DataFrame)
    layers: pd.DataFrame = field(default_factory=pd.DataFrame)
    collectives: pd.DataFrame = field(default_factory=pd.DataFrame)
    categories_unavailable: str | None = None
    verdict: dict = field(default_factory=dict)
    cpu: pd.DataFrame = field(default_factory=pd.DataFrame)
    cpu_gaps: pd.DataFrame = field(default_factory=pd.DataFrame)
    cpu_ranks: pd.DataFrame = field(default_factory=pd.DataFrame)
    undecided: float = 0.0   # share of kernel time whose category the kit could be wrong about
    undecided_by_category: dict = field(default_factory=dict)

    def to_dict(self, full: bool = False) -> dict:
        """The CLI's JSON: files, ranks, kernel_time_us, wall_time_us, steps, categories, warnings
        (``full=True`` adds phase, per_rank, allreduce_spread and top kernels)."""
        cats = [{"category": r.category, "time_us": _num(r.time_us), "share_of_kernel": _num(r.share_of_kernel),
                 "share_of_wall": _num(r.share_of_wall)} for r in self.categories.itertuples()]
        d = {"files": [os.path.basename(f) for f in self.files], "ranks": self.ranks,
             "kernel_time_us": _num(self.kernel_time_us), "wall_time_us": _num(self.wall_time_us),
             "steps": self.steps, "categories": cats, "warnings": list(self.warnings),
             "undecided": _num(self.undecided),
             "undecided_by_category": {c: _num(v) for c, v in self.undecided_by_category.items()}}
        if self.categories_unavailable:
            d["categories_unavailable"] = self.categories_unavailable
        d["decided_by"] = [{"decided_by": r.decided_by, "time_us": _num(r.time_us),
                            "share_of_kernel": _num(r.share_of_kernel)} for r in self.evidence.itertuples()]
        d["cpu"] = _cpu.to_json(self.verdict, self.cpu_ranks, self.cpu_gaps, self.cpu if full else None)
        tables = ("collectives",) if len(self.collectives) else ()
        if full:
            d["phase"] = self.phase
            d["allreduce_spread"] = _cells(self.allreduce_spread)
            tables += ("per_rank", "top", "modules")
        for t in tables:
            d[t] = [_cells(r) for r in getattr(self, t).to_dict("records")]
        return d

    def share(self, category: str, of: str = "kernel") -> float:
        """Share of kernel (``of='kernel'``) or wall (``of='wall'``) time of one category (0 if absent)."""
        row = self.categories[self.categories["category"] == category]
        return float(row[f"share_of_{of}"].iloc[0]) if len(row) else 0.0

    def _table_rows(self) -> list[tuple[str, str, str, str]]:
        rows = []
        for r in self.categories.itertuples():
            sk = "" if pd.isna(r.share_of_kernel) else f"{100 * r.share_of_kernel:.1f}%"
            sw = "" if pd.isna(r.share_of_wall) else f"{100 * r.share_of_wall:.1f}%"
            t = "n/a" if pd.isna(r.time_us) else f"{r.time_us:,.1f}"
            rows.append((r.category, t, sk, sw))
        return rows

    def _head(self) -> str:
        wall = "n/a" if np.isnan(self.wall_time_us) else f"{self.wall_time_us:,.1f} us"
        kern = "n/a" if np.isnan(self.kernel_time_us) else f"{self.kernel_time_us:,.1f} us"
        return (f"Summary(phase={self.phase}, ranks={self.ranks}, steps={self.steps}, "
                f"kernel={kern}, wall={wall})")

    def to_record(self, args: dict) -> dict:
        """What the run catalogue records of this summary (``kit.runs``): headline figures, shares, tables."""
        figs = [("kernel_time_us", self.kernel_time_us), ("wall_time_us", self.wall_time_us), ("steps", self.steps)]
        if self.steps:
            figs.append(("step_us", self.wall_time_us / max(1, self.steps)))
        figs += [(f"share_of_kernel.{r.category}", r.share_of_kernel) for r in self.categories.itertuples()]
        figs += [(f"share_of_wall.{r.category}", r.share_of_wall) for r in self.categories.itertuples()]
        figs += frame_figures(self.per_rank, key="rank")
        verdict = self.verdict.get("verdict") if isinstance(self.verdict, dict) else None
        return {"inputs": list(self.files), "settings": {"phase": self.phase, **call_settings(args)}, "figures": figs,
                "facts": {"phase": self.phase, "verdict": verdict,
                          "categories_unavailable": self.categories_unavailable},
                "tables": {"categories": self.categories, "per_rank": self.per_rank, "top": self.top,
                           "per_step": self.per_step, "collectives": self.collectives, "layers": self.layers},
                "warnings": list(self.warnings)}

    def _notes(self) -> list[str]:
        """What the text and the HTML views say under the category table (warnings apart)."""
        out = [f"categories unavailable: {self.categories_unavailable}"] if self.categories_unavailable else []
        if len(self.evidence) and not self.evidence["share_of_kernel"].isna().all():
            out.append("decided by: " + ", ".join(f"{r.decided_by} {100 * r.share_of_kernel:.1f}%"
                                                  for r in self.evidence.itertuples()))
        out += _cpu.lines(self.verdict, self.cpu_ranks, self.cpu_gaps)
        out += [f"collective {r.collective}: {r.calls} call(s) on the CPU, group size {r.group_size}, "
                f"{r.bytes:,} bytes, {r.kernels} kernel(s)" for r in self.collectives.itertuples()]
        if len(self.per_rank) > 1 or (len(self.per_rank) and self.per_rank["comm_us"].fillna(0).sum() > 0):
            out += [f"rank {r.rank}: comm {r.comm_us:,.1f} us, exposed {r.exposed_comm_us:,.1f} us, "
                    f"allreduce {r.allreduce_us:,.1f} us x{r.allreduce_calls}" for r in self.per_rank.itertuples()]
        sp = self.allreduce_spread
        if sp.get("ranks", 0) > 1:
            out.append(f"allreduce spread across ranks: min {sp['min_us']:,.1f} us, max {sp['max_us']:,.1f} us "
                       f"(rank {sp['max_rank']}), spread {sp['spread_us']:,.1f} us")
        return out

    def __repr__(self) -> str:
        lines = [self._head(), f"{'category':<20}{'time_us':>14}{'%kernel':>9}{'%wall':>8}"]
        lines += [f"{c:<20}{t:>14}{k:>9}{w:>8}" for c, t, k, w in self._table_rows()]
        return "\n".join(lines + self._notes() + [f"warning: {w}" for w in self.warnings])

    def _repr_html_(self) -> str:
        body = "".join(f"<tr><td>{html.escape(c)}</td><td style='text-align:right'>{t}</td>"
                       f"<td style='text-align:right'>{k}</td><td style='text-align:right'>{w}</td></tr>"
                       for c, t, k, w in self._table_rows())
        warn = "".join(f"<li>{html.escape(w)}</li>" for w in self.warnings)
        notes = "".join(f"<p>{html.escape(x)}</p>" for x in self._notes())
        return (f"<div><b>{html.escape(self._head())}</b><table><thead><tr><th>category</th><th>time (us)</th>"
                f"<th>% kernel</th><th>% wall</th></tr></thead><tbody>{body}</tbody></table>{notes}"
                f"{'<p>Warnings:</p><ul>' + warn + '</ul>' if warn else ''}</div>")

def _num(x):
    return None if x is None or (isinstance(x, float) and np.isnan(x)) else round(float(x), 6)


def _cells(row: dict) -> dict:
    return {k: (_num(v) if isinstance(v, float) else v) for k, v in row.items()}
