"""Speculative-decoding acceptance, normalised across engines and versions (private to ``kit.logs``).

Every record ends up with: engine, version, ``k`` (draft tokens per verify step), the **mean
acceptance length including the bonus token** (tokens emitted per verify step, >= 1) and the
**draft acceptance rate excluding the bonus token** (accepted drafts / proposed drafts, a fraction),
plus per-position rates when printed. What the engines print differs:

* SGLang ``accept len`` is always tokens per verify incl. bonus. ``accept rate`` changed meaning:
  <= 0.5.10 it is ``accept len / N`` (N = draft tokens incl. the verified one = k + 1, floor 1/N);
  >= 0.5.11 it is ``(accept len - 1) / (N - 1)``. N comes from the caller's k, the logged
  ``server_args`` or, failing both, from the printed pairs themselves (the N that makes every line
  consistent at the printed 2-decimal precision).
* vLLM V0 ``Speculative metrics``: rate = accepted / draft tokens (fraction), mean length = emitted /
  drafts. V1 ``SpecDecoding metrics``: rate in %, ``Mean acceptance length`` excluded the bonus in
  0.8.5 and includes it from 0.10.1.1; when the per-position list is printed, its sum tells which.

The first window after an idle period has a tiny throughput (the engines divide by wall time since
the previous log line) and is flagged ``after_idle``; summaries exclude it.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from kit.models import spec_from_summary
from kit.util import html_fields

SPEC_COLUMNS = ("time", "line", "engine", "version", "k", "mean_acceptance_length", "draft_acceptance_rate",
                "per_position", "accepted_tokens", "draft_tokens", "printed_accept_len", "printed_accept_rate",
                "gen_throughput", "after_idle", "definition")

IDLE_FRACTION = 0.1  # a window below 10 % of the run's median throughput follows an idle period

SGLANG_OLD = "sglang<=0.5.10: accept rate = accept len / N"
SGLANG_NEW = "sglang>=0.5.11: accept rate = (accept len - 1) / (N - 1)"


def version_tuple(version: str | None) -> tuple[int, ...] | None:
    """``'0.5.3.post3'`` -> (0, 5, 3); None when no leading number is found."""
    m = re.match(r"v?(\d+(?:\.\d+)*)", str(version).strip()) if version and version != "unknown" else None
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def flag_after_idle(throughput: pd.Series) -> pd.Series:
    """True where throughput is below IDLE_FRACTION of the run's median positive throughput."""
    thr = pd.to_numeric(throughput, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    positive = thr[thr > 0]
    if not len(positive):
        return pd.Series(False, index=throughput.index)
    cut = IDLE_FRACTION * float(np.median(positive))
    del positive
    return pd.Series(thr < cut, index=throughput.index)  # NaN < cut is False


def _n_from_server_args(args: dict | None) -> int | None:
    args = args or {}
    steps, ndraft = args.get("speculative_num_steps"), args.get("speculative_num_draft_tokens")
    if isinstance(steps, int) and args.get("speculative_eagle_topk") in (None, 1):
        return steps + 1  # sglang forces num_draft_tokens = steps + 1 for topk == 1 chains
    return ndraft if isinstance(ndraft, int) else None


def _consistent(L: np.ndarray, r: np.ndarray, N: int, old: bool) -> bool:
    if not old and N < 2:
        return False
    d = N if old else N - 1   # the printed rate's denominator
    pred = L / d if old else (L - 1.0) / d
    return bool(np.all(np.abs(pred - r) <= 0.0051 + 0.005 / d + 1e-9))


def _fit_n(L: np.ndarray, r: np.ndarray, old: bool) -> int | None:
    return next((n for n in range(2, 65) if _consistent(L, r, n, old)), None)


def _from_pairs(Lu: np.ndarray, ru: np.ndarray, definition: str | None, n: int | None, n_source: str | None,
                warnings: list[str]) -> tuple[str | None, int | None, str | None]:
    """The accept-rate definition and N that the distinct printed (accept len, accept rate) pairs
    fit, where the version or k did not say them; a warning for each inference and each mismatch."""
    fits = {d_: _fit_n(Lu, ru, d_ == SGLANG_OLD) for d_ in (SGLANG_OLD, SGLANG_NEW)}
    if definition is None:
        if n is not None:
            ok = [d_ for d_ in fits if _consistent(Lu, ru, n, d_ == SGLANG_OLD)]
        else:
            ok = [d_ for d_, fit in fits.items() if fit is not None]
        if len(ok) == 1:
            definition = ok[0]
            warnings.append(f"sglang version unknown: accept-rate definition inferred from the printed "
                            f"accept len/accept rate pairs ({definition})")
        else:
            warnings.append("sglang version unknown and the accept len/accept rate pairs fit both "
                            "accept-rate definitions: pass version= or k=")
    if n is None and definition is not None:
        n = fits[definition]
        if n is not None:
            n_source = "inferred"
            warnings.append(f"k not given: inferred k={n - 1} (N={n} draft tokens per verify) from the "
                            f"printed accept len/accept rate pairs ({definition})")
    elif n is not None and definition is not None and not _consistent(Lu, ru, n, definition == SGLANG_OLD):
        warnings.append(f"accept rate printed by sglang is not consistent with N={n} ({n_source}) "
                        f"under '{definition}'")
    return definition, n, n_source


def sglang_spec(decode: pd.DataFrame, *, version: str, k: int | None, server_args: dict | None,
                warnings: list[str]) -> pd.DataFrame:
    """Normalised acceptance records from SGLang ``Decode batch`` rows that print ``accept len``."""
    if not len(decode) or "accept_len" not in decode.columns:
        return pd.DataFrame(columns=list(SPEC_COLUMNS))
    mask = decode["accept_len"].notna().to_numpy()
    if not mask.any():
        return pd.DataFrame(columns=list(SPEC_COLUMNS))

    def col(name: str, dtype=None):
        return decode[name].to_numpy(dtype=dtype)[mask] if name in decode.columns else None

    L = col("accept_len", float)
    rate_col = col("accept_rate", float)
    has_rate = rate_col is not None and not np.isnan(rate_col).any()
    r = rate_col if has_rate else None
    # the definition only depends on the distinct printed (accept len, accept rate) pairs
    if has_rate:
        pairs = pd.unique(L + 1j * r)  # (accept len, accept rate) as one complex number: hashed, exact
        Lu, ru = pairs.real.copy(), pairs.imag.copy()

    # 1. which accept-rate definition the log uses
    vt = version_tuple(version)
    variants = set(map(str, decode.loc[mask, "format"].dropna().unique())) if "format" in decode.columns else set()
    old_formats = variants & {"dot", "bracket", "trailing"}
    definition = None
    if vt is not None:
        definition = SGLANG_OLD if vt < (0, 5, 11) else SGLANG_NEW
    elif old_formats:
        definition = SGLANG_OLD  # these line formats are only printed by sglang <= 0.5.8
    # 2. N = k + 1
    n = k + 1 if k else None
    n_source = "given k" if n else None
    if n is None:
        n = _n_from_server_args(server_args)
        n_source = "server_args" if n else None
    if has_rate:
        definition, n, n_source = _from_pairs(Lu, ru, definition, n, n_source, warnings)
    kk = n - 1 if n else None
    if kk is None:
        warnings.append("k unknown for the sglang acceptance records: draft acceptance rate not computed; "
                        "pass k=")
    n_rows = len(L)

    def const(value):
        return pd.Categorical.from_codes(np.zeros(n_rows, dtype=np.int8), [value])

    nan = np.full(n_rows, np.nan)
    after_idle = col("after_idle")
    out = pd.DataFrame({
        "time": col("time"),
        "line": col("line"),
        "engine": const("sglang"),
        "version": const(version),
        "k": np.full(n_rows, float(kk) if kk is not None else np.nan),
        "mean_acceptance_length": L,
        "draft_acceptance_rate": (L - 1.0) / kk if kk else nan,
        "per_position": np.full(n_rows, None, dtype=object),
        "accepted_tokens": nan,
        "draft_tokens": nan,
        "printed_accept_len": L,
        "printed_accept_rate": r if r is not None else nan,
        "gen_throughput": col("gen_throughput", float),
        "after_idle": after_idle.astype(bool) if after_idle is not None else np.zeros(n_rows, bool),
        "definition": const(definition or "unknown"),
        "running_req": col("running_req") if "running_req" in decode.columns else nan,
    }, copy=False)
    return out


_VLLM_DEF = {
    "v0": "vllm V0: rate = accepted/draft tokens (counts tokens after a rejection), length = emitted/drafts",
    "v1-early": "vllm V1 (<0.8.3): rate = accepted/drafted, length = 1 + rate*k",
    "v1": "vllm V1: rate = accepted/drafted (excl. bonus), length = 1 + accepted/drafts",
}


def vllm_spec(raw: pd.DataFrame, *, version: str, k: int | None, warnings: list[str]) -> pd.DataFrame:
    """Normalised acceptance records from vLLM ``SpecDecoding metrics`` / ``Speculative metrics`` rows."""
    if not len(raw):
        return pd.DataFrame(columns=list(SPEC_COLUMNS))
    vt = version_tuple(version)
    n = len(raw)

    def col(name: str) -> pd.Series:
        if name in raw.columns:
            return pd.to_numeric(raw[name], errors="coerce").astype(float)
        return pd.Series(np.nan, index=raw.index)

    variant = raw["variant"].astype(str)
    lists = raw["per_position"].tolist() if "per_position" in raw.columns else [None] * n
    lists = [tuple(p) if isinstance(p, (tuple, list)) else None for p in lists]
    pp = pd.Series(lists, index=raw.index, dtype=object)
    pp_len = pd.Series(np.array([float(len(p)) if p else np.nan for p in lists], dtype=np.float64), index=raw.index)
    pp_sum = pd.Series(np.array([float(sum(p)) if p else np.nan for p in lists], dtype=np.float64), index=raw.index)
    del lists
    kk = col("k").fillna(pp_len)
    if k:
        kk = kk.fillna(float(k))
    acc, drafted, emitted = col("accepted_tokens"), col("draft_tokens"), col("emitted_tokens")
    printed_rate = col("printed_accept_rate")
    rate = printed_rate.fillna(acc / drafted.where(drafted > 0))
    printed_len = col("printed_accept_len")
    if vt is not None:
        default_incl = vt >= (0, 10)
    else:
        default_incl = True
        if (printed_len.notna() & pp_sum.isna()).any():
            warnings.append("vllm version unknown and no per-position list: 'Mean acceptance length' assumed to "
                            "include the bonus token (true from 0.10.1.1, not in 0.8.5)")
    incl = ((printed_len - 1.0 - pp_sum).abs() <= (printed_len - pp_sum).abs()).where(pp_sum.notna(), default_incl)
    length = printed_len.where(incl.astype(bool), printed_len + 1.0)
    length = length.fillna(1.0 + rate * kk)
    v0 = variant == "v0"
    length = length.where(~v0, emitted / (drafted / kk).where(drafted > 0))
    if v0.any():
        warnings.append(f"{int(v0.sum())} vLLM V0 acceptance records: V0 counts draft tokens accepted after a "
                        "rejection, so its draft acceptance rate is not comparable with vLLM V1 or SGLang "
                        "(compare mean acceptance lengths only with care)")
    if kk.isna().any():
        warnings.append("k unknown for some vLLM acceptance records (no per-position list or "
                        "'Number of speculative tokens'): pass k=")
    out = pd.DataFrame({
        "time": raw["time"] if "time" in raw.columns else None, "line": raw["line"], "engine": "vllm",
        "version": version, "k": kk, "mean_acceptance_length": length, "draft_acceptance_rate": rate,
        "per_position": pp, "accepted_tokens": acc, "draft_tokens": drafted, "printed_accept_len": printed_len,
        "printed_accept_rate": printed_rate, "gen_throughput": col("gen_throughput"),
        "after_idle": (drafted == 0).to_numpy(), "definition": variant.map(_VLLM_DEF).fillna(variant),
        "emitted_tokens": emitted,
    }).reset_index(drop=True)
    thr = out["gen_throughput"]
    if thr.notna().any():
        out["after_idle"] = out["after_idle"] | flag_after_idle(thr)
    return out


def _fmt_num(x: float, fmt: str) -> str:
    return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else fmt.format(x)


@dataclass(frozen=True)
class SpecSummary:
    """Pooled speculative-decoding figures over a run (after-idle windows excluded).

    ``mean_acceptance_length`` includes the bonus token; ``draft_acceptance_rate`` excludes it and is
    a fraction. vLLM windows are pooled by token counts (as vLLM's own Prometheus rates are); SGLang
    windows, which only print ratios, are weighted by ``#running-req`` (each window covers 40 decode
    iterations of that batch size).
    """

    engine: str
    version: str
    k: int | None
    windows: int
    excluded_windows: int
    mean_acceptance_length: float
    draft_acceptance_rate: float
    per_position: tuple[float, ...] | None = None
    definition: str = ""
    warnings: tuple[str, ...] = field(default=())

    @property
    def comparable(self) -> bool:
        """False for vLLM V0 acceptance, whose draft acceptance rate counts tokens accepted after a
        rejection: not to be put beside vLLM V1 or SGLang figures without saying so."""
        return not self.definition.startswith("vllm V0")

    def _repr_html_(self) -> str:
        return html_fields(f"SpecSummary: {self.engine} {self.version or 'unknown'}", [
            ("draft tokens per step (k)", self.k if self.k else "?"),
            ("mean acceptance length (incl. bonus)", _fmt_num(self.mean_acceptance_length, "{:.3f}")),
            ("draft acceptance (excl. bonus)", _fmt_num(self.draft_acceptance_rate, "{:.1%}")),
            ("per-position acceptance", ", ".join(f"{p:.2f}" for p in self.per_position) if self.per_position else "-"),
            ("windows used / after-idle excluded", f"{self.windows} / {self.excluded_windows}"),
            ("definition", self.definition + ("" if self.comparable else " (NOT comparable with V1 or SGLang)")),
            *[("warning", w) for w in self.warnings]])

    def speedup(self, c: float):
        """Expected speed-up at drafter cost ``c`` (relative to one target step): a
        :class:`kit.models.SpecEstimate` built from this run's measured acceptance length."""
        return spec_from_summary(self, c)

    def to_dict(self) -> dict[str, Any]:
        return {"engine": self.engine, "version": self.version, "k": self.k, "windows": self.windows,
                "excluded_windows": self.excluded_windows,
                "mean_acceptance_length": _clean(self.mean_acceptance_length),
                "draft_acceptance_rate": _clean(self.draft_acceptance_rate),
                "per_position": list(self.per_position) if self.per_position else None,
                "definition": self.definition, "comparable": self.comparable, "warnings": list(self.warnings)}

    def __repr__(self) -> str:
        ver = self.version or "unknown"
        k = f"k={self.k}" if self.k else "k=?"
        al = _fmt_num(self.mean_acceptance_length, "{:.2f}")
        rate = _fmt_num(self.draft_acceptance_rate, "{:.1%}")
        s = (f"SpecSummary({self.engine} {ver}, {k}: mean acceptance length {al} (incl. bonus), "
             f"draft acceptance {rate} over {self.windows} windows")
        if self.excluded_windows:
            s += f", {self.excluded_windows} after-idle excluded"
        return s + ")"


def _clean(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), 6)


def summarize(spec: pd.DataFrame, *, engine: str, version: str, warnings: list[str],
              include_after_idle: bool = False) -> SpecSummary:
    """Pool a normalised ``.spec`` table into one :class:`SpecSummary`."""
    if not len(spec):
        return SpecSummary(engine, version, None, 0, 0, math.nan, math.nan, None, "", tuple(warnings))
    idle = spec["after_idle"].fillna(False).astype(bool)
    use = spec if include_after_idle else spec[~idle]
    use = use[pd.to_numeric(use["mean_acceptance_length"], errors="coerce").notna()]
    excluded = int(idle.sum()) if not include_after_idle else 0
    ks = pd.to_numeric(use["k"], errors="coerce").dropna()
    k = int(ks.mode().iloc[0]) if len(ks) else None
    definition = "; ".join(dict.fromkeys(str(d) for d in use["definition"])) if len(use) else ""
    if not len(use):
        return SpecSummary(engine, version, k, 0, excluded, math.nan, math.nan, None, definition, tuple(warnings))
    L = use["mean_acceptance_length"].astype(float)
    acc = pd.to_numeric(use["accepted_tokens"], errors="coerce")
    drafted = pd.to_numeric(use["draft_tokens"], errors="coerce")
    pp = None
    if acc.notna().all() and drafted.notna().all() and drafted.sum() > 0 and k:
        rate = float(acc.sum() / drafted.sum())
        drafts = drafted / use["k"].astype(float)
        if "emitted_tokens" in use.columns and pd.to_numeric(use["emitted_tokens"], errors="coerce").notna().all():
            al = float(pd.to_numeric(use["emitted_tokens"]).sum() / drafts.sum())
        else:
            al = float(1.0 + acc.sum() / drafts.sum())
        lists = [p for p in use["per_position"] if isinstance(p, tuple)]
        if len(lists) == len(use) and len({len(p) for p in lists}) == 1:
            w = drafts.to_numpy()
            pp = tuple(float(x) for x in (np.array(lists) * w[:, None]).sum(axis=0) / w.sum())
    else:
        w = pd.to_numeric(use.get("running_req", pd.Series(1.0, index=use.index)), errors="coerce")
        w = w.fillna(1.0).clip(lower=1.0)
        al = float((L * w).sum() / w.sum())
        rate = (al - 1.0) / k if k else math.nan
        if engine == "vllm" and not k:
            rate = float(use["draft_acceptance_rate"].astype(float).mean())
    return SpecSummary(engine, version, k, int(len(use)), excluded, al, rate, pp, definition, tuple(warnings))


def _from_sglang(state, frames: dict, *, version: str, k: int | None, mine: bool,
                 warnings: list[str]) -> pd.DataFrame:
    """SGLang's acceptance: its Decode lines' accept len / accept rate (``frames["decode"]``)."""
    return sglang_spec(frames["decode"], version=version, k=k, server_args=state.server_args, warnings=warnings)


def _from_vllm(state, frames: dict, *, version: str, k: int | None, mine: bool,
               warnings: list[str]) -> pd.DataFrame:
    """vLLM's acceptance: its SpecDecoding metrics lines (k from the engine config when the log is vLLM's)."""
    cfg_k = (state.server_args or {}).get("num_speculative_tokens") if mine else None
    return vllm_spec(frames.pop("vllm_spec", pd.DataFrame()), version=version, k=k or cfg_k, warnings=warnings)


# an engine's ``spec`` (kit.engines) -> its acceptance reader
READERS = {"sglang": _from_sglang, "vllm": _from_vllm}

