"""CI outputs of ``check`` and ``audit``: SARIF 2.1.0 (code-scanning views) and JUnit XML (test reports).

Both are built from :class:`RunFindings`, what a command keeps of each run's validation log (small:
the violations and the ids of the rules that applied), so a streaming ``audit`` keeps no log.

- SARIF (OASIS SARIF 2.1.0): one ``run`` (the tool trajaudit), one ``result`` per violation with the
  rule id, the level (``critical``/``error`` -> ``error``, ``warning`` -> ``warning``, ``info`` ->
  ``note``), the message, and as location the trace file (``physicalLocation``; the line of the run in
  a JSONL file) and the step (``logicalLocations``: ``RUN/steps/N``; ``properties.step``). A trace
  file under the working directory is a URI relative to ``%SRCROOT%`` (``uriBaseId``; the run's
  ``originalUriBaseIds`` gives that base as the ``file://`` URI of the working directory, as SARIF
  2.1.0 §3.4.4 and §3.14.14 ask of a relative URI); one outside it (``../shared/…``), an absolute URI
  (``file:///…``); a URL (``s3://…``) stays as it is. A step has no line of its own in a JSON file,
  so a result's ``region`` (``startLine``) is given only for a run that is a line of a JSONL file.
  What the log does not cover is said in ``invocations[0]`` (SARIF 2.1.0 §3.20): a
  ``toolExecutionNotifications`` entry (level, message, location) per skipped input (``error``), per
  run whose rule evaluation ran out of time (``--run-timeout``; ``error``) and per run × rule with
  checks left ``unknown`` (``warning``; ``associatedRule`` names the rule), and
  ``executionSuccessful`` is false when an input was skipped or a run ran out of time (the results
  then miss what those would have found); unknown checks alone leave it true (the tool ran to the end).
- JUnit XML: one ``testsuite`` per run and one ``testcase`` per run × rule that applied to it; a rule
  with a violation at or above ``fail_on`` is a ``failure`` (every violation listed); a rule cut by
  ``--run-timeout`` and one with ``unknown`` checks that fail ``check``'s gate (``--fail-on-unknown``:
  an evaluation error by default) an ``error``; one that could otherwise only be ``unknown``
  ``skipped``; each skipped input an ``error`` case of a last ``testsuite`` "skipped inputs", so the
  report is red whenever ``check`` exits 1.
"""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from trajaudit.engine.validation_log import ValidationLog, severity_rank
from trajaudit.errors import Problem
from trajaudit.report.markdown import visible as _report_visible

#: lone surrogates (U+D800-DFFF: a trace's unpaired ``\ud800`` escape), named too: JSON holding one is
#: refused by strict parsers (jq, a SARIF upload); the reports keep them (a browser's strings hold them)
_SURROGATES = {c: f"⟨U+{c:04X}⟩" for c in range(0xD800, 0xE000)}


def _visible(text: str) -> str:
    """:func:`trajaudit.report.markdown.visible`, lone surrogates named as well (SARIF and JUnit)."""
    return _report_visible(text).translate(_SURROGATES)


SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
_LEVEL = {"critical": "error", "error": "error", "warning": "warning", "info": "note"}
#: the ``uriBaseId`` of trace files under the working directory (the name GitHub code scanning and the
#: SARIF spec's examples use for the source root)
SRCROOT = "%SRCROOT%"
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+://")  # s3://bucket/…, file://… (2+ letters: not a drive letter)


@dataclass(frozen=True)
class Violation:
    """One failing record: step (0-based), rule id, severity, message, rule type."""

    step: int
    rule_id: str
    severity: str
    message: str
    rule_type: str = ""


@dataclass(frozen=True)
class UnknownChecks:
    """A rule's ``unknown`` checks on one run (those of the time budget left out): how many, the first
    step and reason, and whether it is an evaluation error (the rule could not be evaluated:
    :attr:`~trajaudit.engine.validation_log.Record.eval_error`)."""

    rule_id: str
    count: int
    step: int
    reason: str
    eval_error: bool = False


@dataclass(frozen=True)
class RunFindings:
    """What the CI outputs need of one run (text with control and bidi characters shown by name:
    XML 1.0 cannot hold most control characters).

    Attributes:
        run_id: the trajectory id.
        file: the trace file ("" when the run came from memory); record: its 0-based record, or ``None``.
        violations: the failing records, in log order.
        applied: ids of the rules whose guard held at some step (pass, fail or unknown).
        unknown: ids of the rules that applied but could only be ``unknown`` (never pass or fail).
        unknowns: per rule, its ``unknown`` checks (time budget's left out), in log order.
        out_of_time: the rules cut by the run's time budget (``--run-timeout``), in log order; empty
            when the run was evaluated to the end.
    """

    run_id: str
    file: str
    record: int | None
    violations: tuple[Violation, ...] = ()
    applied: tuple[str, ...] = ()
    unknown: frozenset[str] = field(default_factory=frozenset)
    unknowns: tuple[UnknownChecks, ...] = ()
    out_of_time: tuple[str, ...] = ()

    @classmethod
    def of(cls, log: ValidationLog, file: str | None, record: int | None) -> RunFindings:
        """The findings of one validation log."""
        viol = tuple(Violation(r.step, r.rule_id, r.severity, _visible(r.message or r.reason or ""), r.rule_type)
                     for r in log.records if r.verdict == "fail")
        seen: dict[str, set[str]] = {}
        unknowns: dict[str, UnknownChecks] = {}
        cut: dict[str, None] = {}
        for r in log.records:
            if r.out_of_time:
                cut[r.rule_id] = None
            elif r.verdict == "unknown":
                u = unknowns.get(r.rule_id)
                unknowns[r.rule_id] = (UnknownChecks(r.rule_id, u.count + 1, u.step, u.reason, u.eval_error) if u else
                                       UnknownChecks(r.rule_id, 1, r.step, _visible(r.reason or r.message or ""),
                                                     r.eval_error))
            if r.verdict in ("pass", "fail", "unknown"):
                seen.setdefault(r.rule_id, set()).add(r.verdict)
        unknown = frozenset(rid for rid, vs in seen.items() if vs == {"unknown"})
        return cls(_visible(log.trajectory_id), _visible(file or ""), record, viol, tuple(seen), unknown,
                   tuple(unknowns.values()), tuple(cut) if log.out_of_time else ())


def _dir_uri(root: Path) -> str:
    """The ``file://`` URI of the folder ``root`` (absolute), ending in ``/`` (SARIF §3.14.14)."""
    uri = root.as_uri()
    return uri if uri.endswith("/") else uri + "/"


def _location(path: str, root: Path) -> dict[str, str]:
    """The ``artifactLocation`` of the trace file ``path``: relative to :data:`SRCROOT` (the folder
    ``root``, absolute) when the file is under it, else an absolute ``file://`` URI; a URL as it is.
    Lexical (``os.path``): links are not followed, so the URI names the path the user gave."""
    if _URL.match(path):
        return {"uri": path}
    full = os.path.normpath(os.path.join(root, path))
    try:
        rel = os.path.relpath(full, root)
    except ValueError:  # another drive (Windows)
        rel = full
    if rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
        return {"uri": Path(full).as_uri()}
    return {"uri": quote(PurePosixPath(*Path(rel).parts).as_posix()), "uriBaseId": SRCROOT}


def _physical(file: str, record: int | None, base: Path) -> dict[str, Any]:
    """The ``physicalLocation`` of a run (or input) in ``file``: the file, and the line of a JSONL record."""
    phys: dict[str, Any] = {"artifactLocation": _location(file, base)}
    if record is not None and file.lower().endswith((".jsonl", ".ndjson")):
        phys["region"] = {"startLine": record + 1}
    return phys


def _run_location(run: RunFindings, base: Path, step: int | None = None) -> dict[str, Any]:
    """A ``location`` in ``run``: the run itself, or its ``step`` (``RUN/steps/N``), and the run's file
    (if any) as the physical location."""
    logical = ({"fullyQualifiedName": run.run_id, "name": run.run_id} if step is None else
               {"fullyQualifiedName": f"{run.run_id}/steps/{step}", "name": f"step {step}", "kind": "member"})
    loc: dict[str, Any] = {"logicalLocations": [logical]}
    if run.file:
        loc["physicalLocation"] = _physical(run.file, run.record, base)
    return loc


def _notifications(runs: Sequence[RunFindings], skipped: Sequence[Problem], base: Path) -> list[dict[str, Any]]:
    """The ``toolExecutionNotifications`` of the log: skipped inputs, runs out of time, unknown checks."""
    notes: list[dict[str, Any]] = []
    for p in skipped:
        note: dict[str, Any] = {"level": "error", "message": {"text": f"skipped: {_visible(p.message)}"},
                                "properties": {"stage": p.stage, **({"record": p.record} if p.record is not None
                                                                    else {})}}
        if p.file:
            note["locations"] = [{"physicalLocation": _physical(_visible(p.file), p.record, base)}]
        notes.append(note)
    for run in runs:
        if run.out_of_time:
            notes.append({"level": "error", "locations": [_run_location(run, base)],
                          "message": {"text": f"run {run.run_id} ran out of rule-evaluation time (--run-timeout): "
                                              f"{len(run.out_of_time)} rule(s) not evaluated to the end, their "
                                              "checks left 'unknown' (no result can come from them)"},
                          "properties": {"run": run.run_id, "rules": list(run.out_of_time)}})
        for u in run.unknowns:
            what = "could not be evaluated" if u.eval_error else "could not be decided (left 'unknown')"
            notes.append({"level": "warning", "associatedRule": {"id": u.rule_id},
                          "locations": [_run_location(run, base, u.step)],
                          "message": {"text": f"rule {u.rule_id} {what} at {u.count} step(s) of run {run.run_id} "
                                              f"(first at step {u.step}: {u.reason})"},
                          "properties": {"run": run.run_id, "step": u.step, "checks": u.count,
                                         "evaluationError": u.eval_error}})
    return notes


def sarif_log(runs: Iterable[RunFindings], *, titles: Mapping[str, str] | None = None,
              version: str = "", root: str | os.PathLike[str] | None = None,
              skipped: Sequence[Problem] = ()) -> dict[str, Any]:
    """The SARIF 2.1.0 log (a JSON-ready dict) of ``runs``.

    Args:
        runs: the runs' findings, in order.
        titles: ``{rule id: title}`` for the rules' ``shortDescription`` (a pack's text: its control and
            bidi characters are shown by name, ``⟨U+001B⟩``, as in the messages).
        version: trajaudit's version (``tool.driver.version``).
        root: the folder the runs' relative file names are relative to, ``%SRCROOT%`` in the log
            (default: the working directory).
        skipped: the inputs (files, runs) that were skipped, each a
            :class:`~trajaudit.errors.Problem`: a notification each, and ``executionSuccessful`` false.
    """
    base = Path(os.path.abspath(root if root is not None else os.getcwd()))
    titles = titles or {}
    runs = list(runs)
    rules: dict[str, dict[str, Any]] = {}
    results: list[dict[str, Any]] = []
    for run in runs:
        for v in run.violations:
            if v.rule_id not in rules:
                rule: dict[str, Any] = {"id": v.rule_id, "name": v.rule_id,
                                        "shortDescription": {"text": _visible(titles.get(v.rule_id) or v.rule_id)},
                                        "defaultConfiguration": {"level": _LEVEL.get(v.severity, "warning")}}
                if v.rule_type:
                    rule["properties"] = {"type": v.rule_type}
                rules[v.rule_id] = rule
            loc = _run_location(run, base, v.step)
            results.append({
                "ruleId": v.rule_id, "ruleIndex": list(rules).index(v.rule_id),
                "level": _LEVEL.get(v.severity, "warning"),
                "message": {"text": f"{v.message or v.rule_id} (run {run.run_id}, step {v.step})"},
                "locations": [loc],
                "properties": {"run": run.run_id, "step": v.step, "severity": v.severity,
                               **({"record": run.record} if run.record is not None else {})},
            })
    driver: dict[str, Any] = {"name": "trajaudit", "rules": list(rules.values())}
    if version:
        driver["version"] = version
    run_log: dict[str, Any] = {"tool": {"driver": driver}}
    notes = _notifications(runs, skipped, base)
    rooted = any(loc.get("physicalLocation", {}).get("artifactLocation", {}).get("uriBaseId")
                 for item in (*results, *notes) for loc in item.get("locations", ()))
    if rooted:
        run_log["originalUriBaseIds"] = {SRCROOT: {"uri": _dir_uri(base)}}
    invocation: dict[str, Any] = {"executionSuccessful": not (skipped or any(r.out_of_time for r in runs))}
    if notes:
        invocation["toolExecutionNotifications"] = notes
    run_log.update(results=results, invocations=[invocation])
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run_log]}


def sarif_text(runs: Iterable[RunFindings], **kwargs: Any) -> str:
    """:func:`sarif_log` as JSON text."""
    return json.dumps(sarif_log(runs, **kwargs), ensure_ascii=False, indent=1) + "\n"


def _junit_verdict(run: RunFindings, rid: str, failing: Sequence[Violation],
                   fail_on_unknown: str) -> tuple[str, str, str] | None:
    """The element of a ``testcase`` that is not a plain pass: ``(tag, type, message)`` — ``failure``
    for a violation at or above ``fail_on``; ``error`` for a rule cut by the run's time budget (whether
    it applies is not known) and for unknown checks that fail the gate under ``fail_on_unknown`` (as
    ``check --fail-on-unknown``); ``skipped`` for a rule left 'unknown' at every step it applied
    without failing the gate; ``None`` otherwise."""
    if failing:
        worst = max(failing, key=lambda v: severity_rank(v.severity))
        return "failure", worst.severity, f"step {worst.step}: {worst.message}"
    if rid in run.out_of_time:
        return ("error", "out-of-time", f"run {run.run_id} ran out of rule-evaluation time (--run-timeout): the rule "
                "was not evaluated to the end (whether it applies is not known)")
    u = next((x for x in run.unknowns if x.rule_id == rid), None)
    if u is not None and (fail_on_unknown == "any" or (fail_on_unknown == "error" and u.eval_error)):
        what = "could not be evaluated" if u.eval_error else "could not be decided ('unknown')"
        return ("error", "evaluation-error" if u.eval_error else "unknown",
                f"the rule {what} at {u.count} step(s) (first at step {u.step}: {u.reason})")
    if rid in run.unknown:
        what = "could not be evaluated" if u is not None and u.eval_error else "could not be decided"
        return "skipped", "", f"the rule applied but {what} (unknown)" + (f": {u.reason}" if u else "")
    return None


def _skipped_suite(root: ET.Element, skipped: Sequence[Problem]) -> dict[str, int]:
    """A ``testsuite`` "skipped inputs" with an ``error`` test case per skipped input (the file and its
    record / JSONL line): the results miss what those inputs would have found."""
    suite = ET.SubElement(root, "testsuite", name="skipped inputs")
    for p in skipped:
        file = _visible(p.file)
        where = ("" if p.record is None else
                 f" line {p.record + 1}" if file.lower().endswith((".jsonl", ".ndjson")) else f" record {p.record}")
        case = ET.SubElement(suite, "testcase", name=f"{file}{where}", classname="trajaudit.skipped-inputs")
        if file:
            case.set("file", file)
        err = ET.SubElement(case, "error", message=f"skipped: {_visible(p.message)}"[:500], type=f"skipped-{p.stage}")
        err.text = _visible(p.message)  # it names the file (and record) already
    counts = {"tests": len(skipped), "failures": 0, "errors": len(skipped), "skipped": 0}
    for k, n in counts.items():
        suite.set(k, str(n))
    return counts


def junit_xml(runs: Sequence[RunFindings], *, fail_on: str = "error", name: str = "trajaudit",
              skipped: Sequence[Problem] = (), fail_on_unknown: str = "error") -> str:
    """JUnit XML text of ``runs``: a ``testsuite`` per run, a ``testcase`` per run × applied rule.

    A case is a ``failure`` for a violation at or above ``fail_on``; an ``error`` for a rule cut by
    the run's time budget (``--run-timeout``: it ran out of time) and for ``unknown`` checks that fail
    the gate under ``fail_on_unknown`` (``error``: an evaluation error; ``any``: every unknown;
    ``never``: none), as ``check``'s exit code; ``skipped`` for a rule left 'unknown' wherever it
    applied otherwise. Skipped inputs are a last ``testsuite`` "skipped inputs" of ``error`` cases.

    Args:
        fail_on: the lowest severity that fails a test case (lower ones are listed in ``system-out``).
        name: the ``testsuites`` name.
        skipped: the inputs (files, runs) that were skipped (:class:`~trajaudit.errors.Problem`).
        fail_on_unknown: which unknown checks are errors: ``error``, ``any`` or ``never``.
    """
    floor = severity_rank(fail_on)
    root = ET.Element("testsuites", name=name)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for run in runs:
        by_rule: dict[str, list[Violation]] = {}
        for v in run.violations:
            by_rule.setdefault(v.rule_id, []).append(v)
        label = run.run_id + (f" ({run.file}" + (f" #{run.record}" if run.record is not None else "") + ")"
                              if run.file else "")
        suite = ET.SubElement(root, "testsuite", name=label)
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for rid in sorted(set(run.applied) | set(by_rule) | set(run.out_of_time)):
            case = ET.SubElement(suite, "testcase", name=rid, classname=f"trajaudit.{run.run_id}")
            if run.file:
                case.set("file", run.file)
            counts["tests"] += 1
            found = by_rule.get(rid, [])
            lines = "\n".join(f"step {v.step} [{v.severity}]: {v.message}" for v in found)
            verdict = _junit_verdict(run, rid, [v for v in found if severity_rank(v.severity) >= floor],
                                     fail_on_unknown)
            if verdict is None:
                if found:
                    ET.SubElement(case, "system-out").text = lines
                continue
            tag, kind, message = verdict
            counts[{"failure": "failures", "error": "errors", "skipped": "skipped"}[tag]] += 1
            elem = ET.SubElement(case, tag, message=message[:500])
            if kind:
                elem.set("type", kind)
            if tag == "failure":
                elem.text = lines
            elif found:
                ET.SubElement(case, "system-out").text = lines
        for k, n in counts.items():
            suite.set(k, str(n))
            totals[k] += n
    if skipped:
        for k, n in _skipped_suite(root, skipped).items():
            totals[k] += n
    for k, n in totals.items():
        root.set(k, str(n))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


__all__ = ["RunFindings", "SARIF_SCHEMA", "SARIF_VERSION", "SRCROOT", "UnknownChecks", "Violation", "junit_xml", "sarif_log",
           "sarif_text"]
