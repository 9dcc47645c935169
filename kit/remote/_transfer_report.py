"""The records a transfer returns: one :class:`Fetched` per file, a :class:`TransferReport` for many,
and the local names many files get (``local_names``)."""
from __future__ import annotations

import html
import posixpath
from dataclasses import dataclass, fields

from kit.errors import KitError
from kit.util import clip


@dataclass(frozen=True)
class Fetched:
    """One file's outcome in a transfer: where it went, how many bytes (file and wire), how long, how
    (``method``: ``cat``, ``zstd``, ``gzip``, ``sftp``, ``copy``, ``put``, or ``skipped`` when an identical
    copy was already there), from which offset it resumed, or the error that stopped it."""

    host: str
    remote: str
    local: str | None
    size: int = 0
    wire_bytes: int = 0
    seconds: float = 0.0
    method: str = ""
    resumed_from: int = 0
    error: KitError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def __repr__(self) -> str:
        if self.error is not None:
            return f"Fetched(host={self.host!r}, remote={self.remote!r}, error={clip(str(self.error), 120)!r})"
        return (f"Fetched(host={self.host!r}, remote={self.remote!r}, local={self.local!r}, size={self.size}, "
                f"method={self.method!r}, seconds={self.seconds:.3f})")


class TransferReport(list):
    """Per-file outcomes (:class:`Fetched`) of ``get_many`` / ``HostGroup.get``, in request order; a failed
    file never hides the others. ``files``: the local paths that arrived; ``errors``: the failures."""

    def __init__(self, rows: list[Fetched], seconds: float = 0.0) -> None:
        super().__init__(rows)
        self.seconds = seconds

    rows = property(list, doc="The rows as a plain list.")

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self)

    @property
    def files(self) -> list[str]:
        return [r.local for r in self if r.ok and r.local]

    @property
    def errors(self) -> list[Fetched]:
        return [r for r in self if not r.ok]

    @property
    def size(self) -> int:
        return sum(r.size for r in self if r.ok)

    @property
    def wire_bytes(self) -> int:
        return sum(r.wire_bytes for r in self if r.ok)

    def to_frame(self):
        """One row per file: host, remote, local, size, wire_bytes, seconds, method, resumed_from, error."""
        import pandas as pd  # deferred: kit --help loads kit.remote, never pandas

        columns = [f.name for f in fields(Fetched)]
        return pd.DataFrame([{**{c: getattr(r, c) for c in columns},
                              "error": None if r.ok else f"{type(r.error).__name__}: {r.error}"} for r in self],
                            columns=columns)

    def __repr__(self) -> str:
        return (f"TransferReport(files={len(self)}, ok={len(self) - len(self.errors)}, "
                f"errors={len(self.errors)}, bytes={self.size}, wire_bytes={self.wire_bytes}, "
                f"seconds={self.seconds:.3f})")

    def _repr_html_(self) -> str:
        rows = []
        for r in self:
            status = (f"{r.method}, {r.size:,} B in {r.seconds:.2f} s" if r.ok
                      else f"<span style='color:#c62828'>{html.escape(type(r.error).__name__)}: "
                           f"{html.escape(str(r.error))}</span>")
            rows.append(f"<tr><td>{html.escape(r.host)}</td><td><code>{html.escape(r.remote)}</code></td>"
                        f"<td><code>{html.escape(r.local or '')}</code></td><td>{status}</td></tr>")
        return (f"<div>{html.escape(repr(self))}</div><table><thead><tr><th>host</th><th>remote</th><th>local</th>"
                f"<th>result</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")


def local_names(paths: list[str]) -> list[str]:
    """Relative local names for remote paths: the base name, or the shortest distinct path suffix when
    several files share a base name (``a/rank0/trace.json``, ``a/rank1/trace.json`` -> ``rank0/trace.json``...)."""
    parts = [[p for p in posixpath.normpath(path).split("/") if p not in ("", ".", "..")] or ["file"] for path in paths]
    depth = [1] * len(paths)
    while True:
        names = ["/".join(p[-d:]) for p, d in zip(parts, depth)]
        seen: dict[str, list[int]] = {}
        for i, n in enumerate(names):
            seen.setdefault(n, []).append(i)
        clash = [i for idx in seen.values() if len(idx) > 1 for i in idx if depth[i] < len(parts[i])]
        if not clash:
            return names
        for i in clash:
            depth[i] += 1
