"""System-level tracing of final-report errors to the invocation that introduced them (seed 003 §5–§6).

1. Every invocation is evaluated locally (:mod:`trajaudit.citation.local`) — the agent-level view (§5).
2. Each final-report sentence that needs a citation is checked *globally* against the source documents
   its citations point to (citation recall, §2/§6). Citation precision follows ALCE: a citation is
   relevant when its document alone entails the sentence, or when the sentence is supported and
   removing that citation breaks the support. A citation that resolves to no document (a note id) is
   not relevant — final-report readers cannot follow it (App. I.5).
3. Each problematic sentence (not supported by its citations) is traced (§6): starting at the report
   writer, the local verdict is read; if it is an error, that invocation introduced it; if it is
   correct, the supporting spans that came from upstream outputs are followed recursively (depth first,
   in span order) until an invocation with a local error is found. If none is found the error is
   ``untraced`` (e.g. a leaf document was misquoted by the trace itself); a judge failure gives ``unknown``.
4. Per agent: error rates by type over its evaluated sentences, and its share of traced final-report errors.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from trajaudit.citation.judge import CitationJudge
from trajaudit.citation.local import (
    ERROR_TYPES,
    HALLUCINATION,
    NOT_NEEDED,
    UNKNOWN,
    SentenceResult,
    evaluate_run,
)
from trajaudit.citation.model import CitationRun, OutputRef
from trajaudit.errors import LLMError, LLMUnreachableError

log = logging.getLogger(__name__)

TRACED, UNTRACED = "traced", "untraced"


@dataclass(frozen=True)
class Hop:
    """One link of a propagation chain: an output and its local verdict."""

    ref: OutputRef
    agent: str
    verdict: str
    text: str
    reason: str
    spans: tuple[str, ...] = ()

    @classmethod
    def of(cls, r: SentenceResult) -> Hop:
        """The hop for a local result."""
        return cls(r.ref, r.agent, r.verdict, r.text, r.reason, tuple(s.address for s in r.spans))

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"address": self.ref.address, "agent": self.agent, "verdict": self.verdict, "text": self.text,
                "reason": self.reason, "spans": list(self.spans)}


@dataclass(frozen=True)
class FinalSentence:
    """The global citation check of one final-report sentence.

    Attributes:
        ref, text, citations: the sentence.
        needs_citation: whether it needs one (from the local test of the report writer).
        supported: its cited documents entail it (``None``: the judge failed).
        relevant: per citation, whether it is relevant (ALCE precision).
    """

    ref: OutputRef
    text: str
    citations: frozenset[str]
    needs_citation: bool
    supported: bool | None
    relevant: dict[str, bool] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"address": self.ref.address, "text": self.text, "citations": sorted(self.citations),
                "needs_citation": self.needs_citation, "supported": self.supported, "relevant": self.relevant}


@dataclass(frozen=True)
class TracedError:
    """A problematic final-report sentence and where its error came from.

    Attributes:
        sentence: the final-report output.
        status: ``traced``, ``untraced`` or ``unknown`` (a judge failure on the way).
        chain: hops from the report writer down to the origin (the last hop is the origin when traced).
        upstream: further local errors feeding the origin's supporting spans (e.g. the citation a
            researcher dropped before the orchestrator relied on the uncited note) — context, not
            attribution; empty when the origin is a hallucination (its content came from no input).
    """

    sentence: OutputRef
    text: str
    status: str
    chain: tuple[Hop, ...]
    upstream: tuple[Hop, ...] = ()

    @property
    def origin(self) -> Hop | None:
        """The hop that introduced the error, when traced."""
        return self.chain[-1] if self.status == TRACED else None

    @property
    def error_type(self) -> str | None:
        """The origin's error type, when traced."""
        return self.origin.verdict if self.origin else None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        o = self.origin
        return {"sentence": self.sentence.address, "text": self.text, "status": self.status,
                "origin": o.ref.address if o else None, "origin_invocation": o.ref.invocation if o else None,
                "origin_agent": o.agent if o else None, "error_type": self.error_type,
                "chain": [h.to_dict() for h in self.chain], "upstream": [h.to_dict() for h in self.upstream]}


@dataclass(frozen=True)
class AgentStats:
    """Agent-level figures (seed 003 §5 and §6).

    Attributes:
        agent: the agent name.
        invocations: how many invocations it ran.
        evaluated: output sentences that needed a citation and got a definite verdict.
        errors: count per error type.
        unknown: sentences whose verdict could not be decided.
        final_errors: traced final-report errors that originated here.
        final_share: ``final_errors`` / all traced final-report errors (``None`` if there are none).
    """

    agent: str
    invocations: int
    evaluated: int
    errors: dict[str, int]
    unknown: int
    final_errors: int
    final_share: float | None

    @property
    def error_rate(self) -> float | None:
        """Errors / evaluated sentences (``None`` when nothing was evaluated)."""
        return sum(self.errors.values()) / self.evaluated if self.evaluated else None

    def rate(self, error_type: str) -> float | None:
        """The rate of one error type among evaluated sentences."""
        return self.errors.get(error_type, 0) / self.evaluated if self.evaluated else None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"agent": self.agent, "invocations": self.invocations, "evaluated": self.evaluated,
                "errors": dict(self.errors), "error_rate": self.error_rate,
                "rates": {t: self.rate(t) for t in ERROR_TYPES}, "unknown": self.unknown,
                "final_errors": self.final_errors, "final_share": self.final_share}


@dataclass(frozen=True)
class CitationReport:
    """Everything the citation audit found for one run.

    Attributes:
        run: the run audited.
        judge: ``name``, ``approximate`` and ``description`` of the judge used.
        results: local verdicts per invocation id.
        final: the global check of each final-report sentence.
        traced: one entry per problematic final-report sentence.
        agents: per-agent statistics, in order of first appearance.
        recall, precision: final-report citation recall and precision (``None`` when undefined).
    """

    run: CitationRun
    judge: dict[str, Any]
    results: dict[str, tuple[SentenceResult, ...]]
    final: tuple[FinalSentence, ...]
    traced: tuple[TracedError, ...]
    agents: tuple[AgentStats, ...]
    recall: float | None
    precision: float | None

    @property
    def approximate(self) -> bool:
        """True when the judge is an approximation (the offline judge)."""
        return bool(self.judge.get("approximate"))

    def local_errors(self) -> list[SentenceResult]:
        """All local errors, invocation by invocation."""
        return [r for rs in self.results.values() for r in rs if r.is_error]

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``trajaudit cite --format json``)."""
        return {
            "run_id": self.run.id, "file": self.run.file, "format": self.run.format, "judge": dict(self.judge),
            "final_invocation": self.run.final,
            "report": {"recall": self.recall, "precision": self.precision,
                       "sentences": [f.to_dict() for f in self.final]},
            "agents": [a.to_dict() for a in self.agents],
            "traced": [t.to_dict() for t in self.traced],
            "invocations": {k: [r.to_dict() for r in rs] for k, rs in self.results.items()},
        }


def _result_index(results: dict[str, tuple[SentenceResult, ...]]) -> dict[OutputRef, SentenceResult]:
    return {r.ref: r for rs in results.values() for r in rs}


def _follow(ref: OutputRef, index: dict[OutputRef, SentenceResult], seen: set[OutputRef]) -> list[Hop]:
    """Depth-first search for the first local error along supporting spans (§6).

    Returns the chain from ``ref`` to the first error (or undecided verdict) found; when there is none,
    the first path explored, down to a leaf.
    """
    r = index[ref]
    hop = Hop.of(r)
    if r.is_error or r.verdict == UNKNOWN or r.verdict == NOT_NEEDED:
        return [hop]
    first: list[Hop] = []
    for span in r.spans:
        for up in span.unit.sources:
            if up in seen or up not in index:
                continue
            seen.add(up)
            sub = _follow(up, index, seen)
            if sub[-1].verdict in ERROR_TYPES or sub[-1].verdict == UNKNOWN:
                return [hop, *sub]
            first = first or sub
    return [hop, *first]


def _upstream_errors(r: SentenceResult, index: dict[OutputRef, SentenceResult]) -> list[Hop]:
    out: list[Hop] = []
    seen: set[OutputRef] = set()
    stack = [up for s in r.spans for up in s.unit.sources]
    while stack:
        ref = stack.pop(0)
        if ref in seen or ref not in index:
            continue
        seen.add(ref)
        u = index[ref]
        if u.is_error:
            out.append(Hop.of(u))
        stack.extend(up for s in u.spans for up in s.unit.sources)
    return out


def _global(run: CitationRun, r: SentenceResult, judge: CitationJudge) -> FinalSentence:
    needs = r.verdict != NOT_NEEDED
    explicit = run.output(r.ref).needs_citation
    if r.verdict == UNKNOWN and explicit is None:  # the local test failed: was it on the need-citation test?
        try:
            needs = judge.needs_citation(r.text, run.task)
        except LLMUnreachableError:  # the endpoint is down: stop, do not judge 'unknown'
            raise
        except LLMError:
            return FinalSentence(r.ref, r.text, r.citations, True, None)
    if not needs:
        return FinalSentence(r.ref, r.text, r.citations, False, None)
    texts = {c: [d.text for d in run.documents_for([c])] for c in sorted(r.citations)}
    all_texts = [t for ts in texts.values() for t in ts]
    try:
        supported = bool(all_texts) and judge.entails(all_texts, r.text)
        relevant = {}
        for c, ts in texts.items():
            alone = bool(ts) and judge.entails(ts, r.text)
            rest = [t for k, v in texts.items() if k != c for t in v]
            relevant[c] = alone or (supported and bool(ts) and not (rest and judge.entails(rest, r.text)))
    except LLMUnreachableError:  # the endpoint is down: stop, do not judge 'unknown'
        raise
    except LLMError as e:
        log.warning("global citation check failed on %s: %s", r.ref.address, e)
        return FinalSentence(r.ref, r.text, r.citations, True, None)
    return FinalSentence(r.ref, r.text, r.citations, True, supported, relevant)


def audit_citations(run: CitationRun, judge: CitationJudge) -> CitationReport:
    """Evaluate every invocation locally, check the final report globally and trace its errors (seed 003 §4–§6).

    Args:
        run: the run (invocation model).
        judge: an :class:`~trajaudit.citation.judge.OfflineCitationJudge` (approximate) or an LLM judge.

    Returns:
        A :class:`CitationReport`. Judge failures become ``unknown`` verdicts, never exceptions.
    """
    results = evaluate_run(run, judge)
    index = _result_index(results)
    finals = tuple(_global(run, r, judge) for r in results[run.final])
    traced = [_trace(f, index) for f in finals if f.needs_citation and not f.supported]
    agents = _agent_stats(run, results, traced)
    needing = [f for f in finals if f.needs_citation]
    decided = [f for f in needing if f.supported is not None]
    recall = sum(1 for f in decided if f.supported) / len(decided) if decided else None
    cits = [v for f in decided for v in f.relevant.values()]
    precision = sum(cits) / len(cits) if cits else None
    jd = {"name": judge.name, "approximate": judge.approximate, "description": judge.description}
    return CitationReport(run, jd, results, finals, tuple(traced), tuple(agents), recall, precision)


def _trace(f: Any, index: dict[Any, Any]) -> TracedError:
    """An unsupported (or undecided) final-report sentence traced back through the invocations to the
    error it came from, with the errors upstream of that origin."""
    chain = _follow(f.ref, index, {f.ref}) if f.supported is False else [Hop.of(index[f.ref])]
    last = chain[-1].verdict
    status = TRACED if last in ERROR_TYPES else UNKNOWN if (last == UNKNOWN or f.supported is None) else UNTRACED
    upstream = (_upstream_errors(index[chain[-1].ref], index)
                if status == TRACED and last != HALLUCINATION else [])
    return TracedError(f.ref, f.text, status, tuple(chain), tuple(upstream))


def _agent_stats(run: CitationRun, results: Any, traced: list[TracedError]) -> list[AgentStats]:
    """Per agent, in order of first invocation: invocations, sentences evaluated, errors by type,
    unknown verdicts, and the final-report errors that originate with it (count and share)."""
    origin_counts = Counter(t.origin.agent for t in traced if t.origin)
    n_traced = sum(origin_counts.values())
    agents = []
    for agent in dict.fromkeys(inv.agent for inv in run.invocations):
        rs = [r for inv in run.invocations if inv.agent == agent for r in results[inv.id]]
        errs = Counter(r.verdict for r in rs if r.is_error)
        agents.append(AgentStats(
            agent, sum(1 for inv in run.invocations if inv.agent == agent), sum(1 for r in rs if r.evaluated),
            {t: errs.get(t, 0) for t in ERROR_TYPES}, sum(1 for r in rs if r.verdict == UNKNOWN),
            origin_counts.get(agent, 0), origin_counts.get(agent, 0) / n_traced if n_traced else None))
    return agents
