"""The records of ``kit.logs`` (private; the bottom file: it imports no other ``kit.logs`` module but
``_table``): the settings evidence (:class:`SettingEvidence`, :class:`Settings`), a row of the engine table
(:class:`LogFormat`) and what one scan accumulates (:class:`State`)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

import kit.engines
from kit.logs._table import Columns

CLIP = 240  # characters of a line kept as an evidence's text
DUMP_NOTE = re.compile(r"\((?:server_args dump|vLLM engine config|get_server_info JSON|launch note|NCCL echo|"
                        r"environment capture|/proc/PID/environ)\)$")

# Normalised keys (what an experiment compares) and where each comes from.
NORMALISED = {
    "attention_backend": "server args / get_server_info attention_backend; log: the backend the engine chose",
    "custom_all_reduce": "False when the args disable it or the log says the engine disabled it",
    "p2p": "False when NCCL_P2P_DISABLE=1, the engine reports no P2P, or NCCL connects GPUs only via SHM/NET",
    "cuda_graph": "False when disable_cuda_graph / enforce_eager, else True when graphs were captured",
    "cuda_graph_bs": "captured batch sizes (log, or the args' cuda_graph_bs / cudagraph_capture_sizes)",
    "cuda_graph_max_bs": "largest captured batch size",
    "decode_batch_max": "largest running batch in the decode lines",
    "eager_decode_lines": "decode lines that ran without a CUDA graph (SGLang 'cuda graph: False')",
    "overlap_schedule": "SGLang overlap scheduler (not disable_overlap_schedule); vLLM async_scheduling",
    "tokenizer_mode": "'slow' means the Python tokenizer",
    "speculative": "speculative algorithm / method, None when off",
    "torch_compile": "enable_torch_compile / compilation level",
    "tp_size": "tensor-parallel size",
    "nccl_proto": "NCCL_PROTO from the engine's environment or NCCL's echo (plain INFO prints no per-call choice)",
    "nccl_algo": "NCCL_ALGO from the engine's environment or NCCL's echo",
    "nccl_transports": "transport families NCCL connected ranks with (P2P, SHM, NET ...)",
    "topology": "GPU interconnect from nvidia-smi topo -m: NVLink, PCIe-only, mixed",
    "gpus": "GPUs in the topology capture",
}

# dest of a command-line flag -> (normalised key, value transform): every engine's ``settings`` (kit.engines)
_READS: dict[str, Callable[[Any], Any]] = {
    "not": lambda v: not truthy(v), "bool": lambda v: truthy(v), "text": lambda v: v,
    "int": lambda v: int(v) if v is not None else None, "backend": lambda v: norm_backend(v)}


def flag_keys() -> dict[str, tuple[str, Any]]:
    """Every engine's command-line flags (argument dests) -> (normalised key, value transform), read from the
    registry when asked (an engine module may itself import ``kit.logs``)."""
    return {flag: (key, _READS[how]) for e in kit.engines.engines() for flag, (key, how) in e.settings.items()}
ENV_KEYS = {"NCCL_PROTO": "nccl_proto", "NCCL_ALGO": "nccl_algo"}


def truthy(v) -> bool:
    """A flag's value read as on: True, 1, true, yes, on."""
    return v is True or str(v).lower() in ("1", "true", "yes", "on")


def norm_backend(v) -> str | None:
    """An attention backend's name as both engines' arguments and lines say it, in one spelling."""
    if v is None:
        return None
    s = re.sub(r"(?i)\s+attention$", "", str(v).strip()).lower().replace("attentionbackendenum.", "").replace(" ", "_")
    return {"flash_attention": "flash_attn", "flash_attn": "flash_attn", "flashattention": "flash_attn",
            "flash_attn_v1": "flash_attn"}.get(s, s)


@dataclass(frozen=True)
class SettingEvidence:
    """One reported value: ``key`` (normalised or raw), ``value``, the ``file`` and ``line`` it came from
    (line None for a whole-file source) and the ``text`` of that line (clipped)."""

    key: str
    value: Any
    file: str
    line: int | None
    text: str

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    def to_dict(self) -> dict:
        v = self.value
        if isinstance(v, (set, tuple)):
            v = sorted(v) if isinstance(v, set) else list(v)
        return {"key": self.key, "value": v, "where": self.where, "text": self.text}

    def __str__(self) -> str:
        return f"{self.where}: {self.text}"


@dataclass
class Settings:
    """What one engine run reported about itself: ``args`` (its argument dumps, raw keys), ``env`` (its
    process's environment), ``evidence`` (every value with its file and line), ``effective`` (normalised keys,
    :data:`NORMALISED`, -> value: the engine's own report wins over the arguments), ``sources`` (the files read
    and what was found in each)."""

    engine: str | None = None
    args: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)
    evidence: list[SettingEvidence] = field(default_factory=list)
    sources: dict = field(default_factory=dict)

    @property
    def effective(self) -> dict:
        return {e.key: e.value for e in self.evidence if e.key in NORMALISED}

    def get(self, key: str) -> SettingEvidence | None:
        """The last (deciding) evidence for a normalised key, or for ``env:NAME`` / ``arg:NAME``."""
        return next((e for e in reversed(self.evidence) if e.key == key), None)

    @staticmethod
    def key_for(setting: str) -> str | None:
        """The normalised key a changed ``--flag`` or environment variable shows up as (``env:NAME`` for
        other variables), or None when no engine report covers that flag."""
        if setting.startswith("-"):
            return flag_keys().get(setting.lstrip("-").replace("-", "_"), (None,))[0]
        return ENV_KEYS.get(setting, f"env:{setting}")

    def reported(self, key: str) -> SettingEvidence | None:
        """The evidence of ``key``'s effective value, preferring a line the engine printed about it over an
        argument dump (which says what was asked, not what was decided)."""
        last = self.get(key)
        if last is None:
            return None
        said = [e for e in self.all(key) if e.value == last.value and not DUMP_NOTE.search(e.text)]
        return said[-1] if said else last

    def all(self, key: str) -> list[SettingEvidence]:
        return [e for e in self.evidence if e.key == key]

    def to_dict(self) -> dict:
        eff = {k: sorted(v) if isinstance(v, set) else v for k, v in self.effective.items()}
        args = {k: v if isinstance(v, (str, int, float, bool, type(None), list, dict)) else str(v)
                for k, v in self.args.items()}
        return {"engine": self.engine, "effective": eff, "args": args, "env": dict(self.env),
                "evidence": [e.to_dict() for e in self.evidence], "sources": dict(self.sources)}

    def __repr__(self) -> str:
        eff = ", ".join(f"{k}={_short(v)}" for k, v in sorted(self.effective.items()))
        return f"Settings(engine={self.engine}, {eff or 'nothing reported'}; {len(self.env)} env, " \
               f"{len(self.evidence)} evidence lines from {len(self.sources)} file(s))"


def _short(v) -> str:
    if isinstance(v, (list, set, tuple)):
        v = sorted(v) if isinstance(v, set) else list(v)
        return "[" + ",".join(map(str, v[:6])) + (",..." if len(v) > 6 else "") + "]"
    return repr(v)


# the engine table's rows and the scan state
TAKEN, TORN, TAKEN_SEE_NOTES = 1, 2, 3   # what a line parser returns (0: not its line)
Parser = Callable[[str, int, "State"], int]


@dataclass(frozen=True)
class LogFormat:
    """One log format (an engine, NCCL, benchmark output): a row of ``kit.logs._formats.formats()``.

    ``take``: ``(marker, parser)`` pairs: ``parser(line, lineno, state)`` runs on a line holding ``marker`` and
    returns ``TAKEN``, ``TORN``, ``TAKEN_SEE_NOTES`` (taken, and the ``notes`` still read it) or 0 (not its line),
    adding rows to its tables, engine hits (``state.hits[name]``) and settings evidence (``state.say``).
    ``notes``: ``(marker, reader)`` pairs for lines no parser took, settings evidence only (True: the line was
    one). ``tables``: name -> factory; ``build(state, warnings)`` -> its DataFrames. ``engine``: its hits name
    the log's engine (most hits; ties to the later row). ``header``: its logger's line prefix (evidence on
    unknown lines). ``banner``: ``(markers, regex)`` of the version banner. ``batches(tables)`` -> None or (a
    frame of ``line``, ``running`` and ``graph``, an evidence text with ``{n}`` and ``{g}``): the running batch
    of each scheduler line. ``bulk(block, first_line, state)`` -> the line numbers it took out of a block of
    whole lines at C speed, which the line loop then skips.
    """

    name: str
    take: tuple[tuple[str, Parser], ...] = ()
    notes: tuple[tuple[str, Callable[[str, int, "State"], bool]], ...] = ()
    tables: dict[str, Callable[[], Any]] = field(default_factory=dict)
    build: Callable[["State", list], dict] | None = None
    engine: bool = False
    header: re.Pattern | None = None
    banner: tuple[tuple[str, ...], re.Pattern] | None = None
    batches: Callable[[dict], list] | None = None
    bulk: Callable[[str, int, "State"], set] | None = None


EVIDENCE_LIMIT = 20000  # unknown lines inspected for engine evidence; later ones are only counted


class State:
    """Everything one scan accumulates. ``tables``: the formats' tables (name -> factory), each set as an
    attribute (``state.decode``, ``state.nccl`` ...); ``names``: the formats, whose hits are counted."""

    def __init__(self, tables: dict[str, Callable[[], Any]], names: tuple[str, ...]) -> None:
        self.table_names = tuple(tables)
        for name, make in tables.items():
            setattr(self, name, make())
        self.hits = dict.fromkeys(names, 0)     # lines that name each format (engine evidence)
        self.said: list[tuple] = []             # settings evidence in line order (see :meth:`say`)
        self.transports: dict[str, tuple[int, str]] = {}   # NCCL transport family -> first (line, text)
        self.server_args: dict | None = None
        self.server_args_line: int | None = None
        self.versions: list[tuple[str, str, int]] = []  # (engine, version, line)
        self.last_gen_throughput = None
        self.last_gen_line = -10
        self.block = None                       # an open benchmark block (kit.logs._bench.Block)
        self.bench_phase: str | None = None
        self.lines = 0
        self.unknown = 0
        self.torn = 0
        self.torn_examples: list[int] = []
        self.warnings: list[str] = []
        self.bulk_templates: list = []  # (regex, table, template, bracket) of SGLang lines seen so far
        # set by the parallel reader (kit.logs._parallel): engine evidence found in unknown lines is
        # recorded as (unknown-line ordinal, engine) instead of counted, because whether a line is
        # inspected depends on the unknown lines of the pieces before this one
        self.unknown_hits: list | None = None
        self.evidence_limit = EVIDENCE_LIMIT  # 0 in a worker whose piece comes after that many unknown lines

    def say(self, lineno: int, what: str, payload: tuple, found: str | None) -> None:
        """Settings evidence read at line ``lineno``: ``what`` is ``value`` (payload: key, value, text),
        ``env`` (payload: {name: value}, how) or ``args`` (payload: the argument dict, how, engine);
        ``found``: what the line is, for ``Settings.sources``."""
        self.said.append((lineno, what, payload, found))

    def torn_line(self, lineno: int) -> None:
        """A line two writers interleaved on: skipped, counted, the first five kept for the warning."""
        self.torn += 1
        if len(self.torn_examples) < 5:
            self.torn_examples.append(lineno)

    def transport(self, family: str, lineno: int, line: str) -> None:
        """An NCCL transport family connecting two ranks, first seen at ``lineno``."""
        self.transports.setdefault(family, (lineno, line.strip()[:CLIP]))


def first_of(markers: tuple[str, ...], parse, name: str) -> Parser:
    """A parser behind several markers: ``parse(line, lineno, pos, st)`` at the first of ``markers`` found in the
    line (tried in order), a line it reads counted as ``name``'s (``st.hits``); 0 when no marker is there."""
    def take(line: str, lineno: int, st: State) -> int:
        for marker in markers:
            pos = line.find(marker)
            if pos >= 0:
                r = parse(line, lineno, pos, st)
                if r:
                    st.hits[name] += 1
                return r
        return 0
    return take


def clip(line: str) -> str:
    """A line as an evidence's text: stripped, at most ``CLIP`` characters."""
    return line.strip()[:CLIP]


def columns(time_format: str | None = None) -> Callable[[], Columns]:
    """A table factory for :attr:`LogFormat.tables`: rows with varying keys."""
    return lambda: Columns(time_format)
