"""Gold data shared by the gold loaders (:mod:`trajaudit.eval.gold`, :mod:`trajaudit.eval.gold_agentrx`):
:class:`GoldItem`, :class:`GoldFailure`, :class:`GoldSet`, :class:`GoldFormatError`, the step
numbering conventions, and small readers (:func:`int_value`, :func:`category_id`, :func:`read_json`,
:func:`read_jsonl_lines`).
Both loader modules import it; it imports neither. Read only by the evaluation harness.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trajaudit import regular_files, safe_json
from trajaudit.engine.diagnosis import Diagnosis, other_run
from trajaudit.engine.taxonomy import Taxonomy
from trajaudit.engine.trace.text import jsonl_lines
from trajaudit.errors import TrajauditError

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
        else ``aliases[trajectory_id]`` (:func:`~trajaudit.eval.gold_agentrx.suffix_aliases`: gold ``"2"`` for run ``"tau_retail_2"``).

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


def int_value(value: Any) -> int | None:
    """An int from an int or a digit string (``"7"``), else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


def category_id(label: Any, tax: Taxonomy | None, where: str, problems: list[str]) -> str | None:
    """``label`` as a category id of ``tax`` (``None`` for no label); a label not in ``tax`` is kept
    verbatim and reported in ``problems`` (prefixed with ``where``)."""
    if label is None or (isinstance(label, str) and not label.strip()):
        return None
    if tax is not None:
        cid = tax.try_normalize(label)
        if cid is not None:
            return cid
        problems.append(f"{where}: category {label!r} is not in taxonomy {tax.id!r}; compared verbatim")
    return str(label)


def read_json(path: Path) -> Any:
    """The JSON document in ``path`` (a UTF-8 byte-order mark allowed; nesting bounded by ``safe_json``).

    Raises:
        GoldFormatError: unreadable, or not valid JSON.
    """
    try:
        text = regular_files.read_text(path, "utf-8-sig")
        if not text.strip():  # "not valid JSON: Expecting value: line 1 column 1 (char 0)" said it less plainly
            raise GoldFormatError("file is empty", file=str(path))
        return safe_json.loads(text)
    except OSError as e:
        raise GoldFormatError(f"cannot read: {e.strerror or e}", file=str(path)) from None
    except ValueError as e:  # JSONDecodeError, NestedTooDeep, UnicodeDecodeError
        raise GoldFormatError(f"not valid JSON: {e}", file=str(path)) from None


def read_jsonl_lines(path: Path) -> list[str]:
    """The lines of the JSONL file ``path`` (a UTF-8 byte-order mark allowed; split by
    :func:`~trajaudit.engine.trace.text.jsonl_lines`, blank lines kept so line numbers stay 1-based
    file lines).

    Raises:
        GoldFormatError: unreadable, or not valid UTF-8.
    """
    try:
        return jsonl_lines(regular_files.read_text(path, "utf-8-sig"))
    except OSError as e:
        raise GoldFormatError(f"cannot read: {e.strerror or e}", file=str(path)) from None
    except UnicodeDecodeError as e:
        raise GoldFormatError(f"not valid UTF-8: {e}", file=str(path)) from None


__all__ = ["NUMBERING", "GoldFailure", "GoldFormatError", "GoldItem", "GoldSet", "category_id", "int_value",
           "other_file", "read_json", "read_jsonl_lines"]
