"""The tool table: one row per tool (name, function, mode, description, input schema, paged table).

``mode`` is ``read`` (always listed), ``write`` (``--allow-write``) or ``run`` (``--allow-run HOST``; its
``host`` argument may name only those hosts); a tool the server was not started for is answered as one
that does not exist. The schemas are the contract: arguments are validated against them, and every
path-typed field (``x-path``, in the field or its items) is resolved and checked by ``Policy.resolve``
before the row's function sees it: ``file`` (a local regular file inside the roots), ``tree`` (a local
file or directory whose every entry resolves inside the roots), ``traces`` (a trace file or a directory's
``rank*`` traces, as a list), ``new`` (a file or directory the tool creates, not existing yet), ``host``
(a path on the call's ``host``) and ``ledger`` (a session directory or its ``ledger.json``).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable

import kit.engines
from kit.mcp import _catalogue, _investigate, _logs, _session, _source, _traces
from kit.mcp._policy import DEFAULT_PAGE, Policy

HOST = {"type": "string", "description": "host name: 'local' or one the server was started for"}


def _path(kind: str, **extra) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": 4096, "x-path": kind, **extra}


def _paths(kind: str, **extra) -> dict[str, Any]:
    return {"type": "array", "items": _path(kind), "minItems": 1, "maxItems": 64, **extra}


FILE, TREE, HOST_PATH, NEW, LEDGER = _path("file"), _path("tree"), _path("host"), _path("new"), _path("ledger")
TRACES, TREES = _paths("traces"), _paths("tree")
PHASE = {"type": "string", "enum": ["all", "decode", "prefill"], "default": "decode"}
PAGING = {"offset": {"type": "integer", "minimum": 0, "default": 0, "description": "first row of the page"},
          "limit": {"type": "integer", "minimum": 1, "maximum": 5000, "default": DEFAULT_PAGE,
                    "description": "rows per page"}}
VERDICT = {"type": "string", "enum": ["open", "confirmed", "rejected"]}
LABELS = {"type": "array", "items": {"type": "string", "maxLength": 40}, "minItems": 2, "maxItems": 2}  # run A's, B's
REFERENCE = {"reference": _path("traces", description="a reference run's trace (a file or a directory), passed to "
                                                    "kit.profile.load(reference=)")}


@dataclass(frozen=True)
class Tool:
    name: str
    func: Callable[..., Any]
    mode: str                      # read | write | run
    description: str
    properties: dict[str, Any]
    required: tuple[str, ...] = ()
    table: bool = False            # the result holds a long table: offset/limit apply
    reference: bool = False        # takes ``reference`` when kit.profile.load does

    def __post_init__(self) -> None:
        object.__setattr__(self, "required", tuple(self.required))   # the table writes them as lists

    def schema(self, policy: Policy) -> dict[str, Any]:
        """The input schema as listed: host enums filled from the policy, paging and reference added."""
        props = copy.deepcopy(self.properties)
        if "host" in props:
            hosts = policy.run_hosts if self.mode == "run" else policy.hosts
            props["host"] = {**props["host"], "enum": list(hosts)}
        if self.table:
            props.update(copy.deepcopy(PAGING))
        if self.reference:
            props.update(copy.deepcopy(REFERENCE))
        return {"type": "object", "properties": props, "required": list(self.required),
                "additionalProperties": False}


TOOLS: tuple[Tool, ...] = (
    Tool("env_fingerprint", _source.fingerprint, "read",
         "What a host is: OS, CPU, GPUs, link matrix, driver/CUDA/torch/NCCL/engine versions, NCCL variables. "
         "Fields the host cannot answer are null with the reason in 'missing'.",
         {"host": HOST}, ["host"]),
    Tool("source_slice", _source.source_slice, "read", "Lines START..END of a source file on a host, numbered.",
         {"host": HOST, "path": HOST_PATH, "start": {"type": "integer", "minimum": 1},
          "end": {"type": "integer", "minimum": 1}}, ["host", "path", "start"]),
    Tool("source_grep", _source.source_grep, "read",
         "Search a file or directory tree on a host (rg, else grep -r); the pattern is data, never a command.",
         {"host": HOST, "path": HOST_PATH, "pattern": {"type": "string", "minLength": 1, "maxLength": 500},
          "context": {"type": "integer", "minimum": 0, "maximum": 20, "default": 0},
          "fixed": {"type": "boolean", "default": False, "description": "the pattern is a fixed string"},
          "ignore_case": {"type": "boolean", "default": False},
          "glob": {"type": "string", "maxLength": 100, "default": "*.py"}}, ["host", "path", "pattern"], table=True),
    Tool("source_find", _source.source_find, "read",
         "Every definition or assignment of a symbol in a file or tree: functions, fields, keyword arguments "
         "at call sites (sm100_default_attention_backend=...), with the def/class around each.",
         {"host": HOST, "path": HOST_PATH, "symbol": {"type": "string", "maxLength": 200}},
         ["host", "path", "symbol"], table=True),
    Tool("source_definition", _source.source_definition, "read",
         "Follow a name used in a file (a predicate such as is_sm100_supported in server_args.py) through "
         "its imports to its definition: file, line, kind, source and the hops taken.",
         {"host": HOST, "name": {"type": "string", "maxLength": 200}, "near": HOST_PATH}, ["host", "name", "near"]),
    Tool("trace_summary", _traces.trace_summary, "read",
         "Kernel-time breakdown of profiler traces (files or a scenario folder): per category, module or layer, "
         "with the trace's trust verdict for those numbers.",
         {"paths": TRACES, "phase": PHASE, "by": {"type": "string", "enum": ["category", "module", "layer"],
                                                 "default": "category"},
          "top": {"type": "integer", "minimum": 1, "maximum": 50, "default": 5}}, ["paths"], table=True,
         reference=True),
    Tool("trace_check", _traces.trace_check, "read",
         "Can this trace be trusted? Capture mode and per-metric usable/degraded/unreliable with reason and fix.",
         {"paths": TRACES}, ["paths"], reference=True),
    Tool("trace_compare", _traces.trace_compare, "read",
         "Where the step-time difference of two runs goes: parts that add up to it, kernel families, per rank.",
         {"a": TRACES, "b": TRACES, "phase": PHASE, "labels": LABELS}, ["a", "b"], table=True),
    Tool("trace_diff_structure", _traces.trace_diff_structure, "read",
         "Two runs (two engines, two versions) node by node: layer kind x operation family (qkv/o proj, "
         "attention, norm, gate/up, down, router, experts, all-reduce ...), delta and noise per node, fusions, "
         "differing settings.",
         {"a": TRACES, "b": TRACES, "phase": PHASE, "basis": {"type": "string", "enum": ["kernel", "wall"]},
          "labels": LABELS,
          "settings": {"type": "array", "items": FILE, "minItems": 2, "maxItems": 2,
                       "description": "each run's engine log, for the settings that differ"},
          "references": {"type": "array", "items": {**_path("traces"), "type": ["string", "null"]}, "minItems": 2,
                         "maxItems": 2, "description": "a reference run (eager, with stack) per side, or null: "
                                                       "places CUDA-graph replays' kernels in layers"}},
         ["a", "b"], table=True),
    Tool("logs_parse", _logs.logs_parse, "read",
         "A serving log's engine, version, row counts, warnings and server args; one table paged with 'table'.",
         {"path": FILE, "table": {"type": "string", "enum": ["decode", "prefill", "throughput", "spec", "bench",
                                                            "nccl"]},
          "engine": {"type": "string", "enum": kit.engines.names()}, "version": {"type": "string", "maxLength": 40}},
         ["path"], table=True),
    Tool("logs_spec", _logs.logs_spec, "read",
         "Speculative-decoding acceptance of a log, normalised across engines and versions (which definition "
         "was applied, whether it is comparable).",
         {"path": FILE, "version": {"type": "string", "maxLength": 40}, "k": {"type": "integer", "minimum": 1,
                                                                              "maximum": 64}},
         ["path"], table=True),
    Tool("logs_settings", _logs.logs_settings, "read",
         "Effective settings of an engine run as the engine reported them, each with file:line.",
         {"paths": TREES}, ["paths"], table=True),
    Tool("audit", _logs.audit, "read",
         "Did the change take effect, can the run be trusted: findings over logs, settings, benchmarks, traces.",
         {"paths": TREES}, ["paths"], table=True),
    Tool("bench_records", _logs.bench_records, "read",
         "Benchmark output (text blocks, JSON or JSONL results) as one row per run.", {"path": FILE}, ["path"],
         table=True),
    Tool("bench_reconcile", _logs.bench_reconcile, "read",
         "Where a client's inter-token latency goes: HTTP, output path, prefill, host work, scheduler, GPU busy/idle, "
         "from the kit's saved client records and the engine's own records (tinyserve steps; vLLM OTLP spans, SGLang "
         "request stats: per request; SGLang/vLLM log lines: per interval; TensorRT-LLM iteration stats), at the "
         "finest level they give, said in 'level'; clocks aligned or refused.",
         {"client": FILE, "engine_log": FILE, "trace": FILE}, ["client", "engine_log"], table=True),
    Tool("investigate", _investigate.investigate, "read",
         "Why is run B slower than run A: validity, the client gap with intervals, ITL reconciliation, structural "
         "diff, settings that differ or were ignored, speed of light; causes ranked by share of the gap beyond noise, "
         "each with evidence, trust, setting and a confirming kit.experiment; the unexplained remainder.",
         {"a": TREES, "b": TREES, "labels": LABELS}, ["a", "b"], table=True),
    Tool("runs_list", _catalogue.runs_list, "read",
         "The run catalogue's latest runs, newest first, at most 1000, paged (summaries, comparisons, benchmarks, "
         "log parses, audits, experiments).",
         {"kind": {"type": "string", "enum": ["summary", "comparison", "bench", "logs", "audit", "experiment",
                                              "ranks", "gate"]}}, [], table=True),
    Tool("runs_get", _catalogue.runs_get, "read",
         "One recorded run: who, when, host, inputs by sha256, settings, figures, facts, warnings.",
         {"run_id": {"type": "string", "pattern": "^[0-9A-Za-z-]{4,40}$"}}, ["run_id"]),
    Tool("ledger_read", _session.ledger_read, "read",
         "The hypothesis chain: each hypothesis, its verdict, evidence, numbers and the kind of its evidence.",
         {"ledger": {**LEDGER, "description": "a ledger.json or a session directory"},
          "id": {"type": "string", "maxLength": 40}}, ["ledger"], table=True),
    Tool("session_catalogue", _session.session_catalogue, "read",
         "The runs of a session (trace scenarios with files and provenance) and its other artefacts.",
         {"session": TREE}, ["session"], table=True),
    Tool("ledger_record", _session.ledger_record, "write",
         "Record evidence and a verdict for a hypothesis (created when a statement is given).",
         {"ledger": LEDGER, "id": {"type": "string", "maxLength": 40}, "verdict": VERDICT,
          "evidence": {"type": "string", "maxLength": 4000}, "statement": {"type": "string", "maxLength": 1000},
          "test": {"type": "string", "maxLength": 1000}, "source": {"type": "string", "maxLength": 200},
          "numbers": {"type": "object", "additionalProperties": {"type": ["number", "string", "boolean", "null"]},
                      "maxProperties": 64},
          "caveats": {"type": "array", "items": {"type": "string", "maxLength": 500}, "maxItems": 20},
          "artefacts": {"type": "array", "items": TREE, "maxItems": 20}},
         ["ledger", "id", "verdict", "evidence"]),
    Tool("source_evaluate", _source.source_evaluate, "run",
         "Call a predicate (followed from a file, e.g. is_sm100_supported near server_args.py) with the host's "
         "Python: the engine's own code answers. Only engine/kit variables may be set.",
         {"host": HOST, "name": {"type": "string", "maxLength": 200}, "near": HOST_PATH,
          "pythonpath": {"type": "array", "items": HOST_PATH, "maxItems": 8},
          "env": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 1000},
                  "maxProperties": 16}}, ["host", "name", "near"]),
    Tool("report_build", _session.report_build, "run",
         "Execute the notebooks on a session in kernels on this machine and write the offline HTML report.",
         {"session": TREE, "out": NEW, "notebooks": {"type": "array", "items": FILE, "maxItems": 20}},
         ["session", "out"], table=True),
)


def available(policy: Policy) -> list[Tool]:
    """The tools this server lists: the read tools, and write/run tools only where the policy allows them
    (``report_build`` runs on this machine, so it needs ``--allow-run local``)."""
    return [t for t in TOOLS if policy.allows(t.mode)
            and not (t.name == "report_build" and "local" not in policy.run_hosts)]
