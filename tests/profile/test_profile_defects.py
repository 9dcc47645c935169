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



def test_make_clean_removes_the_real_profile_cache(tmp_path, monkeypatch):
    """``make clean`` removes the cache kit.profile writes ($KIT_CACHE_DIR or ~/.cache/decode-kit), not only
    a ``.kit-cache`` folder it never used (issue 16). Run on a copy of the Makefile in a scratch folder."""
    import os
    import shutil
    import subprocess

    from kit.profile.reading._cache import cache_dir
    from tests.conftest import ROOT

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    work = tmp_path / "checkout"
    work.mkdir()
    shutil.copy(ROOT / "Makefile", work / "Makefile")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    for name, value in (("KIT_CACHE_DIR", str(tmp_path / "kc")), ("HOME", str(tmp_path / "home"))):
        monkeypatch.delenv("KIT_CACHE_DIR", raising=False)
        monkeypatch.setenv(name, value)
        cache = cache_dir()  # where kit.profile writes under this environment
        (cache / "abc").mkdir(parents=True)
        (cache / "abc" / "meta.json").write_text("{}")
        done = subprocess.run(["make", "-f", "Makefile", "clean"], cwd=work, env=dict(os.environ),
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert not cache.exists(), f"make clean left {cache} ({name}={value})"
        assert cache.parent.exists()  # only the kit's own folder goes
