"""Prompts for the load benchmark: synthetic ones, distinct from their first token, or a dataset
file read by its format; the hash that says which prompt texts were really sent; length distributions.

Dataset formats (by suffix, a table, not branches): ``.jsonl``/``.ndjson`` (one JSON record a line),
``.json`` (one JSON document: an array, written on one line or one record a line, ShareGPT's own
format, or an object holding one under ``data``/``rows``/``records``), ``.parquet`` and ``.arrow``
(a Hugging Face dataset file on disk; a ``save_to_disk`` folder of ``.arrow`` files too), ``.csv``,
anything else plain text (one prompt a line). A record's prompt is its ``prompt``, ``text``,
``input``, ``question`` or ``instruction`` field, or the first user turn of ShareGPT
``conversations`` / OpenAI ``messages``. A record that is not JSON or has no prompt field stops the
benchmark with one line naming the file and the record; a ShareGPT record with an empty conversation
(the published dump has some) is skipped and counted in a warning.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import random
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

from kit.errors import BenchError

_WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
          "quebec romeo sierra tango uniform victor whiskey xray yankee zulu amber basil cedar dune ember fjord "
          "garnet harbor iris jade kelp lotus maple nectar opal pine quartz reef sage thyme umber violet "
          "willow").split()
PROMPT_KEYS = ("prompt", "text", "input", "question", "instruction")
TURN_KEYS = ("conversations", "conversation", "messages")
USER_ROLES = ("human", "user")


def prompt_hash(prompt) -> str:
    """A short stable hash of the prompt text (or token ids, or chat messages) sent: two requests
    with the same hash sent the same prompt."""
    data = prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True)
    return hashlib.sha1(data.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def words(n: int, rng: random.Random, lead: str = "") -> str:
    """``n`` random words (about one token each), led by ``lead`` when given (counted in ``n``)."""
    head = [lead] if lead else []
    return " ".join(head + [rng.choice(_WORDS) for _ in range(max(0, n - len(head)))])


def new_seed() -> int:
    """A fresh seed for a call that was given none (recorded in its result)."""
    return random.SystemRandom().randrange(1, 2 ** 31)


class PromptPool:
    """A benchmark's prompts, handed out in order (``take``) so no two requests share one, unless a dataset or
    list is smaller than the requests: then cycled, and said once by ``close`` (a warning, and in ``notes``)."""

    def __init__(self, source: str | Sequence = "random", prompt_tokens: int = 128, seed: int = 0,
                 notes: list | None = None) -> None:
        self.source, self.prompt_tokens, self.seed, self.notes = source, prompt_tokens, seed, notes
        self.items, self.next = None, 0
        if isinstance(source, str) and source == "same":  # one fixed text, asked for: said as "same", no warning
            self.items = [" ".join(f"w{i % 97}" for i in range(max(1, prompt_tokens)))]
        elif not (isinstance(source, str) and source in ("random", "random-ids")):
            self.items = list(source) if isinstance(source, (list, tuple)) else read_dataset(Path(source), notes)
            if not self.items:
                raise BenchError(f"{source}: no prompts")

    def take(self, n: int, lengths: Sequence[int] | None = None) -> list:
        """The next ``n`` prompts; ``lengths``: one prompt length each (synthetic sources)."""
        start, self.next = self.next, self.next + n
        rng = random.Random(self.seed)
        size = list(lengths) if lengths is not None else [self.prompt_tokens] * n
        if self.items is not None:
            return [self.items[(start + i) % len(self.items)] for i in range(n)]
        if self.source == "random":
            return [words(max(1, size[i]), rng, f"q{self.seed}x{start + i}") for i in range(n)]
        return [[1000 + ((start + i) * 7919 + self.seed) % 30000]
                + [rng.randrange(1000, 31000) for _ in range(max(0, size[i] - 1))] for i in range(n)]

    def close(self) -> None:
        if self.items is not None and self.next > len(self.items) and self.source != "same":
            what = self.source if isinstance(self.source, str) else "the prompt list"
            _note(self.notes, f"{what}: {len(self.items)} prompts for {self.next} requests: each sent up to "
                              f"{-(-self.next // len(self.items))} times (a prefix cache sees the repeats; "
                              "distinct_prompts counts the texts really sent)")


def make_prompts(n: int, *, source: str | Sequence = "random", prompt_tokens: int = 128, seed: int = 0,
                 lengths: Sequence[int] | None = None, notes: list | None = None, start: int = 0) -> list:
    """``n`` prompts, distinct from each other from their first token on.

    ``source``: ``"random"`` (random words, about one token each, led by a unique one),
    ``"random-ids"`` (lists of random token ids for ``/v1/completions``), ``"same"`` (one fixed text), a path
    to a dataset file (see the module docstring for the formats; used in order, cycled if shorter, with a
    warning), or a list of prompts (cycled the same way). ``lengths``: one prompt length per prompt (synthetic
    sources), else ``prompt_tokens`` each. ``notes``: a list that gets the warnings given. ``start``: the index
    of the first prompt (a later batch of the same benchmark: distinct from the earlier)."""
    pool = PromptPool(source, prompt_tokens, seed, notes)
    pool.next = start
    out = pool.take(n, lengths)
    pool.close()
    return out


def _note(notes: list | None, msg: str) -> None:
    warnings.warn(msg, stacklevel=3)
    if notes is not None:
        notes.append(msg)


def record_prompt(rec: Any, where: str) -> str | None:
    """The prompt of one dataset record (None: a ShareGPT record with an empty conversation)."""
    if isinstance(rec, str):
        return rec
    if not isinstance(rec, dict):
        raise BenchError(f"{where}: a {type(rec).__name__}, not a record with a prompt")
    for k in PROMPT_KEYS:
        if isinstance(rec.get(k), str) and rec[k]:
            return rec[k]
    for k in TURN_KEYS:
        turns = rec.get(k)
        if isinstance(turns, list):
            for t in turns:
                role = (t.get("from") or t.get("role") or "") if isinstance(t, dict) else ""
                text = (t.get("value") or t.get("content")) if isinstance(t, dict) else None
                if isinstance(text, str) and text and (role.lower() in USER_ROLES or not role):
                    return text
            if not turns:
                return None
    raise BenchError(f"{where}: no prompt (expected one of {', '.join(PROMPT_KEYS)}, or ShareGPT "
                     f"{'/'.join(TURN_KEYS)} with a user turn; keys: {', '.join(map(str, list(rec)[:8]))})")


def _jsonl(path: Path, text: str) -> list[tuple[str, Any]]:
    out = []
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append((f"{path}: line {no}", json.loads(line)))
        except ValueError as exc:
            raise BenchError(f"{path}: line {no}: not a JSON record ({exc.args[0][:80]}): {line[:60]!r}") from None
    return out


def _json(path: Path, text: str) -> list[tuple[str, Any]]:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        try:  # JSON lines under a .json name
            return _jsonl(path, text)
        except BenchError:
            raise BenchError(f"{path}: not a JSON document ({exc})") from None
    if isinstance(doc, dict):
        inner = next((doc[k] for k in ("data", "rows", "records") if isinstance(doc.get(k), list)), None)
        doc = inner if inner is not None else [doc]
    if not isinstance(doc, list):
        raise BenchError(f"{path}: a JSON {type(doc).__name__}, not an array of records")
    return [(f"{path}: record {i + 1}", r) for i, r in enumerate(doc)]


def _arrow_table(path: Path):
    import pyarrow as pa  # deferred: only Arrow and Parquet datasets need it

    if path.suffix == ".parquet":
        import pyarrow.parquet as pq  # deferred: as above

        return pq.read_table(path)
    with pa.memory_map(str(path)) as src:  # datasets' save_to_disk writes the IPC stream format
        try:
            return pa.ipc.open_stream(src).read_all()
        except pa.ArrowInvalid:
            src.seek(0)
            return pa.ipc.open_file(src).read_all()


def _columnar(path: Path, text: str | None) -> list[tuple[str, Any]]:
    files = sorted(path.glob("*.arrow")) if path.is_dir() else [path]
    if not files:
        raise BenchError(f"{path}: a folder with no .arrow file (a Hugging Face save_to_disk folder has them)")
    out = []
    for f in files:
        try:
            rows = _arrow_table(f).to_pylist()
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several unrelated types for a bad file
            raise BenchError(f"{f}: not a readable {f.suffix.lstrip('.') or 'arrow'} file ({type(exc).__name__}: "
                             f"{str(exc)[:100]})") from None
        out += [(f"{f}: row {i + 1}", r) for i, r in enumerate(rows)]
    return out


def _csv(path: Path, text: str) -> list[tuple[str, Any]]:
    return [(f"{path}: row {i + 2}", r) for i, r in enumerate(csv.DictReader(io.StringIO(text)))]


def _lines(path: Path, text: str) -> list[tuple[str, Any]]:
    return [(f"{path}: line {i + 1}", line) for i, line in enumerate(text.splitlines()) if line.strip()]


READERS: dict[str, Callable[[Path, Any], list]] = {
    ".jsonl": _jsonl, ".ndjson": _jsonl, ".json": _json, ".parquet": _columnar, ".arrow": _columnar, ".csv": _csv}


def read_dataset(path: Path, notes: list | None = None) -> list[str]:
    """The prompts of a dataset file, in order (see the module docstring for the formats)."""
    reader = _columnar if path.is_dir() else READERS.get(path.suffix.lower(), _lines)
    text = None
    if reader is not _columnar:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BenchError(f"{path}: cannot read the prompt file ({getattr(exc, 'strerror', None) or exc})") from None
    elif not path.exists():
        raise BenchError(f"{path}: cannot read the prompt file (no such file)")
    out, empty = [], 0
    for where, rec in reader(path, text):
        p = record_prompt(rec, where)
        if p is None:
            empty += 1
        else:
            out.append(p)
    if empty:
        _note(notes, f"{path}: {empty} record(s) with an empty conversation skipped ({len(out)} prompts kept)")
    return out


def sample_lengths(spec, n: int, rng: random.Random, what: str) -> list[int]:
    """``n`` lengths from ``spec``: an int (fixed), a list (an empirical distribution, sampled),
    ``("uniform", lo, hi)``, ``("normal", mean, sd)`` or ``("lognormal", median, sigma)`` (at least 1)."""
    if isinstance(spec, int):
        return [spec] * n
    if isinstance(spec, (list, tuple)) and spec and isinstance(spec[0], str):
        kind, a, b = (list(spec) + [0, 0])[:3]
        draw = DISTRIBUTIONS.get(kind)
        if draw is None:
            raise BenchError(f"{what}: unknown distribution {kind!r} (use {', '.join(DISTRIBUTIONS)})")
        return [max(1, int(round(draw(rng, float(a), float(b))))) for _ in range(n)]
    if isinstance(spec, (list, tuple)) and spec and all(isinstance(x, int) for x in spec):
        return [rng.choice(list(spec)) for _ in range(n)]
    raise BenchError(f"{what}: give an int, a list of lengths or (kind, a, b), not {spec!r}")


DISTRIBUTIONS = {
    "uniform": lambda rng, lo, hi: rng.uniform(lo, hi),
    "normal": lambda rng, mean, sd: rng.gauss(mean, sd),
    "lognormal": lambda rng, median, sigma: median * rng.lognormvariate(0.0, sigma),
}
