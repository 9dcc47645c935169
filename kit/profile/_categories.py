"""The kernel-category rule table: load the packaged ``categories.toml``, merge user rules, classify names.

Rules are ordered and the first ``re.search`` match wins; a name no rule matches is ``other``.
User rules (a TOML file with ``[[rule]]`` tables, or Python ``(pattern, category)`` pairs / dicts)
are tried before the packaged ones; a file with ``replace = true`` replaces the packaged table.
Classification runs once per distinct kernel name, so it costs nothing on large traces.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Iterable, Sequence, Union

from kit.errors import ParseError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

OTHER = "other"
COMM = ("allreduce", "other-collectives")


@dataclass(frozen=True)
class Rule:
    """One row of the table: a regex searched in the kernel name, and the category it assigns."""

    category: str
    pattern: str
    note: str = ""
    source: str = "kit"

    def __post_init__(self) -> None:
        object.__setattr__(self, "_rx", re.compile(self.pattern))

    def matches(self, name: str) -> bool:
        return self._rx.search(name) is not None  # type: ignore[attr-defined]


RulesArg = Union[None, str, Path, Sequence]


def _rules_from_toml(text: str, source: str) -> tuple[list[Rule], bool]:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ParseError(f"{source}: invalid TOML rule table ({exc})", path=source) from None
    rules = []
    for i, r in enumerate(doc.get("rule", [])):
        if not isinstance(r, dict) or "category" not in r or "pattern" not in r:
            raise ParseError(f"{source}: rule #{i + 1} needs 'category' and 'pattern'", path=source)
        try:
            rules.append(Rule(str(r["category"]), str(r["pattern"]), str(r.get("note", "")), source))
        except re.error as exc:
            raise ParseError(f"{source}: rule #{i + 1} pattern {r['pattern']!r} is not a valid regex ({exc})",
                             path=source) from None
    return rules, bool(doc.get("replace", False))


def default_rules() -> list[Rule]:
    """The packaged table (``kit/profile/categories.toml``), in order."""
    text = resources.files("kit.profile").joinpath("categories.toml").read_text(encoding="utf-8")
    return _rules_from_toml(text, "kit/profile/categories.toml")[0]


def build_rules(rules: RulesArg = None) -> list[Rule]:
    """Packaged rules, with user rules (file path or list of (pattern, category) / dicts) in front."""
    base = default_rules()
    if rules is None:
        return base
    if isinstance(rules, (str, Path)):
        p = Path(rules)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise ParseError(f"{p}: cannot read rule file ({exc.strerror or exc})", path=str(p)) from None
        user, replace = _rules_from_toml(text, str(p))
        return user if replace else user + base
    user = []
    for item in rules:
        if isinstance(item, Rule):
            user.append(item)
        elif isinstance(item, dict):
            user.append(Rule(item["category"], item["pattern"], item.get("note", ""), "user"))
        else:
            pattern, category = item
            try:
                user.append(Rule(category, pattern, "", "user"))
            except re.error as exc:
                raise ParseError(f"rule {pattern!r}: not a valid regex ({exc})") from None
    return user + base


def categorise(names: Iterable[str], rules: Sequence[Rule]) -> dict[str, str]:
    """Map each distinct name to its category (first matching rule, else ``other``)."""
    out: dict[str, str] = {}
    for n in names:
        if n in out:
            continue
        cat = OTHER
        for r in rules:
            if r.matches(n):
                cat = r.category
                break
        out[n] = cat
    return out


def category_order(rules: Sequence[Rule]) -> list[str]:
    """Categories in table order (for stable plots/tables), ``other`` last."""
    seen: list[str] = []
    for r in rules:
        if r.category not in seen:
            seen.append(r.category)
    return seen + [OTHER]
