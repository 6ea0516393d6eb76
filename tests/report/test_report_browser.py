"""The HTML report in a real headless browser (Debian's chromium): it renders, the critical step is
visible, and every in-page link has a target."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from trajaudit.cli import main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium; .ci/run installs it)")


def _chromium(tmp_path, *args):
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=120)


def test_report_renders_with_critical_step_and_working_links(tau_file, tmp_path):
    html = tmp_path / "report.html"
    r = CliRunner().invoke(main, ["audit", str(tau_file), "--strategy", "last", "-o", str(tmp_path / "d.jsonl"),
                                  "--report", str(html), "-q"])
    assert r.exit_code == 0
    dom = _chromium(tmp_path, "--dump-dom", html.as_uri()).stdout
    assert "<title>trajaudit report (last)</title>" in dom
    ids = set(re.findall(r'\bid="([^"]+)"', dom))
    hrefs = re.findall(r'href="#([^"]+)"', dom)
    assert len(hrefs) > 100 and all(h in ids for h in hrefs)
    crit = re.findall(r'<tr class="step critical" id="run-0-step-(\d+)"', dom)
    assert crit == ["30"]
    shot = tmp_path / "shot.png"
    _chromium(tmp_path, "--window-size=1200,900", f"--screenshot={shot}", html.as_uri())
    assert shot.exists() and shot.stat().st_size > 10_000
