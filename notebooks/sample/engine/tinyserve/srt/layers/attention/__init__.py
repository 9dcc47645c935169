"""Attention backends known to the stand-in engine."""

from .registry import ATTENTION_BACKENDS, MLA_CAPABLE_BACKENDS, check_attention_backend

__all__ = ["ATTENTION_BACKENDS", "MLA_CAPABLE_BACKENDS", "check_attention_backend"]
