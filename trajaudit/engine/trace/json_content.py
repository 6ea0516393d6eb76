"""A step's content parsed as JSON, once for the audit's stages.

The rule language (``json(o)``, ``TrajContext.json_of``) and the claim ledger (the JSON walk of a tool
output, ``claims.sources``) both parse a tool output's stripped content with
:func:`trajaudit.safe_json.loads`; in an audit the rule stage parses it first and the claims stage,
right after, parsed the same text again (issue 22: ≈ 3% of the claims stage on tau). :func:`parse`
keeps the last few documents by their text, so the second parse is a lookup.

The document is shared, not copied: neither stage changes what it reads (rule values are read-only
JSON, the claim walk only reads), and within a run the rules already shared one document; a
test checks after an audit that every kept document still equals a fresh parse of its text.
Per-process memo (bounded, results never depend on it); :func:`clear_memo` empties it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from trajaudit import safe_json

#: Texts longer than this are parsed without the memo (the memo keeps its documents alive; the claims
#: digests have the same bound).
MEMO_MAX_CHARS = 100_000
#: Documents kept: a tau run's rule stage parses ≈ 10 step texts, the claims stage then reads ≈ 5 of them.
MEMO_SIZE = 32


def parse(text: str) -> Any:
    """``safe_json.loads(text)``, or ``None`` when it raises ``ValueError`` (not JSON, or over a limit of
    :mod:`trajaudit.safe_json`: both callers treat the two alike). Memoized for the last
    :data:`MEMO_SIZE` texts of at most :data:`MEMO_MAX_CHARS` characters; the result is shared and
    must not be changed by the caller."""
    if len(text) > MEMO_MAX_CHARS:
        return _parse(text)
    return _memo(text)


def _parse(text: str) -> Any:
    try:
        return safe_json.loads(text)
    except ValueError:
        return None


_memo = lru_cache(maxsize=MEMO_SIZE)(_parse)


def clear_memo() -> None:
    """Empty the memo (benchmarks and tests)."""
    _memo.cache_clear()
