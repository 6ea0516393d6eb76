"""Regex safety: reject patterns prone to catastrophic backtracking before they run.

Python's ``re`` has no timeout, so a rule regex such as ``(A+)+B`` can stall an audit on a 40-character
text. The rule compiler refuses such patterns in every pack (hand-written or synthesized).

The analysis reads the ``sre`` parse tree (after Python's own factoring: ``(a|a)`` is parsed as
``a(?:|)``, ``(ab|ac)`` as ``a[bc]``) and refuses three shapes (docs/rules.md, "Regex safety"):

1. **nested unbounded repetition** — a group repeated without bound (``*``, ``+``, ``{n,}``, or more
   than :data:`UNBOUNDED_COUNT` times) that itself contains an unbounded repetition, unless every
   iteration needs a separator character that the inner repetitions cannot match (``(\\d+,)*`` is
   fine; ``(a+)+``, ``(\\w*\\s?)*``, ``(.*a)+`` are not);
2. **overlapping alternatives under repetition** — an alternation inside a group repeated more than
   :data:`MAX_AMBIGUOUS_COUNT` times (or without bound) whose branches can begin with the same character
   (their first-character sets intersect, counting what may follow a branch that can match empty), or
   can both match the empty string: each iteration can then be matched two ways, ``2**n`` paths on a
   failing text (``(a|a)*``, ``(a|aa)+``, ``(x(?:y|yz))*``);
3. **large bounded repetition of an unbounded subpattern** — ``{n}`` / ``{n,m}`` with ``m`` (times the
   counts of the enclosing repetitions) above :data:`MAX_AMBIGUOUS_COUNT` of a subpattern that contains
   an unbounded repetition and no exclusive separator (as in 1): ``(.*a){25}`` tries every way to cut
   the text into 25 pieces, ``O(len**25)``.

Character sets are compared on a finite sample of characters (ASCII, Latin-1, Latin Extended and a few
letters, digits and spaces of other scripts), case-folded (a pattern's ``i`` flag is not known here):
sound for the usual classes, conservative where case matters. Possessive repetitions and atomic groups
are analysed like ordinary ones (conservative).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from trajaudit.engine.dsl.recording_memo import RecordingMemo

try:
    import re._constants as c  # type: ignore[import-not-found]
    import re._parser as p  # type: ignore[import-not-found]
except ImportError:  # Python < 3.11
    import sre_constants as c  # type: ignore[no-redef]
    import sre_parse as p  # type: ignore[no-redef]

MEMO_SIZE = 4096
UNBOUNDED_COUNT = 50  # a repetition of more than this many counts as unbounded (shape 1)
MAX_AMBIGUOUS_COUNT = 10  # at most 2**10 paths / len**10 splits per start position (shapes 2 and 3)
# verdicts of regex_risk (a pure function of the pattern: "" when safe, else the reason), per process;
# ``pack_cache`` seeds them from its on-disk entries and collects, with ``recording``, the verdicts a
# compile needed
_MEMO = RecordingMemo(MEMO_SIZE)
seed = _MEMO.seed
recording = _MEMO.recording
clear_memo = _MEMO.clear

_REPEATS = {c.MAX_REPEAT, c.MIN_REPEAT} | ({c.POSSESSIVE_REPEAT} if hasattr(c, "POSSESSIVE_REPEAT") else set())
_SAMPLE = "".join(map(chr, range(0x250))) + "\u0391\u03b1\u0416\u0436\u05d0\u0627\u0663\u0966\u4e2d\u3042" \
    "\u2003\u2028\u3000\u200b\u2019\u20ac\U0001f600"
_ATOMIC = getattr(c, "ATOMIC_GROUP", object())
_REFS = (c.GROUPREF, getattr(c, "GROUPREF_IGNORE", c.GROUPREF))
ALL = (1 << len(_SAMPLE)) - 1
INF = float("inf")


def refusal(subject: str, risk: str) -> str:
    """The message refusing a regex: ``"{subject} {risk} (catastrophic backtracking on long texts: an
    audit could hang); rewrite it without that shape (docs/rules.md, Regex safety)"`` (``risk`` from
    :func:`regex_risk`; ``subject`` names the regex, e.g. ``regex '(a|a)*'``)."""
    return (f"{subject} {risk} (catastrophic backtracking on long texts: an audit could hang); "
            "rewrite it without that shape (docs/rules.md, Regex safety)")


def regex_risk(pattern: str) -> str:
    """Why ``pattern`` risks catastrophic backtracking (one of the three shapes of the module doc, as a
    phrase naming the offending subpattern's shape), or ``""`` when it is considered safe. Not a regex
    (a parse error) counts as safe here: the compiler reports it. Memoized per process.

    Args:
        pattern: the regex source (``str``); anything else is ``""``.
    """
    if not isinstance(pattern, str):
        return ""
    hit = _MEMO.get(pattern)
    if hit is not None:
        return hit
    return _MEMO.put(pattern, _risk(pattern))


def nested_unbounded(pattern: str) -> bool:
    """Whether :func:`regex_risk` refuses ``pattern`` (any of the three shapes; the name is historical:
    shape 1, ``(a+)+``, was the first)."""
    return bool(regex_risk(pattern))


def _risk(pattern: str) -> str:
    try:
        parsed = p.parse(pattern)
    except Exception:  # noqa: BLE001 - not a regex here (or a bad one: the compiler reports it)
        return ""
    return _nested(parsed) or _walk(parsed, 0, 1)


def _seq(items: Any) -> list[Any]:
    """The ``(op, av)`` list of a parse-tree sequence (a ``SubPattern``'s own list: its indexing is slow)."""
    data = getattr(items, "data", None)
    return data if isinstance(data, list) else list(items)


def _count(av: Any) -> float:
    return INF if av[1] == c.MAXREPEAT or av[1] > UNBOUNDED_COUNT else av[1]


def _children(op: Any, av: Any) -> list[Any]:
    if op in _REPEATS:
        return [av[2]]
    if op == c.SUBPATTERN:
        return [av[-1]]
    if op == c.BRANCH:
        return list(av[1])
    if op == _ATOMIC:
        return [av]
    if op == c.GROUPREF_EXISTS:
        return [b for b in av[1:] if b is not None]
    if op in (c.ASSERT, c.ASSERT_NOT):
        return [av[1]]
    return []


def _has_unbounded(items: Any) -> bool:
    return any((op in _REPEATS and _count(av) == INF) or any(_has_unbounded(ch) for ch in _children(op, av))
               for op, av in items)


# -- character sets (bitsets over _SAMPLE) ------------------------------------------------------------

@lru_cache(maxsize=None)
def _category(cat: Any) -> int:
    probe = {c.CATEGORY_DIGIT: r"\d", c.CATEGORY_NOT_DIGIT: r"\D", c.CATEGORY_SPACE: r"\s",
             c.CATEGORY_NOT_SPACE: r"\S", c.CATEGORY_WORD: r"\w", c.CATEGORY_NOT_WORD: r"\W"}.get(cat)
    if probe is None:  # line-break categories and the like: anything (conservative)
        return ALL
    rx = re.compile(probe)
    return _bits(ch for ch in _SAMPLE if rx.fullmatch(ch))


@lru_cache(maxsize=4096)
def _literal(code: int) -> int:
    return _bits([chr(code)])


@lru_cache(maxsize=1024)
def _range(lo: int, hi: int) -> int:
    return _bits(ch for ch in _SAMPLE if lo <= ord(ch) <= hi)


def _bits(chars: Any) -> int:
    out = 0
    for ch in chars:
        for variant in {ch, ch.lower(), ch.upper()}:
            i = _SAMPLE.find(variant) if len(variant) == 1 else -1
            if i >= 0:
                out |= 1 << i
    return out


def _char_bits(op: Any, av: Any) -> int | None:
    """The characters a single-character node matches, or ``None`` when ``op`` is not one."""
    if op == c.LITERAL:
        return _literal(av)
    if op == c.NOT_LITERAL:
        return ALL & ~_literal(av)
    if op == c.ANY:
        return ALL
    if op != c.IN:
        return None
    out, negate = 0, False
    for iop, iav in av:
        if iop == c.NEGATE:
            negate = True
        elif iop == c.LITERAL:
            out |= _literal(iav)
        elif iop == c.RANGE:
            out |= _range(*iav)
        elif iop == c.CATEGORY:
            out |= _category(iav)
        else:  # anything unforeseen: every character (conservative)
            out = ALL
    return ALL & ~out if negate else out


def _alphabet(items: Any) -> int:
    """Every character some node of ``items`` can match (a back-reference: anything)."""
    out = 0
    for op, av in items:
        bits = _char_bits(op, av)
        if bits is not None:
            out |= bits
        elif op in _REFS:
            out = ALL
        for ch in _children(op, av):
            out |= _alphabet(ch)
    return out


def _first(items: Any) -> tuple[int, bool]:
    """``(characters a match of items can begin with, whether it can match empty)``."""
    out = 0
    for op, av in items:
        bits, nullable = _first_one(op, av)
        out |= bits
        if not nullable:
            return out, False
    return out, True


def _first_one(op: Any, av: Any) -> tuple[int, bool]:
    bits = _char_bits(op, av)
    if bits is not None:
        return bits, False
    if op in _REPEATS:
        b, nullable = _first(av[2])
        return b, nullable or av[0] == 0
    if op == c.BRANCH or op == c.GROUPREF_EXISTS:
        alts = [_first(b) for b in _children(op, av)]
        return (sum_bits(a[0] for a in alts), any(a[1] for a in alts) or op == c.GROUPREF_EXISTS)
    if op == c.SUBPATTERN or op == _ATOMIC:
        return _first(_children(op, av)[0])
    if op in _REFS:
        return ALL, True
    return 0, True  # anchors, lookarounds: zero-width


def sum_bits(parts: Any) -> int:
    """The union of bitsets."""
    out = 0
    for b in parts:
        out |= b
    return out


# -- the three shapes ---------------------------------------------------------------------------------

def _separated(items: Any) -> bool:
    """A mandatory single character (a literal or a class, not repeated) in every iteration that none of
    the iteration's repetitions can match, as ``,`` in ``(\\d+,)*`` or ``.`` in ``([a-z]+\\.)+``, keeps
    the split between iterations unambiguous (``a`` in ``(.*a)+`` does not: ``.*`` matches it too)."""
    while len(items) == 1 and items[0][0] == c.SUBPATTERN:
        items = items[0][1][-1]
    if len(items) == 1 and items[0][0] == c.BRANCH:  # (now\s+|still\s+)*: every branch needs one
        return all(_separated(branch) for branch in items[0][1][1])
    repeated = sum_bits(_alphabet(av[2]) for op, av in _walk_nodes(items)
                       if op in _REPEATS and av[0] != av[1])
    return any(op in (c.LITERAL, c.IN) and not (_char_bits(op, av) or 0) & repeated for op, av in items)


def _walk_nodes(items: Any) -> Any:
    for op, av in _seq(items):
        yield op, av
        for ch in _children(op, av):
            yield from _walk_nodes(ch)


def _nested(items: Any) -> str:
    """Shape 1."""
    for op, av in _walk_nodes(items):
        if op in _REPEATS and _count(av) == INF and _has_unbounded(av[2]) and not _separated(av[2]):
            return "repeats a group that itself repeats without bound"
    return ""


def _walk(items: Any, follow: int, mult: float) -> str:
    """Shapes 2 and 3 in ``items``, followed by characters ``follow`` (0: may end there), inside
    repetitions allowing ``mult`` iterations in all."""
    items = _seq(items)
    afters, after = [], follow  # afters[i]: what may follow items[i] (one backward pass)
    for op, av in reversed(items):
        afters.append(after)
        bits, nullable = _first_one(op, av)
        after = bits | (after if nullable else 0)
    afters.reverse()
    for (op, av), after in zip(items, afters, strict=True):
        if op in _REPEATS:
            count = _count(av)
            inner = mult * count if count else 0
            if count != INF and inner > MAX_AMBIGUOUS_COUNT and _has_unbounded(av[2]) \
                    and not _separated(av[2]):
                return (f"repeats {av[1]} times a group containing an unbounded repetition "
                        f"(up to len**{min(inner, 10**6):g} ways to split a text)")
            body_follow = after | (_first(av[2])[0] if count > 1 else 0)
            why = _walk(av[2], body_follow, inner)
        elif op == c.BRANCH:
            why = _overlap(av[1], after) if mult > MAX_AMBIGUOUS_COUNT else ""
            why = why or next(filter(None, (_walk(b, after, mult) for b in av[1])), "")
        elif op in (c.ASSERT, c.ASSERT_NOT):  # evaluated on its own, atomically
            why = _walk(av[1], ALL, 1)
        else:
            why = next(filter(None, (_walk(ch, after, mult) for ch in _children(op, av))), "")
        if why:
            return why
    return ""


def _overlap(branches: Any, follow: int) -> str:
    """Shape 2 for the branches of one alternation repeated many times."""
    seen: list[tuple[int, bool]] = []
    for branch in branches:
        bits, nullable = _first(branch)
        eff = bits | (follow if nullable else 0)
        for other, other_nullable in seen:
            if eff & other or (nullable and other_nullable):
                return ("repeats an alternation whose branches can match the same text (overlapping "
                        "alternatives: each iteration can be matched more than one way)")
        seen.append((eff, nullable))
    return ""
