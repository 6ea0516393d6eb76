"""``trajaudit repair``: write a failed run's prefix plus a repair directive, ready to resume the agent
(SearchAuditor, seed 000, §5.4: keep the prefix up to the critical step, append the directive as a
user message, let the agent continue)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from trajaudit import regular_files, safe_json
from trajaudit.cli.common import (
    LLMOptions,
    console,
    handle_errors,
    input_roles,
    llm_config_for,
    llm_options,
    refuse_overwriting_input,
    write_text,
)
from trajaudit.cli.options import check_run_choice, io_options, run_options, select_run_id
from trajaudit.engine.config import AuditConfig
from trajaudit.engine.diagnosis import Diagnosis, other_run
from trajaudit.engine.run.pipeline import AuditSpec, audit_one, build_context
from trajaudit.engine.run.repair_prefix import resume_document, template_directive
from trajaudit.engine.run.repair_writer import synthesize_repair
from trajaudit.engine.strategies.registry import default_strategies
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.engine.trace.loader import load_path
from trajaudit.engine.trace.text import jsonl_lines
from trajaudit.errors import DiagnosisFormatError, TrajauditError
from trajaudit.llm import LLMClient


@click.command("repair")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@run_options("Which run of a multi-run file")
@click.option("--diagnosis", "diagnoses", type=click.Path(exists=True, dir_okay=False),
              help="Diagnoses (JSONL from `trajaudit audit`); the line for this run is used.")
@click.option("--strategy", help="Diagnose the run now with this strategy (default: offline) instead of --diagnosis.")
@click.option("--taxonomy", default="agentrx", show_default=True, help="Taxonomy when diagnosing now.")
@click.option("--template", "use_template", is_flag=True,
              help="Use the deterministic template directive even when an LLM endpoint is configured.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="Where to write the resumed run (a .json file).")
@io_options(["json"], "json", help="Output format of the resumed run (one JSON document).")
@llm_options
@handle_errors
def repair(file: str, record: int | None, run_id: str | None, diagnoses: str | None, strategy: str | None,
           taxonomy: str, use_template: bool, output: str, out_format: str, fmt: str | None, mapping: str | None,
           llm_opts: LLMOptions) -> None:
    """Write the messages of FILE's run before its critical step, in the run's own format, plus a repair
    directive as a user message: OpenAI messages for openai and tau inputs (tau's 'info' is not
    copied), the Who&When document with its history prefix (labels not copied), or the Magentic-One
    list (see docs/llm.md).

    The directive: the one already in the diagnosis (from `audit --repair`), else synthesized by the
    LLM when an endpoint is configured, else a template built from the diagnosis and labelled so.
    The output is one JSON document: -o must end in .json (checked before FILE is read). A
    --diagnosis line is used only when it is about this run: same trajectory id, and not naming
    another trace file or record (ids such as "2" recur across data sets; the rule `eval` pairs by).
    Exit 0 on success, 2 on usage or input errors.

    \b
    Examples:
      trajaudit audit runs.json -o d.jsonl
      trajaudit repair runs.json --record 0 --diagnosis d.jsonl -o resumed.json
      trajaudit repair runs.json --id 12 --diagnosis d.jsonl -o resumed.json
      trajaudit repair run.json --strategy offline --template -o resumed.json
    """
    if diagnoses and strategy:
        raise TrajauditError("give --diagnosis or --strategy, not both")
    if not output.lower().endswith(".json"):
        raise TrajauditError(f"-o/--output must end in .json (the resumed run is one JSON document), got {output!r}")
    check_run_choice(record, run_id)
    refuse_overwriting_input(output, [file, *([mapping] if mapping else [])], roles=input_roles(mapping=mapping))
    t = _load_one(file, record, run_id, fmt, mapping)
    client = None
    try:
        if diagnoses:
            d = _find_diagnosis(diagnoses, t)
        else:
            d, client = _diagnose_now(t, strategy or "offline", taxonomy, llm_opts)
        if d.critical_step is None:
            raise TrajauditError(f"{t.id}: the diagnosis has no critical step; nothing to resume from")
        source = "template"
        if use_template:
            directive = template_directive(d, t)
        elif d.repair:
            directive = d.repair
            source = f"the diagnosis ({(d.metadata.get('repair') or {}).get('source') or d.strategy})"
        else:
            if client is None:
                cfg = llm_config_for(llm_opts, needed=False, wanted=True)
                if cfg is not None:
                    client = LLMClient(cfg)
            if client is not None:
                directive, source = synthesize_repair(client, t, d).text, "llm"
            else:
                directive = template_directive(d, t)
    finally:
        if client is not None:
            client.close()
    doc, described = resume_document(t, d.critical_step, directive)
    write_text(output, json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
    out = console(err=True)
    out.print(f"{t.id}: critical step {d.critical_step} ({d.agent or 'unnamed'}, {d.category}, {d.strategy}); "
              f"directive from {source}", markup=False, highlight=False, soft_wrap=True)
    out.print(f"{output}: {described}", markup=False, highlight=False, soft_wrap=True)


def _load_one(file: str, record: int | None, run_id: str | None, fmt: str | None, mapping: str | None) -> Trajectory:
    res = load_path(file, format=fmt, mapping=mapping, record=record)
    if not res.trajectories:
        raise TrajauditError(res.problems[0].message if res.problems else f"{file}: no run could be loaded")
    runs = select_run_id(res.trajectories, file, run_id)
    if len(runs) > 1:
        raise TrajauditError(f"{file} holds {len(runs)} runs" + (f" with id {run_id!r}" if run_id else "")
                             + ": pass --record N (0-based)" + ("" if run_id else " or --id RUN_ID"))
    return runs[0]


def _find_diagnosis(path: str, t: Trajectory) -> Diagnosis:
    """The diagnosis of run ``t`` in the JSONL file ``path``: same ``trajectory_id`` and not naming
    another trace file or record (:func:`~trajaudit.engine.diagnosis.other_run`, the rule ``eval``
    pairs by: ids such as ``"2"`` are shared by runs of different data sets).

    Raises:
        TrajauditError: unreadable file, a line that is not a diagnosis, or no diagnosis for ``t``
            (saying which lines had its id but named another run).
    """
    matches: list[Diagnosis] = []
    refused: list[str] = []
    try:
        lines = jsonl_lines(regular_files.read_text(path))
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else e  # not the path again
        raise TrajauditError(f"{path}: cannot read diagnoses: {why}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = Diagnosis.from_dict(safe_json.loads(line))
        except (ValueError, KeyError, TypeError) as e:
            why = str(e) if isinstance(e, DiagnosisFormatError) else f"not a diagnosis: {e}"
            raise TrajauditError(f"{path}:{n}: {why}") from None
        if d.trajectory_id != t.id:
            continue
        why = other_run(d, t.source.file, t.source.record)
        if why is None:
            matches.append(d)
        else:
            refused.append(f"line {n}: {why}")
    exact = [d for d in matches if d.record == t.source.record] or matches
    if not exact:
        where = Path(t.source.file).name if t.source.file else "the input"
        if t.source.record is not None:
            where += f", record {t.source.record}"
        msg = f"{path}: no diagnosis for run {t.id!r} ({where}; {len(lines)} line(s) read)"
        if refused:
            more = f" (+{len(refused) - 3} more)" if len(refused) > 3 else ""
            msg += (f"; {len(refused)} diagnosis(es) with that id are about another trace, not used: "
                    + "; ".join(refused[:3]) + more)
        raise TrajauditError(msg)
    return exact[0]


def _diagnose_now(t: Trajectory, strategy: str, taxonomy: str, llm_opts: LLMOptions) -> tuple[Diagnosis, Any]:
    chosen = default_strategies().get(strategy)
    cfg = llm_config_for(llm_opts, needed=chosen.needs_llm, wanted=True, what=f"strategy {strategy!r}")
    ctx = build_context(AuditSpec(strategy=strategy, config=AuditConfig(taxonomy=taxonomy), llm=cfg))
    return audit_one(t, strategy, ctx).diagnosis, ctx.llm
