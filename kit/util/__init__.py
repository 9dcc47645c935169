"""Small helpers shared by every area, one copy each, one file per concern (this file only re-exports):

- ``_text.py``: ANSI stripping (:func:`strip_ansi`), shell quoting (:data:`quote`), :func:`clip`, signed
  differences (:func:`signed`), percentages (:func:`percent_text`), small HTML tables (:func:`html_fields`)
- ``_json.py``: JSON-ready values and table rows (:func:`jsonable`, :func:`frame_records`), a command's answer
  as JSON or text (:func:`print_result`), and what a result's
  ``to_record`` uses: the call's settings (:func:`call_settings`), a table's cells as figures (:func:`frame_figures`)
- ``_python.py``: pausing the garbage collector (:func:`no_gc`), names re-exported under their package
  (:func:`publish`) or loaded on first use (:func:`lazy_names`)
- ``_files.py``: atomic writes (:func:`write_atomic`), the programs shipped to hosts (:func:`host_program`)
- ``_progress.py``: :func:`progress`, the bar for long work (tqdm loaded only when a bar is drawn)
- ``_recording.py``: the run catalogue's hook: :func:`recorded`, the writer the catalogue installs
  (:func:`set_writer`), the deferred queue of the ``kit`` command (written by a
  child that outlives it, :func:`flush_detached`), its command line
- ``_units.py``: the unit of every figure the kit records, from one declared table (:func:`unit_of`)
- ``_version.py``: decode-kit's version (:func:`kit_version`)

Secret names (``secret_name``, ``mask_secrets``) live with the rest of redaction, in ``kit.redact``.
"""
from __future__ import annotations

from kit.util._files import host_program, write_atomic
from kit.util._json import call_settings, frame_figures, frame_records, jsonable, print_result
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

__all__ = ["ANSI", "UNITS", "call_settings", "clip", "command_line", "deferred", "flush",
           "flush_detached", "frame_figures", "frame_records", "host_program", "html_fields", "jsonable",
           "kit_version", "lazy_names", "no_gc", "pending", "percent_text", "print_result", "progress",
           "progress_wanted", "publish", "quote", "recorded", "recording_on", "set_command_line",
           "set_writer", "signed", "strip_ansi", "unit_of", "write_atomic"]
