"""Snapshot of what ``kit.logs`` reads from a set of logs, to prove a refactoring changes nothing.

For every file under the given folders: ``kit.logs.read`` (every table, engine, version, counts,
warnings, server_args; or the one-line error) and ``kit.logs.settings`` (effective settings, args,
env, sources, and each evidence's key, value and file:line). ``dump DIR OUT`` writes one pickle per
file into OUT; ``compare OLD NEW`` reports every difference (exit status 1 when there is one).

Usage: take a snapshot before the change, another after, and compare::

    python tools/logs_snapshot.py dump OLD tests/data/logs notebooks/sample/logs ../shared/data/logs
    python tools/logs_snapshot.py dump NEW tests/data/logs notebooks/sample/logs ../shared/data/logs
    python tools/logs_snapshot.py compare OLD NEW
"""
from __future__ import annotations

import pickle
import sys
from pathlib import Path

import pandas as pd


def _read(p: Path):
    import kit

    try:
        d = kit.logs.read(p)
    except Exception as exc:  # noqa: BLE001 - the error itself is part of the snapshot
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"engine": d.engine, "version": d.version, "lines": d.lines, "unknown": d.unknown_lines,
            "torn": d.torn_lines, "warnings": list(d.warnings), "server_args": repr(d.server_args), "k": d.k,
            "formats": d.sglang_formats, "inferred": d.engine_inferred, "tables": dict(d.tables)}


def _plain(v):
    """A value with its sets sorted: the repr of a set depends on the process's hash seed."""
    return sorted(v) if isinstance(v, (set, frozenset)) else v


def _settings(p: Path):
    import kit

    try:
        s = kit.logs.settings(p)
    except Exception as exc:  # noqa: BLE001
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {"engine": s.engine, "effective": repr(sorted((k, _plain(v)) for k, v in s.effective.items())),
            "args": repr(s.args),
            "env": dict(s.env), "sources": {Path(k).name: v for k, v in s.sources.items()},
            "evidence": sorted(repr((e.key, _plain(e.value), Path(e.file).name, e.line)) for e in s.evidence)}


def dump(out: Path, folders: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for folder in folders:
        for p in sorted(Path(folder).rglob("*")):
            if p.is_file() and p.suffix not in (".md",):
                snap = {"read": _read(p), "settings": _settings(p)}
                (out / f"{Path(folder).name}__{p.name}.pkl").write_bytes(pickle.dumps(snap))


def _diff(a, b, where: str) -> list[str]:
    if isinstance(a, pd.DataFrame) and isinstance(b, pd.DataFrame):
        try:
            pd.testing.assert_frame_equal(a, b)
            return []
        except AssertionError as exc:
            return [f"{where}: {str(exc).splitlines()[0]}"]
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{where}: keys {sorted(set(a) ^ set(b))}"] if set(a) != set(b) else []
        for k in set(a) & set(b):
            out += _diff(a[k], b[k], f"{where}.{k}")
        return out
    return [] if a == b else [f"{where}: {a!r:.300} != {b!r:.300}"]


def compare(old: Path, new: Path) -> int:
    bad = []
    names = sorted({p.name for p in old.glob("*.pkl")} | {p.name for p in new.glob("*.pkl")})
    for n in names:
        if not (old / n).exists() or not (new / n).exists():
            bad.append(f"{n}: in one snapshot only")
            continue
        bad += _diff(pickle.loads((old / n).read_bytes()), pickle.loads((new / n).read_bytes()), n)
    print("\n".join(bad) or f"identical: {len(names)} files")
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1] == "dump":
        dump(Path(sys.argv[2]), sys.argv[3:])
    else:
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
