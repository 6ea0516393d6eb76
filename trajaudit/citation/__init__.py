"""Citation and faithfulness tracing across the agents of a deep-research run (seed 003).

Load a run (:func:`load_run`), pick a judge (:class:`OfflineCitationJudge`, approximate; or
:class:`LLMJudge` over an LLM client), then :func:`audit_citations` evaluates every invocation
locally, checks the final report's citations and traces each of its errors to the invocation that
introduced it. :func:`to_validation_log` and :func:`render_html` present the result. See docs/citation.md.
"""

from trajaudit.citation.adapter import load_run, run_from_dict
from trajaudit.citation.html import render_html, render_page
from trajaudit.citation.judge import CitationJudge, OfflineCitationJudge
from trajaudit.citation.llm_judge import ChatJSONClient, LLMJudge
from trajaudit.citation.local import ERROR_TYPES, SentenceResult, evaluate_invocation, evaluate_run
from trajaudit.citation.mapping import CitationMapping
from trajaudit.citation.model import CitationRun, Document, InputUnit, Invocation, OutputRef, OutputUnit, Span
from trajaudit.citation.records import to_validation_log
from trajaudit.citation.trace import AgentStats, CitationReport, TracedError, audit_citations

__all__ = [
    "ERROR_TYPES",
    "AgentStats",
    "ChatJSONClient",
    "CitationJudge",
    "CitationMapping",
    "CitationReport",
    "CitationRun",
    "Document",
    "InputUnit",
    "Invocation",
    "LLMJudge",
    "OfflineCitationJudge",
    "OutputRef",
    "OutputUnit",
    "SentenceResult",
    "Span",
    "TracedError",
    "audit_citations",
    "evaluate_invocation",
    "evaluate_run",
    "load_run",
    "render_html",
    "render_page",
    "run_from_dict",
    "to_validation_log",
]
