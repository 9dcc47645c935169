"""Files: atomic writes, the cache folder, programs shipped to hosts (real ``.py`` files in ``_host/`` folders)."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path


def cache_home() -> Path:
    """The kit's cache folder, one rule for every cache: ``$KIT_CACHE_DIR``, else ``$XDG_CACHE_HOME`` or
    ``~/.cache``, then ``decode-kit``."""
    root = os.environ.get("KIT_CACHE_DIR")
    return Path(root) if root else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "decode-kit"


def write_atomic(path: "os.PathLike[str] | str", text: str, *, prefix: str | None = None, fsync: bool = False) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory and ``os.replace``:
    readers see the old file or the new one, never half of one, and a failed write leaves the old
    file as it was and no temporary file behind. The file keeps its mode (0644 when new)."""
    import tempfile  # deferred: start-up (it brings shutil and random; only a write needs it)

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=prefix or f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def host_program(package: str, name: str, call: str) -> str:
    """The source of a program the kit ships to hosts, ``<package>/_host/<name>``, a real ``.py`` file
    (linted and read like any other), followed by the line ``call`` whose value ``Host.python`` returns."""
    from importlib import resources  # deferred: start-up (every command imports kit.util; few ship programs)

    text = resources.files(package).joinpath("_host", name).read_text(encoding="utf-8")
    return text.rstrip("\n") + "\n\n" + call + "\n"
