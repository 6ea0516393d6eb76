"""``trajaudit check``: evaluate rule packs on trace files and print the validation logs."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.table import Table

from trajaudit.checkers.tool_schemas import read_tool_list
from trajaudit.cli.common import (
    EXIT_FINDINGS,
    console,
    fail,
    handle_errors,
    input_format_option,
    refuse_overwriting_input,
    report_load,
    write_text,
)
from trajaudit.engine.packs.selection import load_rules
from trajaudit.engine.trace.loader import load_many
from trajaudit.engine.validation.rule_eval import evaluate
from trajaudit.engine.validation_log import ValidationLog, severity_rank

_VERDICT_STYLE = {"fail": "bold red", "unknown": "yellow", "pass": "green"}


def read_tools(path: str | None) -> list[dict[str, Any]] | None:
    """OpenAI function schemas from a JSON file (a list, as written), or ``None``.

    Raises:
        TrajauditError: as :func:`~trajaudit.checkers.tool_schemas.load_tools` (which validates every
            tool's ``parameters`` against the JSON Schema metaschema).
    """
    return None if path is None else read_tool_list(path)


def render_table(vlog: ValidationLog, show_pass: bool) -> Table:
    """A rich table of one validation log (failures and unknowns; passes with ``show_pass``)."""
    s = vlog.summary()
    v = s["verdicts"]
    title = (f"{vlog.trajectory_id}: {v['fail']} fail, {v['unknown']} unknown, {v['pass']} pass, "
             f"{v['skip']} skipped")
    t = Table(title=title, title_justify="left", expand=False)
    for col in ("step", "verdict", "severity", "rule", "message", "evidence"):
        t.add_column(col, overflow="fold")
    for r in vlog.records:
        if r.verdict == "pass" and not show_pass:
            continue
        ev = ", ".join(e.address for e in r.evidence[:4]) + (" …" if len(r.evidence) > 4 else "")
        t.add_row(str(r.step), r.verdict, r.severity, r.rule_id, r.message or r.reason or "", ev,
                  style=_VERDICT_STYLE.get(r.verdict, ""))
    if vlog.incomplete:
        t.caption = "incomplete: " + "; ".join(vlog.incomplete)
    return t


def never_evaluated(logs: list[ValidationLog]) -> list[tuple[str, int, str]]:
    """``(rule id, unknown records, first reason)`` for each rule that applied somewhere in ``logs`` but was
    ``unknown`` at every such step (e.g. ``len(null)``): it can never report a violation."""
    seen: dict[str, list[Any]] = {}
    for lg in logs:
        for r in lg.records:
            if r.verdict in ("pass", "fail", "unknown"):
                seen.setdefault(r.rule_id, []).append(r)
    return [(rid, len(rs), rs[0].reason or "-") for rid, rs in seen.items() if all(r.verdict == "unknown" for r in rs)]


@click.command("check")
@click.argument("files", nargs=-1, required=True)
@click.option("--rules", "packs", multiple=True, metavar="PACK",
              help="A rule pack: a YAML file or a shipped pack's name (repeatable).")
@click.option("--format", "out_format", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="Output: a table per run, or a JSON list of validation logs.")
@click.option("--fail-on", type=click.Choice(["info", "warning", "error", "critical"]), default="error",
              show_default=True,
              help="Exit 1 when a violation at or above this severity exists (exit 1 also when an input was skipped).")
@click.option("--tools", "tools_file", type=click.Path(dir_okay=False),
              help="JSON list of OpenAI function schemas: adds the SCHEMA rules of `rules from-tools` "
                   "and is given to checkers that validate tool calls.")
@click.option("--show-pass", is_flag=True, help="Also list passing checks in the table.")
@input_format_option(dest="input_format")
@click.option("--mapping", type=click.Path(exists=True, dir_okay=False),
              help="YAML mapping of jmespath expressions for a custom trace format.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the JSON logs to this file too.")
@handle_errors
def check(files: tuple[str, ...], packs: tuple[str, ...], out_format: str, fail_on: str, tools_file: str | None,
          show_pass: bool, input_format: str | None, mapping: str | None, output: str | None) -> None:
    """Evaluate rule packs on every run in FILES and print the validation logs.

    Exit code 0 when no violation reaches --fail-on and every input was read; 1 when one does, or
    when an input (a file or a run in it) could not be read and was skipped (listed as `skipped:`),
    so a broken trace does not pass a CI gate; 2 on usage or input errors (an unreadable pack, a
    rule that does not compile, a rule id defined by two packs, no loadable run at all).

    \b
    Examples:
      trajaudit check runs.json --rules generic
      trajaudit check runs.json --rules generic --rules tau_retail --tools tools.json --fail-on warning
      trajaudit check runs/*.json --rules my_pack.yaml --format json -o logs.json
    """
    if not packs and not tools_file:
        fail("give at least one --rules PACK or --tools TOOLS.json")
    refuse_overwriting_input(output, [*files, *packs, *([tools_file] if tools_file else [])])
    tools = read_tools(tools_file)
    # as audit combines packs: unique ids, superseded rules left out, the tools' SCHEMA rules added
    rules = load_rules(packs, tools)
    res = load_many(list(files), format=input_format, mapping=mapping)
    report_load(res.trajectories, res.problems)
    if not res.trajectories:
        fail("no trajectory could be loaded from " + ", ".join(files))
    logs = [evaluate(t, rules, tools=tools) for t in res.trajectories]
    if out_format == "json" or output:
        text = json.dumps([lg.to_dict() for lg in logs], ensure_ascii=False, indent=1, default=str)
        if output:
            write_text(output, text + "\n")
        if out_format == "json":
            click.echo(text)
    if out_format == "table":
        out = console()
        for lg in logs:
            table = render_table(lg, show_pass)
            if table.row_count or lg.incomplete:
                out.print(table)
            else:
                out.print(table.title, highlight=False, markup=False)
    floor = severity_rank(fail_on)
    bad = sum(1 for lg in logs for r in lg.records if r.verdict == "fail" and severity_rank(r.severity) >= floor)
    total_fail = sum(lg.summary()["verdicts"]["fail"] for lg in logs)
    skipped = f"; {len(res.problems)} input(s) skipped (listed above)" if res.problems else ""
    console(err=True).print(f"{len(logs)} run(s), {len(rules)} rule(s): {total_fail} violation(s), "
                            f"{bad} at or above {fail_on}{skipped}", highlight=False)
    for rid, n, reason in never_evaluated(logs):  # a warning only: exit codes stay about violations
        console(err=True).print(f"warning: rule {rid} could not be evaluated at {n} step(s) where it applied "
                                f"(never pass or fail; first reason: {reason})", markup=False, highlight=False,
                                soft_wrap=True)
    if bad or res.problems:
        raise SystemExit(EXIT_FINDINGS)
