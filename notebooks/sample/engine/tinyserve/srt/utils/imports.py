"""Optional-dependency probes for the stand-in engine (no import side effects)."""

from __future__ import annotations

import importlib.util
import os


def is_package_available(name: str) -> bool:
    """True when ``name`` could be imported here, without importing it.

    ``TINYSERVE_ASSUME_PACKAGES`` (comma-separated) forces packages to count as present, so a
    host without them can still evaluate the same branches as a GPU host that has them.
    """
    forced = {p.strip() for p in os.environ.get("TINYSERVE_ASSUME_PACKAGES", "").split(",") if p.strip()}
    if name in forced:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
