"""``trajaudit claims``: print the claim ledger of each run (claim, kind, introduced at, status,
evidence, reused in), its error steps, or export the claim-dependency graph."""

from __future__ import annotations

import json

import click
from rich.markup import escape
from rich.table import Table

from trajaudit.boundary import each_run
from trajaudit.cli.common import (
    console,
    fail,
    handle_errors,
    print_line,
    report_load,
    report_problems,
    terminal_safe,
)
from trajaudit.cli.options import check_run_choice, io_options, run_options, select_run_id
from trajaudit.engine.claims import ClaimConfig, build_claim_graph
from trajaudit.engine.claims.export import ledger_rows, to_graphml, to_node_link, to_text
from trajaudit.engine.trace.loader import load_path

_STATUS_STYLE = {"DIRECT": "green", "WEAK": "yellow", "MISSING": "bold red", "CONFLICTING": "bold magenta"}


@click.command("claims")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@run_options("Only one run")
@io_options(["table", "text", "json", "graphml"], "table",
            help="table/text: the ledger; json: node-link graph + ledger; graphml: the graph.")
@click.option("--unsupported", is_flag=True, help="List only MISSING and CONFLICTING claims.")
@click.option("--max-claims-per-step", type=int, default=ClaimConfig.max_claims_per_step, show_default=True,
              help="Cap on claims extracted from one step (hits are reported).")
@handle_errors
def claims(file: str, record: int | None, run_id: str | None, out_format: str, unsupported: bool,
           max_claims_per_step: int, fmt: str | None, mapping: str | None) -> None:
    """Print the claim ledger of each run in FILE (DRIFT: claims, support, dependency trace).

    Step numbers are 0-based positions in the file's message list. Exit code 0 (the ledger is a
    report, not a check); 2 on unreadable input.

    \b
    Examples:
      trajaudit claims examples/data/tau_retail_sample.json --record 0 --unsupported
      trajaudit claims run.json --format graphml > claims.graphml
    """
    if max_claims_per_step < 1:
        fail("--max-claims-per-step must be at least 1")
    check_run_choice(record, run_id)
    res = load_path(file, format=fmt, mapping=mapping, record=record)
    report_load(res.trajectories, res.problems)
    runs = select_run_id(res.trajectories, file, run_id)
    cfg = ClaimConfig(max_claims_per_step=max_claims_per_step)
    built, failed = each_run(runs, lambda t: build_claim_graph(t, cfg), "claims")
    report_problems(failed)
    if not built:
        fail(f"{file}: no trajectory could be loaded")
    graphs = [g for _, g in built]
    out = console()
    if out_format == "json":
        docs = [to_node_link(g) for g in graphs]
        click.echo(json.dumps(docs[0] if len(docs) == 1 else docs, ensure_ascii=False, indent=1, default=str))
        return
    if out_format == "graphml":
        if len(graphs) > 1:
            fail(f"{file} holds {len(graphs)} runs; choose one with --record or --id for GraphML")
        click.echo(to_graphml(graphs[0]))
        return
    for g in graphs:
        p = g.propagate()
        if out_format == "text":
            click.echo(terminal_safe(to_text(g, unsupported)))  # the run id, notes, addresses: trace text
            continue
        final = "none" if g.final_step is None else g.final_step
        first = "none" if p.first_error_step is None else p.first_error_step
        title = (f"{g.trajectory.id}: {len(g.claims)} claims · final answer at step: {final} · "
                 f"first error step: {first} · error steps {list(p.error_steps)}")
        table = Table(title=title, title_justify="left")
        for col, just in (("id", "right"), ("claim", "left"), ("kind", "left"), ("introduced at", "left"),
                          ("status", "left"), ("evidence", "left"), ("reused in", "left"), ("final", "left")):
            table.add_column(col, justify=just, overflow="fold")  # type: ignore[arg-type]
        for r in ledger_rows(g, unsupported):
            table.add_row(r["id"], r["claim"], r["kind"], r["introduced"], r["status"], r["evidence"],
                          r["reused_in"], r["final"], style=_STATUS_STYLE.get(r["status"], ""))
        out.print(table)
        for s in p.error_steps:
            out.print(f"  error step {s} ({p.roles[s]}): {' → '.join(p.chains[s])}", highlight=False)
        for note in g.incomplete:
            print_line(out, f"  [yellow]incomplete:[/] {escape(note)}", markup=True)
