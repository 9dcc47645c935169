"""Shared test fixtures. The real-sshd fixture lives in kit.testing so users can reuse it."""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from kit.testing import sshd  # noqa: F401  (session fixture: a real OpenSSH sshd on 127.0.0.1)

ROOT = Path(__file__).resolve().parent.parent
# Third-party real data, beside the checkout (never copied into the project).
SHARED_DATA = (ROOT / ".." / "shared" / "data").resolve()
SAMPLE = ROOT / "notebooks" / "sample"
TEST_DATA = ROOT / "tests" / "data"  # small project-made fixtures


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"third-party test data not found at {SHARED_DATA}: these tests read real traces and logs "
                    "from ../shared/data beside the checkout")
    return SHARED_DATA


def stage_readable(*rel_paths: str) -> Path:
    """Copies of checkout paths (relative to ROOT) in a fresh world-readable temporary tree, same
    layout, removed at exit. For tests whose SSH login user (not root) must read project files: the
    checkout may sit where that user cannot enter (a clone in root's 0700 home)."""
    base = Path(tempfile.mkdtemp(prefix="kit-stage-"))
    atexit.register(shutil.rmtree, base, True)
    for rel in rel_paths:
        src, dest = ROOT / rel, base / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", ".kit"))
        else:
            shutil.copy2(src, dest)
    for root, _dirs, files in os.walk(base):
        os.chmod(root, 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    return base
