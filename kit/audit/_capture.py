"""capture_settings: save what a live engine reports about itself, for the audit to read later:
``server_info.json`` (SGLang's ``GET /get_server_info``, the arguments after the engine's own
decisions) and ``environ`` (the engine process's ``/proc/PID/environ`` on its host)."""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

from kit.env import parse_environ
from kit.errors import KitError
from kit.redact import mask_secrets
from kit.remote import connect


def capture_settings(url: str | None, into: str | Path, *, host=None, pid: int | None = None,
                     timeout: float = 10.0) -> dict:
    """Write ``server_info.json`` from ``url``'s ``/get_server_info`` and ``environ`` from the engine
    process ``pid`` on ``host`` (``kit.connect`` target or Host; the process's children are tried first,
    since a launcher shell starts the engine) into the folder ``into``. Returns what was written or why
    not (``{"server_info": path | reason, "environ": path | reason}``); never raises for an engine that
    does not answer."""
    d = Path(into)
    d.mkdir(parents=True, exist_ok=True)
    out: dict = {}
    if url:
        try:
            with urllib.request.urlopen(url.rstrip("/") + "/get_server_info", timeout=timeout) as r:
                info = json.loads(r.read())
            (d / "server_info.json").write_text(json.dumps(info, indent=1, default=str) + "\n", encoding="utf-8")
            out["server_info"] = str(d / "server_info.json")
        except (OSError, ValueError, urllib.error.URLError) as exc:
            out["server_info"] = f"{url}/get_server_info: {exc}"
    if pid is not None and host is not None:
        h = connect(host) if isinstance(host, str) else host
        why = "no process"
        try:   # the process's children first: a launcher shell's child is the engine
            res = h.run(f"ps -o pid= --ppid {int(pid)}", timeout=30)
            kids = [int(x) for x in res.stdout.split() if x.isdigit()] if res.ok else []
        except KitError:
            kids = []
        for p in [*kids, int(pid)]:
            try:
                data = h.read_bytes(f"/proc/{p}/environ")
            except KitError as exc:
                why = str(exc)
                continue
            if data:
                # secrets never leave as values: the house's credential names (kit.redact) keep their key only
                env = mask_secrets(parse_environ(data, prefix=""))
                text = "".join(f"{k}={v}\0" for k, v in env.items())
                (d / "environ").write_bytes(text.encode("utf-8", "surrogateescape"))
                out["environ"] = str(d / "environ")
                out["environ_pid"] = p
                break
        else:
            out["environ"] = f"/proc/PID/environ of {pid} not read ({why})"
    return out
