"""Gold labels: load annotated failures (AgentRx, Who&When, generic JSONL) onto 0-based step indexes.

Every loader converts the dataset's own step numbering to the IR's ``Step.index`` (0-based position
in the run's message list), which is what diagnoses use, and records the convention it converted
from in :attr:`GoldItem.numbering`:

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
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trajaudit.engine import safe_json
from trajaudit.engine.diagnosis import Diagnosis, other_run
from trajaudit.engine.loader import expand_paths
from trajaudit.engine.schema import schema_errors
from trajaudit.engine.taxonomy import Taxonomy, load_taxonomy
from trajaudit.engine.trace_text import jsonl_lines
from trajaudit.errors import TrajauditError

log = logging.getLogger(__name__)

GOLD_FORMATS = ("agentrx", "who_and_when", "jsonl")
NUMBERING = {
    "agentrx": "AgentRx step_number: 1-based over all messages (system included); index = step_number - 1",
    "who_and_when": "Who&When mistake_step: 0-based index into history (string); used as is",
    "jsonl": "generic gold JSONL: 0-based message indexes; used as is",
}


class GoldFormatError(TrajauditError):
    """A gold file cannot be read or its format is unknown. ``file`` names it."""

    def __init__(self, message: str, *, file: str | None = None) -> None:
        self.message, self.file = message, file
        super().__init__(f"{file}: {message}" if file else message)


@dataclass(frozen=True)
class GoldFailure:
    """One annotated failure of a run (AgentRx lists every failure, the critical one among them).

    Attributes:
        step: 0-based message index, or ``None`` when the annotation has no usable step.
        category: taxonomy category id, or the raw label when it is not in the taxonomy.
        agent: the failed agent as annotated.
        failure_id: the annotation's id, as a string.
        reason: the annotator's explanation.
    """

    step: int | None
    category: str | None = None
    agent: str | None = None
    failure_id: str | None = None
    reason: str = ""


@dataclass(frozen=True)
class GoldItem:
    """The gold label of one run.

    Attributes:
        key: the trajectory id predictions are matched on.
        critical_step: 0-based index of the critical (root-cause) step, or ``None`` when the gold
            gives none (reported; excluded from step metrics).
        category: root-cause category id (``None`` when the dataset has no categories).
        agent: the responsible agent as annotated.
        tolerance_span: inclusive ``(lo, hi)`` of acceptable steps (SearchAuditor), or ``None``.
        failures: every annotated failure (AgentRx multi-failure gold), in file order.
        error_steps: all erroneous steps for span metrics (DRIFT), or ``None`` when not annotated.
        repair_rubrics: atomic rubrics a repair must satisfy (SearchAuditor), possibly empty.
        taxonomy: the taxonomy the category comes from.
        file, record: the run's trace file and record, when the gold names them (Who&When: the
            labelled trace file itself; JSONL: its ``file``/``record``; AgentRx: ``None``).
        n_steps: number of messages in the run, when the gold file knows it.
        numbering: the step numbering the loader converted from.
        reason: the annotator's explanation of the critical failure.
        problem: why this item is incomplete (e.g. no root cause), else ``None``.
    """

    key: str
    critical_step: int | None
    category: str | None = None
    agent: str | None = None
    tolerance_span: tuple[int, int] | None = None
    failures: tuple[GoldFailure, ...] = ()
    error_steps: tuple[int, ...] | None = None
    repair_rubrics: tuple[str, ...] = ()
    taxonomy: str | None = None
    file: str | None = None
    record: int | None = None
    n_steps: int | None = None
    numbering: str = ""
    reason: str = ""
    problem: str | None = None


class GoldSet(dict[str, GoldItem]):
    """``{key: GoldItem}`` in file order, plus what loading found.

    Attributes:
        format: ``agentrx``, ``who_and_when`` or ``jsonl``.
        source: the path loaded.
        problems: entries that were skipped or are incomplete, one line each.
    """

    def __init__(self, items: Iterable[GoldItem] = (), *, format: str = "", source: str | None = None,
                 problems: list[str] | None = None) -> None:
        super().__init__()
        self.format, self.source, self.problems = format, source, list(problems or [])
        for it in items:
            self.add(it)

    def add(self, item: GoldItem) -> None:
        """Add an item; a second item with the same key is reported and dropped."""
        if item.key in self:
            self.problems.append(f"duplicate gold entry for {item.key!r} (kept the first)")
        else:
            self[item.key] = item

    def match(self, d: Diagnosis, aliases: Mapping[str, str] | None = None) -> str | None:
        """The gold key a diagnosis belongs to: its ``trajectory_id``, else its (file name, record),
        else ``aliases[trajectory_id]`` (:func:`suffix_aliases`: gold ``"2"`` for run ``"tau_retail_2"``).

        An id match is refused when both sides name their trace file and the files differ
        (:func:`other_file`): a numeric id such as ``"2"`` is shared by runs of many data sets.
        """
        it = self.get(d.trajectory_id)
        if it is not None and other_file(it, d) is None:
            return d.trajectory_id
        if d.file:
            want = (Path(d.file).name, d.record)
            for k, it in self.items():
                if it.file and (Path(it.file).name, it.record) == want:
                    return k
        key = aliases.get(d.trajectory_id) if aliases else None
        if key is not None and key in self and other_file(self[key], d) is None:
            return key
        return None


def other_file(item: GoldItem, d: Diagnosis) -> str | None:
    """Why ``d`` cannot be the run of ``item`` although the ids may be equal, else ``None``.

    Both must name a trace file: the file names (not the folders) differ, or both give a record
    and the records differ. When either side names no file nothing can be said (``None``). The rule
    is :func:`trajaudit.engine.diagnosis.other_run` (shared with ``repair --diagnosis``).
    """
    return other_run(d, item.file, item.record, whose="the gold run's")


def _int(value: Any) -> int | None:
    """An int from an int or a digit string (``"7"``), else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


def _category(label: Any, tax: Taxonomy | None, where: str, problems: list[str]) -> str | None:
    if label is None or (isinstance(label, str) and not label.strip()):
        return None
    if tax is not None:
        cid = tax.try_normalize(label)
        if cid is not None:
            return cid
        problems.append(f"{where}: category {label!r} is not in taxonomy {tax.id!r}; compared verbatim")
    return str(label)


def _read_json(path: Path) -> Any:
    try:
        return safe_json.loads(path.read_text(encoding="utf-8-sig"))
    except OSError as e:
        raise GoldFormatError(f"cannot read: {e.strerror or e}", file=str(path)) from None
    except ValueError as e:  # JSONDecodeError, NestedTooDeep, UnicodeDecodeError
        raise GoldFormatError(f"not valid JSON: {e}", file=str(path)) from None


def load_agentrx_gold(path: str | os.PathLike[str], taxonomy: str | Taxonomy = "agentrx") -> GoldSet:
    """Load AgentRx ground truth (a JSON list, or the Hugging Face release's JSONL): see
    :func:`trajaudit.eval.gold_agentrx.load_agentrx_gold`.

    Raises:
        GoldFormatError: unreadable file or not a list/dict of entries.
    """
    from trajaudit.eval.gold_agentrx import load_agentrx_gold as load

    return load(path, taxonomy)


def suffix_aliases(keys: Iterable[str], run_ids: Iterable[str]) -> dict[str, str]:
    """``{run id: gold key}`` for the AgentRx release's prefixed run ids: see
    :func:`trajaudit.eval.gold_agentrx.suffix_aliases`."""
    from trajaudit.eval.gold_agentrx import suffix_aliases as pairs

    return pairs(keys, run_ids)


def who_and_when_item(doc: Any, file: str) -> GoldItem:
    """The gold item of one Who&When document (key = file stem; ``mistake_step`` used as is).

    Raises:
        GoldFormatError: the document is not a Who&When object with ``history``.
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("history"), list):
        raise GoldFormatError("not a Who&When file (no 'history' list)", file=file)
    step = _int(doc.get("mistake_step"))
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


def load_who_and_when_gold(path: str | os.PathLike[str]) -> GoldSet:
    """Load Who&When labels from one file or a folder of files (the labels are in the trace files).

    ``mistake_step`` is already 0-based (a string); ``mistake_agent`` is kept as written (compare with
    :func:`trajaudit.eval.metrics.normalize_agent`). There is no category. Unreadable files are
    reported in ``problems`` and skipped.
    """
    gold = GoldSet(format="who_and_when", source=str(path))
    for f in expand_paths([path]):
        try:
            item = who_and_when_item(_read_json(f), str(f))
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
    """
    p = Path(path)
    try:
        lines = jsonl_lines(p.read_text(encoding="utf-8-sig"))
    except OSError as e:
        raise GoldFormatError(f"cannot read: {e.strerror or e}", file=str(p)) from None
    gold = GoldSet(format="jsonl", source=str(p))
    taxes: dict[str, Taxonomy] = {}
    for ln, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = safe_json.loads(line)
        except safe_json.NestedTooDeep as e:
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
            key=key, critical_step=crit, category=_category(d.get("category"), tax, f"line {ln}", gold.problems),
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
        from trajaudit.eval.gold_agentrx import agentrx_jsonl

        return "agentrx" if agentrx_jsonl(p) else "jsonl"
    doc = _read_json(p)
    if isinstance(doc, dict) and "history" in doc:
        return "who_and_when"
    entries = doc if isinstance(doc, list) else list(doc.values()) if isinstance(doc, dict) else []
    if entries and all(isinstance(e, dict) and ("failures" in e or "root_cause" in e or "root_cause_failure_id" in e)
                       for e in entries):
        return "agentrx"
    raise GoldFormatError("unknown gold format (expected AgentRx ground truth, Who&When files, or gold JSONL; "
                          "use --gold-format)", file=str(p))


def load_gold(path: str | os.PathLike[str], format: str = "auto", *, taxonomy: str | None = None) -> GoldSet:
    """Load gold labels from ``path`` in ``format`` (``auto``, ``agentrx``, ``who_and_when``, ``jsonl``).

    Args:
        taxonomy: taxonomy for normalizing categories (default: ``agentrx`` for AgentRx and JSONL).

    Returns:
        A :class:`GoldSet` (a ``dict[key, GoldItem]`` with ``problems``); steps are 0-based indexes.

    Raises:
        GoldFormatError: unknown format, unreadable or unrecognisable file.
    """
    fmt = detect_gold_format(path) if format == "auto" else format
    if fmt == "agentrx":
        return load_agentrx_gold(path, taxonomy or "agentrx")
    if fmt == "who_and_when":
        return load_who_and_when_gold(path)
    if fmt == "jsonl":
        return load_jsonl_gold(path, taxonomy or "agentrx")
    raise GoldFormatError(f"unknown gold format {fmt!r} (known: auto, {', '.join(GOLD_FORMATS)})", file=str(path))


__all__ = ["GOLD_FORMATS", "GoldFailure", "GoldFormatError", "GoldItem", "GoldSet", "detect_gold_format",
           "load_agentrx_gold", "load_gold", "load_jsonl_gold", "load_who_and_when_gold", "other_file", "suffix_aliases",
           "who_and_when_item"]
