"""The one shell command behind ``kit.source.grep`` and the parser of its output: ripgrep when the
host has it, else ``grep -r``, both printing ``PATH\\0LINE:TEXT`` (``-`` for context lines), so any file
name parses back. Path, glob and pattern are quoted and follow ``--``: data, never shell code."""
from __future__ import annotations

import re

from kit.errors import UsageError
from kit.source._types import Match
from kit.util import quote

TOOL_MARK = "kit-source-tool:"
EXIT_MISSING = 3
EXIT_UNREADABLE = 4


def build_command(path: str, pattern: str, *, context: int, regex: bool, glob: str | None,
                  ignore_case: bool, tool: str = "auto") -> str:
    """A POSIX-sh command that checks the path, picks rg or grep, and searches."""
    q = quote
    ctx = int(context)
    if ctx < 0:
        raise UsageError(f"context must be >= 0, not {ctx}")
    both = ["-i"] * ignore_case + ["-C", str(ctx)] * bool(ctx)
    rg_cmd = " ".join(["rg", "--no-heading", "--with-filename", "--line-number", "--null", "--color", "never", "-uu",
                       *["-F"] * (not regex), *both])
    gr_cmd = " ".join(["grep", "-nHZI", "--color=never", "-E" if regex else "-F", *both])
    rg_glob = f" -g {q(glob)}" if glob else ""
    gr_glob = f" --include={q(glob)}" if glob else ""
    tail = f"-- {q(pattern)} \"$p\""
    use_rg = {"auto": "command -v rg >/dev/null 2>&1", "rg": "true", "grep": "false"}[tool]
    return (
        f"p={q(path)}; "
        f"if [ ! -e \"$p\" ]; then echo 'no such file or directory' >&2; exit {EXIT_MISSING}; fi; "
        f"if [ ! -r \"$p\" ]; then echo 'permission denied' >&2; exit {EXIT_UNREADABLE}; fi; "
        f"if {use_rg}; then echo '{TOOL_MARK} rg' >&2; "
        f"if [ -d \"$p\" ]; then {rg_cmd}{rg_glob} {tail}; else {rg_cmd} {tail}; fi; "
        f"else echo '{TOOL_MARK} grep' >&2; "
        f"if [ -d \"$p\" ]; then {gr_cmd} -r{gr_glob} {tail}; else {gr_cmd} {tail}; fi; fi"
    )


_LINE = re.compile(r"^(\d+)([:-])(.*)$", re.S)


def _records(stdout: str):
    """(path, 'LINE:TEXT' or 'LINE-TEXT') records. A record is ``PATH\\0LINE[:-]TEXT\\n``: the NUL
    ends the path, the first newline after it ends the text (a line holds none). So a path is taken
    whole, newlines included, instead of splitting the output into lines (a file named ``a\\n.py``
    must not come back as ``.py``). grep's ``--`` context separators stand before a path."""
    pieces = stdout.split("\0")
    path = pieces[0]
    for piece in pieces[1:]:
        rest, nl, after = piece.partition("\n")
        yield path, rest
        if not nl:
            break
        while after.startswith("--\n"):
            after = after[3:]
        path = after


def parse_output(stdout: str, context: int, host: str) -> list[Match]:
    """Matches with their context lines, sorted by (path, line): rg walks directories in parallel
    and grep in readdir order, so the tool's own order is not reproducible."""
    per_file: dict[str, dict[int, tuple[bool, str]]] = {}
    for path, rest in _records(stdout):
        m = _LINE.match(rest)
        if not m or not path:
            continue
        per_file.setdefault(path, {})
        n = int(m.group(1))
        is_match = m.group(2) == ":"
        prev = per_file[path].get(n)
        if prev is None or is_match:
            per_file[path][n] = (is_match, m.group(3).rstrip("\r"))
    out = []
    for path in sorted(per_file):
        lines = per_file[path]
        for n in sorted(lines):
            is_match, text = lines[n]
            if not is_match:
                continue
            before = tuple(lines[i][1] for i in range(n - context, n) if i in lines)
            after = tuple(lines[i][1] for i in range(n + 1, n + context + 1) if i in lines)
            out.append(Match(host, path, n, text, before, after))
    return out


def tool_used(stderr: str) -> str | None:
    for line in stderr.splitlines():
        if line.startswith(TOOL_MARK):
            return line[len(TOOL_MARK):].strip()
    return None


def error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith(TOOL_MARK)]
