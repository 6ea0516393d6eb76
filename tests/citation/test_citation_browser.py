"""The citation HTML fragment embedded in the batch report, rendered by a real headless chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from trajaudit.citation import OfflineCitationJudge, audit_citations, load_run, render_html
from trajaudit.report.html import render_html as render_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
EX = Path(__file__).resolve().parents[2] / "examples" / "citation" / "ev_market.json"

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (.ci/run installs it)")]


def test_fragment_renders_inside_the_batch_report(tmp_path):
    fragment = render_html(audit_citations(load_run(EX), OfflineCitationJudge()))
    page = tmp_path / "report.html"
    page.write_text(render_report([], extra_sections=[fragment]), encoding="utf-8")
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    assert dom.count('<div class="ta-trace">') == 5
    section = dom.split('<section class="ta-cite"')[1]
    origins = re.findall(r'<span class="ta-origin"><b>([\w-]+)</b>', section)
    assert sorted(origins) == ["orchestrator-1", "orchestrator-1", "researcher-1", "researcher-1", "searcher-2"]
    assert "Approximate." in section and "16.7%" in section
