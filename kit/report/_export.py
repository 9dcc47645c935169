"""HTML export of executed notebooks with nbconvert, wired to the report's local assets.

One ``HTMLExporter`` (lab template) is built per report and reused for every page: its CDN knobs point at
relative ``assets/`` URLs, every page gets a navigation bar, and the finished HTML passes through the
redaction safety net. Every code cell's input sits in a closed ``<details>`` ("show code") unless tagged
``show-code`` (:data:`SHOW_CODE_TAG`), so the page reads the same offline, printed or in a PDF. The CSS
makes tables fit the page and printing leaves the navigation bar out."""
from __future__ import annotations

import html as _html
from typing import Any, Sequence

from jinja2 import DictLoader
from nbconvert import HTMLExporter
from traitlets.config import Config

from kit.redact import redact_html
from kit.report import _assets as assets

# Pages are laid out at most PAGE_MAX_PX wide (centred); the output column beside the prompts is then
# PAGE_WIDTH_PX: a figure at most that wide is shown at its own size, never shrunk below readable.
PAGE_MAX_PX = 1200
PAGE_WIDTH_PX = 1100
SHOW_CODE_TAG = "show-code"  # a code cell with this tag shows its code unfolded

# The lab template's page, each code cell's input folded into <details> unless tagged SHOW_CODE_TAG.
_TEMPLATE = """{%- extends 'index.html.j2' -%}
{% block input_group -%}
{%- if '""" + SHOW_CODE_TAG + """' in cell.metadata.get('tags', []) -%}
{{ super() }}
{%- else -%}
<details class="kit-code"><summary>show code</summary>
{{ super() }}
</details>
{%- endif -%}
{% endblock input_group %}
"""
_TEMPLATE_NAME = "kit_report_page.html.j2"

_NAV_CSS = """
<style>
main{max-width:%(page)spx;margin:0 auto}
.kit-nav{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;font-size:14px;padding:8px 12px;
 margin:0 0 12px 0;border-bottom:1px solid #d0d7de;background:#f6f8fa}
.kit-nav a{margin-right:14px;text-decoration:none;color:#0969da}
.kit-nav a.kit-current{font-weight:600;color:#1f2328}
.kit-nav .kit-failed{color:#cf222e}
.kit-head{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;padding:0 12px 12px 12px}
.kit-head table{border-collapse:collapse;margin:6px 0 14px 0}
.kit-head td,.kit-head th{border:1px solid #d0d7de;padding:4px 8px;font-size:13px}
.kit-head th{background:#f6f8fa}
.kit-ok{color:#1a7f37;font-weight:600}.kit-bad{color:#cf222e;font-weight:600}
details.kit-code>summary{cursor:pointer;color:#57606a;font:12px system-ui,sans-serif;padding:2px 0 2px 4px}
details.kit-code[open]>summary{color:#0969da}
.jp-OutputArea-output table{max-width:100%%}
.jp-OutputArea-output td,.jp-OutputArea-output th{white-space:normal;overflow-wrap:anywhere;word-break:normal}
.jp-OutputArea-output pre{white-space:pre-wrap;overflow-wrap:anywhere;word-break:normal}
.jp-OutputArea-output img{max-width:100%%;height:auto}
@media print{
 @page{size:A4 landscape;margin:10mm}
 .kit-nav,.jp-InputPrompt,.jp-OutputPrompt{display:none}
 main{max-width:none}
 details.kit-code{display:none}
 img,.kit-card{break-inside:avoid}
 .kit-cards{display:block !important}
 .kit-card{display:inline-block;width:23.5%%;vertical-align:top;margin:0 0.5%% 8px 0;box-sizing:border-box}
 h1,h2,h3{break-after:avoid}
 .jp-Cell,.jp-Cell *{overflow:visible !important}
 .jp-OutputArea-child,.jp-OutputArea-output{display:block !important}
}
</style>
""" % {"page": PAGE_MAX_PX}


def make_exporter(no_input: bool = False) -> Any:
    """An HTMLExporter (lab template) that loads nothing from the network."""
    cfg = Config()
    cfg.HTMLExporter.require_js_url = assets.REQUIRE_JS_URL
    cfg.HTMLExporter.widget_renderer_url = assets.WIDGET_RENDERER_URL
    cfg.HTMLExporter.mathjax_url = assets.MATHJAX_URL
    cfg.HTMLExporter.template_name = "lab"
    cfg.HTMLExporter.template_file = _TEMPLATE_NAME
    if no_input:
        cfg.TemplateExporter.exclude_input = True
        cfg.TemplateExporter.exclude_input_prompt = True
        cfg.TemplateExporter.exclude_output_prompt = True
    exporter = HTMLExporter(config=cfg, extra_loaders=[DictLoader({_TEMPLATE_NAME: _TEMPLATE})])
    # Not a configurable trait, but read from the instance when resources are built.
    exporter.mermaid_js_url = assets.MERMAID_URL
    exporter.mermaid_layout_elk_js_url = ""
    return exporter


def nav_html(pages: Sequence[tuple[str, str, bool]], current: str | None) -> str:
    """Navigation bar: ``pages`` is (title, href, ok) per page; failed pages are marked."""
    links = []
    for title, href, ok in pages:
        cls = "kit-current" if href == current else ""
        mark = "" if ok else " <span class='kit-failed'>(failed)</span>"
        links.append(f"<a class='{cls}' href='{_html.escape(href, quote=True)}'>{_html.escape(title)}{mark}</a>")
    return _NAV_CSS + "<nav class='kit-nav'>" + "".join(links) + "</nav>"


def inject(page: str, block: str) -> str:
    """Insert ``block`` at the top of the page body (after the lab template's ``<main>``)."""
    for marker in ("<main>", "<body>"):
        idx = page.find(marker)
        if idx >= 0:
            idx += len(marker)
            return page[:idx] + "\n" + block + "\n" + page[idx:]
    return block + page


def export(exporter: Any, nb: Any, title: str, top_block: str = "", secrets: Any = (),
           found: set[str] | None = None) -> tuple[str, int]:
    """Export one executed (already redacted) notebook to HTML; return (page, extra redactions).

    ``secrets`` are the values :func:`kit.redact.redact_notebook` found; the page is checked
    for them once more after rendering. ``found`` receives values seen only on the page."""
    nb.metadata["title"] = title
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
    if top_block:
        body = inject(body, top_block)
    return redact_html(body, secrets, found)


def standalone_page(title: str, block: str) -> str:
    """A minimal page (no notebook): used for index.html when there is no index notebook."""
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_html.escape(title)}</title></head><body><main>\n{block}\n</main></body></html>\n"
    )
