"""Regex safety: reject patterns prone to catastrophic backtracking before they run.

Python's ``re`` has no timeout, so a rule regex such as ``(A+)+B`` can stall an audit on a 40-character
text. The rule compiler refuses such patterns in every pack (hand-written or synthesized).
"""

from __future__ import annotations

from typing import Any

from trajaudit.engine.recording_memo import RecordingMemo

MEMO_SIZE = 4096
# verdicts of nested_unbounded (a pure function of the pattern), per process; ``pack_cache`` seeds
# them from its on-disk entries and collects, with ``recording``, the verdicts a compile needed
_MEMO = RecordingMemo(MEMO_SIZE)
seed = _MEMO.seed
recording = _MEMO.recording
clear_memo = _MEMO.clear


def nested_unbounded(pattern: str) -> bool:
    """Whether ``pattern`` repeats, without bound, a group that itself repeats without bound and has no
    mandatory separator character — the classic catastrophic-backtracking shape (``(a+)+``,
    ``(\\w*\\s?)*``; ``(\\d+,)*`` is fine). A heuristic (star height), sound for these shapes, blind to
    overlapping alternations. Python's ``re`` has no timeout, so such a model-written regex could stall
    an audit on a long text. Memoized per process."""
    hit = _MEMO.get(pattern) if isinstance(pattern, str) else None
    if hit is not None:
        return hit
    verdict = _nested_unbounded(pattern)
    return _MEMO.put(pattern, verdict) if isinstance(pattern, str) else verdict


def _nested_unbounded(pattern: str) -> bool:
    try:
        import re._constants as c  # type: ignore[import-not-found]
        import re._parser as p  # type: ignore[import-not-found]
    except ImportError:  # Python < 3.11
        import sre_constants as c  # type: ignore[no-redef]
        import sre_parse as p  # type: ignore[no-redef]
    try:
        parsed = p.parse(pattern)
    except Exception:  # noqa: BLE001 - not a regex here (or a bad one: the compiler reports it)
        return False
    repeats = {c.MAX_REPEAT, c.MIN_REPEAT} | ({c.POSSESSIVE_REPEAT} if hasattr(c, "POSSESSIVE_REPEAT") else set())

    def unbounded(av: Any) -> bool:
        return av[1] == c.MAXREPEAT or av[1] > 50

    def children(op: Any, av: Any) -> list[Any]:
        if op in repeats:
            return [av[2]]
        if op == c.SUBPATTERN:
            return [av[-1]]
        if op == c.BRANCH:
            return list(av[1])
        return []

    def has_unbounded(items: Any) -> bool:
        return any((op in repeats and unbounded(av)) or any(has_unbounded(ch) for ch in children(op, av))
                   for op, av in items)

    def separated(items: Any) -> bool:
        """A mandatory single character (a literal or a class, not repeated) between iterations, as in
        ``([a-z]+\\.)+`` or ``(\\d+,)*``, keeps the repetition unambiguous."""
        while len(items) == 1 and items[0][0] == c.SUBPATTERN:
            items = items[0][1][-1]
        if len(items) == 1 and items[0][0] == c.BRANCH:  # (now\s+|still\s+)*: every branch needs a literal
            return all(separated(branch) for branch in items[0][1][1])
        return any(op in (c.LITERAL, c.IN) for op, _ in items)

    def nested(items: Any) -> bool:
        for op, av in items:
            if op in repeats and unbounded(av) and not separated(av[2]) and has_unbounded(av[2]):
                return True
            if any(nested(ch) for ch in children(op, av)):
                return True
        return False

    return nested(parsed)
