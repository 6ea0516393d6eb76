"""Claim ledger and claim-dependency graph (DRIFT: Claim Keeper, Support Seeker, Dependency Tracer).

Entry point: :func:`build_claim_graph` (trajectory → :class:`ClaimGraph`), then ``.claims``,
``.graph``, ``.propagate()`` and ``.to_records()``. See ``docs/claims.md``.
"""

from trajaudit.engine.claims.extract import (
    ClaimExtractor,
    RegexExtractor,
    default_extractors,
    extract_mentions,
)
from trajaudit.engine.claims.graph import ClaimGraph, build_claim_graph
from trajaudit.engine.claims.model import (
    CLAIM_KINDS,
    Claim,
    ClaimConfig,
    Mention,
    Propagation,
    Support,
)

__all__ = [
    "CLAIM_KINDS",
    "Claim",
    "ClaimConfig",
    "ClaimExtractor",
    "ClaimGraph",
    "Mention",
    "Propagation",
    "RegexExtractor",
    "Support",
    "build_claim_graph",
    "default_extractors",
    "extract_mentions",
]
