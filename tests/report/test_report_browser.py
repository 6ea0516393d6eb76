"""The HTML report of the Who&When dev set in a real headless browser (Debian's chromium driven by
Playwright): filters, search, sorting, deep links, fallback rows, no console errors, a screenshot kept
as a CI artifact ($TRAJAUDIT_ARTIFACTS, default ./artifacts)."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
import report_page
from click.testing import CliRunner

from trajaudit.cli import main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-quic", "--disable-sync"]
ARTIFACTS = Path(os.environ.get("TRAJAUDIT_ARTIFACTS") or Path(__file__).resolve().parents[2] / "artifacts")

playwright = pytest.importorskip("playwright.sync_api", reason="playwright not installed (pip install -e '.[dev]')")
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium; .ci/run)")]


@pytest.fixture(scope="module")
def built(ww_dir, tmp_path_factory):
    """The Who&When dev set audited (offline) with an HTML report: (report path, diagnoses)."""
    tmp = tmp_path_factory.mktemp("ww_report")
    html, out = tmp / "report.html", tmp / "d.jsonl"
    r = CliRunner().invoke(main, ["audit", str(ww_dir), "-o", str(out), "--report", str(html), "-q"])
    assert r.exit_code == 0, r.output
    return html, [json.loads(x) for x in out.read_text().splitlines()]


@pytest.fixture(scope="module")
def browser():
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


@pytest.fixture()
def page(browser):
    """A page that records console errors and uncaught exceptions (each test asserts there are none)."""
    pg = browser.new_page(viewport={"width": 1400, "height": 950})
    pg.errors = []
    pg.on("console", lambda m: pg.errors.append(f"console.{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    pg.on("pageerror", lambda e: pg.errors.append(f"pageerror: {e}"))
    pg.on("request", lambda r: pg.errors.append(f"network request: {r.url}") if not r.url.startswith("file:") else None)
    yield pg
    assert pg.errors == []
    pg.close()


def _open(page, html: Path, fragment: str = "") -> None:
    page.goto(html.as_uri() + fragment)
    page.wait_for_selector("#runs tbody tr")


def _column(page, key: str) -> list[str]:
    """The text of column ``key`` in the shown rows."""
    idx = page.eval_on_selector_all("#runs thead th", f"ths => ths.findIndex(t => t.dataset.key === {key!r})")
    return page.eval_on_selector_all("#runs tbody tr", f"trs => trs.map(tr => tr.children[{idx}].textContent)")


def test_filter_by_agent_shows_only_that_agents_runs(page, built):
    html, diags = built
    agent, n = Counter(d["agent"] for d in diags).most_common(1)[0]
    _open(page, html)
    assert len(_column(page, "id")) == 100  # the first page of 126 runs
    page.select_option("#f-agent", agent)
    agents = _column(page, "agent")
    assert len(agents) == n > 1 and set(agents) == {agent}
    assert page.inner_text("#count") == f"{n} of 126 run(s) match"
    page.click("#filters button[type=reset]")
    page.wait_for_function("document.querySelector('#count').textContent === '126 run(s)'")


def test_search_finds_a_run_by_a_word_of_its_task(page, built):
    html, diags = built
    rows = report_page.runs(html.read_text(encoding="utf-8"))
    words = Counter(w for r in rows for w in set(re.findall(r"[a-z]{9,}", r["task"].lower())))
    word = sorted(w for w, c in words.items() if c == 1)[0]
    run = next(r for r in rows if word in r["task"].lower())
    _open(page, html)
    page.fill("#q", word.upper())  # case-insensitive
    page.wait_for_function("document.querySelectorAll('#runs tbody tr').length === 1")
    assert _column(page, "id") == [run["id"]]


def _step_only_word(html: str) -> tuple[str, str]:
    """A word found in the steps of exactly one run and in no run's table row: (word, run id)."""
    rows, details = report_page.runs(html), report_page.details(html)
    table = " ".join(json.dumps(r).lower() for r in rows)
    seen: Counter[str] = Counter()
    for d in details:
        seen.update(set(re.findall(r"[a-z]{10,}", " ".join(s["x"] for s in d["steps"]).lower())))
    word = sorted(w for w, c in seen.items() if c == 1 and w not in table)[0]
    i = next(i for i, d in enumerate(details) if word in " ".join(s["x"] for s in d["steps"]).lower())
    return word, rows[i]["id"]


def test_search_in_steps_too_reads_the_steps(page, built):
    html, _ = built
    word, rid = _step_only_word(html.read_text(encoding="utf-8"))
    _open(page, html)
    page.fill("#q", word)
    page.wait_for_function("document.querySelector('#count').textContent.startsWith('0 of')")
    page.check("#f-deep")
    page.wait_for_function("document.querySelectorAll('#runs tbody tr').length === 1")
    assert _column(page, "id") == [rid]


def test_sorting_by_confidence_orders_the_rows(page, built):
    html, _ = built
    _open(page, html)
    page.click("#runs th[data-key=conf]")
    down = [float(x) for x in _column(page, "conf")]
    assert down == sorted(down, reverse=True) and down[0] > down[-1]
    assert page.get_attribute("#runs th[data-key=conf]", "aria-sort") == "descending"
    page.click("#runs th[data-key=conf]")
    up = [float(x) for x in _column(page, "conf")]
    assert up == sorted(up) and page.get_attribute("#runs th[data-key=conf]", "aria-sort") == "ascending"


def test_a_deep_link_opens_the_run_at_its_critical_step(page, built):
    html, diags = built
    d = next(x for x in diags if x["trajectory_id"] == "10")
    step = d["critical_step"]
    _open(page, html, f"#run=10&step={step}")
    page.wait_for_selector("#run-view:not([hidden])")
    assert page.inner_text("#rv-title").startswith("run 10")
    crit = page.locator(f"#rv-step-{step}")
    assert crit.get_attribute("open") is not None and "critical" in crit.get_attribute("class")
    assert crit.is_visible() and crit.bounding_box()["y"] < 950  # scrolled into view
    assert page.locator("#rv-body details.step.critical").count() == 1
    assert page.locator(f"#rv-step-{step} .badge.critical").inner_text() == "critical step"
    # evidence: the rule's title and message, compiled expressions only behind "details"
    ev = page.locator("#rv-body ul.ev").first.inner_text()
    assert "no match:" not in ev
    # a pack's rule title states what the rule expects; a finding shows it as not met (a failed-call
    # rule titled "… is followed by a successful call …" read as the opposite of the finding); a
    # name made from a rule id ("Missing support") names the problem and stays as it is
    titles = page.locator("#rv-body ul.ev li > b").all_text_contents()
    badges = page.locator("#rv-body details.step .badge").all_text_contents()
    assert "not met: tool and code-runner outputs carry no traceback or failing exit code" in titles
    assert "Missing support" in titles and not any("not met: Missing" in t for t in titles + badges)
    assert any(t.startswith("not met: tool and code-runner outputs") for t in badges), badges
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.evaluate("document.getElementById('rv-body').scrollTop = 0")
    page.screenshot(path=str(ARTIFACTS / "report-run-view.png"))
    assert (ARTIFACTS / "report-run-view.png").stat().st_size > 20_000


def test_a_fallback_row_is_marked(page, built):
    html, diags = built
    fallback = [x["trajectory_id"] for x in diags if "fallback" in x["rationale"]]
    finding = [x["trajectory_id"] for x in diags if "fallback" not in x["rationale"]]
    assert fallback and finding
    _open(page, html)
    page.select_option("#f-basis", "fallback")
    assert sorted(_column(page, "id"), key=int) == sorted(fallback, key=int)
    assert set(_column(page, "basis")) == {"fallback guess"}
    assert page.locator("#runs tbody tr.basis-fallback").count() == len(fallback)
    style = page.eval_on_selector("#runs tbody tr.basis-fallback td", "td => getComputedStyle(td).fontStyle")
    assert style == "italic"  # visibly different from a finding
    _open(page, html, f"#run={fallback[0]}")
    assert "Fallback guess." in page.locator("#rv-body .banner.fallback").inner_text()
    page.select_option("#f-basis", "")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.evaluate("document.getElementById('rv-close').click()")
    page.screenshot(path=str(ARTIFACTS / "report-overview.png"))


def test_charts_are_inline_svg_with_top_agents_and_other(page, built):
    html, diags = built
    _open(page, html)
    bars = page.locator("#chart-agent rect")
    assert bars.count() == 9  # top 8 + "other"
    assert "other (" in page.locator("#chart-agent").inner_html()
    cats = Counter(d["category"] for d in diags)
    assert page.locator("#chart-cat rect").count() == len(cats)
    page.locator("#chart-cat rect").first.click()  # a bar filters by its category
    top = cats.most_common(1)[0]
    assert set(_column(page, "cat")) == {top[0]} and page.inner_text("#count") == f"{top[1]} of 126 run(s) match"


def test_a_large_report_with_compressed_details_opens_runs(page, built, tmp_path):
    """Above `compress_above` runs the details are gzip chunks the page decompresses on demand."""
    from trajaudit.engine.run.batch import audit_paths
    from trajaudit.engine.run.pipeline import AuditSpec
    from trajaudit.report.html import HtmlReport

    html, diags = built
    ww = Path(diags[0]["file"]).parent
    rep = HtmlReport(title="compressed", compress_above=5)
    try:
        audit_paths([ww / f"{i}.json" for i in range(1, 21)], AuditSpec(), on_result=rep.add)
        doc = rep.render()
    finally:
        rep.close()
    assert 'type="application/gzip-base64"' in doc and 'id="d0"' not in doc
    path = tmp_path / "big.html"
    path.write_text(doc, encoding="utf-8")
    d = next(x for x in diags if x["trajectory_id"] == "17")
    _open(page, path, f"#run=17&step={d['critical_step']}")
    page.wait_for_selector(f"#rv-step-{d['critical_step']}.critical")
    assert page.inner_text("#rv-title").startswith("run 17")
    word, rid = _step_only_word(doc)  # searching the steps decompresses every chunk
    page.fill("#q", word)
    page.check("#f-deep")
    page.wait_for_function("document.querySelectorAll('#runs tbody tr').length === 1")
    assert _column(page, "id") == [rid]


def test_hostile_trace_text_stays_text_in_the_browser(page, tmp_path):
    evil = "</script><script>window.__pwned = 1</script><img src=x onerror='window.__pwned=2'> \u2028 \u202eevil"
    src = tmp_path / "run.json"
    src.write_text(json.dumps([{"role": "user", "content": "find it"}, {"role": "assistant", "content": evil}]))
    html = tmp_path / "r.html"
    r = CliRunner().invoke(main, ["audit", str(src), "-o", str(tmp_path / "d.jsonl"), "--report", str(html), "-q"])
    assert r.exit_code == 0, r.output
    page.on("request", lambda req: page.errors.append(f"request {req.url}") if "x" == req.url.rsplit("/", 1)[-1] else None)
    _open(page, html, "#run=run&step=1")
    page.wait_for_selector("#rv-step-1")
    page.evaluate("document.getElementById('rv-step-1').open = true")
    assert page.evaluate("window.__pwned") is None
    text = page.inner_text("#rv-step-1 pre")
    assert "<script>window.__pwned = 1</script>" in text and "⟨U+202E⟩evil" in text
    assert page.locator("#rv-body img").count() == 0
