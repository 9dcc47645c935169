"""Every exception decode-kit raises, in one tree under :class:`KitError` (each class says when it is raised).

Each message is one line that names the host, file or command involved and what was wrong,
so a failing notebook cell says what to fix without a traceback dive.
"""
from __future__ import annotations

from typing import Any

__all__ = ["KitError", "RemoteError", "ConnectError", "AuthError", "HostKeyError", "CommandTimeout", "CommandFailed",
           "RemoteFileError", "SourceError", "ParseError", "TraceError", "LogFormatError", "ModelError", "UsageError",
           "LedgerError", "SessionError", "ServerError", "BenchError", "ExperimentError", "CacheError", "ReportError",
           "NotebookFailed"]


class KitError(Exception):
    """Base class of every error decode-kit raises on purpose. Keyword arguments set the fields a class
    declares (``RemoteError(msg, host=...)``); a field not given keeps its class default."""

    def __init__(self, *args: Any, **fields: Any) -> None:
        super().__init__(*args)
        declared = {n for c in type(self).__mro__ for n in getattr(c, "__annotations__", {})}
        for name, value in fields.items():
            if name not in declared:
                raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument {name!r}")
            setattr(self, name, value)


class RemoteError(KitError):
    """Something went wrong running on, or talking to, a host."""

    host: str | None = None


class ConnectError(RemoteError):
    """The host could not be reached (DNS, refused, timeout, jump host)."""


class AuthError(RemoteError):
    """The host refused every credential offered."""


class HostKeyError(RemoteError):
    """The host's key is unknown (refused by default) or changed (always refused)."""

    fingerprint: str | None = None


class CommandTimeout(RemoteError):
    """A command outlived its timeout; it was killed on the host. Partial output attached."""

    cmd: str | None = None
    stdout: str = ""
    stderr: str = ""
    timeout: float | None = None


class CommandFailed(RemoteError):
    """``check=True`` and the command exited non-zero. The :class:`Result` is attached."""

    result: Any = None


class RemoteFileError(RemoteError):
    """A path on a host is missing, a directory, unreadable or otherwise unusable."""

    path: str | None = None


class SourceError(KitError):
    """Source slicing could not do what was asked (binary file, bad range, unknown symbol)."""


class ParseError(KitError):
    """An input file is not what its parser reads. ``path`` names the file."""

    path: str | None = None


class TraceError(ParseError):
    """A profiler trace or nsys export could not be read."""


class LogFormatError(ParseError):
    """A serving log or benchmark output could not be read."""


class ModelError(KitError):
    """An analytical model was given impossible or missing parameters."""


class UsageError(KitError, ValueError):
    """A kit call was given an argument it does not take (``prof.summary("bogus")``); the message
    lists the values it takes. Also a ValueError, for callers that caught that before."""


class LedgerError(KitError):
    """The hypothesis ledger file is unreadable, or a verdict is not allowed."""


class SessionError(KitError):
    """A session directory or its provenance manifest is missing or damaged."""


class ServerError(KitError):
    """A live server did not start, died (``tail`` holds its log's last lines), or its profiler failed."""

    host: str | None = None
    tail: str = ""


class BenchError(KitError):
    """A benchmark could not reach the server, or every request failed. The message names the URL."""


class ExperimentError(KitError):
    """An experiment's matrix is invalid, or its stored state cannot be resumed."""


class CacheError(KitError):
    """The profile cache directory is not this user's own (another user's, a symlink another user
    planted, not a directory): its entries could be forged, so it is never read or written."""


class ReportError(KitError):
    """Report generation failed (export, assets, output directory)."""


class NotebookFailed(ReportError):
    """A notebook raised while the report ran; names the notebook and the failing cell."""

    notebook: str | None = None
    cell: int | None = None
