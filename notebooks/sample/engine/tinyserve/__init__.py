"""tinyserve: a project-written stand-in for an LLM serving engine, not a real engine.

decode-kit's tests and sample notebooks need a serving framework's *argument handling* to read,
slice and navigate: a dataclass of server arguments whose defaults are chosen by GPU architecture
across several helper functions and modules. Real engines are large and change between versions, so
this small package imitates the shape of that code (original code written for decode-kit; nothing
is copied from any engine).

Beside that source stand-in (``srt/``), ``python -m tinyserve.launch_server`` is a small real HTTP
engine for the kit's live tests and recordings: OpenAI-compatible streaming completions, ``/health``,
``/v1/models``, SGLang's ``/start_profile`` and ``/stop_profile``, SGLang-format log lines. Its CPU
runner sleeps for per-token times whose dependence on flags and environment is known exactly
(``runtime.TRUTH``); with torch and a GPU, ``torch_runner.py`` runs a random-weight transformer of a
real model's shape.

- ``launch_server.py``: the command line, start phase, HTTP endpoints, test modes (crash, slow start)
- ``runtime.py``: the scheduler, the CPU runner and its truth table, the profiler
- ``torch_runner.py``: the torch model (static KV cache, CUDA graphs, torch.compile, attention backends)
"""

__version__ = "0.3.1"
