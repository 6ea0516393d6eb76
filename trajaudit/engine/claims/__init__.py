"""Claim ledger and claim-dependency graph (DRIFT: Claim Keeper, Support Seeker, Dependency Tracer).

Entry point: :func:`build_claim_graph` (trajectory → :class:`ClaimGraph`), then ``.claims``,
``.graph``, ``.propagate()`` and ``.to_records()``. See ``docs/claims.md``.

Per-process caches (bounded LRU, results never depend on them): the position-free analysis of evidence
texts (:mod:`.sources`) and the value normalizers (:mod:`.normalize`); :func:`clear_caches` empties them.
"""

from trajaudit.engine.claims import extract, model, normalize, patterns, sources
from trajaudit.engine.claims.extract import (
    ClaimExtractor,
    RegexExtractor,
    default_extractors,
    extract_mentions,
)
from trajaudit.engine.claims.graph import ClaimGraph, ClaimGraphBuilder, build_claim_graph
from trajaudit.engine.claims.ledger import Ledger, LedgerBuilder
from trajaudit.engine.claims.model import (
    CLAIM_KINDS,
    Claim,
    ClaimConfig,
    Mention,
    Propagation,
    Support,
)
from trajaudit.engine.dsl.regex.stored import save_module_patterns
from trajaudit.engine.trace import json_content

# the module patterns' programs made by this import, for the next process (see regex.stored.module_pattern)
save_module_patterns()


def clear_caches() -> None:
    """Empty the claim package's memo caches (text analyses, normalized values, id-key orders, argument
    classifications, tool verbs, folded texts) and the parsed JSON step texts it shares with the rule
    stage (:mod:`~trajaudit.engine.trace.json_content`); results are unchanged."""
    sources.clear_cache()
    json_content.clear_memo()
    extract._value_group.cache_clear()
    extract._code_tool.cache_clear()
    model.tool_verb.cache_clear()
    normalize.clear_caches()
    patterns.ascii_fold.cache_clear()
    patterns.noise_spans.cache_clear()


__all__ = [
    "CLAIM_KINDS",
    "Claim",
    "ClaimConfig",
    "ClaimExtractor",
    "ClaimGraph",
    "ClaimGraphBuilder",
    "Ledger",
    "LedgerBuilder",
    "Mention",
    "Propagation",
    "RegexExtractor",
    "Support",
    "build_claim_graph",
    "clear_caches",
    "default_extractors",
    "extract_mentions",
]
