"""Merge a session recorded by ``tools/record_live_session.py`` into the bundled sample session.

    python tools/import_live_session.py live_session.tar.gz notebooks/sample [experiments]

Copies ``experiments/*`` and ``env/live_recording.json`` from the tarball into the session and carries
over their provenance entries (``provenance.json``), so every imported artefact stays labelled
measured, with the machine and the command that produced it.
"""
from __future__ import annotations

import json
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

import kit


def main(tarball: str, session: str, *only: str) -> int:
    """``only``: ``experiments`` to leave the session's ``env/`` alone (a recording made off the GPU)."""
    sess = kit.session.open(session)
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(tarball) as tar:
            tar.extractall(tmp, filter="data")
        src = Path(tmp) / "session"
        for d in sorted((src / "experiments").iterdir()):
            dest = sess.path("experiments", d.name)
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(d, dest)
        rec = src / "env" / "live_recording.json"
        if rec.is_file() and "experiments" not in only:
            sess.path("env").mkdir(exist_ok=True)
            shutil.copy2(rec, sess.path("env", "live_recording.json"))
        manifest = json.loads((src / "provenance.json").read_text())["artefacts"]
        for key, p in manifest.items():
            if key.startswith("experiments/") or (key == "env/live_recording.json" and "experiments" not in only):
                sess.record(key, kit.session.Provenance.from_dict(p))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
