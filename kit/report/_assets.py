"""The report's offline assets: require.js and the widget renderer, vendored from npm at install time.

``tools/vendor_assets.sh`` (``make assets``) puts them in ``kit/report/_vendor/``; every report gets a copy
in ``assets/`` and its pages reference them by relative URL, so a page opened from disk, a share or
an e-mail attachment loads nothing from a CDN. MathJax is replaced by a local stub (math shows as its
TeX source); mermaid diagrams, which the notebooks do not use, point at a local stub too.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from kit.errors import ReportError

VENDOR_DIR = Path(__file__).resolve().parent / "_vendor"
REQUIRED = ("require.js", "embed-amd.js")

# Relative URLs written into every exported page.
REQUIRE_JS_URL = "assets/require.js"
WIDGET_RENDERER_URL = "assets/embed-amd.js"
MATHJAX_URL = "assets/mathjax-stub.js"
MERMAID_URL = "assets/mermaid-stub.mjs"

_MATHJAX_STUB = (
    "/* decode-kit offline report: MathJax is not bundled, so math is shown as its TeX source.\n"
    "   The page template calls init_mathjax(), which does nothing when window.MathJax is absent. */\n"
)
_MERMAID_STUB = "/* decode-kit offline report: mermaid is not bundled. */\nexport default undefined;\n"


def check_vendored(vendor_dir: Path = VENDOR_DIR) -> Path:
    """Return the vendor directory, or raise ReportError saying how to vendor the assets."""
    missing = [name for name in REQUIRED if not (vendor_dir / name).is_file()]
    if missing:
        raise ReportError(
            f"report assets missing in {vendor_dir}: {', '.join(missing)}; run 'make assets' "
            "(tools/vendor_assets.sh fetches requirejs and @jupyter-widgets/html-manager with npm)"
        )
    return vendor_dir


def copy_assets(dest: Path, vendor_dir: Path = VENDOR_DIR) -> list[str]:
    """Copy the vendored files and the stubs into ``dest`` (the report's ``assets/``); return names."""
    check_vendored(vendor_dir)
    dest.mkdir(parents=True, exist_ok=True)
    names = []
    for src in sorted(vendor_dir.iterdir()):
        if src.is_file():
            shutil.copy2(src, dest / src.name)
            names.append(src.name)
    (dest / "mathjax-stub.js").write_text(_MATHJAX_STUB)
    (dest / "mermaid-stub.mjs").write_text(_MERMAID_STUB)
    return names + ["mathjax-stub.js", "mermaid-stub.mjs"]
