"""tinyserve: a project-written stand-in for an LLM serving engine, not a real engine.

decode-kit's tests and sample notebooks need a serving framework's *argument handling* to read,
slice and navigate: a dataclass of server arguments whose defaults are chosen by GPU architecture
across several helper functions and modules. Real engines are large and change between versions, so
this small package imitates the shape of that code (original code written for decode-kit; nothing
is copied from any engine). It serves nothing: there is no model runner, scheduler or kernel here.
"""

__version__ = "0.3.1"
