"""``trajaudit cite``: citation and faithfulness tracing of a multi-agent deep-research run (seed 003)."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.table import Table

from trajaudit.cli.common import EXIT_FINDINGS, console, handle_errors


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


@click.command("cite")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--mapping", type=click.Path(exists=True, dir_okay=False),
              help="YAML mapping (jmespath) from your system's trace to the citation-run form.")
@click.option("--format", "out_format", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="Output: human tables, or the full JSON report.")
@click.option("--html", "html_out", type=click.Path(dir_okay=False),
              help="Also write an HTML page with the propagation chain of each traced error.")
@click.option("--log", "log_out", type=click.Path(dir_okay=False),
              help="Also write the validation log (JSON) of the audit.")
@handle_errors
def cite(file: str, mapping: str | None, out_format: str, html_out: str | None, log_out: str | None) -> None:
    """Trace citation and faithfulness errors of a deep-research run back to the agent that made them.

    FILE is a citation run (docs/citation.md), or any JSON trace with --mapping. Every agent invocation
    is tested against its own inputs (hallucination, uncited input reliance, uncited output,
    insufficient citations); each unsupported final-report sentence is followed back to the invocation
    that introduced its error. Prints per-agent error rates and the final report's citation recall and
    precision. This command uses the offline judge (lexical + exact numeric overlap): its verdicts are
    APPROXIMATE. Exit code 1 when any error is found.
    """
    from trajaudit.citation import OfflineJudge, audit_citations, load_run, render_page, to_validation_log

    run = load_run(file, mapping=mapping)
    report = audit_citations(run, OfflineJudge())
    if html_out:
        Path(html_out).write_text(render_page(report), encoding="utf-8")
    if log_out:
        Path(log_out).write_text(to_validation_log(report).to_json(), encoding="utf-8")
    if out_format == "json":
        click.echo(json.dumps(report.to_dict(), ensure_ascii=False, indent=1))
    else:
        _print_tables(report)
    if html_out or log_out:
        written = ", ".join(p for p in (html_out, log_out) if p)
        console(err=True).print(f"wrote {written}", highlight=False, markup=False)
    if report.local_errors() or report.traced:
        raise SystemExit(EXIT_FINDINGS)


def _print_tables(report) -> None:  # noqa: ANN001 (CitationReport, imported lazily)
    from trajaudit.citation import ERROR_TYPES

    out = console()
    run = report.run
    out.print(f"citation audit: {run.id}  [{run.format}]  {len(run.invocations)} invocations, "
              f"{len(run.documents)} documents", highlight=False, markup=False)
    out.print(f"judge: {report.judge['description']}", highlight=False, markup=False)
    need = [f for f in report.final if f.needs_citation]
    sup = sum(1 for f in need if f.supported)
    cits = [v for f in need for v in f.relevant.values()]
    out.print(f"final report ({run.final}): citation recall {_pct(report.recall)} ({sup}/{len(need)} sentences), "
              f"citation precision {_pct(report.precision)} ({sum(cits)}/{len(cits)} citations)",
              highlight=False, markup=False)
    t = Table(title="agent-level error rates (sentences needing a citation)", title_justify="left")
    for col in ("agent", "invocations", "evaluated", "error rate", *(e.replace("_", " ") for e in ERROR_TYPES),
                "unknown", "final-report errors"):
        t.add_column(col, justify="left" if col == "agent" else "right")
    for a in report.agents:
        t.add_row(a.agent, str(a.invocations), str(a.evaluated), _pct(a.error_rate),
                  *(f"{a.errors[e]} ({_pct(a.rate(e))})" for e in ERROR_TYPES), str(a.unknown),
                  f"{a.final_errors} ({_pct(a.final_share)})")
    out.print(t)
    if report.traced:
        tr = Table(title="final-report errors traced to their origin", title_justify="left")
        for col in ("sentence", "origin", "error type", "chain", "text"):
            tr.add_column(col, overflow="fold")
        for e in report.traced:
            o = e.origin
            tr.add_row(str(e.sentence), str(o.ref) if o else e.status, o.verdict if o else "–",
                       " → ".join(h.ref.invocation for h in e.chain), e.text[:100])
        out.print(tr)
