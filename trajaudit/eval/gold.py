"""Gold labels: load annotated failures (AgentRx, Who&When, generic JSONL) onto 0-based step indexes.

Every loader converts the dataset's own step numbering to a 0-based source message position (the
position of the message, or of the AgentRx step, in the run as the dataset gives it) and records the
convention it converted from in :attr:`GoldItem.numbering`. That is ``Step.index`` only for a run
whose steps are its messages one to one; the eval harness compares gold with a diagnosis's source
message position (:func:`trajaudit.eval.runs.scored_step`: ``metadata.source_message`` when a
run was renumbered — split Anthropic messages, AgentRx step records — else ``critical_step``):

- AgentRx ground truth (tau and Magentic-One forms, a JSON list or the Hugging Face release's JSONL):
  ``step_number`` is 1-based over all messages, system message included (over the ``steps`` of an
  ``agentrx_steps`` record), so ``index = step_number - 1``. Keyed by ``str(trajectory_id)`` (tau:
  the ``task_id``, which is the tau adapter's trajectory id; the release's bare ``"2"`` pairs with
  the run ``"tau_retail_2"`` through :func:`suffix_aliases`). ``failure_id`` and
  ``root_cause.failure_id`` are compared as strings (some files use strings, some integers).
- Who&When: ``mistake_step`` is a string holding a 0-based index into ``history``: no shift. Keyed by
  the file stem (the Who&When adapter's trajectory id). The labels live in the trace files, so a
  folder of Who&When files is a gold set.
- Generic JSONL (``gold.schema.json``): ``critical_step`` etc. are already 0-based.

Gold is read only by the evaluation harness; no strategy may import this module.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from pathlib import Path
from typing import Any

from trajaudit import safe_json
from trajaudit.engine.schema import schema_errors
from trajaudit.engine.taxonomy import Taxonomy, load_taxonomy
from trajaudit.engine.trace.loader import expand_paths
from trajaudit.errors import TrajauditError
from trajaudit.eval.gold_agentrx import agentrx_entry, agentrx_jsonl, load_agentrx_gold, suffix_aliases
from trajaudit.eval.gold_items import (
    NUMBERING,
    GoldFailure,
    GoldFormatError,
    GoldItem,
    GoldSet,
    category_id,
    int_value,
    other_file,
    read_json,
    read_jsonl_lines,
)

GOLD_FORMATS = ("agentrx", "who_and_when", "jsonl")


def who_and_when_item(doc: Any, file: str) -> GoldItem:
    """The gold item of one Who&When document (key = file stem; ``mistake_step`` used as is).

    Raises:
        GoldFormatError: the document is not a Who&When object with ``history``.
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("history"), list):
        raise GoldFormatError("not a Who&When file (no 'history' list)", file=file)
    step = int_value(doc.get("mistake_step"))
    n = len(doc["history"])
    problem = None
    if step is None:
        problem = f"mistake_step {doc.get('mistake_step')!r} is not a 0-based integer"
    elif not 0 <= step < n:
        problem, step = f"mistake_step {step} is outside history (0..{n - 1})", None
    agent = doc.get("mistake_agent")
    return GoldItem(key=Path(file).stem, critical_step=step, agent=agent if isinstance(agent, str) else None,
                    file=file, n_steps=n, numbering=NUMBERING["who_and_when"],
                    reason=str(doc.get("mistake_reason") or ""), problem=problem)


def load_who_and_when_gold(path: str | os.PathLike[str], *, exclude: Collection[str] = ()) -> GoldSet:
    """Load Who&When labels from one file or a folder of files (the labels are in the trace files).

    ``mistake_step`` is already 0-based (a string); ``mistake_agent`` is kept as written (compare with
    :func:`trajaudit.eval.metrics.normalize_agent`). There is no category. Unreadable files are
    reported in ``problems`` and skipped; files of the folder named in ``exclude`` (as
    :func:`~trajaudit.regular_files.expand_paths` yields them: the caller's own outputs written into
    the folder, e.g. ``eval --save-pred``) are not read.
    """
    gold = GoldSet(format="who_and_when", source=str(path))
    for f in expand_paths([path]):
        if str(f) in exclude:
            continue
        try:
            item = who_and_when_item(read_json(f), str(f))
        except GoldFormatError as e:
            gold.problems.append(f"{e} (skipped)")
            continue
        if item.problem:
            gold.problems.append(f"{item.key}: {item.problem} (no critical step; excluded from step metrics)")
        gold.add(item)
    if not gold and not gold.problems:
        raise GoldFormatError("no Who&When files found", file=str(path))
    return gold


def load_jsonl_gold(path: str | os.PathLike[str], taxonomy: str | Taxonomy | None = "agentrx") -> GoldSet:
    """Load generic gold JSONL (one ``gold.schema.json`` object per line; steps already 0-based).

    The key is ``id`` or ``trajectory_id`` when given, else ``<file stem>`` or ``<file stem>#<record>``;
    diagnoses also match on (file name, record). ``category`` is normalized with the line's
    ``taxonomy`` or the ``taxonomy`` argument. Bad lines are reported in ``problems`` and skipped.

    Raises:
        GoldFormatError: the file cannot be read or is not valid UTF-8.
    """
    p = Path(path)
    lines = read_jsonl_lines(p)
    gold = GoldSet(format="jsonl", source=str(p))
    taxes: dict[str, Taxonomy] = {}
    for ln, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = safe_json.loads(line)
        except safe_json.LimitExceeded as e:
            gold.problems.append(f"line {ln}: {e} (skipped)")
            continue
        except json.JSONDecodeError as e:
            gold.problems.append(f"line {ln}: invalid JSON ({e.msg}) (skipped)")
            continue
        errs = schema_errors("gold", d, limit=1)
        if errs:
            gold.problems.append(f"line {ln}: {errs[0]} (skipped)")
            continue
        tax_name = d.get("taxonomy") or (taxonomy if isinstance(taxonomy, str) else getattr(taxonomy, "id", None))
        tax = None
        if isinstance(taxonomy, Taxonomy) and tax_name == taxonomy.id:
            tax = taxonomy
        elif tax_name:
            try:
                tax = taxes.setdefault(tax_name, load_taxonomy(tax_name))
            except TrajauditError as e:
                gold.problems.append(f"line {ln}: {e}; categories compared verbatim")
        rid = d.get("id", d.get("trajectory_id"))
        stem = Path(d["file"]).stem if d.get("file") else ""
        key = str(rid) if rid is not None else (f"{stem}#{d['record']}" if d.get("record") is not None else stem)
        crit, span = d.get("critical_step"), d.get("tolerance_span")
        problem = None if crit is not None else "critical_step is null"
        if span and (span[0] > span[1] or (crit is not None and not span[0] <= crit <= span[1])):
            gold.problems.append(f"line {ln}: tolerance_span {span} does not contain critical_step {crit}")
        if problem:
            gold.problems.append(f"{key}: {problem} (excluded from step metrics)")
        errors = d.get("error_steps")
        gold.add(GoldItem(
            key=key, critical_step=crit, category=category_id(d.get("category"), tax, f"line {ln}", gold.problems),
            agent=d.get("agent"), tolerance_span=(span[0], span[1]) if span else None,
            error_steps=tuple(sorted(set(errors))) if errors is not None else None,
            repair_rubrics=tuple(d.get("repair_rubrics", [])), taxonomy=tax.id if tax else tax_name,
            file=d.get("file"), record=d.get("record"), n_steps=d.get("n_steps"), numbering=NUMBERING["jsonl"],
            reason=d.get("reason", ""), problem=problem))
    return gold


def detect_gold_format(path: str | os.PathLike[str]) -> str:
    """Guess the gold format: a folder or a ``{history, mistake_step}`` file is Who&When, a list of
    ``{trajectory_id, failures}`` (or a ``.jsonl`` of them, first line decides) is AgentRx, any other
    ``.jsonl`` is generic JSONL.

    Raises:
        GoldFormatError: the path does not exist or matches no format.
    """
    p = Path(path)
    if p.is_dir():
        return "who_and_when"
    if not p.exists():
        raise GoldFormatError("no such file or folder", file=str(p))
    if p.suffix.lower() in (".jsonl", ".ndjson"):
        return "agentrx" if agentrx_jsonl(p) else "jsonl"
    doc = read_json(p)
    if isinstance(doc, dict) and "history" in doc:
        return "who_and_when"
    entries = doc if isinstance(doc, list) else list(doc.values()) if isinstance(doc, dict) else []
    if entries and all(agentrx_entry(e) for e in entries):
        return "agentrx"
    raise GoldFormatError("unknown gold format (expected AgentRx ground truth, Who&When files, or gold JSONL; "
                          "use --gold-format)", file=str(p))


def load_gold(path: str | os.PathLike[str], format: str = "auto", *, taxonomy: str | None = None,
              exclude: Collection[str] = ()) -> GoldSet:
    """Load gold labels from ``path`` in ``format`` (``auto``, ``agentrx``, ``who_and_when``, ``jsonl``).

    Args:
        taxonomy: taxonomy for normalizing categories (default: ``agentrx`` for AgentRx and JSONL).
        exclude: files of a Who&When folder not to read (:func:`load_who_and_when_gold`).

    Returns:
        A :class:`GoldSet` (a ``dict[key, GoldItem]`` with ``problems``); steps are 0-based indexes.

    Raises:
        GoldFormatError: unknown format, unreadable or unrecognisable file.
    """
    fmt = detect_gold_format(path) if format == "auto" else format
    if fmt == "agentrx":
        return load_agentrx_gold(path, taxonomy or "agentrx")
    if fmt == "who_and_when":
        return load_who_and_when_gold(path, exclude=exclude)
    if fmt == "jsonl":
        return load_jsonl_gold(path, taxonomy or "agentrx")
    raise GoldFormatError(f"unknown gold format {fmt!r} (known: auto, {', '.join(GOLD_FORMATS)})", file=str(path))


__all__ = ["GOLD_FORMATS", "GoldFailure", "GoldFormatError", "GoldItem", "GoldSet", "detect_gold_format",
           "load_agentrx_gold", "load_gold", "load_jsonl_gold", "load_who_and_when_gold", "other_file", "suffix_aliases",
           "who_and_when_item"]
