"""The report's offline assets: require.js and the widget renderer, vendored from npm by ``make assets``
(``tools/vendor_assets.sh``) into ``_vendor/``; every report gets a copy in ``assets/`` referenced by relative
URL, so a page loads nothing from a CDN. MathJax and mermaid are local stubs (math shows as its TeX source)."""
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


def check_vendored(vendor_dir: Path = VENDOR_DIR) -> None:
    """Raise ReportError saying how to vendor the assets where one is missing."""
    missing = [name for name in REQUIRED if not (vendor_dir / name).is_file()]
    if missing:
        raise ReportError(f"report assets missing in {vendor_dir}: {', '.join(missing)}; run 'make assets' "
                          "(tools/vendor_assets.sh fetches requirejs and @jupyter-widgets/html-manager with npm)")


def copy_assets(dest: Path) -> None:
    """Copy the vendored files and the stubs into ``dest`` (the report's ``assets/``)."""
    check_vendored()
    dest.mkdir(parents=True, exist_ok=True)
    for src in sorted(VENDOR_DIR.iterdir()):
        if src.is_file():
            shutil.copy2(src, dest / src.name)
    (dest / "mathjax-stub.js").write_text(_MATHJAX_STUB)
    (dest / "mermaid-stub.mjs").write_text(_MERMAID_STUB)
