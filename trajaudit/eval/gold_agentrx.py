"""AgentRx ground truth: the annotation files of the AgentRx release (a JSON list, or the Hugging Face
release's JSONL: ``magentic_one.jsonl``, ``tau_retail.jsonl``) onto 0-based step indexes.

``step_number`` is 1-based over the run's messages (system included), or over the ``steps`` of an
``agentrx_steps`` record (its ``index``): index = ``step_number - 1``. The root cause is
``root_cause.failure_id``, else the release's flat ``root_cause_failure_id``. The release names a tau
run ``"tau_retail_2"`` in the trajectory file and ``"2"`` in the annotations: :func:`suffix_aliases`
pairs them when the pairing is unambiguous. Read only by the evaluation harness.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trajaudit import safe_json
from trajaudit.engine.taxonomy import Taxonomy, load_taxonomy
from trajaudit.eval.gold_items import (
    NUMBERING,
    GoldFailure,
    GoldFormatError,
    GoldItem,
    GoldSet,
    category_id,
    int_value,
    read_json,
    read_jsonl_lines,
)
from trajaudit.regular_files import file_kind

log = logging.getLogger(__name__)


def _is_jsonl(p: Path) -> bool:
    return p.suffix.lower() in (".jsonl", ".ndjson")


def _lines(p: Path, problems: list[str]) -> list[tuple[str, Any]]:
    """``(where, entry)`` of an AgentRx annotation JSONL file (one entry per line, as the Hugging Face
    release's ``magentic_one.jsonl`` and ``tau_retail.jsonl``); bad lines go to ``problems``."""
    out = []
    for ln, line in enumerate(read_jsonl_lines(p), 1):
        if not line.strip():
            continue
        try:
            out.append((f"line {ln}", safe_json.loads(line)))
        except ValueError as e:  # JSONDecodeError, NestedTooDeep
            problems.append(f"line {ln}: not valid JSON ({getattr(e, 'msg', e)}) (skipped)")
    return out


def load_agentrx_gold(path: str | os.PathLike[str], taxonomy: str | Taxonomy = "agentrx") -> GoldSet:
    """Load AgentRx ground truth: a list of ``{trajectory_id, failures[], root_cause, ...}``, or the same
    entries one per line (``.jsonl``/``.ndjson``: the Hugging Face release's annotation files).

    Converts from 1-based ``step_number`` (over all messages, system included; for step records,
    ``agentrx_steps``, the step's 1-based ``index``): index = n - 1. The critical step is the failure
    whose ``failure_id`` equals ``root_cause.failure_id``, else ``root_cause_failure_id`` (as strings;
    when both are given and differ, ``root_cause.failure_id`` is used and the disagreement reported).
    ``error_steps`` are the steps of all annotated failures (AgentRx marks every failure, §2.1).
    Categories are normalized with ``taxonomy``. A dict ``{id: entry}`` is accepted too.

    Raises:
        GoldFormatError: unreadable file or not a list/dict of entries. Bad entries (and bad JSONL
        lines) are reported in ``problems`` and kept without a critical step, or skipped when they
        have no id.
    """
    p = Path(path)
    tax = load_taxonomy(taxonomy) if isinstance(taxonomy, str) else taxonomy
    gold = GoldSet(format="agentrx", source=str(p))
    for where, entry in _entries(p, gold.problems):
        if not isinstance(entry, dict) or entry.get("trajectory_id") is None:
            gold.problems.append(f"{where}: no trajectory_id (skipped)")
            continue
        gold.add(_gold_item(str(entry["trajectory_id"]), entry, tax, gold.problems))
    return gold


def _entries(p: Path, problems: list[str]) -> list[tuple[str, Any]]:
    """``[(where, entry)]`` of an AgentRx gold file: JSONL lines, a list, one entry, or ``{id: entry}``.

    Raises:
        GoldFormatError: not a list/dict of entries.
    """
    if _is_jsonl(p):
        return _lines(p, problems)
    doc = read_json(p)
    if isinstance(doc, dict) and "failures" not in doc:
        doc = [{"trajectory_id": k, **v} for k, v in doc.items() if isinstance(v, dict)]
    if isinstance(doc, dict):
        doc = [doc]
    if not isinstance(doc, list):
        raise GoldFormatError("AgentRx ground truth must be a list of {trajectory_id, failures, root_cause}",
                              file=str(p))
    return [(f"entry {i}", e) for i, e in enumerate(doc)]


def _failures(key: str, entry: dict[str, Any], tax: Taxonomy, problems: list[str]) -> list[GoldFailure]:
    """The entry's annotated failures, 1-based ``step_number`` converted to a 0-based index."""
    fails = []
    for j, f in enumerate(entry.get("failures") or []):
        if not isinstance(f, dict):
            problems.append(f"{key}: failures[{j}] is not an object (skipped)")
            continue
        n = int_value(f.get("step_number"))
        if n is None or n < 1:
            problems.append(f"{key}: failures[{j}] has no usable 1-based step_number ({f.get('step_number')!r})")
        fails.append(GoldFailure(
            step=n - 1 if n is not None and n >= 1 else None,
            category=category_id(f.get("failure_category"), tax, f"{key} failures[{j}]", problems),
            agent=f.get("failed_agent"), failure_id=None if f.get("failure_id") is None else str(f["failure_id"]),
            reason=str(f.get("step_reason") or "")))
    return fails


def _gold_item(key: str, entry: dict[str, Any], tax: Taxonomy, problems: list[str]) -> GoldItem:
    """One entry as a :class:`GoldItem`: the root-cause failure gives the critical step, category and
    agent (none, with the problem noted, when it cannot be found or has no step)."""
    fails = _failures(key, entry, tax, problems)
    rc = entry.get("root_cause")
    rc_id = _root_cause_id(key, entry, problems)
    crit = next((f for f in fails if rc_id is not None and f.failure_id == str(rc_id)), None)
    problem = None
    if rc_id is None:
        problem = "no root_cause.failure_id"
    elif crit is None:
        problem = f"root_cause.failure_id {rc_id!r} matches no failure"
    elif crit.step is None:
        problem = "root-cause failure has no usable step"
    if problem:
        problems.append(f"{key}: {problem} (no critical step; excluded from step metrics)")
    steps = sorted({f.step for f in fails if f.step is not None})
    return GoldItem(
        key=key, critical_step=crit.step if crit else None, category=crit.category if crit else None,
        agent=crit.agent if crit else None, failures=tuple(fails), error_steps=tuple(steps) if fails else None,
        taxonomy=tax.id, numbering=NUMBERING["agentrx"],
        reason=str((rc if isinstance(rc, dict) else {}).get("reason_for_root_cause")
                   or entry.get("root_cause_reason") or (crit.reason if crit else "")), problem=problem)


def _root_cause_id(key: str, entry: dict[str, Any], problems: list[str]) -> Any:
    """The entry's root-cause failure id: ``root_cause.failure_id``, else ``root_cause_failure_id``."""
    rc = entry.get("root_cause")
    nested = rc.get("failure_id") if isinstance(rc, dict) else None
    flat = entry.get("root_cause_failure_id")
    if nested is not None and flat is not None and str(nested) != str(flat):
        problems.append(f"{key}: root_cause.failure_id {nested!r} and root_cause_failure_id {flat!r} differ "
                        "(used root_cause.failure_id)")
    return nested if nested is not None else flat


def agentrx_entry(e: Any) -> bool:
    """Whether ``e`` is an AgentRx annotation entry (an object with ``failures`` or a root cause)."""
    return isinstance(e, dict) and ("failures" in e or "root_cause" in e or "root_cause_failure_id" in e)


def agentrx_jsonl(p: Path) -> bool:
    """Whether the first JSON line of ``p`` is an AgentRx entry (``failures``/``root_cause``), which
    generic gold JSONL (``critical_step``) never has."""
    try:
        if file_kind(p) is not None:  # a FIFO would block the sniff: the gold loader reports it
            return False
        with p.open(encoding="utf-8-sig", errors="replace") as f:
            for line in f:
                if line.strip():
                    try:
                        return agentrx_entry(safe_json.loads(line))
                    except ValueError:
                        return False
    except OSError as e:
        raise GoldFormatError(f"cannot read: {e.strerror or e}", file=str(p)) from None
    return False


def suffix_aliases(keys: Iterable[str], run_ids: Iterable[str]) -> dict[str, str]:
    """``{run id: gold key}`` for runs whose id is the gold key behind a prefix and ``_``.

    AgentRx's Hugging Face release names a tau run ``"tau_retail_2"`` in the trajectory file and
    ``"2"`` in the annotation file. A run id R pairs with gold key K when R is no gold key itself,
    R ends with ``"_" + K``, K is the only gold key R ends with that way, R is the only run id ending
    with ``"_" + K``, and no run has the id K itself — so a pairing is never a guess between two
    candidates (``"a_2"`` and ``"b_2"`` both ending with ``"_2"`` pair with nothing).
    """
    keyset = set(keys)
    ids = set(run_ids)
    cands: dict[str, list[str]] = {}
    for rid in ids - keyset:
        hits = [rid[i + 1:] for i, c in enumerate(rid) if c == "_" and 0 < i < len(rid) - 1 and rid[i + 1:] in keyset]
        if len(hits) == 1:
            cands.setdefault(hits[0], []).append(rid)
        elif hits:
            log.debug("run id %r ends with several gold keys %s: not paired", rid, sorted(hits))
    return {rids[0]: k for k, rids in cands.items() if len(rids) == 1 and k not in ids}


__all__ = ["agentrx_entry", "agentrx_jsonl", "load_agentrx_gold", "suffix_aliases"]
