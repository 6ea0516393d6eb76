"""Local evaluation of one agent invocation against its own inputs (seed 003 §4, App. A Alg. 1 and 2).

Inputs are assumed faithful to their sources and supported by their citations; the invocation is
responsible for preserving that support in its outputs. For each output sentence that needs a citation:

Synthesized sentence (Algorithm 1)
  1. spans ← EXTRACTSUPPORTINGSPANS(sentence, inputs); not ENTAILS(spans, sentence) → ``hallucination``
  2. cited ← spans that carry a citation; some span is uncited and not ENTAILS(cited, sentence)
     → ``uncited_input_reliance``
  3. the sentence carries no citation → ``uncited_output``
  4. mine ← cited spans whose citations the sentence carries; not ENTAILS(mine, sentence)
     → ``insufficient_citations`` (its citations cover only part of the needed ones)
  5. otherwise ``correct``.

Snippet (Algorithm 2): a verbatim excerpt is correct when its cited source supports the whole snippet
(one entailment test); otherwise, if only uncited inputs support it → ``uncited_input_reliance``; if it
carries no citation but a cited input supports it → ``uncited_output``; if another cited input supports
it → ``insufficient_citations``; if no input supports it → ``hallucination``.

Sentences that do not need a citation get ``not_needed``; a judge failure (LLM error after its retries)
gives ``unknown`` with the reason — never a silent pass.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from trajaudit.citation.judge import CitationJudge
from trajaudit.citation.model import CitationRun, Invocation, OutputRef, OutputUnit, Span
from trajaudit.errors import LLMError, LLMUnreachableError

log = logging.getLogger(__name__)

HALLUCINATION = "hallucination"
UNCITED_INPUT_RELIANCE = "uncited_input_reliance"
UNCITED_OUTPUT = "uncited_output"
INSUFFICIENT_CITATIONS = "insufficient_citations"
#: The four error types of seed 003's taxonomy, in the order the algorithm tests them.
ERROR_TYPES: tuple[str, ...] = (HALLUCINATION, UNCITED_INPUT_RELIANCE, UNCITED_OUTPUT, INSUFFICIENT_CITATIONS)
CORRECT = "correct"
NOT_NEEDED = "not_needed"
UNKNOWN = "unknown"
VERDICTS: tuple[str, ...] = (*ERROR_TYPES, CORRECT, NOT_NEEDED, UNKNOWN)


@dataclass(frozen=True)
class SentenceResult:
    """The local verdict on one output sentence.

    Attributes:
        ref: which output (invocation id, output index).
        agent: the agent of the invocation.
        text: the sentence (clean).
        kind: ``synthesized`` or ``snippet``.
        citations: canonical citation ids it carries.
        verdict: one of :data:`VERDICTS`.
        spans: the supporting input spans found (for a snippet: its cited source units).
        reason: why, in words.
    """

    ref: OutputRef
    agent: str
    text: str
    kind: str
    citations: frozenset[str]
    verdict: str
    spans: tuple[Span, ...] = ()
    reason: str = ""

    @property
    def is_error(self) -> bool:
        """True for one of the four error types."""
        return self.verdict in ERROR_TYPES

    @property
    def evaluated(self) -> bool:
        """True when the sentence needed a citation and got a definite verdict."""
        return self.verdict in ERROR_TYPES or self.verdict == CORRECT

    def to_dict(self) -> dict[str, Any]:
        """JSON form (spans as addresses with their text and citations)."""
        return {
            "address": self.ref.address,
            "agent": self.agent,
            "text": self.text,
            "kind": self.kind,
            "citations": sorted(self.citations),
            "verdict": self.verdict,
            "reason": self.reason,
            "spans": [{"address": s.address, "text": s.text, "citations": sorted(s.citations)} for s in self.spans],
        }


def _why_not(judge: CitationJudge, spans: list[Span], sentence: str) -> str:
    explain = getattr(judge, "explain", None)
    return f" ({explain([s.text for s in spans], sentence)})" if callable(explain) else ""


def _synthesized(judge: CitationJudge, inv: Invocation, out: OutputUnit) -> tuple[str, list[Span], str]:
    spans = judge.supporting_spans(out.text, inv.inputs)
    texts = [s.text for s in spans]
    if not spans or not judge.entails(texts, out.text):
        return HALLUCINATION, spans, "its supporting input spans do not entail it" + _why_not(judge, spans, out.text)
    cited = [s for s in spans if s.cited]
    if len(cited) < len(spans) and (not cited or not judge.entails([s.text for s in cited], out.text)):
        n = len(spans) - len(cited)
        return (UNCITED_INPUT_RELIANCE, spans,
                f"it relies on {n} uncited input span(s); the cited spans alone do not entail it"
                + _why_not(judge, cited, out.text))
    needed = frozenset().union(*(s.citations for s in cited))
    if not out.citations:
        return UNCITED_OUTPUT, spans, f"it carries no citation though its support is cited ({', '.join(sorted(needed))})"
    mine = [s for s in cited if s.citations & out.citations]
    if not mine or (len(mine) < len(cited) and not judge.entails([s.text for s in mine], out.text)):
        missing = sorted(needed - out.citations)
        return (INSUFFICIENT_CITATIONS, spans,
                f"its citations ({', '.join(sorted(out.citations))}) cover only part of the needed ones; "
                f"also needed: {', '.join(missing) or 'none of its citations back a supporting span'}")
    return CORRECT, spans, "supported by its inputs and correctly cited"


def _snippet(judge: CitationJudge, inv: Invocation, out: OutputUnit) -> tuple[str, list[Span], str]:
    def whole(units: list) -> list[Span]:
        return [Span(u, 0, len(u.text), u.citations) for u in units]

    if out.citations:
        sources = [u for u in inv.inputs if u.citations & out.citations]
        if sources and judge.entails([u.text for u in sources], out.text):
            return CORRECT, whole(sources), "its cited source supports the whole snippet"
    others = [u for u in inv.inputs if not (u.citations & out.citations)]
    supporters = [u for u in others if judge.entails([u.text], out.text)]
    if supporters and not any(u.citations for u in supporters):
        return UNCITED_INPUT_RELIANCE, whole(supporters), "the snippet comes from an uncited input"
    if supporters and not out.citations:
        return UNCITED_OUTPUT, whole(supporters), "the snippet carries no citation though its source is cited"
    if supporters:
        return (INSUFFICIENT_CITATIONS, whole(supporters),
                f"its citations ({', '.join(sorted(out.citations))}) do not support it; another input does")
    return HALLUCINATION, [], "no single input supports the whole snippet"


def evaluate_output(run: CitationRun, inv: Invocation, out: OutputUnit, judge: CitationJudge) -> SentenceResult:
    """Run the local test on one output of ``inv`` (seed 003 §4; Alg. 1 for synthesized, Alg. 2 for snippets).

    Args:
        run: the run (for the task text given to the need-citation test).
        inv: the invocation that wrote ``out``; its inputs are the only evidence considered.
        out: the output sentence.
        judge: the judge (offline or LLM).

    Returns:
        A :class:`SentenceResult`; ``unknown`` (with the error text as reason) when the judge raised
        :class:`~trajaudit.errors.LLMError`.

    Raises:
        LLMUnreachableError: the judge's endpoint cannot be connected to (no sentence could be judged).
    """

    def result(verdict: str, spans: list[Span] | tuple[Span, ...] = (), reason: str = "") -> SentenceResult:
        return SentenceResult(out.ref, inv.agent, out.text, out.kind, out.citations, verdict, tuple(spans), reason)

    try:
        needs = out.needs_citation if out.needs_citation is not None else judge.needs_citation(out.text, run.task)
        if not needs:
            return result(NOT_NEEDED, reason="states nothing that needs a citation")
        verdict, spans, reason = (_snippet if out.kind == "snippet" else _synthesized)(judge, inv, out)
    except LLMUnreachableError:  # the endpoint is down: stop, do not judge 'unknown'
        raise
    except LLMError as e:
        log.warning("citation judge failed on %s: %s", out.ref.address, e)
        return result(UNKNOWN, reason=f"judge failed: {e}")
    return result(verdict, spans, reason)


def evaluate_invocation(run: CitationRun, inv: Invocation, judge: CitationJudge) -> tuple[SentenceResult, ...]:
    """Local verdicts for every output of one invocation, in output order."""
    return tuple(evaluate_output(run, inv, out, judge) for out in inv.outputs)


def evaluate_run(run: CitationRun, judge: CitationJudge) -> dict[str, tuple[SentenceResult, ...]]:
    """Local verdicts for every invocation of the run: ``{invocation id: results}`` (agent-level, §5)."""
    return {inv.id: evaluate_invocation(run, inv, judge) for inv in run.invocations}
