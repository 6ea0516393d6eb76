"""The validation log: every (step, rule) evaluation that was not skipped, with verdict and evidence.

AgentRx §3.3 ("validation log"): constraint checks are evidence for the judge, not verdicts on the
run. Records are frozen data; the log serializes to JSON valid against
``trajaudit/schemas/validation_log.schema.json``. Rule checks, claim-graph findings (PROVENANCE /
RELATIONAL_POST records) and semantic (LLM) checks all land in the same log.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, fields
from functools import partial
from operator import attrgetter
from typing import Any, Literal

Verdict = Literal["pass", "fail", "unknown", "skip"]
VERDICTS: tuple[str, ...] = ("pass", "fail", "unknown", "skip")
Severity = Literal["info", "warning", "error", "critical"]
SEVERITIES: tuple[str, ...] = ("info", "warning", "error", "critical")
RULE_TYPES: tuple[str, ...] = ("SCHEMA", "PROTOCOL", "RELATIONAL_POST", "PROVENANCE", "TEMPORAL", "CAPABILITY")

LOG_SCHEMA_VERSION = 1
#: How a ``ValidationLog.incomplete`` note of the run's time budget (``--run-timeout``) begins.
RUN_BUDGET_NOTE = "run time budget"
#: how the reasons of the ``unknown`` records of a rule that could not be evaluated begin
#: (:attr:`Record.eval_error`; written by ``engine.validation.rule_eval`` and ``stepper``)
EVAL_ERROR_NOTES = ("evaluation error", "error: ", "evaluation budget of ")


def severity_rank(severity: str) -> int:
    """0 for info … 3 for critical; raises ``ValueError`` for an unknown severity."""
    try:
        return SEVERITIES.index(severity)
    except ValueError:
        raise ValueError(f"unknown severity {severity!r}; expected one of {', '.join(SEVERITIES)}") from None


@dataclass(frozen=True)
class Evidence:
    """An address into the trajectory and what was seen there.

    Attributes:
        address: e.g. ``steps.7.tool_calls.0.arguments.item_ids`` or ``steps.6.content[120:164]``.
        value: the value the check saw (JSON-serializable), or ``None``.
        note: a short human label ("claimed count", "latest get_product_details output").
    """

    address: str
    value: Any = None
    note: str | None = None

    @property
    def step(self) -> int | None:
        """The step index the address points into, or ``None`` if it is not a ``steps.N…`` address."""
        parts = self.address.split(".")
        if len(parts) >= 2 and parts[0] == "steps":
            head = parts[1].split("[")[0]
            if head.isdigit():
                return int(head)
        return None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"address": self.address, "value": self.value, "note": self.note}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Evidence:
        """Inverse of :meth:`to_dict`."""
        return cls(address=d["address"], value=d.get("value"), note=d.get("note"))


@dataclass(frozen=True)
class Record:
    """One evaluation of one rule at one step.

    Attributes:
        step: the step index evaluated (0-based).
        rule_id: ``pack.kebab-name``.
        verdict: pass / fail / unknown (could not decide: budget hit, no LLM, …) / skip.
        severity: the rule's severity (info/warning/error/critical).
        rule_type: SCHEMA, PROTOCOL, RELATIONAL_POST, PROVENANCE, TEMPORAL or CAPABILITY.
        targets: taxonomy category ids this rule is evidence for.
        message: the rendered message (bound values filled in).
        evidence: addresses and values the check saw.
        bindings: variables bound by quantifiers/selectors, for messages and explanations.
        origin: who produced the record: ``rules``, ``claims``, ``semantic``, ``tools`` …
        reason: why the verdict is ``unknown`` (or extra detail), else ``None``.
    """

    step: int
    rule_id: str
    verdict: Verdict
    severity: Severity = "error"
    rule_type: str = "PROTOCOL"
    targets: tuple[str, ...] = ()
    message: str = ""
    evidence: tuple[Evidence, ...] = ()
    bindings: dict[str, Any] = field(default_factory=dict)
    origin: str = "rules"
    reason: str | None = None

    @property
    def is_violation(self) -> bool:
        """True when the verdict is ``fail``."""
        return self.verdict == "fail"

    @property
    def out_of_time(self) -> bool:
        """True for an ``unknown`` that says the run's time budget (``--run-timeout``) was used up
        before this check was made: not a check made, nor a sign that the rule's guard held."""
        return self.verdict == "unknown" and (self.reason or "").startswith(RUN_BUDGET_NOTE)

    @property
    def eval_error(self) -> bool:
        """True for an ``unknown`` made because the rule could not be evaluated at this step: its
        expression raised (``evaluation error: …``, e.g. a division by zero or ``len()`` of a step
        range), nested too deeply, used up its operation budget, or its checker raised (``error: …``)
        — a defect of the rule (or of the evaluator), not a fact about the run. Unknowns that come from
        the data (an assertion on missing data is null, a checker or an oracle cannot decide) and from
        the run's time budget (:attr:`out_of_time`) are not."""
        return self.verdict == "unknown" and (self.reason or "").startswith(EVAL_ERROR_NOTES)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "step": self.step,
            "rule_id": self.rule_id,
            "verdict": self.verdict,
            "severity": self.severity,
            "rule_type": self.rule_type,
            "targets": list(self.targets),
            "message": self.message,
            "evidence": [e.to_dict() for e in self.evidence],
            "bindings": self.bindings,
            "origin": self.origin,
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Record:
        """Inverse of :meth:`to_dict`."""
        return cls(
            step=d["step"],
            rule_id=d["rule_id"],
            verdict=d["verdict"],
            severity=d.get("severity", "error"),
            rule_type=d.get("rule_type", "PROTOCOL"),
            targets=tuple(d.get("targets", [])),
            message=d.get("message", ""),
            evidence=tuple(Evidence.from_dict(e) for e in d.get("evidence", [])),
            bindings=dict(d.get("bindings", {})),
            origin=d.get("origin", "rules"),
            reason=d.get("reason"),
        )


class LazyRecord(Record):
    """A :class:`Record` whose ``evidence`` and ``bindings`` are computed on first read.

    A rule passes at most of the steps it visits, and the audit (judge, diagnosis, reports) reads the
    evidence of failures only; rendering the evidence of every pass (JSON-safe previews of the values
    the check read) was a fifth of the rule stage. ``thunk()`` returns ``(evidence, bindings)`` from the
    evaluation state captured when the rule ran (read-only views and values of the run), so the
    record equals, serializes and compares exactly like the eager one it stands for.

    Args:
        thunk: ``() -> (evidence tuple, bindings dict)``, called at most once; or ``None`` with
            ``evidence`` / ``bindings`` given (as ``dataclasses.replace`` does).
        other arguments: as :class:`Record`.
    """

    def __init__(self, step: int, rule_id: str, verdict: Verdict, severity: Severity = "error",
                 rule_type: str = "PROTOCOL", targets: tuple[str, ...] = (), message: str = "",
                 evidence: tuple[Evidence, ...] = (), bindings: dict[str, Any] | None = None,
                 origin: str = "rules", reason: str | None = None, *, thunk: Any = None) -> None:
        # frozen: fields are written straight into the instance dict (as the dataclass __init__ does
        # through object.__setattr__), in one call: a batch creates hundreds of these per run
        self.__dict__.update(step=step, rule_id=rule_id, verdict=verdict, severity=severity, rule_type=rule_type,
                             targets=targets, message=message, origin=origin, reason=reason, _thunk=thunk)
        if thunk is None:
            self.__dict__["_lazy"] = (evidence, bindings if bindings is not None else {})

    @staticmethod
    def pass_fields(rule_id: str, severity: str, rule_type: str, targets: tuple[str, ...],
                    message: str) -> dict[str, Any]:
        """The instance fields of a ``pass`` record of one rule, but its step and thunk, in the order
        ``__init__`` writes them (for :meth:`passed`)."""
        return dict(step=None, rule_id=rule_id, verdict="pass", severity=severity, rule_type=rule_type,
                    targets=targets, message=message, origin="rules", reason=None, _thunk=None)

    @classmethod
    def passed(cls, fields: dict[str, Any], step: int, thunk: Any) -> LazyRecord:
        """``LazyRecord(step, rule_id, "pass", severity, rule_type, targets, message, thunk=thunk)`` from
        :meth:`pass_fields` (the same instance dict, one copy instead of ten keyword arguments)."""
        rec = cls.__new__(cls)
        d = rec.__dict__
        d.update(fields)
        d["step"] = step
        d["_thunk"] = thunk
        return rec

    @property
    def rendered(self) -> bool:
        """True once the evidence and bindings exist (read, or given)."""
        return "_lazy" in self.__dict__

    def _force(self) -> tuple[tuple[Evidence, ...], dict[str, Any]]:
        d = self.__dict__
        got = d.get("_lazy")
        if got is None:
            got = d["_lazy"] = d["_thunk"]()
            d["_thunk"] = None
        return got

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in fields(Record))

    __hash__ = None  # type: ignore[assignment] - like Record's: bindings is a dict

    @property  # type: ignore[override]
    def evidence(self) -> tuple[Evidence, ...]:
        """Addresses and values the check saw (computed on first read)."""
        return self._force()[0]

    @property  # type: ignore[override]
    def bindings(self) -> dict[str, Any]:
        """Variables bound by the rule (computed on first read)."""
        return self._force()[1]


_STEP = attrgetter("step")


@dataclass
class ValidationLog:
    """All records for one trajectory, ordered by step (stable within a step).

    Attributes:
        trajectory_id: the trajectory's id.
        records: the records (no ``skip`` verdicts are stored; skips are only counted).
        skipped: number of (step, rule) pairs whose guard did not hold.
        incomplete: notes of limits hit (budget, claim caps, rules that could not apply), never silent.
        dropped_passes: ``pass`` records left out by :meth:`without_passes` (still counted by
            :meth:`summary`).
    """

    trajectory_id: str
    records: list[Record] = field(default_factory=list)
    skipped: int = 0
    incomplete: list[str] = field(default_factory=list)
    dropped_passes: int = 0

    def without_passes(self) -> ValidationLog:
        """A copy keeping only the ``fail`` and ``unknown`` records (what reports show), for batches
        that keep thousands of logs: pass records are most of a log and each keeps what its evidence
        is rendered from. :meth:`summary` still counts the passes."""
        kept = [r for r in self.records if r.verdict != "pass"]
        return ValidationLog(self.trajectory_id, kept, self.skipped, list(self.incomplete),
                             self.dropped_passes + len(self.records) - len(kept))

    @property
    def out_of_time(self) -> bool:
        """True when the run's rule evaluation used up its time budget (``--run-timeout``): an
        ``incomplete`` note begins with :data:`RUN_BUDGET_NOTE` and the checks left are ``unknown``."""
        return any(n.startswith(RUN_BUDGET_NOTE) for n in self.incomplete)

    def add(self, record: Record) -> None:
        """Append a record (``skip`` verdicts only increment ``skipped``)."""
        if record.verdict == "skip":
            self.skipped += 1
        else:
            self.records.append(record)

    def extend(self, records: list[Record]) -> None:
        """Add many records."""
        for r in records:
            self.add(r)

    def sort(self) -> None:
        """Order records by step, keeping insertion order within a step."""
        self.records.sort(key=_STEP)  # (a C key function: a lambda cost a Python call per record)

    def violations(self, min_severity: str = "info") -> list[Record]:
        """``fail`` records at or above ``min_severity``, in step order."""
        floor = severity_rank(min_severity)
        return [r for r in self.records if r.verdict == "fail" and severity_rank(r.severity) >= floor]

    def at(self, step: int) -> list[Record]:
        """Records evaluated at ``step``."""
        return [r for r in self.records if r.step == step]

    def summary(self) -> dict[str, Any]:
        """Counts: by verdict, failures by severity, and failures by rule id."""
        verdicts = Counter(r.verdict for r in self.records)
        verdicts["skip"] = self.skipped
        verdicts["pass"] += self.dropped_passes
        fails = [r for r in self.records if r.verdict == "fail"]
        return {
            "records": len(self.records) + self.dropped_passes,
            "verdicts": {v: verdicts.get(v, 0) for v in VERDICTS},
            "fail_by_severity": {s: sum(1 for r in fails if r.severity == s) for s in SEVERITIES},
            "fail_by_rule": dict(Counter(r.rule_id for r in fails).most_common()),
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON form, valid against ``validation_log.schema.json``."""
        self.sort()
        return {
            "schema_version": LOG_SCHEMA_VERSION,
            "trajectory_id": self.trajectory_id,
            "summary": self.summary(),
            "incomplete": list(self.incomplete),
            "records": [r.to_dict() for r in self.records],
        }

    def to_json(self, indent: int | None = 1) -> str:
        """Serialize to a JSON string."""
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=indent, default=str)

    def to_rows(self, deferred: Collection[str] = ()) -> tuple[Any, ...]:
        """A compact form for shipping the log between processes (``audit --jobs``): nested tuples of
        the records' fields, evidence as ``(address, value, note)``; values are not converted (unlike
        :meth:`to_dict`, whose form is JSON), so :meth:`from_rows` gives back an equal log. Not a
        storage format: use :meth:`to_dict`.

        Args:
            deferred: rule ids whose not yet rendered lazy pass records travel without evidence and
                bindings (their slots hold ``None`` and the record's ordinal among the rule's records),
                for the receiver to derive again (see :meth:`from_rows`). Every other record's
                evidence is read (lazy records are rendered).
        """
        rows = []
        seen: Counter[str] = Counter()
        for r in self.records:
            ordinal = seen[r.rule_id]
            seen[r.rule_id] += 1
            if r.rule_id in deferred and isinstance(r, LazyRecord) and not r.rendered:
                evidence, bindings = None, ordinal
            else:
                evidence, bindings = tuple((e.address, e.value, e.note) for e in r.evidence), r.bindings
            rows.append((r.step, r.rule_id, r.verdict, r.severity, r.rule_type, r.targets, r.message,
                         evidence, bindings, r.origin, r.reason))
        return self.trajectory_id, self.skipped, tuple(self.incomplete), tuple(rows), self.dropped_passes

    @classmethod
    def from_rows(cls, rows: tuple[Any, ...],
                  derive: Callable[[str, int, int], tuple[tuple[Evidence, ...], dict[str, Any]]] | None = None
                  ) -> ValidationLog:
        """Inverse of :meth:`to_rows`: equal records, in the same order.

        Args:
            derive: ``(rule_id, ordinal, step) -> (evidence, bindings)`` of that rule's ``ordinal``-th
                record (0-based, in log order; at ``step``), for records shipped without them; called when such a
                record's evidence is first read (the record is a :class:`LazyRecord`).

        Raises:
            ValueError: a record was shipped without evidence and no ``derive`` was given.
        """
        trajectory_id, skipped, incomplete, records, dropped_passes = rows
        out: list[Record] = []
        for step, rule_id, verdict, severity, rule_type, targets, message, evidence, bindings, origin, reason in records:
            if evidence is None:
                if derive is None:
                    raise ValueError(f"{trajectory_id}: record {rule_id} at step {step} has no evidence to derive")
                out.append(LazyRecord(step, rule_id, verdict, severity, rule_type, targets, message, origin=origin,
                                      reason=reason, thunk=partial(derive, rule_id, bindings, step)))
            else:
                out.append(Record(step, rule_id, verdict, severity, rule_type, targets, message,
                                  tuple([Evidence(*e) for e in evidence]), bindings, origin, reason))
        return cls(trajectory_id, out, skipped, list(incomplete), dropped_passes)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ValidationLog:
        """Inverse of :meth:`to_dict` (for a log of :meth:`without_passes`, the passes its summary counts
        beyond its records are its ``dropped_passes``)."""
        records = [Record.from_dict(r) for r in d.get("records", [])]
        verdicts = d.get("summary", {}).get("verdicts", {})
        shown = sum(1 for r in records if r.verdict == "pass")
        return cls(
            trajectory_id=d["trajectory_id"],
            records=records,
            skipped=int(verdicts.get("skip", 0)),
            incomplete=list(d.get("incomplete", [])),
            dropped_passes=max(0, int(verdicts.get("pass", shown)) - shown),
        )
