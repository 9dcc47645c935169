"""Per-architecture default hooks, split out of server_args.py as real engines do over time."""

from .hybrid_mamba import apply_hybrid_mamba_defaults

__all__ = ["apply_hybrid_mamba_defaults"]
