"""What the regex fast paths learn from a pattern's text, as plain data that the pack cache can store.

The literal prefilter (:mod:`~trajaudit.engine.dsl.regex.prefilter`) and the ASCII twins
(:mod:`~trajaudit.engine.dsl.regex.ascii`) parse every rule pattern again with ``re._parser`` to
decide how to search it: its required literals, anchor and required characters, whether its twin is
exact, and how its alternation splits into branches. Each decision is a pure function of the pattern
text and flags (and of the code and Python version, which key the pack cache's entries), so it is
kept here in plain JSON form, in a bounded per-process :class:`RecordingMemo`: ``pack_cache`` stores
the decisions a pack's patterns need in the pack's on-disk entry and seeds them back in the next
process, which then searches without parsing any pattern with ``re._parser``. Compiled patterns
(``re.compile``) are never stored: the twin and the branches are compiled from their text as before.

Exact or not used: a stored value is decoded with strict type checks; anything that does not decode
(an edited entry) is ignored and the decision is computed from the pattern again.

Keys: ``"<kind><flags>:<pattern>"`` with kind ``i`` (literals, anchor, characters: :func:`info_data`),
``t`` (the twin decision: ``[exact, uses_space]``), ``p`` (the branch texts, or ``[None]``).
"""

from __future__ import annotations

import re
from typing import Any

from trajaudit.engine.dsl.recording_memo import RecordingMemo

_MEMO = RecordingMemo(4096)
seed = _MEMO.seed
recording = _MEMO.recording
clear_memo = _MEMO.clear
get = _MEMO.get
put = _MEMO.put

Lits = frozenset[str]
Info = tuple[Lits | None, tuple[Lits, int] | None, tuple[frozenset[str], ...] | None]


def key(kind: str, rx: re.Pattern[str]) -> str:
    """The memo key of decision ``kind`` (``i``, ``t`` or ``p``) about ``rx`` (its text and flags)."""
    return f"{kind}{rx.flags}:{rx.pattern}"


def _strs(v: Any) -> list[str]:
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        raise ValueError("not a list of strings")
    return v


def info_data(info: Info) -> list[Any]:
    """``(literals, anchor, characters)`` as JSON data: sets as sorted lists (order kept for the
    character sets, which are tested in turn)."""
    lits, anchor, chars = info
    return [None if lits is None else sorted(lits),
            None if anchor is None else [sorted(anchor[0]), anchor[1]],
            None if chars is None else [sorted(c) for c in chars]]


def info_from(d: Any) -> Info:
    """:func:`info_data` back to sets and tuples.

    Raises:
        ValueError: ``d`` is not what :func:`info_data` writes.
    """
    if not isinstance(d, list) or len(d) != 3:
        raise ValueError("not an analysis")
    lits, anchor, chars = d
    a = None
    if anchor is not None:
        if not (isinstance(anchor, list) and len(anchor) == 2 and type(anchor[1]) is int and anchor[1] >= 0):
            raise ValueError("not an anchor")
        a = (frozenset(_strs(anchor[0])), anchor[1])
    if chars is not None and not isinstance(chars, list):
        raise ValueError("not a list of character sets")
    return (None if lits is None else frozenset(_strs(lits)), a,
            None if chars is None else tuple(frozenset(_strs(c)) for c in chars))


def twin_from(d: Any) -> tuple[bool, bool]:
    """A stored twin decision ``[exact, uses_space]``.

    Raises:
        ValueError: not two booleans.
    """
    if not (isinstance(d, list) and len(d) == 2 and all(type(x) is bool for x in d)):
        raise ValueError("not a twin decision")
    return d[0], d[1]


def branches_from(d: Any) -> tuple[list[str] | None]:
    """A stored branch split ``[texts]`` or ``[None]`` (no usable split), as a 1-tuple.

    Raises:
        ValueError: neither.
    """
    if not (isinstance(d, list) and len(d) == 1):
        raise ValueError("not a branch split")
    return (None if d[0] is None else _strs(d[0]),)


def lookup(k: str, decode: Any) -> Any:
    """The decoded stored value of key ``k`` (``decode``: one of the ``*_from`` functions), or ``None``
    when there is none or it does not decode (then it is dropped and computed again)."""
    d = get(k)
    if d is None:
        return None
    try:
        return decode(d)
    except (ValueError, TypeError):  # the caller computes it and stores the fresh value over it
        return None
