"""SGLang scheduler log lines (private to ``kit.logs``): ``Prefill batch`` / ``Decode batch`` and the
startup ``server_args`` dump, in every format from 0.4.x to 0.5.2x.

Lines are parsed key by key, never by position: the body after ``Decode batch`` is split at
``", "`` into ``key: value`` pairs, because fields come and go with the version (``cuda graph``,
``accept rate``, ``cap len``), the model type (hybrid SWA / Mamba usage fields), PD mode and device
(``npu graph``). Each line's *format variant* is also counted, because it dates the engine:

    dot        ``Decode batch. #running-req: ...``         sglang <= 0.5.3
    bracket    ``Decode batch [123], #running-req: ...``   0.5.4 (or 0.5.6-0.5.8 with SGLANG_LOG_FORWARD_ITERS)
    trailing   ``Decode batch, ... #queue-req: 0, ``       0.5.6-0.5.8 (trailing ", ")
    comma      ``Decode batch, ... #queue-req: 0``         0.5.9 and later

The variant is kept per row in the ``format`` column.
"""
from __future__ import annotations

import ast
import re
from typing import Any

import numpy as np
import pandas as pd

from kit.errors import LogFormatError
from kit.logs import _records as records
from kit.logs._checks import check_values
from kit.logs._records import TAKEN, TORN
from kit.logs._spec import flag_after_idle
from kit.logs._table import CHUNK, TemplateTable, merge_frames, pairs

# Line header: "[2025-10-22 10:27:56 TP0] " / "[2025-05-14 09:31:43.123 DP1 TP3] " / none.
_RANK = r" (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+"
HEADER = re.compile(r"\[(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{3})?)" f"(?P<ranks>(?:{_RANK})*)\\] ")
_BRACKET_ITER = re.compile(r"\[(\d+)\], ")

DECODE_COLUMNS = ("time", "ranks", "line", "running_req", "gen_throughput", "accept_len", "accept_rate",
                  "queue_req", "graph", "graph_kind")
PREFILL_COLUMNS = ("time", "ranks", "line", "new_seq", "new_token", "cached_token", "running_req",
                   "queue_req")

# Values are cut out of the message with one regex split; what remains is the line's *template*.
# Junk from another writer either changes the template (then the careful parser decides: torn) or
# sits inside a value (then converting the value fails at flush time: the row is dropped as torn).
_SPLIT = re.compile(r": ([^,]*)")
FAST_HEAD = ("line", "time", "ranks", "iter")
_RANKS_OK: dict[str, str | None] = {"": None}
_RANKS = re.compile(f"(?:{_RANK})+")


def parse_batch_line(line: str, lineno: int, pos: int, st) -> int:
    """One ``Prefill batch`` / ``Decode batch`` line found at ``pos``: TAKEN or TORN. The message is split into
    template + values by one regex call; a template seen before maps straight to its columns
    (``st.decode_fast`` / ``st.prefill_fast``), a new one is checked by the careful parser first."""
    kind = "Decode" if line.startswith("D", pos) else "Prefill"
    if pos:
        # "[2025-10-22 10:27:56 TP0] " / "[2025-10-22 10:27:56.123 DP1 TP3] " / "[2025-05-14 09:31:43] "
        if line[0] != "[" or line[pos - 2] != "]" or line[5] != "-" or line[14] != ":":
            return TORN  # something else was written in front of the message: torn/interleaved
        extra = line[20:pos - 2]
        if extra:
            ranks = _RANKS_OK.get(extra, "?")
            if ranks == "?":
                ranks = _ranks(extra)
                if ranks == "?":
                    return TORN
            ts = line[1:24] if extra[0] == "." else line[1:20]
        else:
            ts = line[1:20]
            ranks = None
    else:
        ts = ranks = None
    it = None
    if line[pos + len(kind) + 6] == " ":  # "Decode batch [123], ...": keep the number out of the template
        m = _BRACKET_ITER.match(line, pos + len(kind) + 7)
        if m is None:
            return TORN
        it = int(m.group(1))
        msg = kind + " batch [], " + line[m.end():]
    else:
        msg = line[pos:]
    parts = _SPLIT.split(msg)
    tmpl = "".join(parts[0::2])
    fast = st.decode_fast if kind == "Decode" else st.prefill_fast
    group = fast.groups.get(tmpl)
    if group is None:
        group = _new_template(st, fast, kind, msg, tmpl, parts, pos, (lineno, ts, ranks, it))
        if isinstance(group, int):
            return group
    group += (lineno, ts, ranks, it)
    group += parts[1::2]
    fast.n += 1
    if fast.n >= CHUNK:
        fast.flush()
    return TAKEN


def _new_template(st, fast, kind: str, msg: str, tmpl: str, parts: list[str], pos: int, head: tuple):
    """A template not seen before, checked by the careful parser: a new group for the caller to fill when its
    keys line up with the split values, else TAKEN (the row added as it is) or TORN."""
    lineno, ts, ranks, it = head
    vb = _variant_body(msg, kind)
    if vb is None:
        return TORN
    variant, body = vb
    row = _parse_body(body, kind)
    if row is None:
        return TORN
    group = None
    if tmpl not in fast.slow:
        names = tuple(k for k in row if k != "graph_kind")
        if len(names) == len(parts) // 2 and len(set(names)) == len(names):
            consts = {"graph_kind": row["graph_kind"]} if "graph_kind" in row else {}
            consts["format"] = variant
            group = fast.add_group(tmpl, names, consts, bracket=it is not None)
            if pos:
                st.bulk_templates.append((template_regex(parts[0::2], it is not None), fast, tmpl,
                                          it is not None))
        else:
            fast.slow.add(tmpl)
    if group is None:
        row = {"line": lineno, "time": ts, "ranks": ranks, "iter": it, **row, "format": variant}
        (st.decode if kind == "Decode" else st.prefill).add(row)
        return TAKEN
    return group


def template_regex(pieces: list[str], bracket: bool) -> re.Pattern:
    """A regex of one template's lines from the ``] `` that closes the header to the end of the line, capturing
    [the iteration and] each value; it starts with a literal, found in a text block at C speed."""
    first = re.escape("] " + pieces[0])
    if bracket:
        first = first.replace(re.escape("[], "), r"\[(\d+)\], ", 1)
    rx = first
    for piece in pieces[1:-1]:
        rx += r": ([^,\n]*)" + re.escape(piece)
    rx += r": ([^,\n]*)" + re.escape(pieces[-1].rstrip("\n")) + r"$"
    return re.compile(rx, re.M)


def extract_block(block: str, first_line: int, st) -> np.ndarray:
    """Every line of a known template taken out of ``block`` (ASCII, whole lines, the first being line
    ``first_line``) at once, with NumPy: the same rows and header checks as the line-by-line path; returns the
    line numbers taken, which the line loop skips."""
    found = []
    for regex, fast, tmpl, _bracket in st.bulk_templates:
        matches = list(regex.finditer(block))
        if matches:
            found.append((fast, tmpl, matches))
    taken: list[np.ndarray] = []
    if not found:
        return np.zeros(0, dtype=np.int64)
    buf = np.frombuffer(block.encode("ascii"), dtype=np.uint8)
    last = len(buf) - 1
    nl = np.flatnonzero(buf == 10)
    for fast, tmpl, matches in found:
        starts = np.fromiter(map(re.Match.start, matches), np.int64, len(matches))
        k = np.searchsorted(nl, starts)
        ls = np.where(k > 0, nl[np.maximum(k - 1, 0)] + 1, 0)  # line starts
        lines = k + first_line
        taken.append(lines)
        ok = (starts - ls >= 20) & (buf[ls] == 91)  # "["
        ok &= (buf[np.minimum(ls + 5, last)] == 45) & (buf[np.minimum(ls + 14, last)] == 58)  # "-", ":"
        ms = ok & (starts - ls >= 24) & (buf[np.minimum(ls + 20, last)] == 46)  # ".123" after the seconds
        # times: 19 (or 23 with ms) bytes after "[", decoded once per distinct value
        win = buf[np.minimum(ls[:, None] + np.arange(1, 24), last)]
        win[~ms, 19:] = 0
        uniq, inv = _runs(win.view("S23").ravel())
        ts = np.array([u.decode() for u in uniq], dtype=object)[inv]
        # rank tags: the bytes between the time and "]", validated once per distinct value
        ts_end = ls + np.where(ms, 24, 20)
        rlen = starts - ts_end
        ok &= (rlen >= 0) & (rlen <= 40)
        win = buf[np.minimum(ts_end[:, None] + np.arange(40), last)]
        win[np.arange(40)[None, :] >= rlen[:, None]] = 0
        uniq, inv = _runs(win.view("S40").ravel())
        norm = []
        known: dict[bytes, str | None] = {}
        for u in uniq:
            r = known.get(u, "")
            if r == "":
                r = u.decode()
                r = known[u] = r.strip() or None if r == "" or _RANKS.fullmatch(r) else "?"
            norm.append(r)
        ranks = np.array(norm, dtype=object)[inv]
        if "?" in norm:
            ok &= np.array([r == "?" for r in norm])[inv] == False  # noqa: E712
        groups = list(map(_GROUPS, matches))
        if not ok.all():
            for ln in lines[~ok].tolist():
                st.torn_line(ln)
            keep = np.flatnonzero(ok).tolist()
            lines, ts, ranks = lines[ok], ts[ok], ranks[ok]
            groups = [groups[i] for i in keep]
        if len(lines):
            fast.bulk[tmpl].append((lines, ts, ranks, groups))
            fast.n += len(lines)
            st.hits["sglang"] += len(lines)
    for fast in (st.decode_fast, st.prefill_fast):
        if fast.n >= CHUNK:
            fast.flush()
    return np.concatenate(taken)


_GROUPS = re.Match.groups


def _runs(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values of a fixed-width bytes array by runs of equal neighbours (a log repeats the
    same time stamp and rank tag line after line): (value of each run, run index of each element).
    O(n), no sort; a value that comes back later simply starts another run."""
    change = np.empty(len(keys), dtype=bool)
    change[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=change[1:])
    inv = np.cumsum(change) - 1
    return keys[change], inv


def _variant_body(msg: str, kind: str) -> tuple[str, str] | None:
    """(format variant, body without trailing comma) of a message starting with ``kind batch``."""
    rest = msg[len(kind) + 6:]
    for sep, variant in ((", ", "comma"), (". ", "dot"), (" [], ", "bracket")):  # noqa: B007 (used below)
        if rest.startswith(sep):
            body = rest[len(sep):].rstrip()
            break
    else:
        return None
    if body.endswith(","):
        body = body[:-1]
        if variant == "comma":
            variant = "trailing"
    return variant, body


def _ranks(extra: str) -> str | None:
    """Validate the part of the header after the seconds (``.123`` and/or `` DP1 TP3``); '?' if bad."""
    rest = extra[4:] if extra[0] == "." and extra[1:4].isdigit() else extra
    if rest and _RANKS.fullmatch(rest) is None:
        return "?"
    _RANKS_OK[extra] = rest.strip() or None
    return _RANKS_OK[extra]


def _parse_body(body: str, kind: str) -> dict | None:
    """Key-by-key parse of a batch line body -> {column: value}; None when malformed (torn)."""
    row: dict[str, Any] = {}
    if not pairs(body, row, strict=True) or (kind == "Decode" and "gen_throughput" not in row):
        return None
    return row


def parse_server_args(text: str) -> dict[str, Any]:
    """The startup ``server_args=ServerArgs(k=v, ...)`` repr (<= 0.5.16) or ``server_args={'k': v}`` dict
    (>= 0.5.20), in a log line or alone -> dict of Python values (other values as their source text). A truncated
    dump yields the keys before the cut and ``'__truncated__': True``. LogFormatError when neither form is there.
    """
    start = text.find("server_args=")
    body = text[start + len("server_args="):] if start >= 0 else text
    body = body.strip()
    if body.startswith("ServerArgs("):
        body, close, style = body[len("ServerArgs("):], ")", "repr"
    elif body.startswith("{"):
        body, close, style = body[1:], "}", "dict"
    else:
        raise LogFormatError("server_args: no ServerArgs(...) repr or server_args={...} dict in the text")
    items, complete = _split_top_level(body, close)
    out: dict[str, Any] = {}
    for i, item in enumerate(items):
        item = item.strip()
        if not item:
            continue
        if i == len(items) - 1 and not complete:
            break  # the cut fell inside this item: its value may be incomplete
        if style == "repr":
            key, sep, val = item.partition("=")
            key = key.strip()
        elif m := re.match(r"""\s*(['"])(.*?)\1\s*:\s*""", item, re.S):
            key, sep, val = m.group(2), ":", item[m.end():]
        else:
            continue
        if not sep or not key.isidentifier():
            continue
        try:
            out[key] = ast.literal_eval(val.strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            out[key] = val.strip()
    if not complete:
        out["__truncated__"] = True
    return out


def _split_top_level(body: str, close: str) -> tuple[list[str], bool]:
    """Split at commas outside quotes/brackets; stop at the closing bracket. Returns the items and
    whether the closing bracket was found (False: the dump was truncated)."""
    items: list[str] = []
    depth = 0
    quote = ""
    start = 0
    i = 0
    n = len(body)
    opens, closes = "([{", ")]}"
    while i < n:
        ch = body[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in opens:
            depth += 1
        elif ch in closes:
            if depth == 0:
                if ch == close:
                    items.append(body[start:i])
                    return items, True
            else:
                depth -= 1
        elif ch == "," and depth == 0:
            items.append(body[start:i])
            start = i + 1
        i += 1
    items.append(body[start:])
    return items, False


_SG_DEFAULT_BACKEND = re.compile(r"Attention backend not (?:set|specified)\. Use (\w+) backend by default|"
                                 r"[Uu]sing (\w+) (?:attention )?backend instead|Use (\w+) as attention backend")
_CAPTURE_BS = re.compile(r"Capture (?:cuda|CUDA|cpu|npu) graph bs \[([\d,\s]*)\]")


def _dump(line: str, lineno: int, st) -> int:
    """The startup ``server_args`` dump: the log's arguments (the first dump) and settings evidence."""
    try:
        args = parse_server_args(line)
    except LogFormatError:
        return 0
    if st.server_args is None:
        st.server_args = args
        st.server_args_line = lineno
    st.hits["sglang"] += 1
    if args:
        st.say(lineno, "args", (args, "server_args dump", "sglang"), "server_args dump")
    return records.TAKEN


def _captured(line: str, lineno: int, st) -> bool:
    """``Capture cuda graph bs [1, 2, 4, 8]``: the CUDA-graph batch sizes captured."""
    m = _CAPTURE_BS.search(line)
    if m is None:
        return False
    bs = sorted(int(x) for x in m.group(1).split(",") if x.strip())
    if bs:
        text = records.clip(line)
        for key, v in (("cuda_graph", True), ("cuda_graph_bs", bs), ("cuda_graph_max_bs", max(bs))):
            st.say(lineno, "value", (key, v, text), "captured graph sizes")
    return True


def _backend(line: str, lineno: int, st) -> bool:
    """The attention backend SGLang chose."""
    m = _SG_DEFAULT_BACKEND.search(line)
    if m is None:
        return False
    st.say(lineno, "value", ("attention_backend", records.norm_backend(m.group(1) or m.group(2) or m.group(3)),
                             records.clip(line)), "attention backend line")
    return True


def _build(st, warnings: list[str]) -> dict:
    """The ``decode`` and ``prefill`` tables: fast-path and careful rows merged in line order, impossible
    values dropped and counted, the first window after idle flagged; rows the fast path dropped at
    conversion counted as torn."""
    out = {}
    for name, fast, slow, cols in (("decode", st.decode_fast, st.decode, DECODE_COLUMNS),
                                   ("prefill", st.prefill_fast, st.prefill, PREFILL_COLUMNS)):
        t = merge_frames(fast.frame(cols), slow.frame(), cols)
        if "iter" in t.columns and len(t) and t["iter"].isna().all():  # only printed by some versions
            del t["iter"]
        out[name] = check_values(t, name, warnings)
    if len(out["decode"]):
        out["decode"]["after_idle"] = flag_after_idle(out["decode"]["gen_throughput"])
    for fast in (st.decode_fast, st.prefill_fast):
        if fast.bad_lines:
            st.torn += len(fast.bad_lines)
            st.torn_examples = sorted(st.torn_examples + fast.bad_lines)[:5]
    return out


def _batches(tables: dict):
    """The decode lines that say whether they ran a CUDA graph: (line, running requests, graph) and the
    text an evidence shows for one."""
    t = tables["decode"]
    if not len(t) or "graph" not in t.columns:
        return None
    ok = t["graph"].notna() & t["running_req"].notna()
    if "graph_kind" in t.columns:
        ok &= (t["graph_kind"].astype(object) == "cuda").to_numpy(bool)
    rows = pd.DataFrame({"line": t["line"][ok], "running": t["running_req"][ok], "graph": t["graph"][ok].astype(bool)})
    return rows, "Decode batch, #running-req: {n}, cuda graph: {g} (the line's fields as parsed)"


FORMAT = records.LogFormat(
    "sglang", engine=True, header=HEADER,
    take=(("batch", records.first_of(("Decode batch", "Prefill batch"), parse_batch_line, "sglang")),
          ("server_args=", _dump)),
    notes=(("Capture ", _captured), ("backend", _backend)),
    tables={"decode": records.columns("ISO8601"), "prefill": records.columns("ISO8601"),
            "decode_fast": lambda: TemplateTable(FAST_HEAD, "ISO8601"),
            "prefill_fast": lambda: TemplateTable(FAST_HEAD, "ISO8601")},
    build=_build, batches=_batches,
    bulk=lambda block, first_line, st: extract_block(block, first_line, st))   # looked up per call: patchable
