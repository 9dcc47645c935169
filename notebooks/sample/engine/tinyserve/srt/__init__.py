"""tinyserve.srt: the 'runtime' half of the stand-in engine (arguments, utilities, backend registry)."""
