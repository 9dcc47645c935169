"""The record of one engine (private to ``kit.engines``): :class:`Engine`, a row of the registry, and the
small records its fields hold (:class:`StepMarker`, :class:`GraphOff`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["Engine", "GraphOff", "StepMarker"]


@dataclass(frozen=True)
class StepMarker:
    """A trace range that marks one scheduler step of the engine: ``pattern`` (a regex matched at the start
    of the range's name) and ``phase(match)`` -> ``decode`` / ``prefill`` / ``mixed`` / ``unknown``."""

    pattern: str
    phase: Callable[[re.Match], str] = field(default=lambda m: "unknown")

    @property
    def regex(self) -> re.Pattern:
        return re.compile(self.pattern)


@dataclass(frozen=True)
class GraphOff:
    """How a command of the engine runs with CUDA graphs off (the reference run of a graph replay).

    ``strip``: a regex of the flags that set graphs already (removed); ``add``: the arguments that turn
    graphs off; ``same_program``: False when they also turn off something else (vLLM's ``--enforce-eager``
    turns torch.compile off too); ``mode``: what was turned off, in words; ``since``: the first version
    (major, minor) the row applies to (None: any); ``options``: set instead of flags where the
    engine reads its graph setting from an options file (TensorRT-LLM: ``{"cuda_graph_config": None}``)."""

    strip: str = ""
    add: tuple[str, ...] = ()
    same_program: bool = True
    mode: str = ""
    since: tuple[int, int] | None = None
    options: dict | None = None


@dataclass(frozen=True)
class Engine:
    """One serving engine: a row of the registry (``kit.engines.engines()``), defined in its own module.

    - ``name`` (the key the CLI, MCP and ``engine=`` arguments take), ``title`` (how people write it),
      ``commands``: words of a launch command that name it (``kit.engines.guess``);
    - ``log_formats``: the ``kit.logs`` formats of its server log, each a ``LogFormat`` object or the
      dotted name ``"package.module:ATTR"`` of one (resolved by ``kit.logs``, so parsers may stay there);
      ``log_header``: its logger's line prefix; ``spec``: the name of its speculative-acceptance reader in
      ``kit.logs`` (None: it prints no acceptance);
    - ``step_markers``: trace ranges that mark one scheduler step (``kit.profile`` finds steps by them
      first; ``kit.engines.step_markers()`` lists every engine's);
    - ``records``: readers of the engine's own per-step / per-request / per-interval records for the ITL
      reconciliation (``kit.logs.step_records``), each ``(level, reader, how)``: ``reader(source)`` (a
      callable or the dotted name ``"package.module:function"`` of one) returns ``kit.logs.StepRecords`` or
      None when the file is not its format; ``level``: ``step``, ``request``, ``iteration`` or ``interval``;
      ``how``: what the user does to get such a file, said when none is found;
    - ``launch``: the command that starts it, the engine's own arguments appended (``kit serve ENGINE``);
      ``bundled``: where its code is when the kit ships it (a repository-relative directory put on
      ``PYTHONPATH``: tinyserve's ``notebooks/sample/engine``), None when it is installed on the host;
    - ``phases``: (phase, regex) of its load phases in order, ``ready`` last (readiness: the health check
      on ``/health`` or ``/v1/models`` answering from the engine's own process); ``port``: its default port;
      ``profile_dir_env``: the variable that names its torch-profiler directory (set at start; then
      ``/start_profile`` takes no body), ``profile_steps``: whether ``/start_profile`` takes a step count;
    - ``graph_off``: rows of :class:`GraphOff`, the first that applies to the version wins (empty: unknown);
    - ``distributions``: its Python distribution names (the version probe); ``settings``: its command-line
      flags (argument dests) -> (normalised key, how the value reads: ``bool``, ``not`` (a disable flag),
      ``int``, ``text``, ``backend``) for effective settings;
    - ``notes``: free text (what is measured, what is not).
    """

    name: str
    title: str = ""
    commands: tuple[str, ...] = ()
    log_formats: tuple[Any, ...] = ()
    log_header: str | None = None
    spec: str | None = None
    step_markers: tuple[StepMarker, ...] = ()
    records: tuple[tuple[str, Any, str], ...] = ()
    launch: str = ""
    bundled: str | None = None
    phases: tuple[tuple[str, str], ...] = ()
    port: int = 8000
    profile_dir_env: str | None = None
    profile_steps: bool = True
    graph_off: tuple[GraphOff, ...] = ()
    distributions: tuple[str, ...] = ()
    settings: dict[str, tuple[str, str]] = field(default_factory=dict)
    priority: int = 100
    notes: str = ""

    def graph_off_for(self, version: str | None = None) -> GraphOff | None:
        """The graph-off row that applies to ``version`` (e.g. ``"0.11.0"``; None: the newest)."""
        m = re.match(r"(\d+)\.(\d+)", version or "")
        v = (int(m.group(1)), int(m.group(2))) if m else (99, 0)
        for row in self.graph_off:
            if row.since is None or v >= row.since:
                return row
        return None

    def __repr__(self) -> str:
        parts = [f"{len(self.log_formats)} log format(s)", f"{len(self.step_markers)} step marker(s)",
                 f"records: {', '.join(k for k, _, _ in self.records) or 'none'}"]
        return f"Engine({self.name!r}: {'; '.join(parts)})"
