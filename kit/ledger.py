"""The hypothesis ledger: what the investigation suspected, how it was tested, and what the numbers said.

Each notebook tests one or more hypotheses and records a verdict computed from its values, never typed
by hand. The ledger is one JSON file beside the session, written atomically under a lock on its
directory: a crash mid-write never corrupts it, and two notebooks or two ``Ledger`` instances updating
different hypotheses never lose each other's verdicts (``save()`` merges, and refuses with
``LedgerError`` when both changed the same hypothesis). A damaged file is one ``LedgerError`` naming it,
and is left as it was. Each hypothesis says where its evidence came from (``provenance``: one entry per
artefact, with its kind, see ``kit.provenance``) and what the reader must know to weigh it (``caveats``).

    ledger = Ledger.open("notebooks/sample/ledger.json")
    ledger.record("H1", statement="AllReduce dominates decode time on TP over PCIe",
                  test="kernel-time share of the allreduce category in decode steps",
                  evidence=f"allreduce share {share:.1%}", verdict=confirmed_if(share >= 0.30),
                  numbers={"allreduce_share": share}, source="01_allreduce_share",
                  provenance=[s.evidence("traces/tp8", "kernel traces")])
"""
from __future__ import annotations

import contextlib
import glob
import html
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import pandas as pd

from kit.errors import LedgerError
from kit.util import write_atomic

try:
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX: the ledger is then not locked
    fcntl = None

__all__ = ["VERDICTS", "LEDGER_ENV", "Hypothesis", "Ledger", "confirmed_if"]

LEDGER_ENV = "KIT_LEDGER"  # set by ``kit report``: where notebooks record verdicts during a report run
VERDICTS = ("open", "confirmed", "rejected")
_FORMAT = 1
_FIELDS = ("id", "statement", "test", "evidence", "verdict", "numbers", "source", "provenance", "caveats")
_TEXT_FIELDS = ("test", "evidence", "source")
_PROVENANCE_KEYS = ("artefact", "kind", "label", "role")
_KIND_ORDER = ("measured", "third-party", "project-written", "sample", "unknown")


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
    # where the evidence came from: [{"artefact": path, "kind": one of kit.session.KINDS, "label": ..., "role": ...}]
    provenance: list[dict[str, str]] = field(default_factory=list)
    # what weighs on the verdict (model vs measurement, other machine ...)
    caveats: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise LedgerError(f"hypothesis id must be a non-empty string, got {self.id!r}")
        if not isinstance(self.statement, str) or not self.statement.strip():
            raise LedgerError(f"hypothesis {self.id}: statement must be a non-empty string, got {self.statement!r}")
        for name in _TEXT_FIELDS:
            value = getattr(self, name)
            if value is None:
                setattr(self, name, "")
            elif not isinstance(value, str):
                raise LedgerError(f"hypothesis {self.id}: {name} must be a string, got {type(value).__name__}")
        self.provenance = _clean_provenance(self.id, self.provenance)
        caveats = [] if self.caveats is None else self.caveats
        if isinstance(caveats, str) or not all(isinstance(c, str) for c in caveats):
            raise LedgerError(f"hypothesis {self.id}: caveats must be a list of strings, got {caveats!r}")
        self.caveats = list(caveats)
        if self.verdict not in VERDICTS:
            raise LedgerError(f"hypothesis {self.id}: verdict {self.verdict!r} is not one of {', '.join(VERDICTS)}")
        if self.numbers is not None and not isinstance(self.numbers, Mapping):
            raise LedgerError(f"hypothesis {self.id}: numbers must be an object of name: value, "
                              f"got {type(self.numbers).__name__}")
        self.numbers = {str(k): _clean_number(str(k), v) for k, v in dict(self.numbers or {}).items()}

    def to_dict(self) -> dict[str, Any]:
        return {name: (list(v) if isinstance(v := getattr(self, name), list) else
                       dict(v) if isinstance(v, dict) else v) for name in _FIELDS}

    @property
    def evidence_kind(self) -> str:
        """One word for the evidence behind the verdict: ``measured`` only when every artefact was
        measured; ``sample`` / ``unknown`` / ... when all are of that kind; ``mixed: ...`` otherwise;
        ``not stated`` when the hypothesis records no provenance."""
        kinds = sorted({p.get("kind", "unknown") for p in self.provenance}, key=_kind_rank)
        if not kinds:
            return "not stated"
        return kinds[0] if len(kinds) == 1 else "mixed: " + ", ".join(kinds)

    @property
    def provenance_label(self) -> str:
        """Where the evidence came from, in words: for measured evidence the label of each artefact
        (host, when, how), else its kind (``sample``, ``mixed: measured, sample`` ...)."""
        if self.evidence_kind != "measured":
            return self.evidence_kind
        return "; ".join(dict.fromkeys(p.get("label") or "measured" for p in self.provenance))

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


def _kind_rank(kind: str) -> int:
    return _KIND_ORDER.index(kind) if kind in _KIND_ORDER else len(_KIND_ORDER)


def _clean_provenance(hid: str, items: Any) -> list[dict[str, str]]:
    """Provenance entries as plain dicts; accepts ``kit.session.Evidence``/``Provenance``-like objects
    (anything with ``to_ledger()``) and dicts."""
    if items is None:
        return []
    if isinstance(items, (str, bytes, Mapping)) or not hasattr(items, "__iter__"):
        raise LedgerError(f"hypothesis {hid}: provenance must be a list of entries, got {type(items).__name__}")
    out = []
    for item in items:
        if hasattr(item, "to_ledger"):
            item = item.to_ledger()
        if not isinstance(item, Mapping) or not isinstance(item.get("kind"), str):
            raise LedgerError(f"hypothesis {hid}: provenance entry {item!r} needs at least a 'kind'")
        extra = set(item) - set(_PROVENANCE_KEYS)
        if extra:
            raise LedgerError(f"hypothesis {hid}: provenance entry has unknown keys {sorted(extra)}")
        entry = {k: str(item[k]) for k in _PROVENANCE_KEYS if item.get(k) is not None}
        if entry not in out:
            out.append(entry)
    return out


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


_BADGE = {"confirmed": "#1a7f37", "rejected": "#cf222e", "open": "#6e7781"}


_COLUMNS = (("id", 4), ("verdict", 8), ("hypothesis", 15), ("test", 15), ("evidence", 22), ("provenance", 15),
            ("numbers", 13), ("set by", 8))
_KIND_COLOUR = {"measured": "#1a7f37", "third-party": "#0969da", "sample": "#9a6700", "project-written": "#6e7781"}


def _provenance_html(h: Hypothesis) -> str:
    """One line per distinct provenance (kind and label), then the artefacts it covers, roles as tooltips."""
    if not h.provenance:
        return "<i>not stated</i>"
    groups: dict[tuple[str, str], list[dict[str, str]]] = {}
    for p in h.provenance:
        groups.setdefault((p.get("kind", "unknown"), p.get("label", "")), []).append(p)
    items = []
    for (kind, label), entries in sorted(groups.items(), key=lambda kv: _kind_rank(kv[0][0])):
        colour = _KIND_COLOUR.get(kind, "#6e7781")
        seen: dict[str, list[str]] = {}
        for e in entries:
            if e.get("artefact"):
                seen.setdefault(e["artefact"], []).append(e.get("role", ""))
        arts = ", ".join(f"<code title='{html.escape('; '.join(r for r in roles if r), quote=True)}'>"
                         f"{html.escape(a)}</code>" for a, roles in seen.items())
        items.append(f"<span style='color:{colour}'><b>{html.escape(kind)}</b></span>: {html.escape(label)}"
                     + (f"<br><span style='font-size:85%'>{arts}</span>" if arts else ""))
    return "<br>".join(items)


def _html_table(rows: list[Hypothesis]) -> str:
    cols = "".join(f"<col style='width:{w}%'>" for _, w in _COLUMNS)
    head = "".join(f"<th style='text-align:left'>{h}</th>" for h, _ in _COLUMNS)
    body = []
    for h in rows:
        nums = "<br>".join(f"{html.escape(k)} = {html.escape(_fmt(v))}" for k, v in sorted(h.numbers.items()))
        badge = (f"<span style='color:#fff;background:{_BADGE[h.verdict]};padding:1px 6px;"
                 f"border-radius:8px;white-space:nowrap'>{h.verdict}</span>")
        evidence = html.escape(h.evidence) + "".join(
            f"<br><span style='color:#9a6700'>&#9888; {html.escape(c)}</span>" for c in h.caveats)
        cells = [html.escape(h.id), badge, html.escape(h.statement), html.escape(h.test),
                 evidence, _provenance_html(h), nums, html.escape(h.source)]
        row = f"<tr data-kit-id='{html.escape(h.id, quote=True)}' data-kit-verdict='{h.verdict}'>"
        body.append(row + "".join(f"<td style='text-align:left;vertical-align:top;overflow-wrap:break-word'>{c}</td>"
                                     for c in cells) + "</tr>")
    return (f"<table class='kit-ledger' style='width:100%;table-layout:fixed'><colgroup>{cols}</colgroup>"
            f"<thead><tr>{head}</tr></thead><tbody>" + "".join(body) + "</tbody></table>")


_CARD = ("<div class='kit-card' style='border:1px solid #d0d7de;border-left:6px solid {colour};border-radius:6px;"
         "padding:8px 12px;background:#fff;font-family:system-ui,sans-serif;break-inside:avoid'>")


@dataclass
class _Cards:
    """Verdict cards (:meth:`Ledger.cards`): (hypothesis, [(headline, formatted value)]) per card."""

    items: list[tuple[Hypothesis, list[tuple[str, str]]]]

    def _card(self, h: Hypothesis, nums: list[tuple[str, str]]) -> str:
        colour = _BADGE.get(h.verdict, "#6e7781")
        (label, value), rest = nums[0], nums[1:]
        kind = h.evidence_kind
        pill = _KIND_COLOUR.get(kind.split(":")[0], "#9a6700" if kind.startswith("mixed") else "#6e7781")
        more = "".join(f"<div style='font-size:12px;color:#57606a'>{html.escape(lab)}: <b>{html.escape(v)}</b></div>"
                       for lab, v in rest)
        return (_CARD.format(colour=colour)
                + f"<div style='display:flex;justify-content:space-between;gap:8px'><b>{html.escape(h.id)}</b>"
                f"<span style='color:#fff;background:{colour};padding:1px 8px;border-radius:8px'>{h.verdict}"
                "</span></div>"
                f"<div style='font-size:13px;margin:4px 0'>{html.escape(h.statement)}</div>"
                "<div style='font-size:22px;font-weight:600;line-height:1.2;overflow-wrap:anywhere'>"
                f"{html.escape(value)}</div><div style='font-size:12px;color:#57606a'>{html.escape(label)}</div>{more}"
                "<div style='margin-top:6px'><span class='kit-kind' "
                f"title='{html.escape(h.provenance_label, quote=True)}' "
                f"style='font-size:11px;border:1px solid {pill};color:{pill};padding:0 6px;border-radius:8px'>"
                f"{html.escape(kind)}</span> <span style='font-size:11px;color:#57606a'>{html.escape(h.source)}"
                "</span></div></div>")

    def _repr_html_(self) -> str:
        cards = "".join(self._card(h, nums) for h, nums in self.items)
        return ("<div class='kit-cards' data-kit-block='verdicts' style='display:grid;"
                f"grid-template-columns:repeat(auto-fill,minmax(260px,1fr));gap:10px;margin:8px 0'>{cards}</div>")

    def __repr__(self) -> str:
        return "\n".join(f"{h.id} {h.verdict}: {nums[0][1]} ({nums[0][0]}; {h.evidence_kind})"
                         for h, nums in self.items)

    def __len__(self) -> int:
        return len(self.items)


class Ledger:
    """The hypotheses of one session, kept in a JSON file; every change is saved atomically."""

    def __init__(self, path: str | os.PathLike[str], hypotheses: list[Hypothesis] | None = None) -> None:
        self.path = Path(path)
        self._items: dict[str, Hypothesis] = {h.id: h for h in hypotheses or []}
        # what the file held when this instance last read or wrote it: save() merges against it
        self._base: dict[str, dict[str, Any]] = {h.id: h.to_dict() for h in self._items.values()}

    # ---------------------------------------------------------------- file I/O
    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> "Ledger":
        """Load the ledger at ``path``; a missing file gives an empty ledger (created on first save)."""
        p = Path(path)
        if p.is_dir():
            raise LedgerError(f"ledger {p}: is a directory, expected a JSON file")
        return cls(p, _read(p) if p.exists() else None)

    @classmethod
    def for_session(cls, session: str | os.PathLike[str]) -> "Ledger":
        """The ledger a notebook should record into: ``$KIT_LEDGER`` when set (``kit report`` points it
        at the report's copy), else ``<session>/ledger.json``."""
        override = os.environ.get(LEDGER_ENV)
        return cls.open(override if override else Path(session) / "ledger.json")

    def reload(self) -> "Ledger":
        """Re-read the file (another notebook may have recorded verdicts since)."""
        self._items = {h.id: h for h in (_read(self.path) if self.path.exists() else [])}
        self._base = {i: h.to_dict() for i, h in self._items.items()}
        return self

    def save(self) -> Path:
        """Write the ledger atomically, merged under the lock with what others saved since this instance read
        it; a hypothesis changed on both sides is not written, and LedgerError names it (``reload()`` and redo)."""
        with self._locked():
            disk = {h.id: h for h in _read(self.path)} if self.path.exists() else {}
            merged = dict(disk)
            conflicts = []
            for hid, h in self._items.items():
                mine, base = h.to_dict(), self._base.get(hid)
                if mine == base:
                    continue  # unchanged here: whatever is on disk wins
                theirs = disk.get(hid)
                if theirs is not None and base is not None and theirs.to_dict() not in (base, mine):
                    conflicts.append(hid)
                elif theirs is not None and base is None and theirs.to_dict() != mine:
                    conflicts.append(hid)
                merged[hid] = h
            if conflicts:
                raise LedgerError(f"ledger {self.path}: not saved: {', '.join(conflicts)} changed both here and "
                                  "in the file since this ledger was read; reload() and apply the change again")
            self._items = merged
            self._store()
        return self.path

    def _store(self) -> None:
        """Write the file (the lock held) and take what it now holds as the base of the next merge."""
        data = {"format": _FORMAT, "hypotheses": [h.to_dict() for h in self._items.values()]}
        _write_atomic(self.path, json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
        self._base = {i: h.to_dict() for i, h in self._items.items()}

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        # flock on the ledger's directory: no lock file left beside the session.
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if fcntl is None:  # pragma: no cover - non-POSIX
            yield
            return
        try:
            fd = os.open(self.path.parent, os.O_RDONLY)
        except OSError as exc:
            raise LedgerError(f"ledger {self.path}: cannot open its directory ({exc.strerror})") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            _remove_stale_temps(self.path)  # only writers holding this lock create them
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    # ---------------------------------------------------------------- changes
    def record(self, id: str, *, statement: str | None = None, test: str | None = None,
               evidence: str | None = None, verdict: str | None = None,
               numbers: Mapping[str, Any] | None = None, source: str | None = None,
               provenance: Any = None, caveats: list[str] | None = None) -> Hypothesis:
        """Create or update hypothesis ``id`` and save at once.

        The file is re-read under the lock first, so verdicts other notebooks saved meanwhile are
        kept; only the fields given here change (``numbers`` are merged key by key; ``provenance``
        and ``caveats``, when given, replace the old lists: they describe this verdict's evidence).
        """
        with self._locked():
            if self.path.exists():
                self._items = {h.id: h for h in _read(self.path)}
            old = self._items.get(id)
            if old is None and statement is None:
                raise LedgerError(f"ledger {self.path}: new hypothesis {id!r} needs a statement")
            base = old.to_dict() if old else {"id": id}
            for key, value in (("statement", statement), ("test", test), ("evidence", evidence),
                               ("verdict", verdict), ("source", source), ("caveats", caveats)):
                if value is not None:
                    base[key] = value
            if provenance is not None:
                base["provenance"] = _clean_provenance(id, provenance)
            if numbers is not None:
                base["numbers"] = {**base.get("numbers", {}), **dict(numbers)}
            hyp = Hypothesis.from_dict(base, where=f"ledger {self.path}")
            self._items[id] = hyp
            self._store()
        return hyp

    def revise(self, id: str, *, check: str, finding: str, verdict: str | None = None,
               numbers: Mapping[str, Any] | None = None, source: str | None = None,
               provenance: Any = None, caveats: list[str] | None = None) -> Hypothesis:
        """Revise hypothesis ``id`` after a later ``check`` (another notebook's measurement, say).

        The recorded evidence stays and gains one sentence, ``"Checked against {check}: {finding}"``;
        running the check again replaces that sentence, never stacks a second one. ``provenance`` is
        added to the entry's own (duplicates dropped), ``source`` is appended as ``"checked by ..."``,
        ``numbers`` are merged and ``caveats`` replace the old list, as in :meth:`record`.
        """
        old = self.reload()[id]
        marker = f" Checked against {check}: "
        kept = old.evidence.split(marker, 1)[0].rstrip()
        evidence = (kept.rstrip(".") + "." if kept else "") + marker + finding
        merged = None if provenance is None else old.provenance + [
            p for p in _clean_provenance(id, provenance) if p not in old.provenance]
        by = f"checked by {source}" if source else None
        new_source = old.source if not by or by in old.source else ", ".join(x for x in (old.source, by) if x)
        return self.record(id, evidence=evidence.strip(), verdict=verdict, numbers=numbers, source=new_source,
                           provenance=merged, caveats=caveats)

    # ---------------------------------------------------------------- access
    def __getitem__(self, id: str) -> Hypothesis:
        try:
            return self._items[id]
        except KeyError:
            have = ", ".join(self._items) or "none"
            raise LedgerError(f"ledger {self.path}: no hypothesis {id!r} (have {have})") from None

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

    def headlines(self, rows: Iterable[tuple[str, str, str, str]]):
        """A table of headline numbers read from the ledger, each row of ``rows`` (headline, hypothesis id, key in
        its numbers, format): the value formatted or "not recorded", where it came from, the notebook that set it."""
        out = []
        for label, hid, key, fmt in rows:
            h = self._items.get(hid)
            out.append((label, self._value(hid, key, fmt), h.provenance_label if h else "not recorded",
                        h.source if h else ""))
        return pd.DataFrame(out, columns=["headline", "value", "provenance", "notebook"])

    def _value(self, hid: str, key: str, fmt: str, yes_no: bool = False) -> str:
        """Number ``key`` of hypothesis ``hid`` formatted by ``fmt``, or "not recorded" (``yes_no``: a bool
        reads "yes"/"no", not "True")."""
        h = self._items.get(hid)
        value = h.numbers.get(key) if h else None
        if yes_no and isinstance(value, bool):
            value = "yes" if value else "no"
        return fmt.format(value) if value is not None else "not recorded"

    def cards(self, rows: Iterable[tuple[str, str, str, str]]) -> "_Cards":
        """The verdicts as cards, one per hypothesis named in ``rows`` (as for :meth:`headlines`), in order: its
        verdict, the number that decided it (its first row; the others under it), where the evidence came from.
        What a reader of the report sees first."""
        groups: dict[str, list[tuple[str, str]]] = {}
        for label, hid, key, fmt in rows:
            groups.setdefault(hid, []).append((label, self._value(hid, key, fmt, yes_no=True)))
        return _Cards([(self._items.get(hid) or Hypothesis(id=hid, statement="not recorded in the ledger"), nums)
                       for hid, nums in groups.items()])

    def to_frame(self):
        """The ledger as a pandas DataFrame (one row per hypothesis, numbers as a dict column)."""
        return pd.DataFrame([h.to_dict() for h in self._items.values()], columns=list(_FIELDS))

    # ---------------------------------------------------------------- display
    def to_text(self) -> str:
        """A plain-text table (what the terminal and the text/plain output show)."""
        if not self._items:
            return f"ledger {self.path.name}: no hypotheses"
        lines = [f"{'id':<6} {'verdict':<10} hypothesis / evidence", "-" * 100]
        for h in self._items.values():
            lines.append(f"{h.id:<6} {h.verdict:<10} {h.statement}")
            if h.evidence:
                lines.append(f"{'':<17} evidence: {h.evidence}")
            for c in h.caveats:
                lines.append(f"{'':<17} caveat: {c}")
            if h.provenance:
                lines.append(f"{'':<17} provenance: {h.evidence_kind}")
            if h.numbers:
                nums = ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(h.numbers.items()))
                lines.append(f"{'':<17} numbers: {nums}")
        return "\n".join(lines)

    def to_html(self) -> str:
        """An HTML table with a coloured verdict badge per row (report index and notebooks)."""
        c = self.counts()
        summary = ", ".join(f"{n} {v}" for v, n in c.items())
        table = _html_table(list(self._items.values()))
        return (f"<div class='kit-ledger-wrap' data-kit-block='ledger'><p><b>Hypothesis ledger</b> ({summary})</p>"
                f"{table}</div>")

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
        raw = path.read_bytes()
    except OSError as exc:
        raise LedgerError(f"ledger {path}: cannot read ({exc.strerror})") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LedgerError(f"ledger {path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
                          "the file was left as it is") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LedgerError(f"ledger {path}: not valid JSON (line {exc.lineno}: {exc.msg})") from exc
    except RecursionError:
        raise LedgerError(f"ledger {path}: JSON nested too deeply to be a ledger") from None
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


def _remove_stale_temps(path: Path) -> None:
    """Temporary files of writers killed mid-write (kill -9). Called with the lock held: no live
    writer has one open then."""
    for temp in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        with contextlib.suppress(OSError):
            temp.unlink()


def _write_atomic(path: Path, text: str) -> None:
    try:
        write_atomic(path, text, prefix=f".{path.name}.", fsync=True)  # the prefix _remove_stale_temps sweeps
    except OSError as exc:
        raise LedgerError(f"ledger {path}: cannot write ({exc.strerror or exc}); "
                          "the previous file is unchanged") from exc
