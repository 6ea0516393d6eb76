"""JSON parsing with limits as data, so a pathological document is refused with a clear message
instead of crashing.

Python's ``json`` parser and every recursive walk of its result (schema validation, adapters, evidence
rendering, the claim digests) recurse once or more per level: ``'[' * 5000`` raised ``RecursionError``
out of ``json.loads``, and a document nested a few hundred levels deep could still overflow a later
walk. An integer literal of more than 4,300 digits made ``json.loads`` raise a bare ``ValueError``
(Python's int-conversion limit) that no caller expected: a traceback, and the batch's good runs lost.

Every JSON input (trace documents, JSONL lines, tool-call arguments and outputs, tools files, gold
and prediction files, LLM answers) is therefore parsed with :func:`loads`, which enforces a
:class:`Limits` (:data:`LIMITS` by default) and raises a :class:`LimitExceeded` (a ``ValueError``, so
the callers' "not JSON" handling applies) naming the limit, its value and the line:

- :class:`NestedTooDeep`: more than ``Limits.depth`` levels of arrays/objects;
- :class:`IntegerTooLong`: an integer literal of more than ``Limits.int_digits`` digits;
- :class:`StringTooLong`: a string of more than ``Limits.string_chars`` characters.

Real traces nest about 10 levels (tau-bench, Who&When), carry integers of a few digits and strings
of at most a few hundred KB. The YAML side (:mod:`trajaudit.safe_yaml`) applies the same
:class:`Limits` plus ``alias_nodes``.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from typing import Any

MAX_DEPTH = 100  # levels of arrays/objects; the real traces nest ~10
#: Digits of one integer literal: Python's own int-conversion limit (``sys.get_int_max_str_digits``).
MAX_INT_DIGITS = 4300
#: Characters of one string value (16 M: far above any real message or tool output).
MAX_STRING_CHARS = 16_000_000
#: Nodes that YAML aliases may add to a document when expanded (see ``safe_yaml``).
MAX_ALIAS_NODES = 100_000


@dataclass(frozen=True)
class Limits:
    """The parsing limits, as data (one frozen value, passed where a caller needs other limits).

    Attributes:
        depth: levels of arrays/objects (lists/mappings in YAML); a scalar is 0 levels, ``[]`` 1.
        int_digits: digits of one integer literal (at most Python's own 4,300, which ``int()``
            enforces anyway; a lower value is enforced by the parser hook).
        string_chars: characters of one string value.
        alias_nodes: nodes YAML aliases may add when expanded (YAML only).
    """

    depth: int = MAX_DEPTH
    int_digits: int = MAX_INT_DIGITS
    string_chars: int = MAX_STRING_CHARS
    alias_nodes: int = MAX_ALIAS_NODES


LIMITS = Limits()


class LimitExceeded(ValueError):
    """A JSON (or YAML) document exceeds one of the :class:`Limits` (``ValueError``: "not usable JSON").

    Attributes:
        limit_name: which limit (``depth``, ``int_digits``, ``string_chars``, ``alias_nodes``).
        limit: its value.
        line: the 1-based line of the text where the offending value starts, when known.
    """

    limit_name = "limit"

    def __init__(self, what: str, limit: int, line: int | None = None) -> None:
        self.limit = limit
        self.line = line
        self.what = what
        super().__init__(f"{what}{f' (line {line})' if line is not None else ''}")


class NestedTooDeep(LimitExceeded):
    """A JSON text or value nested more than the limit."""

    limit_name = "depth"

    def __init__(self, limit: int = MAX_DEPTH, line: int | None = None) -> None:
        super().__init__(f"nested too deeply (more than {limit} levels of arrays/objects)", limit, line)


class IntegerTooLong(LimitExceeded):
    """An integer literal with more digits than the limit."""

    limit_name = "int_digits"

    def __init__(self, limit: int = MAX_INT_DIGITS, line: int | None = None, digits: int | None = None) -> None:
        got = f" ({digits} digits)" if digits is not None else ""
        super().__init__(f"integer literal too long{got}: the limit is {limit} digits", limit, line)


class StringTooLong(LimitExceeded):
    """A string value longer than the limit."""

    limit_name = "string_chars"

    def __init__(self, limit: int = MAX_STRING_CHARS, line: int | None = None, chars: int | None = None) -> None:
        got = f" ({chars} characters)" if chars is not None else ""
        super().__init__(f"string too long{got}: the limit is {limit} characters", limit, line)


def too_deep(doc: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether the JSON value ``doc`` (dicts, lists, scalars) nests more than ``limit`` levels of
    lists/dicts (a scalar is 0 levels, ``[]`` is 1). Iterative: never recurses."""
    stack = [(doc, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        v, depth = pop()
        if type(v) is dict:
            items: Any = v.values()
        elif type(v) is list:
            items = v
        else:
            continue
        if depth > limit:
            return True
        for ch in items:
            if type(ch) is dict or type(ch) is list:
                push((ch, depth + 1))
    return False


def longest_string(doc: Any) -> int:
    """The length of the longest string (value or key) in the JSON value ``doc``. Iterative."""
    best = 0
    stack = [doc]
    while stack:
        v = stack.pop()
        if type(v) is str:
            best = max(best, len(v))
        elif type(v) is dict:
            for k, x in v.items():
                best = max(best, len(k))
                stack.append(x)
        elif type(v) is list:
            stack.extend(v)
    return best


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def line_of(text: str | bytes, pos: int) -> int:
    """The 1-based line of character ``pos`` in ``text``."""
    nl = b"\n" if isinstance(text, bytes) else "\n"
    return text.count(nl, 0, max(0, pos)) + 1  # type: ignore[arg-type]


def _long_integer(text: str | bytes, limit: int) -> tuple[int | None, int | None]:
    """``(line, digits)`` of the first integer literal (outside a string, as far as a regex can tell)
    with more than ``limit`` digits, or ``(None, None)``."""
    s = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    m = re.search(r"(?<![\"\w.\\])-?(\d{%d,})(?![\w\"])" % (limit + 1), s)
    if m is None:
        return None, None
    return line_of(s, m.start()), len(m.group(1))


def _string_line(text: str | bytes, limit: int) -> int | None:
    s = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    start = 0
    while True:  # the first quote that opens a long stretch without another unescaped quote
        i = s.find('"', start)
        if i < 0:
            return None
        j = i + 1
        while True:
            j = s.find('"', j)
            if j < 0:
                return line_of(s, i)
            k = j - 1
            while k > i and s[k] == "\\":
                k -= 1
            if (j - k - 1) % 2 == 0:
                break
            j += 1
        if j - i - 1 > limit:
            return line_of(s, i)
        start = j + 1


def loads(text: str | bytes, limit: int | None = None, *, allow_nan: bool = True, limits: Limits = LIMITS) -> Any:
    """``json.loads(text)`` within ``limits``.

    Args:
        text: the JSON text.
        limit: the nesting limit (overrides ``limits.depth``; kept for callers that pass a depth).
        allow_nan: ``False`` also refuses ``NaN``, ``Infinity`` and ``-Infinity``, which Python's
            parser accepts but JSON does not (used for model answers).
        limits: the :class:`Limits` to enforce (default :data:`LIMITS`).

    Raises:
        json.JSONDecodeError: not JSON (as ``json.loads``).
        NestedTooDeep: nested more than the depth limit (also when the parser ran out of stack).
        IntegerTooLong: an integer literal of more than ``limits.int_digits`` digits.
        StringTooLong: a string of more than ``limits.string_chars`` characters.
        ValueError: a ``NaN``/``Infinity`` constant when ``allow_nan`` is false.
    """
    depth = limits.depth if limit is None else limit
    kwargs: dict[str, Any] = {} if allow_nan else {"parse_constant": _refuse_constant}
    py_limit = sys.get_int_max_str_digits()
    if py_limit == 0 or limits.int_digits < py_limit:
        kwargs["parse_int"] = _int_parser(limits.int_digits)
    try:
        doc = json.loads(text, **kwargs)
    except RecursionError:
        raise NestedTooDeep(depth) from None
    except IntegerTooLong as e:
        line, digits = _long_integer(text, limits.int_digits)
        raise IntegerTooLong(limits.int_digits, line, digits or e.limit) from None
    except ValueError as e:
        if isinstance(e, json.JSONDecodeError) or "integer string conversion" not in str(e):
            raise
        line, digits = _long_integer(text, limits.int_digits)
        raise IntegerTooLong(limits.int_digits, line, digits) from None
    if len(text) > limits.string_chars:  # no string can be longer than the text that holds it
        longest = longest_string(doc)
        if longest > limits.string_chars:
            raise StringTooLong(limits.string_chars, _string_line(text, limits.string_chars), longest)
    if type(doc) is not dict and type(doc) is not list:
        return doc
    # a document cannot nest deeper than it has opening brackets: most texts (tool outputs, arguments)
    # are decided by two C-level counts, without walking the parsed value
    if isinstance(text, str) and text.count("[") + text.count("{") <= depth:
        return doc
    if too_deep(doc, depth):
        raise NestedTooDeep(depth)
    return doc


def _int_parser(limit: int) -> Any:
    def parse_int(s: str) -> int:
        digits = len(s) - (s[:1] == "-")
        if digits > limit:
            raise IntegerTooLong(limit, None, digits)
        return int(s)

    return parse_int
