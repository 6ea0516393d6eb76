"""Batch reports: JSONL diagnoses, Markdown and self-contained HTML (whole lists, or streamed: see
:mod:`trajaudit.report.stream`)."""

from trajaudit.report.html import HtmlReport, render_html
from trajaudit.report.markdown import MarkdownReport, render_markdown

__all__ = ["HtmlReport", "MarkdownReport", "render_html", "render_markdown"]
