"""``python -m kit`` is the ``kit`` command."""
from kit.cli import run

run()
