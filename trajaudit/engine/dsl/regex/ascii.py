"""ASCII twins of rule regexes: the same pattern compiled with ``re.ASCII``, for ASCII texts.

On a text made only of ASCII characters, a pattern whose every literal, range and negated literal is
ASCII matches exactly the same spans, groups included, with or without ``re.ASCII``:

- ``\\w``, ``\\d``, ``\\b`` (and their negations): ``str.isalnum`` / ``str.isdecimal`` of an ASCII
  character are the ASCII classes ``[A-Za-z0-9]`` / ``[0-9]``;
- ``re.IGNORECASE``: Unicode case folding of ASCII characters is ASCII case folding; the extra
  Unicode equivalents of an ASCII letter (``K`` KELVIN SIGN for ``k``, ``ſ`` for ``s`` …) are
  non-ASCII, so they cannot occur in the text, and a non-ASCII pattern literal (which could fold
  to an ASCII letter) disables the twin;
- ``\\s`` is the one exception: Unicode whitespace also holds the ASCII separators ``\\x1c``–``\\x1f``,
  so a pattern that uses ``\\s``/``\\S`` takes its twin only for texts without them.

The same holds on a text whose other characters are all *inert* (:func:`ascii_like`): not
alphanumeric, not whitespace and caseless (``c.lower() == c == c.upper()``) — curly quotes, dashes,
ellipses, symbols. Neither mode counts such a character as ``\\w``, ``\\d`` or ``\\s``, and no ASCII
literal or class matches it, case-insensitively or not (a test checks every inert character of
Unicode in both modes).

``re`` implements the ASCII classes and case folding with table look-ups instead of calls into the
Unicode database: the twin searches an English tool output or agent message 1.1–2.5x faster
(most for ``IGNORECASE`` alternations). Tests check the per-character equivalences over all of
ASCII and the twins against the originals on generated texts. Anything unexpected in the parse
tree (an unknown opcode, a pattern that does not compile with ``re.ASCII``) means no twin.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from trajaudit.engine.dsl.regex import stored

log = logging.getLogger(__name__)

try:  # CPython's regex parser (private; its shape is stable since 3.11)
    from re import _parser as _p
except ImportError:  # pragma: no cover - another Python: no twins
    _p = None

_SPACE_CATEGORIES = {"CATEGORY_SPACE", "CATEGORY_NOT_SPACE"}
_SAFE_CATEGORIES = {"CATEGORY_DIGIT", "CATEGORY_NOT_DIGIT", "CATEGORY_WORD", "CATEGORY_NOT_WORD",
                    "CATEGORY_LINEBREAK", "CATEGORY_NOT_LINEBREAK"}
_SEPARATORS = ("\x1c", "\x1d", "\x1e", "\x1f")


class _NoTwin(Exception):
    pass


def _walk(seq: Any, space: list[bool]) -> None:
    """Raise :class:`_NoTwin` unless every node of the parse tree ``seq`` behaves alike in both modes
    on ASCII text; sets ``space[0]`` when a whitespace class occurs."""
    for op, av in seq:
        name = str(op)
        if name in ("LITERAL", "NOT_LITERAL"):
            if av >= 128:
                raise _NoTwin
        elif name == "RANGE":
            if av[0] >= 128 or av[1] >= 128:
                raise _NoTwin
        elif name == "CATEGORY":
            if str(av) in _SPACE_CATEGORIES:
                space[0] = True
            elif str(av) not in _SAFE_CATEGORIES:
                raise _NoTwin
        elif name == "IN":
            _walk(av, space)
        elif name in ("NEGATE", "ANY", "AT", "GROUPREF"):
            continue
        elif name == "SUBPATTERN":
            _walk(av[-1], space)
        elif name == "BRANCH":
            for b in av[1]:
                _walk(b, space)
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            _walk(av[2], space)
        elif name in ("ASSERT", "ASSERT_NOT"):
            _walk(av[1], space)
        elif name == "ATOMIC_GROUP":
            _walk(av, space)
        elif name == "GROUPREF_EXISTS":
            _walk(av[1], space)
            if av[2] is not None:
                _walk(av[2], space)
        else:
            raise _NoTwin


def ascii_twin(rx: re.Pattern[str]) -> tuple[re.Pattern[str] | None, bool]:
    """``(twin, uses_space)``: ``rx`` compiled with ``re.ASCII`` when it is exact on ASCII texts (see
    the module docstring), else ``None``; ``uses_space``: the twin is exact only on texts without
    :data:`_SEPARATORS` (see :func:`twin_for`)."""
    if _p is None or not isinstance(rx.pattern, str) or rx.flags & re.ASCII:
        return None, False
    k = stored.key("t", rx)
    got = stored.lookup(k, stored.twin_from)
    twin: tuple[re.Pattern[str] | None, bool] = (None, False)
    if got is None:  # decide from the parse tree
        twin = _twin_parsed(rx)
    elif got[0]:  # stored: exact (the parse is not needed, the twin is compiled from the text)
        try:
            twin = stored.compile_pattern(rx.pattern, (rx.flags & ~re.UNICODE) | re.ASCII), got[1]
        except Exception as e:  # noqa: BLE001 - as in _twin_parsed
            log.debug("no ASCII twin for %r: %s", rx.pattern[:80], e)
    stored.put(k, [twin[0] is not None, twin[1]])
    return twin


def _twin_parsed(rx: re.Pattern[str]) -> tuple[re.Pattern[str] | None, bool]:
    """:func:`ascii_twin` decided from the parse tree of ``rx``."""
    try:
        space = [False]
        _walk(_p.parse(rx.pattern, rx.flags), space)
        return stored.compile_pattern(rx.pattern, (rx.flags & ~re.UNICODE) | re.ASCII), space[0]
    except _NoTwin:
        return None, False
    except Exception as e:  # noqa: BLE001 - the twin is optional; the original pattern stays
        log.debug("no ASCII twin for %r: %s", rx.pattern[:80], e)
        return None, False


def twin_for(rx: re.Pattern[str], twin: tuple[re.Pattern[str] | None, bool], text: str) -> re.Pattern[str]:
    """The pattern to run on ``text``: the twin when ``text`` is :func:`ascii_like` (and, for a pattern
    using ``\\s``, holds no ``\\x1c``–``\\x1f``), else ``rx`` itself."""
    t, space = twin
    if t is None or not ascii_like(text) or (space and has_separators(text)):
        return rx
    return t


_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_INERT: dict[str, bool] = {}
_LIKE: dict[str, bool] = {}
_LIKE_MAX = 4096


def inert(c: str) -> bool:
    """A character no ASCII pattern tells apart in ``re.ASCII`` and Unicode mode (module docstring)."""
    got = _INERT.get(c)
    if got is None:
        if len(_INERT) >= 65536:
            _INERT.clear()
        got = _INERT[c] = not c.isalnum() and not c.isspace() and c.lower() == c == c.upper()
    return got


def ascii_like(text: str) -> bool:
    """``text`` is ASCII, or each of its non-ASCII characters is :func:`inert` (memoized per text)."""
    if text.isascii():
        return True
    got = _LIKE.get(text)
    if got is None:
        if len(_LIKE) >= _LIKE_MAX:
            _LIKE.clear()
        got = _LIKE[text] = all(inert(c) for c in set(_NON_ASCII.findall(text)))
    return got


def clear_memo() -> None:
    """Forget the per-text verdicts of :func:`ascii_like`."""
    _LIKE.clear()


def has_separators(text: str) -> bool:
    """Whether ``text`` holds one of the ASCII separators ``\\x1c``–``\\x1f`` (Unicode ``\\s`` only)."""
    return any(c in text for c in _SEPARATORS)
