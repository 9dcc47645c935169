"""Small helpers shared by every area, one copy each, one file per concern (text, JSON-ready values, the
interpreter, files, the progress bar, the run catalogue's hook, units, the version: CONTRIBUTING's map); this
file only re-exports. Secret names (``secret_name``, ``mask_secrets``) live with the rest of redaction, in
``kit.redact``.
"""
from __future__ import annotations

from kit.util._files import cache_home, host_program, write_atomic
from kit.util._json import call_settings, frame_figures, frame_records, jsonable, print_json, print_result
from kit.util._progress import progress, progress_wanted
from kit.util._python import lazy_names, no_gc, publish
from kit.util._recording import (
    command_line,
    deferred,
    flush,
    flush_detached,
    pending,
    recorded,
    recording_on,
    set_command_line,
    set_writer,
)
from kit.util._text import ANSI, clip, html_fields, percent_text, quote, signed, strip_ansi
from kit.util._units import UNITS, unit_of
from kit.util._version import kit_version

__all__ = ["ANSI", "UNITS", "cache_home", "call_settings", "clip", "command_line", "deferred", "flush",
           "flush_detached", "frame_figures", "frame_records", "host_program", "html_fields", "jsonable",
           "kit_version", "lazy_names", "no_gc", "pending", "percent_text", "print_json", "print_result", "progress",
           "progress_wanted", "publish", "quote", "recorded", "recording_on", "set_command_line",
           "set_writer", "signed", "strip_ansi", "unit_of", "write_atomic"]
