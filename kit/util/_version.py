"""decode-kit's version, in one place: ``kit.__version__`` and every module that writes it read it here."""
from __future__ import annotations

VERSION = "0.1.0"


def kit_version() -> str:
    """decode-kit's version, for modules that must not import the ``kit`` package."""
    return VERSION
