"""The lower-cased fast path of case-insensitive rules (``_categories.lowered`` / ``fold``) decides as the
regex written: on every kernel and CPU-frame name of the recorded traces and of the shared third-party
traces, and on the patterns whose rewrite could differ (those must not take the fast path)."""
from __future__ import annotations

import gzip
import random
import re
from pathlib import Path

import orjson
import pytest

from kit.profile.attribution._categories import Rule, default_rules, fold, lowered

ROOT = Path(__file__).resolve().parents[2]
OWN = sorted((ROOT / "tests" / "data" / "traces").glob("*/trace.json.gz"))
SHARED = ROOT.parent / "shared" / "data" / "traces"


def _names(path: Path) -> set[str]:
    """Every event name of one gzipped or plain Kineto trace (kernels, ops, modules, python frames)."""
    raw = path.read_bytes()
    doc = orjson.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    evs = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    return {e["name"] for e in evs if isinstance(e, dict) and isinstance(e.get("name"), str)}


@pytest.fixture(scope="module")
def real_names() -> set[str]:
    names: set[str] = set()
    for p in OWN:
        names |= _names(p)
    shared = sorted(SHARED.rglob("*.json.gz"))[:12] if SHARED.is_dir() else []
    for p in shared:
        if p.stat().st_size < 40 << 20:
            names |= _names(p)
    assert len(names) > 2000, "too few names to check the fast path on"
    return names


def test_packaged_rules_decide_alike_on_real_names(real_names):
    folded = [r for r in default_rules() if r.compiled()[1] is not None]
    assert len(folded) >= 15, "the packaged kernel-name rules should take the fast path"
    subjects = real_names | {n.rsplit("): ", 1)[-1] for n in real_names} | {n[len("nn.Module: "):] for n in real_names}
    diff = [(r.pattern[:40], n[:80]) for r in folded for n in subjects
            if r.matches(n) != r.matches(n, fold(n))]
    assert diff == []


@pytest.mark.parametrize("pattern", [
    "(?i)[A-z]x", r"(?i)foo\x41", "(?i)a(?-i:B)", "(?i)[]A]x", "(?i)[^]A]x", r"(?i)[\d-z]", r"(?i)(a)\1",
    "(?ix) a b", "(?i)\u00e9t\u00e9",
])
def test_rewrites_that_could_differ_are_not_taken(pattern):
    assert lowered(pattern) is None


@pytest.mark.parametrize("pattern", [
    r"(?i)gemm(?!a)|Cijk_|\bMatMul\b", r"(?i)^\S+_KERNEL[0-9A-F]{2}$", r"(?i)[^A-Z]x[A-F]", r"(?i)flash_?(?:fwd|bwd)",
    r"(?i)(?P<Head>rms)_?norm(?=\W|$)", r"(?i)\w+::(?:mm|BMM)\s",
])
def test_foldable_patterns_decide_alike_on_random_ascii(pattern):
    r = Rule("x", pattern)
    assert r.compiled()[1] is not None
    rng = random.Random(7)
    alphabet = "abcfgijklmnoprstuwxyzABCFGIJKLMNOPRSTUWXYZ0123456789_:- ()\t"
    words = re.findall(r"[A-Za-z_]{2,}", pattern) or ["x"]
    for _ in range(3000):
        parts = [rng.choice([rng.choice(words), "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))])
                 for _ in range(rng.randint(1, 5))]
        s = "".join(p.swapcase() if rng.random() < 0.3 else p for p in parts)
        assert r.matches(s) == r.matches(s, fold(s)), s


def test_non_ascii_names_are_searched_as_written():
    r = Rule("x", "(?i)kelvin")
    assert fold("\u212aelvin") is None          # KELVIN SIGN folds to k only under (?i)
    assert r.matches("\u212aelvin", fold("\u212aelvin"))


def test_every_packaged_pattern_compiles_and_user_patterns_are_checked_when_given(tmp_path):
    """Patterns compile when first used; a bad packaged one would fail here, a bad user one at once."""
    from kit.errors import ParseError
    from kit.profile.attribution._categories import build_rules

    for r in default_rules():
        r.compiled()
    with pytest.raises(ParseError, match="not a valid regex"):
        build_rules([("gemm(", "gemm")])
    bad = tmp_path / "rules.toml"
    bad.write_text('[[rule]]\ncategory = "gemm"\npattern = "(?i)gemm["\n')
    with pytest.raises(ParseError, match="rules.toml: rule #1 pattern"):
        build_rules(bad)
