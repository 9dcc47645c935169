"""The kernel-category rule table: load the packaged ``categories.toml``, merge user rules, classify names.

Five kinds of rule, each ordered, the first ``re.search`` match winning: kernel-name rules
(``[[rule]]``, ``on = ("kernel",)``), module roles (``[[role]]``: what an ``nn.Module`` class is, from
its name's suffix; ``on = ("module",)``), rules on the other CPU frames enclosing a launch
(``[[frame]]``: ops, python functions, ranges; see ``_attribution.py``), unfused op sequences
(``[[sequence]]``, ``on = ("sequence",)``: regexes over the names of a thread's outermost ops, see
``_sequences.py``) and rules on the op list of inductor's fused Triton kernels (``[[fused]]``,
``on = ("fused",)``). A name no rule matches is ``other``. ``generic = true`` marks a frame rule whose
op says little (``mm``, ``topk``): an enclosing frame with a meaning (an SDPA op, a module role)
beats it; ``container = true`` makes a frame override what it encloses, except the categories in
its ``keep`` list (an SSM mixer keeps its projections as GEMMs).
User rules (a TOML file with ``[[rule]]`` tables, or Python ``(pattern, category)`` pairs / dicts)
are tried before the packaged ones; a file with ``replace = true`` replaces the packaged table.
Classification runs once per distinct kernel name, so it costs nothing on large traces.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from functools import lru_cache
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
FRAME_KINDS = {"op", "module", "function", "range"}
# changes whenever the attribution code decides differently for the same rules (cache keys)
ATTRIBUTION_VERSION = "3"  # 2: roles, generic ops, containers, sequences; 3: ssm rules, layer kinds
PACKAGED = "kit/profile/categories.toml"   # the source of the packaged rules (all others are the user's)


@dataclass(frozen=True)
class Rule:
    """One row of the table: a regex searched in the kernel name, and the category it assigns."""

    category: str
    pattern: str
    note: str = ""
    source: str = "kit"
    on: tuple = ("kernel",)
    container: bool = False
    kinds: tuple = ()
    generic: bool = False
    keep: tuple = ()
    role: str = ""

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
    for table, default_on in (("rule", ("kernel",)), ("role", ("module",)),
                              ("frame", ("op", "module", "function", "range")), ("sequence", ("sequence",)),
                              ("fused", ("fused",))):
        for i, r in enumerate(doc.get(table, [])):
            if not isinstance(r, dict) or "category" not in r or "pattern" not in r:
                raise ParseError(f"{source}: {table} #{i + 1} needs 'category' and 'pattern'", path=source)
            on = tuple(r.get("on", default_on)) if table == "frame" else default_on
            bad = set(on) - FRAME_KINDS if table == "frame" else set()
            if bad:
                raise ParseError(f"{source}: frame #{i + 1}: 'on' must name {sorted(FRAME_KINDS)}, not {sorted(bad)}",
                                 path=source)
            try:
                rules.append(Rule(str(r["category"]), str(r["pattern"]), str(r.get("note", "")), source, on,
                                  bool(r.get("container", False)), tuple(r.get("kinds", ())),
                                  bool(r.get("generic", False)), tuple(r.get("keep", ())),
                                  str(r.get("role", r["category"] if table == "role" else ""))))
            except re.error as exc:
                raise ParseError(f"{source}: {table} #{i + 1} pattern {r['pattern']!r} is not a valid regex ({exc})",
                                 path=source) from None
    return rules, bool(doc.get("replace", False))


def default_rules() -> list[Rule]:
    """The packaged table (``kit/profile/categories.toml``), in order (a new list each call)."""
    return list(_packaged())


@lru_cache(maxsize=1)
def _packaged() -> tuple[Rule, ...]:
    """The packaged table, read and compiled once per process (``Rule`` is frozen): the CLI asks for it
    twice (prefetch's cache key, then the load), ~15 ms each time."""
    text = resources.files("kit.profile").joinpath("categories.toml").read_text(encoding="utf-8")
    return tuple(_rules_from_toml(text, PACKAGED)[0])


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
    rules = [r for r in rules if "kernel" in r.on]
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


def rules_ident(rules: Sequence[Rule]) -> str:
    """A text that changes whenever a rule that can change a category changes (cache keys)."""
    return ATTRIBUTION_VERSION + "\n" + "\n".join(
        f"{r.category}\t{r.pattern}\t{','.join(r.on)}\t{int(r.container)}\t{','.join(r.kinds)}\t{int(r.generic)}"
        f"\t{','.join(r.keep)}\t{r.role}" for r in rules)


def category_order(rules: Sequence[Rule]) -> list[str]:
    """Categories in table order (for stable plots/tables), ``other`` last."""
    seen: list[str] = []
    for r in rules:
        if r.category not in seen:
            seen.append(r.category)
    return seen + [OTHER]
