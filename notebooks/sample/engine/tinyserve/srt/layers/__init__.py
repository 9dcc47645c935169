"""Layer-side pieces of the stand-in engine (only the attention backend registry exists here)."""
