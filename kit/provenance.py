"""Where an artefact came from: :class:`Provenance`, the manifest that records it, and the marks that
say it without one.

Every artefact is **measured** (on which host, when, how), **third-party**, **sample** (written to a
documented format: not measured), **project-written** or **unknown** (never assumed measured). A session's
``provenance.json`` maps session-relative paths or folder prefixes to provenances, the longest matching
prefix winning; a file no entry covers is read for the marks sample writers leave (a first line starting
``# SAMPLE``, ``"sample": true`` in JSON). :class:`Evidence` is one artefact a result rests on. This module
sits at the bottom of the house (it imports only ``kit.errors``): parsers ask :func:`provenance_of` without a
session."""
from __future__ import annotations

import datetime as _dt
import html
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable

from kit.errors import SessionError, UsageError

__all__ = ["KINDS", "MANIFEST", "UNKNOWN", "Evidence", "Provenance", "caption", "lookup", "provenance_of",
           "read_manifest", "relative", "sniff"]

KINDS = ("measured", "third-party", "sample", "project-written", "unknown")
MANIFEST = "provenance.json"
_SNIFF_BYTES = 4096
_MAX_UP = 12              # provenance_of: how many parent directories are searched for a manifest


@dataclass(frozen=True)
class Provenance:
    """Where one artefact came from. ``kind`` is one of :data:`KINDS`; the rest says who, where,
    when and how, as far as it is known."""

    kind: str
    host: str | None = None      # measured: the machine it was measured on
    when: str | None = None      # measured: ISO date/time
    how: str | None = None       # the command, tool or script that produced it
    source: str | None = None    # third-party: repository/URL; sample: the format it was written to
    note: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise UsageError(f"provenance kind {self.kind!r} is not one of {KINDS}")

    @classmethod
    def measured(cls, *, host: str, how: str, when: str | None = None, note: str | None = None) -> "Provenance":
        """Measured on ``host`` by ``how`` (now, unless ``when`` is given)."""
        when = when or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        return cls("measured", host=host, when=when, how=how, note=note)

    @classmethod
    def sample(cls, *, source: str, how: str | None = None, note: str | None = None) -> "Provenance":
        """Written to the format ``source`` describes; its numbers were not measured."""
        return cls("sample", source=source, how=how, note=note)

    @property
    def is_measured(self) -> bool:
        return self.kind == "measured"

    @property
    def label(self) -> str:
        """One line for a table cell or a plot caption; says 'measured' only for measured data."""
        if self.kind == "measured":
            bits = (f"measured on {self.host}" if self.host else "measured", self.when, self.how and f"by {self.how}")
            return ", ".join(b for b in bits if b)
        if self.kind == "third-party":
            return f"third-party artefact ({self.source})" if self.source else "third-party artefact"
        if self.kind == "sample":
            what = f"sample written to the {self.source} format" if self.source else "sample written by hand"
            return what + " (not measured)"
        if self.kind == "project-written":
            return "written by the project" + (f" ({self.note})" if self.note else "")
        return "provenance unknown (not shown to be measured)"

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, where: str = "provenance") -> "Provenance":
        try:
            return cls(**{k: d.get(k) for k in ("kind", "host", "when", "how", "source", "note")})
        except (TypeError, ValueError) as exc:
            raise SessionError(f"{where}: bad provenance entry {d!r} ({exc})") from None

    def __repr__(self) -> str:
        return f"Provenance({self.label!r})"

    def _repr_html_(self) -> str:
        colour = {"measured": "#1a7f37", "third-party": "#0969da", "sample": "#9a6700"}.get(self.kind, "#6e7781")
        return f'<span style="color:{colour}">{html.escape(self.label)}</span>'


UNKNOWN = Provenance("unknown")


@dataclass(frozen=True)
class Evidence:
    """One artefact a result rests on: its session-relative path, its provenance and its role in
    the argument ("step time", "kernel traces"). ``to_ledger()`` is what a ledger entry stores."""

    artefact: str
    provenance: Provenance
    role: str | None = None

    @property
    def kind(self) -> str:
        return self.provenance.kind

    @property
    def label(self) -> str:
        return self.provenance.label

    def to_ledger(self) -> dict[str, str]:
        return {"artefact": self.artefact, "kind": self.kind, "label": self.label,
                **({"role": self.role} if self.role else {})}

    def __repr__(self) -> str:
        role = f"{self.role}: " if self.role else ""
        return f"Evidence({role}{self.artefact} -- {self.label})"

    def _repr_html_(self) -> str:
        role = f"{html.escape(self.role)}: " if self.role else ""
        return f"{role}<code>{html.escape(self.artefact)}</code> &mdash; {self.provenance._repr_html_()}"


def caption(items: Iterable[Evidence | Provenance]) -> str:
    """One line for under a plot or table: the distinct provenances of what it was drawn from
    (``"Source: sample written to the ... format (not measured)"``)."""
    labels = list(dict.fromkeys(it.label for it in items))
    return "Source: " + ("; ".join(labels) if labels else "provenance not stated")


def read_manifest(root: Path) -> dict[str, Provenance]:
    """The entries of ``root/provenance.json`` (path or folder prefix -> Provenance); {} without one."""
    p = root / MANIFEST
    entries: dict[str, Provenance] = {}
    if p.is_file():
        try:
            raw = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            raise SessionError(f"{p}: unreadable provenance manifest ({exc})") from None
        if not isinstance(raw, dict) or not isinstance(raw.get("artefacts", {}), dict):
            raise SessionError(f"{p}: expected {{\"artefacts\": {{path: provenance}}}}")
        for key, d in raw.get("artefacts", {}).items():
            entries[key.strip("/")] = Provenance.from_dict(d, where=str(p))
    return entries


def relative(root: Path, path: str | os.PathLike[str]) -> str:
    """``path`` relative to the session ``root`` as the manifest names it (``a/b``); a path outside the
    root stays absolute."""
    p = Path(path)
    if not p.is_absolute() and not (root / p).exists() and p.exists():
        p = p.resolve()  # a path built from the session's own root (s.path(...)), relative to the cwd
    if p.is_absolute():
        try:
            p = p.resolve().relative_to(root.resolve())
        except ValueError:
            return p.as_posix()
    return p.as_posix().strip("/")


def lookup(entries: dict[str, Provenance], root: Path, rel: str) -> Provenance:
    """The provenance of ``rel`` (session-relative): the longest manifest prefix, else the file's marks."""
    parts = rel.split("/")
    for i in range(len(parts), 0, -1):
        hit = entries.get("/".join(parts[:i]))
        if hit is not None:
            return hit
    return sniff(root / rel)


def provenance_of(path: str | os.PathLike[str]) -> Provenance:
    """Where the file at ``path`` came from, without a session in hand (for parsers): the nearest
    parent directory holding a ``provenance.json`` answers; else the marks inside the file; else
    ``unknown``. A path that is not a local file (``host:path``, ``<text>``) is ``unknown``."""
    p = Path(path)
    try:
        p = p.resolve()
    except (OSError, RuntimeError):
        return UNKNOWN
    if not p.exists():
        return UNKNOWN
    for parent in list(p.parents)[:_MAX_UP]:
        if (parent / MANIFEST).is_file():
            try:
                return lookup(_manifest_of(parent), parent, relative(parent, p))
            except SessionError:
                return UNKNOWN
    return sniff(p)


_MANIFESTS: dict[tuple[str, float], dict[str, Provenance]] = {}


def _manifest_of(root: Path) -> dict[str, Provenance]:
    """One read per manifest version (parsers may ask for hundreds of files)."""
    key = (str(root), (root / MANIFEST).stat().st_mtime)
    if key not in _MANIFESTS:
        if len(_MANIFESTS) > 64:
            _MANIFESTS.clear()
        _MANIFESTS[key] = read_manifest(root)
    return _MANIFESTS[key]


def sniff(path: Path) -> Provenance:
    """Provenance from the marks sample writers leave inside a file; ``unknown`` otherwise."""
    if not path.is_file():
        return UNKNOWN
    try:
        with path.open("rb") as f:
            head = f.read(_SNIFF_BYTES)
    except OSError:
        return UNKNOWN
    first = head.split(b"\n", 1)[0].strip()
    if first.startswith(b"# SAMPLE"):
        return Provenance("sample", note=first.decode("utf-8", "replace")[2:].strip())
    if b'"sample": true' in head or b'"sample":true' in head:
        return Provenance("sample")
    return UNKNOWN
