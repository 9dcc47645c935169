"""Resources (the session's README, hypothesis chain and provenance manifest) and the prompt that walks
the investigation, hypothesis by hypothesis, with the tools that test each one.

The session is the bundled sample (``notebooks/sample`` of the checkout) unless ``kit mcp --session``
names another. Resource texts go through the same redaction as tool results.
"""
from __future__ import annotations

from pathlib import Path

import mcp_types as types

from kit.errors import UsageError
from kit.ledger import Ledger
from kit.redact import redact_text

SAMPLE = Path(__file__).resolve().parents[2] / "notebooks" / "sample"
# uri -> (file in the session, MIME type, what it is)
_FILES = {"kit://session/README.md": ("README.md", "text/markdown", "what the session holds, real or sample"),
          "kit://session/ledger.json": ("ledger.json", "application/json", "the hypotheses and their verdicts"),
          "kit://session/provenance.json": ("provenance.json", "application/json", "where each artefact came from")}
CHAIN = "kit://session/hypotheses"

PROMPT = types.Prompt(name="investigate_session", title="Walk the session's hypothesis chain",
                      description="Test each hypothesis of the session's ledger with the kit's tools, repeating "
                                  "every figure with its provenance and trust verdict.",
                      arguments=[])


def _root(session: Path | None) -> Path | None:
    root = session if session is not None else SAMPLE
    return root if root.is_dir() else None


def resources(session: Path | None) -> list[types.Resource]:
    root = _root(session)
    if root is None:
        return []
    out = [types.Resource(uri=uri, name=name, description=what, mime_type=mime)
           for uri, (name, mime, what) in _FILES.items() if (root / name).is_file()]
    if (root / "ledger.json").is_file():
        out.append(types.Resource(uri=CHAIN, name="hypotheses", mime_type="text/plain",
                                  description="the hypothesis chain as text: id, verdict, statement, evidence"))
    return out


def read_resource(session: Path | None, uri: str) -> tuple[str, str, str]:
    """(uri, MIME type, redacted text) of a listed resource; UsageError for any other URI."""
    root = _root(session)
    if root is None or uri not in {r.uri for r in resources(session)}:
        raise UsageError(f"resource {uri!r}: not one this server lists")
    if uri == CHAIN:
        text, mime = Ledger.open(root / "ledger.json").to_text(), "text/plain"
    else:
        name, mime, _ = _FILES[uri]
        text = (root / name).read_text(encoding="utf-8")
    return uri, mime, redact_text(text, markup=False)[0]


_WALK = (
    ("H0", "env_fingerprint (host 'local' and the serving host if allowed); the session's server/ captures"),
    ("H1", "trace_check then trace_summary on each traces/<scenario> (by category): the allreduce share, "
           "only where allreduce_share is usable"),
    ("H2", "trace_compare of traces/tp1_eager against traces/tp1_graph: GPU idle and launch gaps"),
    ("H3", "source_definition of is_sm100_supported near the engine's srt/server_args.py; source_find of "
           "sm100_default_attention_backend; source_evaluate where run tools are allowed"),
    ("H4", "logs_spec on the EAGLE3 log: acceptance length and which definition was applied"),
    ("H5", "logs_settings and audit on the NCCL logs: did the variables take effect"),
    ("H6", "bench_records on bench/: the two engines' single-stream throughput"),
)


def prompt_text(name: str, session: Path | None, policy, tools: list[str]) -> str:
    if name != PROMPT.name:
        raise UsageError(f"prompt {name!r}: this server has only {PROMPT.name!r}")
    root = _root(session)
    where = str(root) if root is not None else "the session directory you were given"
    lines = [f"Investigate the decode-performance session at {where}.",
             f"Start with resource {CHAIN} (the hypotheses) and session_catalogue (the runs).",
             "For each hypothesis, in order:"]
    lines += [f"- {hid}: {how}" for hid, how in _WALK]
    lines += ["Rules: quote each figure with its 'provenance' (measured / sample / third-party / unknown) and its "
              "'trust' verdict and reasons; a figure whose trust is not 'usable' is reported as such, never as a "
              "finding. Sample artefacts are not measurements. Follow 'page.next_offset' for long tables."]
    if "ledger_record" in tools:
        lines.append("Record each verdict with ledger_record, citing the artefacts it rests on.")
    else:
        lines.append("This server is read-only: state each verdict and its evidence in your answer "
                     "(ledger_record is not available).")
    if "report_build" in tools:
        lines.append("Finish with report_build into a new output directory.")
    return "\n".join(lines)
