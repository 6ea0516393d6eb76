"""``trajaudit check``: evaluate rule packs on trace files and print the validation logs."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click
from rich.table import Table

from trajaudit import __version__
from trajaudit.boundary import each_run
from trajaudit.checkers.tool_schemas import read_tool_list
from trajaudit.cli.common import (
    EXIT_FINDINGS,
    RuleUse,
    check_output_folder,
    console,
    fail,
    handle_errors,
    input_roles,
    print_line,
    refuse_overwriting_input,
    report_load,
    say_never_fired,
    terminal_safe,
    warn_incomplete,
    write_text,
)
from trajaudit.cli.options import (
    check_input_paths,
    io_options,
    note_unread_files,
    run_timeout_option,
    warn_output_name,
)
from trajaudit.cli.outputs import without_own_outputs
from trajaudit.cli.unknowns import Unknowns
from trajaudit.engine.config import AuditConfig
from trajaudit.engine.packs.compile import CompiledRule
from trajaudit.engine.packs.selection import default_packs, load_rules
from trajaudit.engine.run.evidence import rules_for
from trajaudit.engine.strategies.context import AuditContext
from trajaudit.engine.trace.forced_format import mapping_for
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.engine.trace.loader import LoadResult, load_many
from trajaudit.engine.validation.rule_eval import evaluate
from trajaudit.engine.validation_log import Record, ValidationLog, severity_rank
from trajaudit.errors import Problem
from trajaudit.report.ci import RunFindings, junit_xml, sarif_text
from trajaudit.report.html import rule_titles
from trajaudit.run_budget import DEFAULT_RUN_TIMEOUT

_VERDICT_STYLE = {"fail": "bold red", "unknown": "yellow", "pass": "green"}


def read_tools(path: str | None) -> list[dict[str, Any]] | None:
    """OpenAI function schemas from a JSON file (a list, as written), or ``None``.

    Raises:
        TrajauditError: as :func:`~trajaudit.checkers.tool_schemas.load_tools` (which validates every
            tool's ``parameters`` against the JSON Schema metaschema).
    """
    return None if path is None else read_tool_list(path)


_CHECK_COLUMNS = ("step", "verdict", "severity", "rule", "message", "evidence")
#: the narrowest message column kept beside the rule ids; with less room the message goes under its
#: rule id, in the rule column ("rule / message")
MIN_MESSAGE = 20


def render_table(vlog: ValidationLog, show_pass: bool, width: int | None = None) -> Table:
    """A rich table of one validation log (failures and unknowns; passes with ``show_pass``), fitted
    to ``width`` terminal cells (``None``: every column, as wide as rich makes them) by
    :func:`fit_check_columns`: whole columns are left out, or the message put under its rule id,
    rather than every column squeezed; rule ids are never cut. Cells hold their text as the console
    shows it (:func:`~trajaudit.cli.common.terminal_safe`: ESC as ``\\x1b``), and are measured so."""
    s = vlog.summary()
    v = s["verdicts"]
    title = (f"{vlog.trajectory_id}: {v['fail']} fail, {v['unknown']} unknown, {v['pass']} pass, "
             f"{v['skip']} skipped")
    t = Table(title=title, title_justify="left", caption_justify="left", expand=False)
    rows = []
    for r in vlog.records:
        if r.verdict == "pass" and not show_pass:
            continue
        ev = ", ".join(e.address for e in r.evidence[:4]) + (" …" if len(r.evidence) > 4 else "")
        # measured as displayed: the console shows ESC as \x1b (4 cells, where rich counts the raw ESC as
        # 0), so a cell measured raw got too narrow a column and an address was cut mid-way
        raw = (str(r.step), r.verdict, r.severity, r.rule_id, r.message or r.reason or "", ev)
        rows.append((tuple(terminal_safe(c) for c in raw), r.verdict))
    shown, stacked = fit_check_columns([cells for cells, _ in rows], width)
    for col, fixed in shown.items():
        t.add_column("rule / message" if col == "rule" and stacked else col, overflow="fold", width=fixed)
    at = [_CHECK_COLUMNS.index(col) for col in shown]
    for cells, verdict in rows:
        if stacked:  # the message on the lines under the rule id
            cells = (*cells[:3], f"{cells[3]}\n{cells[4]}".rstrip(), *cells[4:])
        t.add_row(*(cells[i] for i in at), style=_VERDICT_STYLE.get(verdict, ""))
    if vlog.incomplete:
        t.caption = "incomplete: " + "; ".join(vlog.incomplete)
    return t


def fit_check_columns(rows: list[tuple[str, ...]], width: int | None) -> tuple[dict[str, int | None], bool]:
    """The columns of a ``check`` table (of :data:`_CHECK_COLUMNS`) shown within ``width`` terminal
    cells, each with its fixed width (``None``: rich sizes it), and whether the message goes under the
    rule id (``True``: no message column). When every cell fits whole on one line, rich sizes them all.

    Otherwise the message (or the rule id with the message under it) wraps in the room the other
    columns leave; each of them needs its longest cell (the step, the verdict, the severity, the rule id: never cut),
    the message :data:`MIN_MESSAGE` (it wraps between words), the evidence its longest address (it
    wraps between addresses). When they do not all fit, the evidence, then the severity are left out
    whole; then the message goes under the rule id; last the verdict is left out (the row's colour
    still says it). Rich would otherwise squeeze every column to a few characters ("evidenc|e",
    "generic|.protoc|ol.no-r…")."""
    from rich.cells import cell_len

    def longest(col: str, whole: bool = True) -> int:
        i = _CHECK_COLUMNS.index(col)
        cells = [c for row in rows for c in ([row[i]] if whole or i < 5 else row[i].split(", "))]
        return max([cell_len(col)] + [cell_len(c) for c in cells])

    def need(col: str) -> int:  # the evidence: its longest address and the comma after it
        if col == "message":
            return min(longest(col), MIN_MESSAGE)
        return longest(col, whole=False) + (col == "evidence" and any(", " in row[5] for row in rows))

    def fits(cols: list[str], size: Callable[[str], int] = need) -> bool:  # padding, rules between, edges
        return sum(size(c) for c in cols) + 3 * len(cols) + 1 <= (width or 0)

    cols = list(_CHECK_COLUMNS)
    if width is None or fits(cols, longest):
        return dict.fromkeys(cols), False
    for leave_out in ("evidence", "severity", ""):
        if fits(cols):
            return {c: None if c == "message" else need(c) for c in cols}, False
        if leave_out:
            cols.remove(leave_out)
    cols.remove("message")
    if not fits(cols):
        cols.remove("verdict")
    return {c: None if c == "rule" else need(c) for c in cols}, True


def never_evaluated(logs: list[ValidationLog]) -> list[tuple[str, int, str]]:
    """``(rule id, unknown records, first reason)`` for each rule that applied somewhere in ``logs`` but was
    ``unknown`` at every such step (e.g. ``len(null)``): it can never report a violation. The ``unknown``
    records of the run's time budget (``--run-timeout``) are not counted: they are checks not made, not
    steps where the rule applied (the note of the rules not evaluated names them)."""
    seen: dict[str, list[Any]] = {}
    for lg in logs:
        for r in lg.records:
            if r.verdict in ("pass", "fail", "unknown") and not r.out_of_time:
                seen.setdefault(r.rule_id, []).append(r)
    return [(rid, len(rs), rs[0].reason or "-") for rid, rs in seen.items() if all(r.verdict == "unknown" for r in rs)]


def never_fired(rule_ids: list[str], logs: list[ValidationLog]) -> list[str]:
    """The rules (ids, in the given order) whose guard never held on any run of ``logs``: not one
    record (pass, fail or unknown) anywhere — a rule that can never report anything on this data (a
    guard that names a tool the runs never call, a typo in a field name). A rule left unevaluated by
    the time budget (``--run-timeout``) is not one of them (:meth:`RuleUse.never_fired`)."""
    return rule_use(logs).never_fired(rule_ids)


def rule_use(logs: list[ValidationLog]) -> RuleUse:
    """The :class:`~trajaudit.cli.common.RuleUse` of ``logs``: the rules checked, and those and the runs
    cut by the time budget."""
    use = RuleUse()
    for lg in logs:
        use.add(lg)
    return use


@click.command("check")
@click.argument("files", nargs=-1, required=True)
@click.option("--rules", "packs", multiple=True, metavar="PACK",
              help="A rule pack to check: a YAML file or a shipped pack's name (repeatable). Without --rules the "
                   "default packs apply, as in `trajaudit audit`.")
@click.option("--no-default-packs", is_flag=True,
              help="Without --rules: only the --tools rules, not the shipped generic pack nor the shipped domain "
                   "packs selected by each run's tools.")
@io_options(["table", "json", "sarif", "junit"], "table",
            help="Output: a table per run with findings, a JSON list of validation logs, SARIF 2.1.0 (one result "
                 "per violation) or JUnit XML (a test case per run x rule).")
@click.option("--fail-on", type=click.Choice(["info", "warning", "error", "critical"]), default="error",
              show_default=True,
              help="Exit 1 when a violation at or above this severity exists (exit 1 also when an input was skipped "
                   "or a run ran out of time, --run-timeout); "
                   "in JUnit output, the severity that fails a test case.")
@click.option("--fail-on-unknown", type=click.Choice(["error", "any", "never"]), default="error", show_default=True,
              help="Exit 1 when checks are 'unknown': 'error' — because a rule could not be evaluated (its expression "
                   "raised, e.g. a division by zero, or its checker did); 'any' — also for want of data (an "
                   "assertion on missing data, a checker that cannot decide); 'never' — unknowns never fail the "
                   "gate (runs cut by --run-timeout still do).")
@click.option("--tools", "tools_file", type=click.Path(dir_okay=False),
              help="JSON list of OpenAI function schemas: adds the SCHEMA rules of `rules from-tools` "
                   "and is given to checkers that validate tool calls.")
@click.option("--show-pass", is_flag=True, help="Also list passing checks in the table.")
@click.option("--verbose", "-v", "verbose", is_flag=True, help="Table: also list the runs without findings.")
@click.option("--quiet", "-q", is_flag=True,
              help="No tables or summary: only the exit code (and errors, skipped inputs and the warnings that "
                   "results are incomplete); a --format json/sarif/junit output is still written (to stdout "
                   "without -o).")
@click.option("--all-records", is_flag=True,
              help="JSON: every record of every run (passes too); default: every run with its summary (counts of "
                   "violations, unknown checks, evaluation errors, whether it ran out of time) and only the records "
                   "that fail the gate: violations, checks cut by --run-timeout and the unknowns --fail-on-unknown "
                   "counts.")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Write the --format output (json when --format is table) to this file instead of stdout "
                   "('-': stdout, as without -o).")
@run_timeout_option(help="Rule-evaluation time budget per run (z3 time included); when used up, the checks left "
                         "are 'unknown', a warning says so (also with -q) and the exit code is 1.")
@handle_errors
def check(files: tuple[str, ...], packs: tuple[str, ...], no_default_packs: bool, out_format: str, fail_on: str,
          tools_file: str | None, show_pass: bool, verbose: bool, quiet: bool, all_records: bool, fmt: str | None,
          mapping: str | None, output: str | None, run_timeout: float = DEFAULT_RUN_TIMEOUT,
          fail_on_unknown: str = "error") -> None:
    """Evaluate rule packs on every run in FILES and print the validation logs.

    Without --rules the shipped packs apply as in `trajaudit audit` (the generic pack, and the domain
    packs that a run's tools select; --no-default-packs turns them off); with --rules, the packs named
    (a shipped pack or a part of one, such as generic.protocol, or your YAML file) are checked alone.
    --tools adds the SCHEMA rules of the tools. The table lists the runs with findings (--verbose: every
    run); the JSON every run with its summary and the records that fail the gate (--all-records: every
    record). Exit code 0 when no violation
    reaches --fail-on and every input was read and evaluated; 1 when one does, when an input (a file
    or a run in it) could not be read and was skipped (listed as `skipped:`), when a run's rule
    evaluation ran out of time (--run-timeout: its checks left are 'unknown'), or when a rule could not
    be evaluated (its checks 'unknown' with an evaluation error; --fail-on-unknown), so a broken trace,
    an unevaluated run or a broken rule does not pass a CI gate; 2 on usage or input errors (a missing file, an unreadable
    pack, a rule that does not compile, a rule id defined by two packs, no loadable run at all).

    \b
    Examples:
      trajaudit check runs.json
      trajaudit check runs.json --rules my_pack.yaml --tools tools.json --fail-on warning
      trajaudit check runs/*.json --format sarif -o trajaudit.sarif
      trajaudit check runs/*.json --format junit -o junit.xml -q
    """
    output = None if output == "-" else output  # '-': stdout, as without -o (it made a file named '-')
    _check_options(files, packs, no_default_packs, tools_file, mapping, output, out_format)
    files = _without_diagnoses(files)
    if not quiet:  # a .json.gz or .log trace in a folder is not read: say so before the batch
        note_unread_files(files)
    inputs = _gather_inputs(files, packs, no_default_packs, tools_file, fmt, mapping, run_timeout)
    checked, applied = _run_checks(inputs)
    logs = [lg for _, lg in checked]
    rule_ids = {r.id for r in inputs.rules} | set(applied)
    if out_format in ("json", "sarif", "junit") or output:
        _write_output(checked, out_format, output, all_records, packs, (fail_on, fail_on_unknown),
                      inputs.load.problems)
    if out_format == "table" and not quiet:
        _print_tables(logs, show_pass, verbose)
    floor = severity_rank(fail_on)
    bad = sum(1 for lg in logs for r in lg.records if r.verdict == "fail" and severity_rank(r.severity) >= floor)
    use, unknowns = rule_use(logs), Unknowns.of(logs)
    if not quiet:
        _print_summary(logs, len(rule_ids), list(applied), bad, fail_on, inputs.load.problems, use, unknowns,
                       machine=out_format == "json")
    # with -q too: the gate must not pass an unevaluated run, nor a rule that could not be evaluated, silently
    said = _warn_never_evaluated(logs)
    _warn_out_of_time(use, len(logs), run_timeout)
    unknown_fails = unknowns.fail_gate(fail_on_unknown)
    if unknown_fails:
        warn_incomplete(unknowns.gate_warning(fail_on_unknown, said))
    if bad or inputs.load.problems or use.runs_cut or unknown_fails:
        raise SystemExit(EXIT_FINDINGS)


def _check_options(files: tuple[str, ...], packs: tuple[str, ...], no_default_packs: bool, tools_file: str | None,
                   mapping: str | None, output: str | None, out_format: str) -> None:
    """Refuse, before anything is read, options that leave no rule, missing inputs and an ``output`` that
    would overwrite an input or lands in a folder that cannot be written (exit 2 through ``fail``)."""
    if no_default_packs and not packs and not tools_file:
        fail("--no-default-packs leaves no rule: give --rules PACK or --tools TOOLS.json")
    check_input_paths(files)
    given = [*files, *packs, *([tools_file] if tools_file else []), *([mapping] if mapping else [])]
    refuse_overwriting_input(output, given, roles=input_roles(rules=packs, tools=[tools_file], mapping=mapping))
    check_output_folder(output)
    # -o holds the JSON list when --format is table (the tables go to the terminal): name what is written
    warn_output_name("-o", output, "json" if out_format == "table" else out_format)


def _without_diagnoses(files: tuple[str, ...]) -> tuple[str, ...]:
    """``files`` without the trajaudit output files (diagnoses, check results, SARIF, JUnit) found in its folders and
    globs (``audit runs/`` writes ``runs/diagnoses.jsonl``: ``check runs/`` read it as a broken trace and
    failed the gate), with a note naming them (stderr, also with ``-q``); nothing but them left stops the command (exit 2)."""
    kept = without_own_outputs(files, lambda note: print_line(console(err=True), note))
    if not kept:
        fail(f"no trace files found under {', '.join(files)}: only trajaudit output")
    return kept


@dataclass
class _Inputs:
    """What ``check`` evaluates: the rules, the tools, the loaded runs (with the load problems so far) and
    the context :func:`~trajaudit.engine.run.evidence.rules_for` picks each run's rules from."""

    files: tuple[str, ...]
    rules: list[CompiledRule]
    tools: list[dict[str, Any]] | None
    load: LoadResult
    config: AuditConfig
    context: AuditContext


def _gather_inputs(files: tuple[str, ...], packs: tuple[str, ...], no_default_packs: bool, tools_file: str | None,
                   fmt: str | None, mapping: str | None, run_timeout: float) -> _Inputs:
    """Read the mapping, the tools, the rule packs and the runs, in that order (a bad mapping is refused
    before any run is read; an unreadable pack or tools file stops the command with exit 2).

    Packs combine as in ``audit``: unique ids, superseded rules left out, the tools' SCHEMA rules added,
    the shipped domain packs applied to the runs whose tools select them. Without ``--rules`` and
    ``--no-default-packs`` the shipped packs apply; ``--rules`` names the packs to check (sub-packs
    included)."""
    defaults = not packs and not no_default_packs
    adapter = mapping_for(fmt, mapping)  # a bad mapping is refused before any run is read
    tools = read_tools(tools_file)
    always, domains = default_packs([]) if defaults else ([], [])
    rules = load_rules(tuple(always) + tuple(packs), tools, defaults=always, domains=domains)
    res = load_many(list(files), format=fmt, mapping=adapter)
    config = AuditConfig(run_timeout=run_timeout)
    context = AuditContext(config=config, rules=rules, tools=tools, domain_packs=tuple(domains))
    return _Inputs(files=files, rules=rules, tools=tools, load=res, config=config, context=context)


def _run_checks(inputs: _Inputs) -> tuple[list[tuple[Trajectory, ValidationLog]], dict[str, None]]:
    """Evaluate each run's rules inside the per-run boundary: ``([(run, log)], applied rule ids in order)``.

    A run that fails is added to ``inputs.load.problems``; the load report (skipped inputs, non-UTF-8
    files) is printed; no checked run at all stops the command (exit 2)."""
    applied: dict[str, None] = {}  # rule ids applied to some run (after domain packs superseded some), in order

    def check_run(t: Trajectory) -> ValidationLog:
        run_rules, _ = rules_for(t, inputs.context)
        applied.update(dict.fromkeys(r.id for r in run_rules))
        return evaluate(t, run_rules, tools=inputs.tools, config=inputs.config)

    res = inputs.load
    checked, failed = each_run(res.trajectories, check_run, "check")
    res.problems.extend(failed)
    report_load(res.trajectories, res.problems)
    if not checked:
        fail("no trajectory could be loaded from " + ", ".join(inputs.files))
    return checked, applied


def _write_output(checked: list[tuple[Trajectory, ValidationLog]], out_format: str, output: str | None,
                  all_records: bool, packs: tuple[str, ...], gate: tuple[str, str], problems: list[Problem]) -> None:
    """Write the JSON list of logs (``--format json``, or ``table`` with ``-o``; after the logs, one
    ``{"skipped": ...}`` entry per skipped input, :func:`problem_json`), SARIF or JUnit to
    ``output`` (atomically), else to stdout — with ``quiet`` too: ``-q`` hides the tables and the
    summary, never the machine output asked for (``check --format sarif -q > out.sarif``). The SARIF log
    and the JUnit report also report the skipped inputs (``problems``), the runs out of time and the
    unknown checks; ``gate`` is ``(--fail-on, --fail-on-unknown)``."""
    fail_on, fail_on_unknown = gate
    if out_format in ("sarif", "junit"):
        findings = [RunFindings.of(lg, t.source.file, t.source.record) for t, lg in checked]
        text = (sarif_text(findings, titles=rule_titles(packs), version=__version__, skipped=problems)
                if out_format == "sarif"
                else junit_xml(findings, fail_on=fail_on, skipped=problems, fail_on_unknown=fail_on_unknown))
    else:
        entries = [_log_json(lg, all_records, fail_on_unknown) for _, lg in checked]
        entries += [{"skipped": problem_json(p)} for p in problems]  # after the logs: each input not checked
        text = json.dumps(entries, ensure_ascii=False, indent=1, default=str) + "\n"
    if output:
        write_text(output, text)
    else:
        click.echo(text, nl=False)


def _print_tables(logs: list[ValidationLog], show_pass: bool, verbose: bool) -> None:
    """Print a table per run with findings (or an incomplete log); with ``verbose`` every other run too
    (its table when it has rows to show, else its title line)."""
    out = console()
    for lg in logs:
        table = render_table(lg, show_pass, out.width)
        if _has_fail(lg) or lg.incomplete or (verbose and (table.row_count or show_pass)):
            out.print(table)
        elif verbose:
            out.print(table.title, highlight=False, markup=False)


def _print_summary(logs: list[ValidationLog], rule_count: int, applied: list[str], bad: int, fail_on: str,
                   problems: list[Problem], use: RuleUse, unknowns: Unknowns, machine: bool) -> None:
    """The summary on stderr: counts (the checks left 'unknown', the runs not fully evaluated in time),
    the rules that never fired and those the time budget left unevaluated; with ``machine``
    (``--format json``) also as one JSON line ``{"summary": {...}}``. The warnings that results are
    incomplete are printed apart (with ``-q`` too)."""
    err = console(err=True)
    total_fail = sum(lg.summary()["verdicts"]["fail"] for lg in logs)
    failing = sum(1 for lg in logs if _has_fail(lg))
    skipped = f"; {len(problems)} input(s) skipped (listed above)" if problems else ""
    cut = f"; {len(use.runs_cut)} run(s) not fully evaluated (--run-timeout)" if use.runs_cut else ""
    unknown = f"; {unknowns.checks} check(s) unknown ({unknowns.split()})" if unknowns.checks else ""
    print_line(err, f"{len(logs)} run(s), {rule_count} rule(s): {total_fail} violation(s), "
               f"{bad} at or above {fail_on}{skipped}{cut}{unknown}"
               + (f" ({failing} run(s) with violations)" if failing else ""))
    unevaluated = never_evaluated(logs)
    idle, not_evaluated = use.never_fired(applied), use.not_evaluated(applied)
    say_never_fired(idle, len(logs), not_evaluated=not_evaluated)
    if machine:  # the summary for machines too (stdout keeps the list of logs)
        summary = {"runs": len(logs), "rules": rule_count, "violations": total_fail, "at_or_above_fail_on": bad,
                   "fail_on": fail_on, "skipped_inputs": len(problems), "runs_with_violations": failing,
                   "never_fired": idle, "never_evaluated": [rid for rid, _, _ in unevaluated],
                   "unknown_checks": unknowns.checks, "evaluation_errors": unknowns.errors,
                   "rules_with_evaluation_errors": list(unknowns.by_rule),
                   "runs_out_of_time": use.runs_cut, "rules_out_of_time": [rid for rid in applied if rid in use.cut],
                   "not_evaluated_out_of_time": not_evaluated,
                   "problems": [problem_json(p) for p in problems]}
        click.echo(json.dumps({"summary": summary}, ensure_ascii=False), err=True)


def _warn_never_evaluated(logs: list[ValidationLog]) -> list[str]:
    """A warning (stderr, also with ``-q``) per rule that applied but was 'unknown' at every such step:
    it can never report a violation. A rule whose unknowns are evaluation errors "could not be
    evaluated" (a defect of the rule); one left unknown for want of data (no LLM configured, a null
    assertion) "could not be decided" — the words of the summary. Returns the ids of the rules named."""
    rules = never_evaluated(logs)
    errors: dict[str, set[bool]] = {}
    for lg in logs:
        for r in lg.records:
            if r.verdict == "unknown" and not r.out_of_time:
                errors.setdefault(r.rule_id, set()).add(r.eval_error)
    for rid, n, reason in rules:
        kinds = errors.get(rid, set())
        what = ("could not be evaluated or decided" if len(kinds) > 1 else
                "could not be evaluated" if True in kinds else "could not be decided (left unknown)")
        warn_incomplete(f"rule {rid} {what} at {n} step(s) where it applied "
                        f"(never pass or fail; first reason: {reason})")
    return [rid for rid, _, _ in rules]


def _warn_out_of_time(use: RuleUse, runs: int, seconds: float) -> None:
    """The warning (stderr, also with ``-q``) that runs ran out of rule-evaluation time: how many runs
    (the first few named) and rules were left unevaluated, and that the exit code is therefore 1."""
    if not use.runs_cut:
        return
    # "runs: 10, 13": a bare "(10)" read as a count; ids are never cut, the rest counted after them
    named = ", ".join(use.runs_cut[:5]) + (f" and {len(use.runs_cut) - 5} more" if len(use.runs_cut) > 5 else "")
    warn_incomplete(f"{len(use.runs_cut)} of {runs} run(s) ran out of rule-evaluation time (--run-timeout "
                    f"{seconds:g} s): {len(use.cut)} rule(s) were not evaluated to the end there, their checks left "
                    f"'unknown' (runs: {named}); the result is incomplete, so the exit code is 1")


def _has_fail(lg: ValidationLog) -> bool:
    return any(r.verdict == "fail" for r in lg.records)


def _gate_record(r: Record, fail_on_unknown: str) -> bool:
    """Whether record ``r`` is one that fails ``check``'s gate or says why it fails: a violation, a check
    cut by the time budget, an ``unknown`` that ``--fail-on-unknown`` counts (an evaluation error with
    ``error``, every unknown with ``any``)."""
    if r.verdict == "fail" or r.out_of_time:
        return True
    return r.verdict == "unknown" and (fail_on_unknown == "any" or (fail_on_unknown == "error" and r.eval_error))


def problem_json(p: Problem) -> dict[str, Any]:
    """A skipped input's JSON form, in the summary's ``problems`` and the JSON list's ``skipped`` entries:
    ``{"file", "record" (the run's index in a multi-run file, or null), "stage" (read, load, check),
    "message" (why, the file named)}``."""
    return {"file": p.file, "record": p.record, "stage": p.stage, "message": p.message}


def _log_json(lg: ValidationLog, all_records: bool, fail_on_unknown: str = "error") -> dict[str, Any]:
    """A log's JSON form; without ``all_records`` only the records that fail the gate (violations, checks
    cut by the time budget, the unknowns ``fail_on_unknown`` counts). Its summary also counts the
    unknown checks (the time budget's left out), the evaluation errors among them, and says whether
    the run ran out of time (and the rules cut)."""
    d = lg.to_dict()
    unknown = [r for r in lg.records if r.verdict == "unknown" and not r.out_of_time]
    d["summary"].update(unknown_checks=len(unknown), evaluation_errors=sum(1 for r in unknown if r.eval_error),
                        out_of_time=lg.out_of_time,
                        rules_out_of_time=list(dict.fromkeys(r.rule_id for r in lg.records if r.out_of_time)))
    if not all_records:
        d["records"] = [x for r, x in zip(lg.records, d.get("records", []), strict=True)
                        if _gate_record(r, fail_on_unknown)]
    return d
