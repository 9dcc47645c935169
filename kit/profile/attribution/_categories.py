"""The kernel-category rule table: load the packaged ``categories.toml``, merge user rules, classify names.

Five kinds of rule, each ordered, the first ``re.search`` match winning: kernel names (``[[rule]]``), module
roles (``[[role]]``: an ``nn.Module`` class by its name's suffix), the other CPU frames around a launch
(``[[frame]]``: ops, python functions, ranges), unfused op sequences (``[[sequence]]``, ``_sequences.py``) and
the op lists of inductor's fused Triton kernels (``[[fused]]``); ``on`` says which. A name no rule matches is
``other``; ``generic``, ``container`` and ``keep`` weigh a frame rule against the frames around it
(``_attribution.py``). User rules (a TOML file of ``[[rule]]`` tables, ``(pattern, category)`` pairs or
dicts) are tried first; a file with ``replace = true`` replaces the packaged table. Names are classified
once per distinct name.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path
from typing import Iterable, Sequence, Union

from kit.errors import ParseError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# category names the code decides by (the rest are data: categories.toml)
OTHER = "other"
ALLREDUCE, OTHER_COLLECTIVES = "allreduce", "other-collectives"
COMM = (ALLREDUCE, OTHER_COLLECTIVES)
MEMCPY = "memcpy/memset"
GEMM, ATTENTION, MOE = "gemm", "attention", "moe"
FRAME_KINDS = {"op", "module", "function", "range"}
# changes whenever the attribution code decides differently for the same rules (cache keys)
ATTRIBUTION_VERSION = "3"  # 2: roles, generic ops, containers, sequences; 3: ssm rules, layer kinds
PACKAGED = "kit/profile/categories.toml"   # the source of the packaged rules (all others are the user's)


@dataclass(frozen=True)
class Rule:
    """One row of the table: a regex searched in a name, and the category it assigns."""

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

    def compiled(self) -> tuple[re.Pattern, re.Pattern | None]:
        """The pattern and its :func:`lowered` form (or None), each compiled on first use (the cache key,
        ``rules_ident``, compiles nothing); ``re.error`` for an invalid pattern."""
        return self._regex, self._lowered

    @cached_property
    def _regex(self) -> re.Pattern:
        return re.compile(self.pattern)

    @cached_property
    def _lowered(self) -> re.Pattern | None:
        return lowered(self.pattern)

    def matches(self, name: str, low: str | None = None) -> bool:
        """Whether the pattern is found in ``name``. ``low``: ``fold(name)``, given by callers that test
        one name against many rules (a case-insensitive rule then searches it without ``(?i)``)."""
        if low is not None and self._lowered is not None:
            return self._lowered.search(low) is not None
        return self._regex.search(name) is not None


# inline flags after the leading (?i), escapes of characters by code, octal escapes and backreferences; a class
# starting with a literal ] ([]..], [^]..]); a class (maybe a literal \[ too: only ever a slower search) and its ranges
_NOT_FOLDABLE = re.compile(r"\\(?:[xuUN0-9])|\(\?[aiLmsux-]|\[\^?\]")
_CLASS = re.compile(r"\[\^?((?:\\.|[^\\\]])*)\]")
_RANGE = re.compile(r"(\\.|[^\\])-(\\.|[^\\])")
# what the rewrite keeps as written: escapes, a group's name and its backreference
_TOKEN = re.compile(r"\\.|\(\?P<[^>]*>|\(\?P=[^)]*\)|[^\\(]+|\(", re.S)


def lowered(pattern: str) -> re.Pattern | None:
    """``pattern`` (a ``(?i)`` regex) compiled for ASCII text already lower-cased (``fold``), or None.

    Why: ``(?i)`` alternations of literals over long kernel names (a ROCm ``Cijk_`` name runs to 5,000
    characters) are ~7x slower in ``re`` than the same regex lower-cased over lower-cased text
    (``bench/reader_choices.py``: kernel categorisation ~46 ms -> ~6 ms per load). For ASCII pattern
    and text the two decide alike: literals are lowered, escapes (``\\S``, ``\\W``) kept; a pattern the
    rewrite could change (other inline flags, ``\\x41``, a class range like ``[A-z]``) gets None and is
    searched as written."""
    body = pattern[4:]
    if not pattern.startswith("(?i)") or not pattern.isascii() or _NOT_FOLDABLE.search(body):
        return None
    for cls in _CLASS.finditer(body):   # [A-z], [0-Z], an escape as an end: the lowered class could differ
        if "(?P" in cls.group(1) or any(
                lo[0] == "\\" or hi[0] == "\\" or not (lo.isalpha() and hi.isalpha() and lo.islower() == hi.islower()
                                                  or lo.isdigit() and hi.isdigit())
                for lo, hi in _RANGE.findall(cls.group(1))):
            return None
    try:
        return re.compile(_TOKEN.sub(lambda m: m[0] if m[0].startswith(("\\", "(?P")) else m[0].lower(), body))
    except re.error:
        return None


def fold(name: str) -> str | None:
    """``name`` lower-cased for :meth:`Rule.matches`, or None when it is not ASCII (searched as written)."""
    return name.lower() if name.isascii() else None


RulesArg = Union[None, str, Path, Sequence]


def _rules_from_doc(doc: dict, source: str) -> list[Rule]:
    rules = []
    for table, default_on in (("rule", ("kernel",)), ("role", ("module",)),
                              ("frame", ("op", "module", "function", "range")), ("sequence", ("sequence",)),
                              ("fused", ("fused",))):
        for i, r in enumerate(doc.get(table, [])):
            if not isinstance(r, dict) or "category" not in r or "pattern" not in r:
                raise ParseError(f"{source}: {table} #{i + 1} needs 'category' and 'pattern'", path=source)
            on = tuple(r.get("on", default_on)) if table == "frame" else default_on
            if table == "frame" and (bad := set(on) - FRAME_KINDS):
                raise ParseError(f"{source}: frame #{i + 1}: 'on' must name {sorted(FRAME_KINDS)}, not {sorted(bad)}",
                                 path=source)
            rule = Rule(str(r["category"]), str(r["pattern"]), str(r.get("note", "")), source, on,
                        bool(r.get("container", False)), tuple(r.get("kinds", ())), bool(r.get("generic", False)),
                        tuple(r.get("keep", ())), str(r.get("role", r["category"] if table == "role" else "")))
            rules.append(rule)
            try:
                if source != PACKAGED:   # the packaged patterns compile when first used (tests compile all)
                    rule.compiled()
            except re.error as exc:
                raise ParseError(f"{source}: {table} #{i + 1} pattern {r['pattern']!r} is not a valid regex ({exc})",
                                 path=source) from None
    return rules


def default_rules() -> list[Rule]:
    """The packaged table (``kit/profile/categories.toml``), in order (a new list each call)."""
    return list(_packaged())


def category_colours() -> dict[str, str]:
    """Category -> colour, from the packaged table's ``[[category]]`` entries (how ``kit.plots`` draws
    each category): a new category's colour is one TOML entry, not a code change."""
    return {str(c["name"]): str(c["colour"]) for c in _doc().get("category", [])}


@lru_cache(maxsize=1)
def _doc() -> dict:
    return tomllib.loads(resources.files("kit.profile").joinpath("categories.toml").read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _packaged() -> tuple[Rule, ...]:
    """The packaged table, read once per process: the CLI asks for it twice (prefetch's cache key, the load)."""
    return tuple(_rules_from_doc(_doc(), PACKAGED))


@dataclass(frozen=True)
class Structure:
    """A model's structure by the packaged ``[[role]]`` and ``[[category]]`` entries: the roles that name a
    layer's kind, in order; (block role, category or ``*`` or ``gemm:before``/``gemm:after``) -> operation
    family; role -> the category its GEMMs are placed around; category -> (family in a layer, outside)."""

    kind_order: tuple[str, ...]
    families: dict
    anchors: dict
    category_family: dict

    def family_of_category(self, category: str, in_layer: bool) -> str:
        """A category's family where no block role claims the kernel; a category the table does not
        describe (a user's) is its own family, never ``other`` unsaid."""
        inside, outside = self.category_family.get(category, (category, category))
        return inside if in_layer else outside


@lru_cache(maxsize=1)
def structure() -> Structure:
    """The packaged table's :class:`Structure`."""
    doc = _doc()
    roles = [r for r in doc.get("role", []) if "role" in r]
    kinds = tuple(r["role"] for r in sorted((r for r in roles if "layer_kind" in r), key=lambda r: r["layer_kind"]))
    families = {(r["role"], key): fam for r in roles for key, fam in r.get("families", {}).items()}
    anchors = {r["role"]: r["anchor"] for r in roles if "anchor" in r}
    cats = {c["name"]: (c["family"], c.get("outside", c["family"])) for c in doc.get("category", []) if "family" in c}
    return Structure(kinds, families, anchors, cats)


@lru_cache(maxsize=4096)
def role_of(cls) -> str:
    """The role of an ``nn.Module`` class name by the packaged ``[[role]]`` rules (its name's suffix), or
    ``''`` (no rule claims it, or not a name)."""
    if not isinstance(cls, str) or not cls:
        return ""
    low = fold(cls)
    return next((r.role for r in _packaged() if "module" in r.on and r.role and r.matches(cls, low)), "")


def layer_kind(roles) -> str:
    """What a layer is from the roles found inside it: those of :attr:`Structure.kind_order` present,
    joined in that order (``attention+moe``), or ``other``."""
    got = [r for r in structure().kind_order if r in roles]
    return "+".join(got) if got else OTHER


def build_rules(rules: RulesArg = None) -> list[Rule]:
    """Packaged rules, with user rules (file path or list of (pattern, category) / dicts) in front."""
    base = default_rules()
    if rules is None:
        return base
    if isinstance(rules, (str, Path)):
        p = Path(rules)
        try:
            doc = tomllib.loads(p.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ParseError(f"{p}: cannot read rule file ({exc.strerror or exc})", path=str(p)) from None
        except tomllib.TOMLDecodeError as exc:
            raise ParseError(f"{p}: invalid TOML rule table ({exc})", path=str(p)) from None
        user = _rules_from_doc(doc, str(p))
        return user if doc.get("replace", False) else user + base
    user = []
    for item in rules:
        rule = item if isinstance(item, Rule) else \
            Rule(item["category"], item["pattern"], item.get("note", ""), "user") if isinstance(item, dict) else \
            Rule(item[1], item[0], "", "user")   # (pattern, category)
        try:
            rule.compiled()
        except re.error as exc:
            raise ParseError(f"rule {rule.pattern!r}: not a valid regex ({exc})") from None
        user.append(rule)
    return user + base


def categorise(names: Iterable[str], rules: Sequence[Rule]) -> dict[str, str]:
    """Map each distinct name to its category (first matching rule, else ``other``)."""
    rules = [r for r in rules if "kernel" in r.on]
    out: dict[str, str] = {}
    for n in dict.fromkeys(names):
        low = fold(n)
        out[n] = next((r.category for r in rules if r.matches(n, low)), OTHER)
    return out


def rules_ident(rules: Sequence[Rule]) -> str:
    """A text that changes whenever a rule that can change a category changes (cache keys)."""
    return ATTRIBUTION_VERSION + "\n" + "\n".join(
        f"{r.category}\t{r.pattern}\t{','.join(r.on)}\t{int(r.container)}\t{','.join(r.kinds)}\t{int(r.generic)}"
        f"\t{','.join(r.keep)}\t{r.role}" for r in rules)


def category_order(rules: Sequence[Rule]) -> list[str]:
    """Categories in table order (for stable plots/tables), ``other`` last."""
    return [*dict.fromkeys(r.category for r in rules), OTHER]
