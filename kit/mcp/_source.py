"""The host and its source: ``env_fingerprint``, ``source_slice``, ``source_grep``, ``source_find``,
``source_definition`` and, as a run tool, a predicate called with the host's Python (``source_evaluate``).
Paths arrive checked (``x-path: host``); a definition followed through imports is checked again where it
lands, since a relative import may climb above the root."""
from __future__ import annotations

import dataclasses
import os

from kit import env, source
from kit.mcp._policy import Policy, environment, identifier
from kit.mcp._policy import pattern as checked_pattern
from kit.mcp._result import Answer, file_provenance, now
from kit.remote import connect


def fingerprint(policy: Policy, host: str) -> Answer:
    with connect(host) as h:
        fp = env.fingerprint(h, timeout=min(policy.timeout_s, 120))
    missing = dict(fp.missing or {})
    return Answer(fp.to_dict(), [{"artefact": f"host {host}", "role": "fingerprint", "kind": "measured",
                                  "how": "kit.env.fingerprint (one shell round trip, one Python probe)",
                                  "when": now()}],
                  trust="degraded" if missing else "usable",
                  reasons=[f"{k}: not known ({v})" for k, v in missing.items()] or
                  ["every field answered by the host"])


def _answer(result: dict, host: str, paths: list[str], table: str | None = None,
            notes: list[str] | None = None) -> Answer:
    return Answer(result, [file_provenance(host, p, "source") for p in dict.fromkeys(paths)],
                  trust="not assessed", reasons=["source text as read from the host now; no trust check applies"],
                  warnings=[n for n in notes or [] if n], table=table)


def source_slice(policy: Policy, host: str, path: str, start: int, end: int | None = None) -> Answer:
    with connect(host) as h:
        sl = source.slice(h, path, start, end)
    return _answer(dataclasses.asdict(sl), host, [path], notes=[sl.note])


def source_grep(policy: Policy, host: str, path: str, pattern: str, context: int = 0, fixed: bool = False,
                ignore_case: bool = False, glob: str = "*.py") -> Answer:
    glob = checked_pattern(glob, "glob") if glob else None
    with connect(host) as h:
        hits = source.grep(h, path, checked_pattern(pattern), context=min(context, 20), regex=not fixed, glob=glob,
                           ignore_case=ignore_case, timeout=min(policy.timeout_s, 60))
    rows = [dataclasses.asdict(m) for m in hits]
    return _answer({"matches": rows, "count": len(rows)}, host, [path], table="matches")


def source_find(policy: Policy, host: str, path: str, symbol: str) -> Answer:
    with connect(host) as h:
        found = source.find(h, path, identifier(symbol, "symbol"))
    rows = [s.to_dict() for s in found]
    return _answer({"symbols": rows, "count": len(rows)}, host, [path], table="symbols")


def source_definition(policy: Policy, host: str, name: str, near: str) -> Answer:
    """Where ``name``, as used in ``near``, is defined (through that file's imports): the predicate
    behind a default (``is_sm100_supported`` from ``server_args.py``) and its source. Imports inside the
    file's package tree are followed by reading files; a module of another installed package is located
    by the host's Python (``find_spec``, which imports that package's parents, never the tool's text).
    Where the definition lies outside the roots (a relative import above the root) it is refused."""
    with connect(host) as h:
        d = source.definition(h, identifier(name), near=near)
        landed = policy.host_path(host, d.path)
        scope = source.enclosing(h, landed, d.line)
    out = dataclasses.asdict(d)
    out["enclosing"] = scope.qualname if scope is not None else None
    return _answer(out, host, [near, d.path])


def source_evaluate(policy: Policy, host: str, name: str, near: str, pythonpath: list[str] | None = None,
                    env: dict | None = None) -> Answer:
    """Follow ``name`` from ``near`` to its definition and call it with the host's Python (a predicate
    such as ``is_sm100_supported``): the engine's own code answers, on that host's GPU."""
    variables = environment(env)
    for value in variables.values():   # a value naming a file is held to the roots like a path argument
        if value.startswith(("/", "~", "./", "../")):
            policy.host_path(host, value)
    if pythonpath:
        variables["PYTHONPATH"] = os.pathsep.join(pythonpath)
    with connect(host) as h:
        d = source.definition(h, identifier(name), near=near, env=variables or None)
        policy.host_path(host, d.path)
        value = source.evaluate(h, d, env=variables or None, timeout=min(policy.timeout_s, 120))
    out = {"name": name, "qualname": d.qualname, "path": d.path, "line": d.line, "value": value,
           "environment": sorted(variables)}
    prov = [file_provenance(host, d.path, "source"),
            {"artefact": f"host {host}", "role": "evaluated", "kind": "measured",
             "how": "kit.source.evaluate (the file imported as its module, the definition called)", "when": now()}]
    return Answer(out, prov, "usable", [f"the host's Python answered {value!r}"])

