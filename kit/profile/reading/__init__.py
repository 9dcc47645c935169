"""Reading: trace files -> raw column tables, then frames (the first stage of ``kit.profile``).

- ``_io.py``: bytes in: gzip, magic-byte sniffing, ``detect`` (the format decision)
- ``_read.py``: one file -> raw column tables with the reader its format calls for (stdlib only)
- ``_kineto.py``: Kineto/torch-profiler chrome-trace JSON -> kernel, annotation, runtime-call and CPU-frame
  tables, streamed a few MB at a time; typed decoding of the used fields (msgspec), orjson/json fallback
- ``_kineto_events.py``: which Kineto events are kept, and the collector that reduces each decoded piece
  to typed columns
- ``_nsys.py``: nsys stats CSV and nsys SQLite -> kernel tables
- ``_validate.py``: broken input repaired or dropped and counted (NaN, text numbers, missing ts,
  negative or out-of-range times and durations, kernels without ``cat``, duplicates, too-deep events),
  applied where raw tables become frames
- ``_columns.py``: text columns (categoricals) read once per distinct value, not ``astype(str)`` per row
- ``_cache.py``: the cache (Arrow IPC files) of assembled profiles, keyed by the files' identities and the
  rules; this user's own 0700 directory only, every entry sealed with a keyed digest (used by ``_load``)
- ``_remote.py``: traces read where they lie: the reader shipped to the host as a zipapp, its output cut
  into files by the one frame reader (``Frames``), used by ``load(host=)`` and ``ranks`` (never imports
  the façade)

``_io``, ``_read``, ``_kineto``, ``_kineto_events``, ``_nsys`` and ``_validate`` are standard library only:
they also run on remote hosts as the reader's zipapp.
"""
