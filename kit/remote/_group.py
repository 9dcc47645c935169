"""HostGroup: run one command on several hosts in parallel; each host's result or error in its own slot."""
from __future__ import annotations

import collections
import contextlib
import html
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

from kit.errors import KitError
from kit.remote._base import Host
from kit.remote._result import Closing, Result
from kit.remote._transfer_report import Fetched, TransferReport
from kit.util import html_fields


class GroupResult:
    """Per-host outcome of ``HostGroup.run``, in the group's order: a :class:`Result` or the exception
    (usually a :class:`RemoteError`) it raised. A dead host never hides the others' results."""

    def __init__(self, cmd: str, slots: list[tuple[str, Result | KitError]]) -> None:
        self.cmd = cmd
        self._slots = slots

    def __iter__(self) -> Iterator[tuple[str, Result | KitError]]:
        return iter(self._slots)

    def __len__(self) -> int:
        return len(self._slots)

    def __getitem__(self, name: str) -> Result | KitError:
        return dict(self._slots)[name]

    @property
    def results(self) -> dict[str, Result]:
        return {h: v for h, v in self._slots if isinstance(v, Result)}

    @property
    def errors(self) -> dict[str, KitError]:
        return {h: v for h, v in self._slots if not isinstance(v, Result)}

    @property
    def ok(self) -> bool:
        """Every host answered and every command exited 0."""
        return all(isinstance(v, Result) and v.ok for _, v in self._slots)

    def to_frame(self):
        """One row per host: exit_code, duration_s, stdout, stderr, error."""
        import pandas as pd  # deferred: kit --help loads kit.remote, never pandas

        columns = ["exit_code", "duration_s", "stdout", "stderr"]
        return pd.DataFrame([{"host": host, **{c: getattr(v, c) for c in columns}, "error": None}
                             if isinstance(v, Result) else
                             {"host": host, **dict.fromkeys(columns), "error": f"{type(v).__name__}: {v}"}
                             for host, v in self._slots], columns=["host", *columns, "error"])

    def __repr__(self) -> str:
        inner = ", ".join(f"{h!r}: exit {v.exit_code}" if isinstance(v, Result) else f"{h!r}: {type(v).__name__}"
                          for h, v in self._slots)
        return f"GroupResult(cmd={self.cmd!r}, {{{inner}}})"

    def _repr_html_(self) -> str:
        rows = []
        for host, v in self._slots:
            if isinstance(v, Result):
                status = f"exit {v.exit_code}"
                text = (v.stdout or v.stderr).strip()[-500:]
            else:
                status = type(v).__name__
                text = str(v)
            rows.append(f"<tr><td>{html.escape(host)}</td><td>{html.escape(status)}</td>"
                        f"<td><pre style='margin:0'>{html.escape(text)}</pre></td></tr>")
        return (f"<table><thead><tr><th>host</th><th>status</th><th>output</th></tr></thead>"
                f"<tbody>{''.join(rows)}</tbody></table>")


class HostGroup(Closing):
    """Several hosts addressed together (``kit.hosts([...])``). Connections open lazily, in parallel."""

    def __init__(self, hosts: list[Host], max_workers: int | None = None) -> None:
        self.hosts = list(hosts)
        self._max_workers = max_workers or max(1, min(32, len(self.hosts)))
        self._pool: ThreadPoolExecutor | None = None

    def __repr__(self) -> str:
        return f"HostGroup({[h.target for h in self.hosts]!r})"

    def _repr_html_(self) -> str:
        return html_fields(f"HostGroup of {len(self.hosts)} hosts",
                           [(f"host {i}", f"{h.name} ({type(h).__name__})") for i, h in enumerate(self.hosts)])

    def _names(self) -> Iterator[str]:
        """The hosts' names, a repeated one numbered (``a``, ``a#2``)."""
        seen: collections.Counter = collections.Counter()
        for h in self.hosts:
            seen[h.name] += 1
            yield h.name if seen[h.name] == 1 else f"{h.name}#{seen[h.name]}"

    def run(self, cmd: str, **kwargs) -> GroupResult:
        """``host.run(cmd, **kwargs)`` on every host at once; errors land in their host's slot."""
        def one(host: Host):
            try:
                return host.run(cmd, **kwargs)
            except Exception as exc:  # noqa: BLE001  any failure stays in this host's slot
                return exc

        return GroupResult(cmd, list(zip(self._names(), self._each(one, self.hosts))))

    def _each(self, fn, *args) -> list:
        """``fn`` over the hosts at once, on the group's threads; results in host order."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._max_workers, thread_name_prefix="kit-hosts")
        return list(self._pool.map(fn, *args))

    def get(self, remote_paths, dest: str, **options):
        """Download the same files (a list, or a glob pattern) from every host at once, each into
        ``dest/<host name>/``, overlapped within a host (``Host.get_many``). One :class:`TransferReport`
        in host order: an unreachable host or a failed file is a row with its error. ``remote_paths`` may
        be a dict ``{host name: paths}``."""
        names = list(self._names())
        t0 = time.perf_counter()

        def one(host: Host, name: str):
            paths = remote_paths.get(name, []) if isinstance(remote_paths, dict) else remote_paths
            try:
                return list(host.get_many(paths, os.path.join(dest, name.replace("/", "_")), **options))
            except Exception as exc:  # noqa: BLE001  a host-wide failure stays in this host's rows
                shown = [paths] if isinstance(paths, str) else list(paths) or ["(no files)"]
                return [Fetched(host.name, p, None, error=exc if isinstance(exc, KitError) else
                                KitError(f"{host.name}: {type(exc).__name__}: {exc}")) for p in shown]

        rows = [row for got in self._each(one, self.hosts, names) for row in got]
        return TransferReport(rows, time.perf_counter() - t0)

    def close(self) -> None:
        for h in self.hosts:
            with contextlib.suppress(Exception):  # closing is best effort
                h.close()
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None
