"""The citation audit as validation-log records (the project's common evidence format).

Three rules, all ``PROVENANCE`` records with ``origin="citation"``; ``step`` is the invocation's 0-based
position in the run (a citation run has invocations, not steps); evidence addresses point into the
invocation model (``invocations.researcher-1.outputs.3``, ``invocations.researcher-1.inputs.2.text[0:55]``);
``targets`` are ids of the 4-type citation taxonomy (seed 003): ``hallucination``,
``uncited_input_reliance``, ``uncited_output``, ``insufficient_citations``.

- ``citation.local-test`` — one record per output sentence that needs a citation: pass (correct), fail
  (one error type), unknown (the judge failed). Sentences that need no citation are counted as skipped.
- ``citation.report-support`` — one per final-report sentence needing a citation: do its cited
  documents support it (citation recall)?
- ``citation.trace-origin`` — one per traced final-report error, at the invocation that introduced it,
  with the propagation chain as evidence (final-report sentence first, origin last).

Records from the offline judge say ``[approximate]`` in the message and ``approximate: true`` in bindings.
"""

from __future__ import annotations

from trajaudit.citation.local import HALLUCINATION, NOT_NEEDED, UNKNOWN, SentenceResult
from trajaudit.citation.trace import UNTRACED, CitationReport, TracedError
from trajaudit.engine.validation_log import Evidence, Record, ValidationLog

RULE_LOCAL = "citation.local-test"
RULE_SUPPORT = "citation.report-support"
RULE_ORIGIN = "citation.trace-origin"


def _severity(error_type: str | None) -> str:
    return "error" if error_type == HALLUCINATION else "warning"


def _prefix(report: CitationReport) -> str:
    return "[approximate] " if report.approximate else ""


def _bindings(report: CitationReport, **extra: object) -> dict:
    return {"judge": report.judge["name"], "approximate": report.approximate, **extra}


def _local_record(report: CitationReport, r: SentenceResult, step: int) -> Record:
    ev = [Evidence(r.ref.address, {"text": r.text, "citations": sorted(r.citations), "kind": r.kind},
                   "output sentence")]
    for s in r.spans:
        note = f"supporting span, cited: {', '.join(sorted(s.citations))}" if s.cited else "supporting span, uncited"
        ev.append(Evidence(s.address, s.text, note))
    if r.verdict == UNKNOWN:
        verdict, targets = "unknown", ()
    elif r.is_error:
        verdict, targets = "fail", (r.verdict,)
    else:
        verdict, targets = "pass", ()
    return Record(
        step=step, rule_id=RULE_LOCAL, verdict=verdict,  # type: ignore[arg-type]
        severity=_severity(r.verdict) if r.is_error else "info",  # type: ignore[arg-type]
        rule_type="PROVENANCE", targets=targets,
        message=f"{_prefix(report)}{r.ref}: {r.verdict.replace('_', ' ')} — {r.reason}",
        evidence=tuple(ev), bindings=_bindings(report, agent=r.agent, invocation=r.ref.invocation),
        origin="citation", reason=r.reason if verdict == "unknown" else None)


def _origin_record(report: CitationReport, t: TracedError, position: dict[str, int]) -> Record:
    o = t.origin
    assert o is not None
    ev = tuple(Evidence(h.ref.address, h.text, f"{h.agent}: {h.verdict}") for h in t.chain)
    ev += tuple(Evidence(h.ref.address, h.text, f"upstream {h.agent}: {h.verdict}") for h in t.upstream)
    return Record(
        step=position[o.ref.invocation], rule_id=RULE_ORIGIN, verdict="fail",
        severity=_severity(o.verdict), rule_type="PROVENANCE", targets=(o.verdict,),  # type: ignore[arg-type]
        message=(f"{_prefix(report)}final-report sentence {t.sentence}: {o.verdict.replace('_', ' ')} "
                 f"introduced by {o.ref.invocation} ({o.agent}) after {len(t.chain) - 1} hop(s)"),
        evidence=ev, bindings=_bindings(report, agent=o.agent, invocation=o.ref.invocation,
                                        sentence=t.sentence.address),
        origin="citation")


def to_validation_log(report: CitationReport) -> ValidationLog:
    """Turn a :class:`~trajaudit.citation.trace.CitationReport` into a :class:`ValidationLog`.

    The log's ``trajectory_id`` is the run id; untraced or undecided final-report errors are listed in
    ``incomplete`` (never dropped silently). The result validates against ``validation_log.schema.json``.
    """
    vlog = ValidationLog(report.run.id)
    position = {inv.id: inv.position for inv in report.run.invocations}
    for inv in report.run.invocations:
        for r in report.results[inv.id]:
            if r.verdict == NOT_NEEDED:
                vlog.skipped += 1
                continue
            vlog.add(_local_record(report, r, inv.position))
    traced = {t.sentence: t for t in report.traced}
    final_step = position[report.run.final]
    for f in report.final:
        if not f.needs_citation:
            continue
        verdict = "unknown" if f.supported is None else "pass" if f.supported else "fail"
        t = traced.get(f.ref)
        targets = (t.error_type,) if t is not None and t.error_type else ()
        ev = [Evidence(f.ref.address, f.text, "final-report sentence")]
        ev += [Evidence(f"documents.{c}", {"relevant": f.relevant.get(c)}, "cited document") for c in sorted(f.citations)]
        what = "supported by its cited documents" if f.supported else (
            "not supported by its cited documents" if f.citations else "has no citation")
        vlog.add(Record(
            step=final_step, rule_id=RULE_SUPPORT, verdict=verdict,  # type: ignore[arg-type]
            severity="info" if verdict == "pass" else _severity(targets[0] if targets else None),  # type: ignore[arg-type]
            rule_type="PROVENANCE", targets=targets, message=f"{_prefix(report)}{f.ref}: {what}",
            evidence=tuple(ev), bindings=_bindings(report), origin="citation",
            reason="judge failed" if verdict == "unknown" else None))
    for t in report.traced:
        if t.origin is not None:
            vlog.add(_origin_record(report, t, position))
        else:
            why = "no invocation on its support path has a local error" if t.status == UNTRACED else "judge failed"
            vlog.incomplete.append(f"{t.sentence}: final-report error not traced ({why})")
    vlog.sort()
    return vlog
