"""The jinja2 environment every HTML page of trajaudit is rendered with (audit, eval and cite
reports): templates in ``trajaudit/report/templates/``, the one stylesheet and the one script in
``trajaudit/report/static/``, inlined so a page is one self-contained file (nothing is loaded from
the network).

Autoescaping is on, and every string a template prints is first passed through
:func:`~trajaudit.report.markdown.visible` (control and bidi-override characters shown by name):
trace text cannot inject markup or reorder what the page shows. Trusted fragments (the embedded
JSON, a citation section) are passed as :class:`markupsafe.Markup`.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from trajaudit.report.markdown import visible

if TYPE_CHECKING:
    import jinja2
# jinja2 (~40 ms of imports) is imported when a page is first rendered: `trajaudit audit` without
# --report imports this module (through the CLI) but renders nothing (issue 22, start-up)


def _finalize(value: Any) -> Any:
    """Every printed string shows control/bidi characters by name (trusted Markup is left alone)."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return visible(value)
    return value


@cache
def environment() -> jinja2.Environment:
    """The shared environment (autoescape on, :func:`visible` on every printed string, a ``visible``
    filter for values built inside templates)."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("trajaudit.report", "templates"),
                             autoescape=True, finalize=_finalize, trim_blocks=False, lstrip_blocks=False,
                             undefined=jinja2.StrictUndefined)
    env.filters["visible"] = lambda x: visible(str(x))
    return env


@cache
def static(name: str) -> str:
    """The text of ``trajaudit/report/static/NAME`` (``report.css``, ``report.js``)."""
    return resources.files("trajaudit.report").joinpath("static", name).read_text(encoding="utf-8")


def stylesheet() -> Markup:
    """The one stylesheet, to inline in a ``<style>`` block."""
    return Markup(static("report.css"))


def script() -> Markup:
    """The runs page's script, to inline in a ``<script>`` block (it contains no ``</script>``)."""
    return Markup(static("report.js"))


def template(name: str) -> jinja2.Template:
    """A template of ``trajaudit/report/templates``."""
    return environment().get_template(name)


__all__ = ["environment", "script", "static", "stylesheet", "template"]
