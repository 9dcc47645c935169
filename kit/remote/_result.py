"""Result and FileStat: the records that host calls return (one command's outcome; one path's metadata)."""
from __future__ import annotations

import html
from dataclasses import dataclass

from kit.util import clip


class Closing:
    """``with x: ...`` closes ``x`` at the end (hosts, groups, forwards)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass(frozen=True)
class Result:
    """The outcome of one command on one host. ``ok`` is ``exit_code == 0``.

    ``stdout``/``stderr`` are decoded as UTF-8 with invalid bytes replaced: the whole output, or its
    tail when it went to a file or was streamed (see :meth:`kit.remote.Host.run`). ``stdout_bytes``/
    ``stderr_bytes`` count every byte written, ``truncated`` says either text is only a tail.
    ``exit_code`` follows the shell (128+N when killed by signal N); -1 when an SSH server reported none."""

    cmd: str
    host: str
    stdout: str
    stderr: str
    exit_code: int
    duration_s: float
    stdout_bytes: int | None = None
    stderr_bytes: int | None = None
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def __repr__(self) -> str:
        kept = ""
        if self.truncated:
            kept = f", tail of stdout_bytes={self.stdout_bytes}, stderr_bytes={self.stderr_bytes}"
        return (f"Result(host={self.host!r}, cmd={clip(self.cmd)!r}, exit_code={self.exit_code}, "
                f"duration_s={self.duration_s:.3f}, stdout={clip(self.stdout)!r}, stderr={clip(self.stderr)!r}{kept})")

    def _repr_html_(self) -> str:
        colour = "#2e7d32" if self.ok else "#c62828"
        parts = [f"<div><b>{html.escape(self.host)}</b> <code>{html.escape(clip(self.cmd, 200))}</code> "
                 f"<span style='color:{colour}'>exit {self.exit_code}</span> in {self.duration_s:.3f} s</div>"]
        for label, text, total in (("stdout", self.stdout, self.stdout_bytes),
                                   ("stderr", self.stderr, self.stderr_bytes)):
            if text:
                size = f"{len(text)} chars"
                if self.truncated and total is not None:
                    size += f", the tail of {total} bytes"
                parts.append(f"<details{' open' if label == 'stdout' or not self.ok else ''}><summary>{label} "
                             f"({size})</summary><pre>{html.escape(_tail(text))}</pre></details>")
        return "".join(parts)


@dataclass(frozen=True)
class FileStat:
    """What ``host.stat(path)`` found: size in bytes, mtime (epoch seconds), directory flag, mode bits."""

    path: str
    size: int
    mtime: float
    is_dir: bool
    mode: int

    def __repr__(self) -> str:
        return (f"FileStat(path={self.path!r}, size={self.size}, mtime={self.mtime:.3f}, "
                f"is_dir={self.is_dir}, mode={oct(self.mode)})")


def _tail(text: str, n: int = 4000) -> str:
    return text if len(text) <= n else "...\n" + text[-n:]
