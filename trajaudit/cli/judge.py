"""``trajaudit judge fit``: fit the offline judge's weights to a team's own labelled failures."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import click
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

from trajaudit.checkers.tool_schemas import load_tools
from trajaudit.cli.common import (
    check_output_folder,
    console,
    fail,
    handle_errors,
    input_roles,
    print_line,
    refuse_dash,
    refuse_overwriting_input,
    report_problems,
)
from trajaudit.cli.options import io_options
from trajaudit.engine.run.pipeline import AuditSpec, build_context
from trajaudit.engine.trace.loader import load_many
from trajaudit.eval.fit import C_GRID, FitError, fit_judge, label_runs
from trajaudit.eval.gold import GOLD_FORMATS, load_gold


@click.group("judge")
def judge() -> None:
    """The offline judge's weights: fit them to your own labelled failures.

    The offline judge ranks candidate steps with a linear model whose weights are a JSON file
    (docs/judge.md). `trajaudit judge fit` fits one; `trajaudit audit --judge-weights FILE` and
    `trajaudit eval --judge-weights FILE` use it.
    """


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


@judge.command("fit")
@click.argument("datasets", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--gold", "golds", multiple=True, required=True, type=click.Path(exists=True),
              help="Gold labels (AgentRx ground_truth.json, a Who&When file or folder, gold JSONL): one for "
                   "every DATASET in the same order, or one for all.")
@click.option("--gold-format", type=click.Choice(["auto", *GOLD_FORMATS]), default="auto", show_default=True,
              help="Format of --gold.")
@click.option("--label", "labels", multiple=True,
              help="A name per DATASET for the report (default: the file or folder name).")
@click.option("--tools", "tools", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="Tool schemas (OpenAI function format; repeatable: all files are merged), as for `audit`.")
@click.option("--rules", "rules", multiple=True, metavar="PACK",
              help="A rule pack file or shipped pack name (repeatable), as for `trajaudit audit`.")
@click.option("--no-default-packs", is_flag=True, help="Do not apply the shipped generic and domain packs.")
@io_options(None)
@click.option("--folds", type=click.IntRange(2, 100), default=5, show_default=True,
              help="k of k-fold cross-validation (used with a single DATASET).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the k-fold split.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default="judge_weights.json", show_default=True,
              help="Where to write the weights (JSON).")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@handle_errors
def fit(datasets: tuple[str, ...], golds: tuple[str, ...], gold_format: str, labels: tuple[str, ...],
        tools: tuple[str, ...], rules: tuple[str, ...], no_default_packs: bool, folds: int, seed: int, output: str,
        quiet: bool, out_format: str | None, fmt: str | None, mapping: str | None) -> None:
    """Fit the offline judge to labelled failures and print the figures to expect on unseen runs.

    \b
    trajaudit judge fit runs/ --gold gold.jsonl -o weights.json
    trajaudit judge fit teamA/ teamB/ --gold a.jsonl --gold b.jsonl -o weights.json
    trajaudit audit new_runs/ --judge-weights weights.json

    Each DATASET (a file, folder or glob of runs) is one data set. The runs are audited as `audit`
    audits them (same packs and tools); every candidate step becomes a feature row and the gold
    critical step the positive one. A logistic regression (scikit-learn: pip install
    'trajaudit[fit]') is fitted; its regularization is chosen by cross-validation — with two or more
    DATASETs leave-one-dataset-out (each set scored by weights fitted without it: what runs of an
    unseen framework will see), with one k-fold — and its confidence is calibrated on the held-out
    predictions. The final weights are fitted on every run. The printed figures are the held-out
    ones: exact step, ±3 steps, agent, expected calibration error and accuracy on the most
    confident half.
    """
    if len(golds) not in (1, len(datasets)):
        fail(f"give one --gold for all DATASETs or one per DATASET ({len(datasets)} DATASETs, {len(golds)} --gold)")
    if labels and len(labels) != len(datasets):
        fail(f"give one --label per DATASET ({len(datasets)} DATASETs, {len(labels)} --label)")
    refuse_dash(output, "-o/--output", "the weights are written to a file")
    refuse_overwriting_input(output, [*datasets, *golds, *tools, *rules],
                             roles=input_roles(gold=[g for g in golds if g not in datasets], tools=tools, rules=rules))
    check_output_folder(output)
    names = list(labels) or [Path(d).name or d for d in datasets]
    if len(set(names)) != len(names):
        fail(f"two DATASETs have the same name ({', '.join(names)}): name them with --label")
    tool_list = None
    if tools:
        tool_list = tuple(fn for path in tools for fn in load_tools(path))
    ctx = build_context(AuditSpec(rules=rules, tools=tool_list, default_packs=not no_default_packs))
    err = console(err=True)
    runs = []
    for i, (path, name) in enumerate(zip(datasets, names, strict=True)):
        gold_path = golds[i] if len(golds) > 1 else golds[0]
        gold_set = load_gold(gold_path, gold_format)
        if not gold_set:
            fail(f"{gold_path}: no gold labels could be loaded")
        res = load_many([path], format=fmt, mapping=mapping)
        report_problems(res.problems)
        with Progress(console=err, disable=quiet or not err.is_terminal, transient=True) as bar:
            task = bar.add_task(f"{name}: evidence", total=len(res.trajectories))
            got, problems = label_runs(res.trajectories, gold_set, ctx, name, on_run=partial(bar.advance, task))
        for p in problems:
            print_line(err, f"[yellow]warning:[/] {escape(p)}", markup=True)
        if not got:
            fail(f"{path}: no run could be paired with a gold label in {gold_path}")
        print_line(err, f"{name}: {len(got)} labelled runs ({sum(r.positive is not None for r in got)} with the "
                   "gold step among the candidates)")
        runs.extend(got)
    try:
        result = fit_judge(runs, grid=C_GRID, k=folds, seed=seed,
                           on_step=None if quiet else (lambda m: err.print(f"  {m}", highlight=False)))
    except FitError as e:
        fail(str(e))
    result.weights.save(output)
    out = console()
    pooled = "dataset" not in result.scheme  # k-fold: one row, every fold's held-out runs pooled
    table = Table(title=f"held-out figures ({result.scheme}, C={result.c:g})",
                  caption="all: the held-out runs of every fold pooled (the C= lines above give the mean of the "
                          "folds' rates, which chooses C)" if pooled else None, caption_justify="left")
    for col in ("held out", "runs", "exact", "±3", "agent"):
        table.add_column(col)
    summary = result.summary()
    for label, f in summary["heldout"].items():
        table.add_row(label, str(f["runs"]), _pct(f["exact"]), _pct(f["within3"]), _pct(f["agent"]))
    out.print(table)
    cal = result.calibration
    out.print(f"calibration on held-out runs: ECE {_pct(cal['ece'])}, accuracy {_pct(cal['accuracy'])}, "
              f"mean confidence {_pct(cal['mean_confidence'])}, accuracy at 50% coverage {_pct(cal['accuracy_at_50'])}")
    out.print(f"wrote the weights to {output}; use them with: trajaudit audit RUNS --judge-weights {output}")
