"""Batch reports: JSONL diagnoses, Markdown and self-contained HTML (whole lists, or streamed: see
:mod:`trajaudit.report.stream`), and the CI formats (:mod:`trajaudit.report.ci`: SARIF, JUnit).

The names and the submodules load on first use (PEP 562 ``__getattr__``, as ``trajaudit.audit``):
``trajaudit audit`` refers to ``trajaudit.report.HtmlReport``, ``trajaudit.report.ci.sarif_text`` …,
so a batch that writes neither a report nor a CI format does not import (nor, run from source,
compile) the writers, ``markupsafe`` and ``xml.etree``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trajaudit.lazy_names import lazy_names

if TYPE_CHECKING:
    from trajaudit.report import ci, html, markdown, page, rundata, stream  # noqa: F401
    from trajaudit.report.html import HtmlReport, render_html
    from trajaudit.report.markdown import MarkdownReport, render_markdown

__all__ = ["HtmlReport", "MarkdownReport", "render_html", "render_markdown"]

#: Public names loaded on first use: name -> defining submodule.
_LAZY = {"HtmlReport": "html", "render_html": "html", "MarkdownReport": "markdown", "render_markdown": "markdown"}
#: Submodules reachable as attributes before they are imported (``trajaudit.report.ci.sarif_text``).
_SUBMODULES = frozenset({"ci", "html", "markdown", "page", "rundata", "stream"})


__getattr__, __dir__ = lazy_names(__name__, globals(), _LAZY, _SUBMODULES)
