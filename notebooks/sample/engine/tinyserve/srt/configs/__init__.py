"""Model configuration helpers of the stand-in engine."""

from .model_config import ModelInfo, read_model_info

__all__ = ["ModelInfo", "read_model_info"]
