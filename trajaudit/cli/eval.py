"""``trajaudit eval``: score diagnoses (or a strategy run now) against gold labels."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from trajaudit.cli.common import (
    DEBUG,
    MAX_SKIPPED_LINES,
    LLMOptions,
    check_output_folder,
    client_from_options,
    console,
    fail,
    file_console,
    handle_errors,
    input_roles,
    llm_options,
    more_skipped,
    print_line,
    refuse_dash,
    refuse_overwriting_input,
    refuse_resume_into,
    refuse_same_outputs,
    report_problems,
    warn_degraded,
    warn_incomplete,
    write_parts,
    write_text,
)
from trajaudit.cli.options import (
    check_input_paths,
    io_options,
    note_unread_files,
    run_timeout_option,
    warn_output_name,
)
from trajaudit.cli.outputs import (
    RESUME_KEY,
    OutputSet,
    ResumeJournal,
    left_out_note,
    resume_key_of,
    select_inputs,
    without_own_outputs,
)
from trajaudit.cli.unknowns import Unknowns
from trajaudit.engine.config import AuditConfig
from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.run.pipeline import AuditSpec, build_context
from trajaudit.engine.strategies.judge_weights import load_weights
from trajaudit.engine.strategies.registry import default_strategies
from trajaudit.engine.trace.forced_format import mapping_for
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.engine.trace.loader import load_many
from trajaudit.eval.evaluate import evaluate
from trajaudit.eval.gold import GOLD_FORMATS, GoldSet, load_gold
from trajaudit.eval.report import EvalReport
from trajaudit.eval.runner import check_step_ranges, read_diagnoses, run_on_paths
from trajaudit.report.eval_html import eval_html_parts
from trajaudit.run_budget import DEFAULT_RUN_TIMEOUT

#: the most bootstrap resamples ``--bootstrap`` takes: each metric's interval sorts that many means, so
#: 10**20 ran (and grew a list) until killed, and a negative number meant no intervals silently
MAX_BOOTSTRAP = 100_000


@click.command("eval")
@click.argument("datasets", nargs=-1, type=click.Path())
@click.option("--gold", required=True, type=click.Path(exists=True),
              help="Gold labels: AgentRx ground_truth.json, a Who&When file or folder, or gold JSONL.")
@click.option("--gold-format", type=click.Choice(["auto", *GOLD_FORMATS]), default="auto", show_default=True,
              help="Format of --gold.")
@click.option("--pred", type=click.Path(exists=True, dir_okay=False),
              help="Diagnoses JSONL to score (one diagnosis per line).")
@click.option("-s", "--strategy", "strategies", multiple=True,
              help="Run this strategy on DATASET... and score it (e.g. first, last, random); one per eval.")
@click.option("--taxonomy", help="Taxonomy for category normalization (default: the gold's).")
@click.option("--tools", type=click.Path(exists=True, dir_okay=False),
              help="Tool schemas (OpenAI function format) passed to the strategy.")
@click.option("--rules", "rules", multiple=True, metavar="PACK",
              help="With --strategy: a rule pack file or shipped pack name (repeatable), as for `trajaudit audit`.")
@click.option("--no-default-packs", is_flag=True,
              help="With --strategy: do not apply the shipped generic and domain packs (as `trajaudit audit`).")
@click.option("--judge-weights", "judge_weights", type=click.Path(exists=True, dir_okay=False),
              help="With --strategy offline: the judge's weights (JSON from `trajaudit judge fit`).")
@io_options(["table", "json", "markdown"], "table", help="Report format (stdout, or -o).", trace_format_alias=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the report here instead of stdout ('-': stdout).")
@click.option("--report", "report_file", type=click.Path(dir_okay=False),
              help="Also write a report: .html (the metrics, then every run with its gold step next to the "
                   "prediction and the distance; self-contained) or .md.")
@click.option("--save-pred", type=click.Path(dir_okay=False), help="With --strategy: also write the diagnoses JSONL.")
@click.option("--misses", type=int, default=20, show_default=True, help="Misses to list (-1: all, 0: none).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for the random strategy and the bootstrap.")
@click.option("--bootstrap", type=click.IntRange(0, MAX_BOOTSTRAP), default=2000, show_default=True,
              help=f"Bootstrap resamples for the 95% CIs, 0 to {MAX_BOOTSTRAP:,} (0: no intervals).")
@click.option("--resume", is_flag=True,
              help="With --strategy and --save-pred: append to an existing --save-pred file, skipping the runs already "
                   "diagnosed there with the same options; each new diagnosis is appended as it is made.")
@run_timeout_option(help="With --strategy: rule-evaluation time budget per run; when used up, the checks left are "
                         "'unknown' and the diagnosis is marked degraded (metadata.degraded in --save-pred; a "
                         "warning on stderr).")
@llm_options
@handle_errors
def eval_cmd(datasets: tuple[str, ...], gold: str, gold_format: str, pred: str | None, strategies: tuple[str, ...],
             taxonomy: str | None, tools: str | None, rules: tuple[str, ...], no_default_packs: bool,
             judge_weights: str | None, fmt: str | None, mapping: str | None, out_format: str, output: str | None,
             report_file: str | None, save_pred: str | None, misses: int, seed: int, bootstrap: int, llm_opts: LLMOptions,
             resume: bool = False, run_timeout: float = DEFAULT_RUN_TIMEOUT) -> None:
    """Score diagnoses against gold labels with the metrics of AgentRx, SearchAuditor, Who&When and DRIFT.

    \b
    trajaudit eval --gold GOLD --pred diagnoses.jsonl [DATASET...]
    trajaudit eval DATASET... --gold GOLD --strategy S

    Steps are compared as 0-based message indexes (the gold loaders convert: AgentRx step_number - 1,
    Who&When mistake_step as is). Missing predictions count as wrong and are listed. DATASET, when
    given with --pred, supplies step previews and run lengths; for Who&When gold the labelled trace
    files serve as the dataset.

    With --strategy the runs are diagnosed as `trajaudit audit` would (same rule packs and tools); an
    LLM strategy (all-at-once, searchauditor, drift, hybrid, ...) needs the LLM options (--base-url,
    --model, ...). The report ends with per-strategy LLM accounting: calls, cache hits, tokens as the
    API reported them and tokenizer-free character counts.
    """
    output = None if output == "-" else output  # '-': stdout, as without -o (it made a file named '-')
    strategy = _choose_source(strategies, pred, judge_weights, resume, save_pred)
    asked = datasets
    datasets = without_own_outputs(datasets, lambda note: print_line(console(err=True), note))  # --save-pred in them
    # a Who&When gold folder (often the dataset folder too) leaves out trajaudit's outputs in it as well
    gold_files, gold_left_out = select_inputs([gold])
    if gold_left_out and gold not in asked:  # (as a dataset folder, the note is said above)
        print_line(console(err=True), left_out_note(gold_left_out))
    gold_inputs = tuple(gold_files) if gold_left_out else (gold,)
    _check_paths(datasets, gold, pred, tools, rules, mapping, output, report_file, save_pred,
                 gold_inputs=gold_inputs, gold_is_dataset=gold in asked)
    warn_output_name("-o", output, out_format)  # the report: a table under report.json is named
    trace_format = fmt
    adapter = mapping_for(trace_format, mapping)  # a bad mapping is refused before anything is read
    gold_set = _read_gold(gold, gold_format, taxonomy, frozenset(gold_left_out))
    paths = list(datasets) or (list(gold_inputs) if gold_set.format == "who_and_when" else [])
    err = console(err=True)
    if strategy:
        spec = AuditSpec(strategy=strategy, rules=rules, tools=tools,
                         config=AuditConfig(seed=seed, run_timeout=run_timeout), default_packs=not no_default_packs,
                         judge_weights=load_weights(judge_weights) if judge_weights else None)
        run = _diagnose_now(paths, spec, llm_opts, trace_format, mapping, adapter,
                            save_pred if resume else None, err)
        key: str | None = resume_key_of(spec, trace_format, mapping)
    else:
        assert pred is not None  # _choose_source: exactly one of --pred and --strategy
        run = _read_predictions(pred, paths, trace_format, adapter)
        key = None
    # --save-pred, -o and --report are staged, then renamed together (a signal meanwhile: all old)
    with OutputSet() as outs:
        wrote = _save_predictions(run, save_pred, key, outs)
        warn_degraded(run.diagnoses)  # as audit: scores of diagnoses made on partial evidence
        diagnoses, warnings = check_step_ranges(run.diagnoses, gold_set, run.trajectories)
        for w in warnings:
            print_line(err, f"[yellow]warning:[/] {escape(w)}", markup=True)
        report = evaluate(gold_set, diagnoses, trajectories=run.trajectories, taxonomy=taxonomy,
                          resamples=bootstrap, seed=seed)
        max_misses = None if misses < 0 else misses
        wrote += _write_report(report, out_format, output, max_misses, outs)
        if report_file:
            _write_report_file(report_file, report, diagnoses, run.trajectories, outs)
            wrote.append(f"wrote the report to {report_file}")
        outs.commit()
    for line in wrote:
        err.print(line, highlight=False)
    _exit_status(report, run.skipped, err)


def _choose_source(strategies: tuple[str, ...], pred: str | None, judge_weights: str | None, resume: bool,
                   save_pred: str | None) -> str | None:
    """The strategy to run now (``None``: score ``--pred``), after refusing option combinations that
    cannot work (exit 2): several strategies, both or neither of ``--pred`` and ``--strategy``,
    ``--judge-weights`` without the offline strategy, ``--resume`` without ``--strategy`` and
    ``--save-pred``."""
    if len(strategies) > 1:  # click would keep the last one silently
        fail(f"one --strategy per eval (got {', '.join(strategies)}): run eval once per strategy "
             "(benchmarks/make_results.py scores every offline strategy on both data sets)")
    strategy = strategies[0] if strategies else None
    if bool(pred) == bool(strategy):
        fail("give exactly one of --pred FILE or --strategy NAME")
    if judge_weights and strategy != "offline":
        fail("--judge-weights needs --strategy offline (the weights are the offline judge's)")
    if resume and not (strategy and save_pred):
        fail("--resume goes with --strategy and --save-pred FILE (the diagnoses file it appends to)")
    if resume:
        refuse_resume_into(save_pred, "--save-pred")  # '-', /dev/stdout, a FIFO: read back before appending
    return strategy


def _check_paths(datasets: tuple[str, ...], gold: str, pred: str | None, tools: str | None, rules: tuple[str, ...],
                 mapping: str | None, output: str | None, report_file: str | None, save_pred: str | None, *,
                 gold_inputs: tuple[str, ...], gold_is_dataset: bool) -> None:
    """Refuse, before anything is read (exit 2), a ``--report`` that is neither HTML nor Markdown, missing
    datasets, two outputs with one path, an output that would overwrite an input and an output whose
    folder cannot be written. ``gold_inputs``: the gold path, or the files of a gold folder without
    trajaudit's outputs in it (a ``--save-pred`` written there by an earlier run is not the gold)."""
    if report_file and not report_file.endswith((".html", ".htm", ".md", ".markdown")):
        fail(f"--report must end in .html or .md, got {report_file!r}")
    check_input_paths(datasets, "dataset")
    note_unread_files(datasets)  # as audit: a .json.gz or .log trace in a dataset folder is not read
    given = [*gold_inputs, *datasets, *([pred] if pred else []), *([tools] if tools else []), *rules,
             *([mapping] if mapping else [])]
    refuse_same_outputs({"-o/--output": output, "--save-pred": save_pred, "--report": report_file})
    roles = input_roles(gold=[] if gold_is_dataset else list(gold_inputs), pred=pred, tools=[tools], rules=rules,
                        mapping=mapping)
    refuse_overwriting_input(output, given, roles=roles)
    refuse_overwriting_input(save_pred, given, "--save-pred", roles)
    refuse_dash(save_pred, "--save-pred", "the diagnoses are written to a file (stdout carries the report)")
    refuse_overwriting_input(report_file, given, "--report", roles)
    check_output_folder(output)
    check_output_folder(save_pred, "--save-pred")
    check_output_folder(report_file, "--report")
    warn_output_name("--save-pred", save_pred, "jsonl")  # after the refusals: a refused output gets its error alone


def _read_gold(gold: str, gold_format: str, taxonomy: str | None, left_out: frozenset[str]) -> GoldSet:
    """The gold labels of ``gold`` (a folder's ``left_out`` files, trajaudit's outputs, not read); none
    at all prints the loading problems and stops (exit 2)."""
    gold_set = load_gold(gold, gold_format, taxonomy=taxonomy, exclude=left_out)
    if not gold_set:
        report_problems_text(gold_set.problems, gold)
        fail(f"{gold}: no gold labels could be loaded")
    return gold_set


@dataclass
class _Scored:
    """What is scored: the diagnoses, the runs they belong to (previews, run lengths) and the number of
    runs or prediction lines skipped (reported; exit 1)."""

    diagnoses: list[Diagnosis]
    trajectories: list[Trajectory]
    skipped: int
    journal: ResumeJournal | None = None


def _diagnose_now(paths: list[str], spec: AuditSpec, llm_opts: LLMOptions, trace_format: str | None,
                  mapping: str | None, adapter: Any, resume_file: str | None, err: Console) -> _Scored:
    """Run ``spec``'s strategy on ``paths`` as ``trajaudit audit`` would (an LLM strategy gets the client of
    the LLM options). With ``resume_file`` (``--resume --save-pred FILE``) the runs already diagnosed
    there with the same options are skipped, each new diagnosis is appended, and every diagnosis of these
    options in the file is scored. No diagnosis at all stops the command (exit 2)."""
    if not paths:
        fail("--strategy needs DATASET paths (the runs to diagnose)")
    strat = default_strategies().get(spec.strategy)
    ctx = build_context(spec)
    if getattr(strat, "needs_llm", False):
        ctx.llm = client_from_options(llm_opts)
    journal = ResumeJournal.for_spec(resume_file, spec, trace_format, mapping, "--save-pred") if resume_file else None
    unknowns = Unknowns()  # the checks of rules that could not be evaluated: warned about as audit does
    try:
        out = run_on_paths(paths, spec.strategy, context=ctx, format=trace_format, mapping=adapter,
                           skip=journal.done if journal else None,
                           on_diagnosis=journal.append if journal else None, on_log=unknowns.add)
    finally:
        if ctx.llm is not None:
            ctx.llm.close()
        if journal is not None:
            journal.close()
    report_problems(out.problems)
    said = unknowns.audit_warning(len(out.diagnoses))
    if said:
        warn_incomplete(said)
    diagnoses = out.diagnoses
    if journal is not None and resume_file:  # score every diagnosis of these options in the file, the earlier ones too
        earlier, _ = read_diagnoses(resume_file)
        diagnoses = [d for d in earlier if d.metadata.get(RESUME_KEY) == journal.key]
        err.print(journal.summary(len(diagnoses) - len(out.diagnoses)), highlight=False, markup=False)
    if not diagnoses:
        fail(f"no run could be diagnosed with strategy {spec.strategy!r} ({len(out.problems)} skipped): nothing to "
             "score")
    return _Scored(diagnoses, out.trajectories, len(out.problems), journal)


def _save_predictions(run: _Scored, save_pred: str | None, key: str | None, outs: OutputSet) -> list[str]:
    """``--save-pred`` without ``--resume``: stage the diagnoses JSONL in ``outs``, each line with the
    options' fingerprint ``key`` (``metadata.resume_key``: a later ``--resume`` goes on from it); a
    resumed file was appended to as the diagnoses were made. Returns the line to say once it is written."""
    if save_pred and run.journal is None:
        lines = (ResumeJournal.tagged(d, key) if key else d for d in run.diagnoses)
        write_text(save_pred, "".join(d.to_json() + "\n" for d in lines), outs)
        return [f"wrote {len(run.diagnoses)} diagnoses to {save_pred}"]
    return []


def _read_predictions(pred: str, paths: list[str], trace_format: str | None, adapter: Any) -> _Scored:
    """The diagnoses of ``--pred`` and the runs of ``paths`` (without paths: the existing files the
    diagnoses name) for previews and run lengths. Unreadable lines and traces are reported and counted as
    skipped; no diagnosis at all stops the command (exit 2)."""
    diagnoses, problems = read_diagnoses(pred)
    report_problems(problems)
    skipped = len(problems)
    if not diagnoses:
        fail(f"{pred}: no diagnosis could be read: nothing to score")
    diagnoses, superseded = latest_per_run(diagnoses)
    if superseded:
        print_line(console(err=True), f"note: {pred} holds {superseded} earlier diagnosis line(s) of runs diagnosed "
                                      "again further down (audit/eval --resume with other options appends): the last "
                                      "line of each run is scored")
    if not paths:
        named = sorted({d.file for d in diagnoses if d.file})
        paths = [f for f in named if Path(f).exists()]
        gone = [f for f in named if f not in paths]
        if gone:  # left out without a word: those runs' previews and run lengths were missing from the report
            shown = ", ".join(gone[:3]) + (f" and {len(gone) - 3} more" if len(gone) > 3 else "")
            print_line(console(err=True), f"note: {len(gone)} trace file(s) named by the diagnoses are not there "
                       f"(their runs get no preview, run length or normalized distance; give the traces as "
                       f"DATASET): {shown}")
    res = load_many(paths, format=trace_format, mapping=adapter) if paths else None
    trajectories = res.trajectories if res else []
    if res is not None and res.problems:  # a trace that cannot be read gives no preview or run length
        report_problems(res.problems)
        skipped += len(res.problems)
    return _Scored(diagnoses, trajectories, skipped)


def latest_per_run(diagnoses: list[Diagnosis]) -> tuple[list[Diagnosis], int]:
    """The last diagnosis of each run (file, record, run id) in ``diagnoses``, in the order of those last
    lines, and how many earlier ones were left out: ``--resume`` with other options appends a run's new
    diagnosis after its old one, and scoring the first one scored the options of the older run."""
    last = {(d.file, d.record, d.trajectory_id): i for i, d in enumerate(diagnoses)}
    keep = sorted(last.values())
    return [diagnoses[i] for i in keep], len(diagnoses) - len(keep)


def _write_report(report: EvalReport, out_format: str, output: str | None, max_misses: int | None,
                  outs: OutputSet) -> list[str]:
    """The report in ``out_format`` (json, markdown, or the rich table) to ``output`` (staged in
    ``outs``; the line to say once it is written is returned) or stdout."""
    if out_format == "json":
        text: str | None = report.to_json()
    elif out_format == "markdown":
        text = report.to_markdown(max_misses=max_misses)
    else:
        text = None
    if output:
        if text is None:
            buf = StringIO()
            report.render(file_console(buf), max_misses=max_misses)
            text = buf.getvalue()
        write_text(output, text, outs)
        return [f"wrote the {out_format} report to {output}"]
    if text is not None:
        click.echo(text, nl=not text.endswith("\n"))
    else:
        report.render(console(), max_misses=max_misses)
    return []


def _write_report_file(report_file: str, report: EvalReport, diagnoses: list[Diagnosis],
                       trajectories: list[Trajectory], outs: OutputSet) -> None:
    """``--report``: Markdown (``.md``/``.markdown``, every miss) or the self-contained HTML page,
    staged in ``outs``."""
    if report_file.endswith((".md", ".markdown")):
        write_text(report_file, report.to_markdown(max_misses=None), outs)
    else:
        write_parts(report_file, eval_html_parts(report, diagnoses, trajectories,
                                                 title=f"trajaudit evaluation ({', '.join(report.strategies) or '?'})"),
                    outs)


def _exit_status(report: EvalReport, skipped: int, err: Console) -> None:
    """Warn about pairing problems and skipped inputs; either one exits with code 1."""
    for line in report.problems.get("pairing", []):
        print_line(err, f"[bold yellow]warning:[/] {escape(line)}; exit code 1", markup=True)
    if skipped:
        print_line(err, f"{skipped} run(s) or prediction line(s) were skipped (see above); exit code 1")
    if skipped or report.problems.get("pairing"):
        sys.exit(1)


def report_problems_text(lines: list[str], file: str = "the gold file") -> None:
    """Print gold-loading problems of ``file`` to stderr, one line each; of its skipped lines the first
    :data:`~trajaudit.cli.common.MAX_SKIPPED_LINES`, then one line counting the rest (``--debug``: all)."""
    c = console(err=True)
    per_line = 0
    hidden: list[str] = []
    for line in lines:
        if line.startswith("line ") and not DEBUG["on"]:
            per_line += 1
            if per_line > MAX_SKIPPED_LINES:
                hidden.append(line)
                continue
        print_line(c, f"[yellow]gold:[/] {escape(line)}", markup=True)
    if hidden:
        print_line(c, f"[yellow]gold:[/] {escape(more_skipped(file, hidden))}", markup=True)
