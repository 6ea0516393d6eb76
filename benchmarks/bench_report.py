"""Size and time to first render of a 10,000-run HTML report in headless Chromium.

The 126 Who&When dev runs (``../shared/data/who_and_when/algorithm_generated``) are audited once
(offline strategy); their results are then added to one :class:`~trajaudit.report.html.HtmlReport`
again and again with new run ids (``ID-k``) until ``--runs`` runs — the path ``audit --report`` takes
for each result — and the page is written. Then Debian's chromium (driven by Playwright, the flags of
the browser tests) opens it ``--repeat`` times and reports, per load:

- ``first render``: ``performance.now()`` when the page's script has drawn the runs table (from
  navigation start: reading the HTML up to the script, parsing the runs JSON, first table page);
- ``table visible``: wall time from ``page.goto`` to the first row being visible (what a person sees);
- ``load``: the browser's load event (the whole file read, details included);
- ``open run``: wall time to open a run through a deep link (``#run=ID&step=N``) on the loaded page,
  which decompresses that run's chunk.

Goal (issue 21): under 3 s to first render and under 40 MB. Run:
``python benchmarks/bench_report.py [--runs 10000] [--repeat 3]``. Results: benchmarks/bench_report.txt.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
WW = ROOT.parent / "shared" / "data" / "who_and_when" / "algorithm_generated"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-quic", "--disable-sync"]


def build(n_runs: int, out: Path) -> tuple[int, float, float]:
    """Write the report of ``n_runs`` runs to ``out``: ``(bytes, audit seconds, report seconds)``."""
    from trajaudit.cli.common import write_parts
    from trajaudit.engine.run.batch import audit_paths
    from trajaudit.engine.run.pipeline import AuditSpec
    from trajaudit.report.html import HtmlReport

    t0 = time.perf_counter()
    results = []
    audit_paths([WW], AuditSpec(), on_result=lambda i, r: results.append(r))
    t1 = time.perf_counter()
    report = HtmlReport(title=f"trajaudit report ({n_runs} runs)")
    try:
        for i in range(n_runs):
            r = results[i % len(results)]
            k = i // len(results)
            if k:
                r = dataclasses.replace(r, trajectory=dataclasses.replace(r.trajectory, id=f"{r.trajectory.id}-{k}"))
            report.add(i, r)
        write_parts(out, report.render_parts())
    finally:
        report.close()
    return out.stat().st_size, t1 - t0, time.perf_counter() - t1


def measure(path: Path, repeat: int, chromium: str) -> list[dict[str, float]]:
    """Open the page ``repeat`` times in a fresh page each: the timings of one load per dict."""
    from playwright.sync_api import sync_playwright

    out = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=FLAGS)
        try:
            for _ in range(repeat):
                page = browser.new_page(viewport={"width": 1400, "height": 950})
                errors: list[str] = []
                page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
                t0 = time.perf_counter()
                page.goto(path.as_uri(), wait_until="commit", timeout=120_000)
                page.wait_for_selector("#runs tbody tr", timeout=120_000)
                visible = time.perf_counter() - t0
                page.wait_for_load_state("load", timeout=120_000)
                first = page.evaluate("window.__trajaudit.firstRender")
                load = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventStart")
                rows = page.evaluate("window.__trajaudit.runs")
                t1 = time.perf_counter()
                page.evaluate("location.hash = 'run=3-70&step=4'")
                page.wait_for_selector("#rv-step-4.critical", timeout=60_000)
                opened = time.perf_counter() - t1
                assert not errors, errors
                out.append({"first_render_s": first / 1000, "table_visible_s": visible, "load_s": load / 1000,
                            "open_run_s": opened, "runs": rows})
                page.close()
        finally:
            browser.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", help="also copy the generated report here")
    args = ap.parse_args(argv)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not WW.is_dir() or chromium is None:
        print("needs ../shared/data/who_and_when and chromium (apt-get install chromium)")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "report.html"
        size, t_audit, t_report = build(args.runs, path)
        if args.keep:
            shutil.copy(path, args.keep)
        loads = measure(path, args.repeat, chromium)
    print(f"report of {args.runs} runs (126 Who&When dev runs repeated with new ids): {size / 1e6:.1f} MB "
          f"(goal < 40 MB); audit of the 126 runs {t_audit:.1f} s, writing the report {t_report:.1f} s")
    print(f"chromium {os.path.basename(chromium)}, {args.repeat} loads (median; min-max):")
    for key, goal in (("first_render_s", " (goal < 3 s)"), ("table_visible_s", ""), ("load_s", ""),
                      ("open_run_s", "")):
        vals = [x[key] for x in loads]
        print(f"  {key:16s} {statistics.median(vals):6.2f} s  ({min(vals):.2f}-{max(vals):.2f}){goal}")
    assert all(x["runs"] == args.runs for x in loads)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
