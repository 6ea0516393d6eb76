"""``trajaudit show`` and ``trajaudit convert``: look at a trajectory, or write its IR."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from trajaudit.boundary import each_run
from trajaudit.cli.common import (
    EXIT_FINDINGS,
    console,
    fail,
    handle_errors,
    input_roles,
    print_line,
    refuse_overwriting_input,
    report_load,
    report_problems,
    write_text,
)
from trajaudit.cli.options import check_run_choice, io_options, run_options, select_run_id, warn_output_name
from trajaudit.engine.trace.ir import Trajectory, renumbered
from trajaudit.engine.trace.loader import TRACE_SUFFIXES, load_path

_KIND_STYLE = {"system": "dim", "user": "cyan", "agent": "bold", "tool": "green"}


@click.command("show")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@run_options("Show only one run")
@click.option("--width", type=click.IntRange(min=10), default=90, show_default=True,
              help="Preview width in characters (at least 10).")
@io_options(["table", "json"], "table", help="Output: a table per run, or the outlines as JSON.")
@handle_errors
def show(file: str, record: int | None, run_id: str | None, width: int, out_format: str, fmt: str | None,
         mapping: str | None) -> None:
    """Print the outline of each trajectory in FILE: index, agent, kind, tool, one-line preview.

    The index is the step's 0-based index, which diagnoses and gold labels use: the position of the
    message in the file's message list, except where one message became several steps (an Anthropic
    message holding several tool results); then a "msg" column gives each step's message position.

    \b
    Examples:
      trajaudit show examples/data/tau_retail_sample.json --record 0
      trajaudit show runs.jsonl --id 5 --width 120
      trajaudit show run.json --format json
    """
    check_run_choice(record, run_id)
    res = load_path(file, format=fmt, mapping=mapping, record=record)
    report_load(res.trajectories, res.problems)
    runs = select_run_id(res.trajectories, file, run_id)
    if out_format == "json":
        docs, failed = each_run(runs, lambda t: _outline_doc(t, width), "show")
        report_problems(failed)
        if not docs:
            fail(f"{file}: no trajectory could be loaded")
        click.echo(json.dumps([d for _, d in docs], ensure_ascii=False, indent=1))
        return
    tables, failed = each_run(runs, lambda t: _outline_table(t, width), "show")
    report_problems(failed)
    out = console()
    for t, table in tables:
        out.print(table)
        if t.task:  # after the run's table (its title names the run), cut at a word with "…"
            task = " ".join(t.task.split())
            if len(task) > width * 2:
                task = task[: width * 2].rsplit(" ", 1)[0] + " …"
            out.print(f"task: {task}", highlight=False, markup=False)
    if not tables:
        fail(f"{file}: no trajectory could be loaded")


def _outline_doc(t: Trajectory, width: int) -> dict[str, Any]:
    """The outline of one run as JSON (``show --format json``)."""
    return {"id": t.id, "format": t.source.format, "file": t.source.file, "record": t.source.record,
            "task": t.task, "steps": t.outline(width)}


def _outline_table(t: Trajectory, width: int) -> Table:
    """The outline table of one run (``show``)."""
    title = f"{t.id}  [{t.source.format}]  {len(t.steps)} steps, {len(t.decision_steps)} decision steps"
    table = Table(title=title, title_justify="left", show_lines=False, expand=False)
    split = renumbered(t)
    table.add_column("#", justify="right")
    if split:  # steps are no longer message positions: say which message each step came from
        table.add_column("msg", justify="right")
    table.add_column("kind")
    table.add_column("agent")
    table.add_column("tool", overflow="ellipsis", max_width=24)
    table.add_column("preview", overflow="ellipsis", no_wrap=True, ratio=1)
    for row in t.outline(width):
        style = _KIND_STYLE.get(row["kind"], "")
        flags = t.steps[row["index"]].flags
        out_step = t.steps[row["index"]].tool_output
        failed = "  ✗ failed" if out_step is not None and out_step.is_error else ""
        preview = row["preview"] + failed + (f"  ⚑{','.join(flags)}" if flags else "")
        msg = [str(t.steps[row["index"]].source_number)] if split else []
        table.add_row(str(row["index"]), *msg, row["kind"], row["agent"] or "", row["tool"], preview, style=style)
    return table


@click.command("convert")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="Output path: .json for one run (a list if several), .jsonl for one run per line.")
@run_options("Convert only one run")
@io_options(["json", "jsonl"], None, help="Layout of -o: json (one run, or a list) or jsonl (one run per line); "
                                          "default: from the -o suffix.")
@handle_errors
def convert(file: str, output: str, record: int | None, run_id: str | None, out_format: str | None,
            fmt: str | None, mapping: str | None) -> None:
    """Convert FILE to the trajaudit IR (validated against trajectory.schema.json).

    The output suffix (or --format) chooses the layout: .json (one run, or a list of runs) or
    .jsonl/.ndjson (one run per line); any other suffix is a usage error (exit 2), checked before
    FILE is read. A run that cannot be read (a bad JSONL line, a record in no known format) is named
    and skipped, the others written; the exit code is then 1 (2 when no run could be read).
    """
    check_run_choice(record, run_id)
    if not output.lower().endswith(TRACE_SUFFIXES):
        fail(f"-o/--output must end in .json, .jsonl or .ndjson, got {output!r}")
    refuse_overwriting_input(output, [file, *([mapping] if mapping else [])], roles=input_roles(mapping=mapping))
    layout = out_format or ("jsonl" if output.lower().endswith((".jsonl", ".ndjson")) else "json")
    warn_output_name("-o", output, layout)  # --format json into x.jsonl: one JSON document under a JSONL name
    res = load_path(file, format=fmt, mapping=mapping, record=record)
    report_load(res.trajectories, res.problems)
    runs = select_run_id(res.trajectories, file, run_id)
    converted, failed = each_run(runs, lambda t: t.to_dict(), "convert")
    report_problems(failed)
    if not converted:
        fail(f"{file}: no trajectory could be loaded")
    dicts = [d for _, d in converted]
    out = Path(output)
    if layout == "jsonl":
        write_text(out, "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in dicts))
    else:
        write_text(out, json.dumps(dicts[0] if len(dicts) == 1 else dicts, ensure_ascii=False, indent=1))
    skipped = len(res.problems) + len(failed)  # each named above; the file holds the others
    print_line(console(err=True), f"wrote {len(dicts)} trajectory(ies) to {output}"
               + (f"; {skipped} skipped (listed above)" if skipped else ""))
    if skipped:  # as audit and check: a run left out of the output must not pass a pipeline step
        raise SystemExit(EXIT_FINDINGS)
