"""Batch reports: JSONL diagnoses, Markdown and self-contained HTML."""

from trajaudit.report.html import render_html
from trajaudit.report.markdown import render_markdown

__all__ = ["render_html", "render_markdown"]
