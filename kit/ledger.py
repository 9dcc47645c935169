"""The hypothesis ledger: what the investigation suspected, how it was tested, and what the numbers said.

An investigation is a chain of hypotheses ("AllReduce dominates decode", "the sm100 default backend
applies on this GPU", ...). Each notebook tests one or more of them and records a verdict computed from
its values, never typed by hand. The ledger is one JSON file beside the session, written atomically
(temporary file + ``os.replace``) under a lock file, so a crash mid-write never corrupts it and two
notebooks updating different hypotheses never lose each other's verdicts. The report renders it as a
table at the top of ``index.html``.

    ledger = Ledger.open("notebooks/sample/ledger.json")
    ledger.record("H1", statement="AllReduce dominates decode time on TP over PCIe",
                  test="kernel-time share of the allreduce category in decode steps",
                  evidence=f"allreduce share {share:.1%}", verdict=confirmed_if(share >= 0.30),
                  numbers={"allreduce_share": share}, source="01_allreduce_share")
"""
from __future__ import annotations

import contextlib
import html
import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from kit.errors import LedgerError

__all__ = ["VERDICTS", "LEDGER_ENV", "Hypothesis", "Ledger", "confirmed_if"]

LEDGER_ENV = "KIT_LEDGER"  # set by ``kit report``: where notebooks record verdicts during a report run
VERDICTS = ("open", "confirmed", "rejected")
_FORMAT = 1
_FIELDS = ("id", "statement", "test", "evidence", "verdict", "numbers", "source")


def confirmed_if(condition: bool | None) -> str:
    """Verdict from a computed condition: True -> confirmed, False -> rejected, None -> open."""
    if condition is None:
        return "open"
    return "confirmed" if bool(condition) else "rejected"


def _clean_number(key: str, value: Any) -> Any:
    """Numbers are JSON scalars: numpy scalars become Python ones; NaN/inf become None (JSON has neither)."""
    if hasattr(value, "item") and callable(value.item):  # numpy / pandas scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise LedgerError(f"ledger number {key!r} must be a number, string, bool or None, got {type(value).__name__}")


@dataclass
class Hypothesis:
    """One hypothesis: what is claimed, how it is tested, the evidence, the verdict and its numbers."""

    id: str
    statement: str
    test: str = ""
    evidence: str = ""
    verdict: str = "open"
    numbers: dict[str, Any] = field(default_factory=dict)
    source: str = ""  # the notebook (or person) that set the verdict

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise LedgerError(f"hypothesis id must be a non-empty string, got {self.id!r}")
        if self.verdict not in VERDICTS:
            raise LedgerError(
                f"hypothesis {self.id}: verdict {self.verdict!r} is not one of {', '.join(VERDICTS)}"
            )
        if self.numbers is not None and not isinstance(self.numbers, Mapping):
            raise LedgerError(f"hypothesis {self.id}: numbers must be an object of name: value, "
                              f"got {type(self.numbers).__name__}")
        self.numbers = {str(k): _clean_number(str(k), v) for k, v in dict(self.numbers or {}).items()}

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _FIELDS}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "ledger") -> "Hypothesis":
        if not isinstance(data, Mapping):
            raise LedgerError(f"{where}: a hypothesis must be a JSON object, got {type(data).__name__}")
        unknown = set(data) - set(_FIELDS)
        if unknown:
            raise LedgerError(f"{where}: hypothesis {data.get('id')!r} has unknown keys {sorted(unknown)}")
        if "id" not in data or "statement" not in data:
            raise LedgerError(f"{where}: a hypothesis needs 'id' and 'statement', got keys {sorted(data)}")
        try:
            return cls(**{k: data[k] for k in _FIELDS if k in data})
        except LedgerError as exc:  # say which file holds the bad hypothesis
            raise LedgerError(f"{where}: {exc}") from None

    def __repr__(self) -> str:
        nums = ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(self.numbers.items()))
        return f"Hypothesis({self.id}: {self.verdict}; {self.statement!r}" + (f"; {nums}" if nums else "") + ")"

    def _repr_html_(self) -> str:
        return _html_table([self])


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


_BADGE = {"confirmed": "#1a7f37", "rejected": "#cf222e", "open": "#6e7781"}


_COLUMNS = (("id", 4), ("verdict", 8), ("hypothesis", 18), ("test", 19), ("evidence", 24), ("numbers", 17),
            ("set by", 10))


def _html_table(rows: list[Hypothesis]) -> str:
    cols = "".join(f"<col style='width:{w}%'>" for _, w in _COLUMNS)
    head = "".join(f"<th style='text-align:left'>{h}</th>" for h, _ in _COLUMNS)
    body = []
    for h in rows:
        nums = "<br>".join(f"{html.escape(k)} = {html.escape(_fmt(v))}" for k, v in sorted(h.numbers.items()))
        badge = (f"<span style='color:#fff;background:{_BADGE[h.verdict]};padding:1px 6px;"
                 f"border-radius:8px;white-space:nowrap'>{h.verdict}</span>")
        cells = [html.escape(h.id), badge, html.escape(h.statement), html.escape(h.test),
                 html.escape(h.evidence), nums, html.escape(h.source)]
        body.append("<tr>" + "".join(f"<td style='text-align:left;vertical-align:top;overflow-wrap:break-word'>{c}</td>"
                                     for c in cells) + "</tr>")
    return (f"<table class='kit-ledger' style='width:100%;table-layout:fixed'><colgroup>{cols}</colgroup>"
            f"<thead><tr>{head}</tr></thead><tbody>" + "".join(body) + "</tbody></table>")


class Ledger:
    """The hypotheses of one session, kept in a JSON file; every change is saved atomically."""

    def __init__(self, path: str | os.PathLike[str], hypotheses: list[Hypothesis] | None = None) -> None:
        self.path = Path(path)
        self._items: dict[str, Hypothesis] = {}
        for h in hypotheses or []:
            self._items[h.id] = h

    # ---------------------------------------------------------------- file I/O
    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> "Ledger":
        """Load the ledger at ``path``; a missing file gives an empty ledger (created on first save)."""
        p = Path(path)
        if p.is_dir():
            raise LedgerError(f"ledger {p}: is a directory, expected a JSON file")
        if not p.exists():
            return cls(p)
        return cls(p, _read(p))

    @classmethod
    def for_session(cls, session: str | os.PathLike[str]) -> "Ledger":
        """The ledger a notebook should record into: ``$KIT_LEDGER`` when set (``kit report`` points it
        at the report's copy), else ``<session>/ledger.json``."""
        override = os.environ.get(LEDGER_ENV)
        return cls.open(override if override else Path(session) / "ledger.json")

    def reload(self) -> "Ledger":
        """Re-read the file (another notebook may have recorded verdicts since)."""
        self._items = {h.id: h for h in (_read(self.path) if self.path.exists() else [])}
        return self

    def save(self) -> Path:
        """Write the whole ledger atomically: a temporary file in the same directory, then os.replace."""
        with self._locked():
            _write_atomic(self.path, self._payload())
        return self.path

    def _payload(self) -> str:
        data = {"format": _FORMAT, "hypotheses": [h.to_dict() for h in self._items.values()]}
        return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        # flock on the ledger's directory: no lock file left beside the session.
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            import fcntl
        except ImportError:  # pragma: no cover - non-POSIX
            yield
            return
        try:
            fd = os.open(self.path.parent, os.O_RDONLY)
        except OSError as exc:
            raise LedgerError(f"ledger {self.path}: cannot open its directory ({exc.strerror})") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    # ---------------------------------------------------------------- changes
    def record(self, id: str, *, statement: str | None = None, test: str | None = None,
               evidence: str | None = None, verdict: str | None = None,
               numbers: Mapping[str, Any] | None = None, source: str | None = None) -> Hypothesis:
        """Create or update hypothesis ``id`` and save at once.

        The file is re-read under the lock first, so verdicts other notebooks saved meanwhile are
        kept; only the fields given here change (``numbers`` are merged key by key).
        """
        with self._locked():
            if self.path.exists():
                self._items = {h.id: h for h in _read(self.path)}
            old = self._items.get(id)
            if old is None and statement is None:
                raise LedgerError(f"ledger {self.path}: new hypothesis {id!r} needs a statement")
            base = old.to_dict() if old else {"id": id}
            for key, value in (("statement", statement), ("test", test), ("evidence", evidence),
                               ("verdict", verdict), ("source", source)):
                if value is not None:
                    base[key] = value
            if numbers is not None:
                base["numbers"] = {**base.get("numbers", {}), **dict(numbers)}
            hyp = Hypothesis.from_dict(base, where=f"ledger {self.path}")
            self._items[id] = hyp
            _write_atomic(self.path, self._payload())
        return hyp

    def add(self, hypothesis: Hypothesis) -> Hypothesis:
        """Insert or replace a whole hypothesis and save."""
        return self.record(hypothesis.id, **{k: getattr(hypothesis, k) for k in _FIELDS if k != "id"})

    # ---------------------------------------------------------------- access
    def __getitem__(self, id: str) -> Hypothesis:
        try:
            return self._items[id]
        except KeyError:
            raise LedgerError(f"ledger {self.path}: no hypothesis {id!r} (have {', '.join(self._items) or 'none'})") from None

    def get(self, id: str) -> Hypothesis | None:
        return self._items.get(id)

    def __contains__(self, id: object) -> bool:
        return id in self._items

    def __iter__(self) -> Iterator[Hypothesis]:
        return iter(list(self._items.values()))

    def __len__(self) -> int:
        return len(self._items)

    def counts(self) -> dict[str, int]:
        """Number of hypotheses per verdict, in VERDICTS order."""
        return {v: sum(1 for h in self._items.values() if h.verdict == v) for v in VERDICTS}

    def to_frame(self):
        """The ledger as a pandas DataFrame (one row per hypothesis, numbers as a dict column)."""
        import pandas as pd

        return pd.DataFrame([h.to_dict() for h in self._items.values()], columns=list(_FIELDS))

    # ---------------------------------------------------------------- display
    def to_text(self, width: int = 100) -> str:
        """A plain-text table (what the terminal and the text/plain output show)."""
        if not self._items:
            return f"ledger {self.path.name}: no hypotheses"
        lines = [f"{'id':<6} {'verdict':<10} hypothesis / evidence"]
        lines.append("-" * min(width, 100))
        for h in self._items.values():
            lines.append(f"{h.id:<6} {h.verdict:<10} {h.statement}")
            if h.evidence:
                lines.append(f"{'':<17} evidence: {h.evidence}")
            if h.numbers:
                nums = ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(h.numbers.items()))
                lines.append(f"{'':<17} numbers: {nums}")
        return "\n".join(lines)

    def to_html(self) -> str:
        """An HTML table with a coloured verdict badge per row (report index and notebooks)."""
        c = self.counts()
        summary = ", ".join(f"{n} {v}" for v, n in c.items())
        return f"<div class='kit-ledger-wrap'><p><b>Hypothesis ledger</b> ({summary})</p>{_html_table(list(self._items.values()))}</div>"

    def _repr_html_(self) -> str:
        return self.to_html()

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        c = self.counts()
        return (f"Ledger({self.path.name!r}, {len(self)} hypotheses: "
                + ", ".join(f"{v}={n}" for v, n in c.items()) + ")")


def _read(path: Path) -> list[Hypothesis]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LedgerError(f"ledger {path}: cannot read ({exc.strerror})") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LedgerError(f"ledger {path}: not valid JSON (line {exc.lineno}: {exc.msg})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("hypotheses"), list):
        raise LedgerError(f"ledger {path}: expected an object with a 'hypotheses' list")
    if data.get("format", _FORMAT) != _FORMAT:
        raise LedgerError(f"ledger {path}: format {data.get('format')!r} not supported (this kit writes {_FORMAT})")
    items = [Hypothesis.from_dict(d, where=f"ledger {path}") for d in data["hypotheses"]]
    ids = [h.id for h in items]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise LedgerError(f"ledger {path}: duplicate hypothesis ids {dupes}")
    return items


def _write_atomic(path: Path, text: str) -> None:
    try:
        _replace_with(path, text)
    except OSError as exc:
        raise LedgerError(f"ledger {path}: cannot write ({exc.strerror or exc}); the previous file is unchanged") from exc


def _replace_with(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
