"""``trajaudit cite``: citation and faithfulness tracing of a multi-agent deep-research run (Hirsch et
al., *Who is the Agent to Blame? Localizing Faithfulness and Citation Mistakes in Agentic Deep
Research*: docs/citation.md)."""

from __future__ import annotations

import json

import click
from rich.table import Table

from trajaudit.citation import (
    ERROR_TYPES,
    LLMJudge,
    OfflineCitationJudge,
    audit_citations,
    load_run,
    render_page,
    to_validation_log,
)
from trajaudit.citation.local import UNKNOWN
from trajaudit.cli.common import (
    EXIT_FINDINGS,
    LLMOptions,
    client_from_options,
    console,
    fail,
    handle_errors,
    input_roles,
    llm_options,
    print_line,
    refuse_dash,
    refuse_overwriting_input,
    refuse_same_outputs,
    write_text,
)
from trajaudit.cli.options import io_options
from trajaudit.cli.outputs import OutputSet


def _cut(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters at a word boundary when one is near, with "…" when cut."""
    if len(text) <= width:
        return text
    head = text[: width - 1]
    space = head.rfind(" ")
    return (head[:space] if space >= width // 2 else head).rstrip() + "…"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


@click.command("cite")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--mapping", type=click.Path(exists=True, dir_okay=False),
              help="YAML mapping (jmespath) from your system's trace to the citation-run form.")
@io_options(["table", "json"], "table", help="Output: human tables, or the full JSON report.", input_format=False,
            mapping=False)
@click.option("--html", "html_out", type=click.Path(dir_okay=False),
              help="Also write an HTML page with the propagation chain of each traced error (a file: stdout "
                   "carries the report, so '-' is refused; ./- for a file named '-').")
@click.option("--log", "log_out", type=click.Path(dir_okay=False),
              help="Also write the validation log (JSON) of the audit (a file, as --html).")
@click.option("--llm", "use_llm", is_flag=True,
              help="Judge with an LLM (the prompts of the citation-faithfulness tracing paper, docs/citation.md) instead of the approximate offline judge; needs an "
                   "endpoint (--base-url/--model or TRAJAUDIT_BASE_URL/TRAJAUDIT_MODEL, or --llm-config).")
@llm_options
@handle_errors
def cite(file: str, mapping: str | None, out_format: str, html_out: str | None, log_out: str | None,
         use_llm: bool, llm_opts: LLMOptions) -> None:
    """Trace citation and faithfulness errors of a deep-research run back to the agent that made them.

    FILE is a citation run (docs/citation.md), or any JSON trace with --mapping. Every agent invocation
    is tested against its own inputs (hallucination, uncited input reliance, uncited output,
    insufficient citations); each unsupported final-report sentence is followed back to the invocation
    that introduced its error. Prints per-agent error rates and the final report's citation recall and
    precision. By default the offline judge decides (lexical + exact numeric overlap): its verdicts are
    APPROXIMATE. With --llm an LLM judges (need-citation, verbatim supporting spans, entailment), its
    answers cached like every trajaudit LLM call; sentences it cannot judge are `unknown`, and a judge
    that fails on every sentence (endpoint down, model ignoring the schema) is an error. Exit code 1
    when any error is found, 2 on bad input or an unusable LLM.

    \b
    Examples:
      trajaudit cite examples/citation/ev_market.json --html cite.html
      trajaudit cite trace.json --mapping examples/citation/mappings/aiq_like.yaml --format json
      trajaudit cite run.json --llm --base-url http://localhost:8000/v1 --model M
    """
    given = [file, *([mapping] if mapping else [])]
    # '-' made a file named '-' (the "wrote -" line said so, nothing else): stdout carries the report
    stdout_has = "stdout carries the report: the tables, or the JSON of --format json"
    refuse_dash(html_out, "--html", f"the HTML page is written to a file ({stdout_has})")
    refuse_dash(log_out, "--log", f"the validation log is written to a file ({stdout_has})")
    refuse_same_outputs({"--html": html_out, "--log": log_out})
    roles = input_roles(mapping=mapping)
    refuse_overwriting_input(html_out, given, "--html", roles)
    refuse_overwriting_input(log_out, given, "--log", roles)
    run = load_run(file, mapping=mapping)
    if use_llm:
        client = client_from_options(llm_opts, without_llm="Without an LLM, run `trajaudit cite` without --llm "
                                                             "(the approximate offline judge).")
        try:
            report = audit_citations(run, LLMJudge(client, model=client.config.model))
        finally:
            client.close()
        _llm_summary(report, client.usage)
    else:
        report = audit_citations(run, OfflineCitationJudge())
    with OutputSet() as outs:  # --html and --log replaced together (a signal: both old, or both new)
        if html_out:
            write_text(html_out, render_page(report), outs)
        if log_out:
            write_text(log_out, to_validation_log(report).to_json(), outs)
        outs.commit()
    if out_format == "json":
        click.echo(json.dumps(report.to_dict(), ensure_ascii=False, indent=1))
    else:
        _print_tables(report)
    if html_out or log_out:
        written = ", ".join(p for p in (html_out, log_out) if p)
        print_line(console(err=True), f"wrote {written}")
    if report.local_errors() or report.traced:
        raise SystemExit(EXIT_FINDINGS)


def _llm_summary(report, usage) -> None:  # noqa: ANN001 (CitationReport, Usage; imported lazily)
    """Print the LLM accounting to stderr; exit 2 when the judge failed on every sentence it was asked about."""
    u = usage.to_dict()
    console(err=True).print(
        f"LLM judge: {u['requests']} requests, {u['calls']} calls, {u['cache_hits']} cache hits, "
        f"{u['input_chars']:,} input chars (tokenizer-free), {u['input_tokens']:,} input tokens (API)",
        highlight=False, markup=False)
    results = [r for rs in report.results.values() for r in rs]
    failed = [r for r in results if r.verdict == UNKNOWN]
    if results and len(failed) == len(results):
        fail(f"the LLM judge failed on all {len(results)} sentences; first: {failed[0].reason}")


def _print_tables(report) -> None:  # noqa: ANN001 (CitationReport, imported lazily)

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
                       " → ".join(h.ref.invocation for h in e.chain), _cut(e.text, 100))
        out.print(tr)
