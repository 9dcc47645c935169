"""``python -m kit`` is the ``kit`` command."""
try:
    from kit.cli import run
except KeyboardInterrupt:   # Ctrl-C while the command is still being imported
    raise SystemExit(130) from None

run()
