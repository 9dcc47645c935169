"""Defects found in use (issue 16), each pinned by a test that failed before its fix."""
from __future__ import annotations

import pytest


def test_profile_summary_of_an_unknown_phase_is_a_kit_error():
    import kit.profile
    from kit.errors import KitError, UsageError
    from tests.conftest import SAMPLE

    prof = kit.profile.load(sorted((SAMPLE / "traces" / "tp1_graph").glob("rank*.trace.json.gz")))
    with pytest.raises(KitError, match=r"phase must be one of all, decode, prefill, not 'bogus'") as info:
        prof.summary("bogus")
    assert isinstance(info.value, UsageError) and isinstance(info.value, ValueError)
