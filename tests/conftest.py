"""Shared test fixtures. The real-sshd fixture lives in kit.testing so users can reuse it."""
from __future__ import annotations

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
        raise FileNotFoundError(f"shared test data not found at {SHARED_DATA} (expected ../shared/data)")
    return SHARED_DATA
