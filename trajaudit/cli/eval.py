"""``trajaudit eval``: score diagnoses (or a strategy run now) against gold labels."""

from __future__ import annotations

import sys
from io import StringIO
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from trajaudit.cli.common import (
    LLMOptions,
    check_output_folder,
    client_from_options,
    console,
    fail,
    handle_errors,
    llm_options,
    refuse_overwriting_input,
    report_problems,
    write_parts,
    write_text,
)
from trajaudit.cli.options import check_input_paths, io_options
from trajaudit.engine.config import AuditConfig
from trajaudit.engine.run.pipeline import AuditSpec, build_context
from trajaudit.engine.strategies.judge_weights import load_weights
from trajaudit.engine.strategies.registry import default_strategies
from trajaudit.engine.trace.loader import load_many
from trajaudit.eval.evaluate import evaluate
from trajaudit.eval.gold import GOLD_FORMATS, load_gold
from trajaudit.eval.runner import check_step_ranges, read_diagnoses, run_on_paths
from trajaudit.report.eval_html import eval_html_parts


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
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the report here instead of stdout.")
@click.option("--report", "report_file", type=click.Path(dir_okay=False),
              help="Also write a report: .html (the metrics, then every run with its gold step next to the "
                   "prediction and the distance; self-contained) or .md.")
@click.option("--save-pred", type=click.Path(dir_okay=False), help="With --strategy: also write the diagnoses JSONL.")
@click.option("--misses", type=int, default=20, show_default=True, help="Misses to list (-1: all, 0: none).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for the random strategy and the bootstrap.")
@click.option("--bootstrap", type=int, default=2000, show_default=True, help="Bootstrap resamples for the 95% CIs.")
@llm_options
@handle_errors
def eval_cmd(datasets: tuple[str, ...], gold: str, gold_format: str, pred: str | None, strategies: tuple[str, ...],
             taxonomy: str | None, tools: str | None, rules: tuple[str, ...], no_default_packs: bool,
             judge_weights: str | None, fmt: str | None, mapping: str | None, out_format: str, output: str | None, report_file: str | None,
             save_pred: str | None, misses: int, seed: int, bootstrap: int, llm_opts: LLMOptions) -> None:
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
    if len(strategies) > 1:  # click would keep the last one silently
        fail(f"one --strategy per eval (got {', '.join(strategies)}): run eval once per strategy "
             "(benchmarks/make_results.py scores every offline strategy on both data sets)")
    strategy = strategies[0] if strategies else None
    if bool(pred) == bool(strategy):
        fail("give exactly one of --pred FILE or --strategy NAME")
    if judge_weights and strategy != "offline":
        fail("--judge-weights needs --strategy offline (the weights are the offline judge's)")
    trace_format = fmt
    if report_file and not report_file.endswith((".html", ".htm", ".md", ".markdown")):
        fail(f"--report must end in .html or .md, got {report_file!r}")
    check_input_paths(datasets, "dataset")
    given = [gold, *datasets, *([pred] if pred else []), *([tools] if tools else []), *rules]
    refuse_overwriting_input(output, given)
    refuse_overwriting_input(save_pred, given, "--save-pred")
    refuse_overwriting_input(report_file, given, "--report")
    check_output_folder(output)
    check_output_folder(save_pred, "--save-pred")
    check_output_folder(report_file, "--report")
    gold_set = load_gold(gold, gold_format, taxonomy=taxonomy)
    if not gold_set:
        report_problems_text(gold_set.problems)
        fail(f"{gold}: no gold labels could be loaded")
    paths = list(datasets) or ([gold] if gold_set.format == "who_and_when" else [])
    err = console(err=True)
    if strategy:
        diagnoses, trajectories, skipped = _diagnose_runs(paths, strategy, rules, tools, no_default_packs, seed,
                                                          judge_weights, trace_format, mapping, save_pred, llm_opts)
    else:
        diagnoses, trajectories, skipped = _read_predictions(pred or "", paths, trace_format, mapping)
    diagnoses, warnings = check_step_ranges(diagnoses, gold_set, trajectories)
    for w in warnings:
        err.print(f"[yellow]warning:[/] {escape(w)}", markup=True, highlight=False)
    report = evaluate(gold_set, diagnoses, trajectories=trajectories, taxonomy=taxonomy,
                      resamples=bootstrap, seed=seed)
    _write_report(report, out_format, output, None if misses < 0 else misses)
    if report_file:
        _write_report_file(report_file, report, diagnoses, trajectories)
    for line in report.problems.get("pairing", []):
        err.print(f"[bold yellow]warning:[/] {escape(line)}; exit code 1", markup=True, highlight=False)
    if skipped:
        err.print(f"{skipped} run(s) or prediction line(s) were skipped (see above); exit code 1", highlight=False)
    if skipped or report.problems.get("pairing"):
        sys.exit(1)


def _diagnose_runs(paths: list[str], strategy: str, rules: tuple[str, ...], tools: str | None, no_default_packs: bool,
                   seed: int, judge_weights: str | None, trace_format: str | None, mapping: str | None,
                   save_pred: str | None, llm_opts: LLMOptions) -> tuple[list[Any], list[Any], int]:
    """``--strategy``: diagnose the runs under ``paths`` as ``trajaudit audit`` would (same packs and
    tools; the judge's weights for ``offline``; the LLM options for an LLM strategy). Returns
    ``(diagnoses, trajectories, runs skipped)``."""
    if not paths:
        fail("--strategy needs DATASET paths (the runs to diagnose)")
    strat = default_strategies().get(strategy)
    ctx = build_context(AuditSpec(strategy=strategy, rules=rules, tools=tools, config=AuditConfig(seed=seed),
                                  default_packs=not no_default_packs,
                                  judge_weights=load_weights(judge_weights) if judge_weights else None))
    if getattr(strat, "needs_llm", False):
        ctx.llm = client_from_options(llm_opts)
    try:
        out = run_on_paths(paths, strategy, context=ctx, format=trace_format, mapping=mapping)
    finally:
        if ctx.llm is not None:
            ctx.llm.close()
    report_problems(out.problems)
    skipped = len(out.problems)
    if not out.diagnoses:
        fail(f"no run could be diagnosed with strategy {strategy!r} ({skipped} skipped): nothing to score")
    if save_pred:
        write_text(save_pred, "".join(d.to_json() + "\n" for d in out.diagnoses))
        console(err=True).print(f"wrote {len(out.diagnoses)} diagnoses to {save_pred}", highlight=False)
    return out.diagnoses, out.trajectories, skipped


def _read_predictions(pred: str, paths: list[str], trace_format: str | None, mapping: str | None
                      ) -> tuple[list[Any], list[Any], int]:
    """``--pred``: the diagnoses of ``pred`` and the runs they name (from ``paths``, else the trace
    files the diagnoses name that exist). Returns ``(diagnoses, trajectories, lines or runs skipped)``."""
    diagnoses, problems = read_diagnoses(pred)
    report_problems(problems)
    skipped = len(problems)
    if not diagnoses:
        fail(f"{pred}: no diagnosis could be read: nothing to score")
    if not paths:
        paths = sorted({d.file for d in diagnoses if d.file and Path(d.file).exists()})
    res = load_many(paths, format=trace_format, mapping=mapping) if paths else None
    trajectories = res.trajectories if res else []
    if res is not None and res.problems:  # a trace that cannot be read gives no preview or run length
        report_problems(res.problems)
        skipped += len(res.problems)
    return diagnoses, trajectories, skipped


def _write_report(report: Any, out_format: str, output: str | None, max_misses: int | None) -> None:
    """The report as JSON, Markdown or the terminal tables, to ``output`` or stdout."""
    if out_format == "json":
        text = report.to_json()
    elif out_format == "markdown":
        text = report.to_markdown(max_misses=max_misses)
    else:
        text = None
    if output:
        if text is None:
            buf = StringIO()
            report.render(Console(file=buf, width=160, highlight=False), max_misses=max_misses)
            text = buf.getvalue()
        write_text(output, text)
        console(err=True).print(f"wrote the {out_format} report to {output}", highlight=False)
    elif text is not None:
        click.echo(text, nl=not text.endswith("\n"))
    else:
        report.render(console(), max_misses=max_misses)


def _write_report_file(report_file: str, report: Any, diagnoses: list[Any], trajectories: list[Any]) -> None:
    """``--report``: the whole report (every miss) as Markdown (.md) or a self-contained HTML page."""
    if report_file.endswith((".md", ".markdown")):
        write_text(report_file, report.to_markdown(max_misses=None))
    else:
        write_parts(report_file, eval_html_parts(report, diagnoses, trajectories,
                                                 title=f"trajaudit evaluation ({', '.join(report.strategies) or '?'})"))
    console(err=True).print(f"wrote the report to {report_file}", highlight=False)


def report_problems_text(lines: list[str]) -> None:
    """Print gold-loading problems to stderr, one line each."""
    c = console(err=True)
    for line in lines:
        c.print(f"[yellow]gold:[/] {escape(line)}", markup=True, highlight=False)
