"""Splitting a regex's text at its top-level alternation, for the branch plans of
:mod:`trajaudit.engine.dsl.regex.prefilter` (``A|B|C…``, with branches that are one non-capturing group
around an alternation flattened into their own branches, flags kept). String scanning only: escapes
and character classes are skipped; an unbalanced pattern gives ``None`` (no plan)."""

from __future__ import annotations

import re


def _scan_group(p: str, i: int, stop_at_bar: bool) -> int:
    """Index of the top-level ``|`` (when ``stop_at_bar``) or of the ``)`` closing depth 0 at or after
    ``i``, else ``len(p)``; escapes and character classes are skipped. ``-1``: unbalanced."""
    depth, n = 0, len(p)
    while i < n:
        c = p[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i += 1
            if i < n and p[i] == "^":
                i += 1
            if i < n and p[i] == "]":
                i += 1
            while i < n and p[i] != "]":
                i += 2 if p[i] == "\\" else 1
        elif c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                return i if not stop_at_bar else -1
            depth -= 1
        elif c == "|" and depth == 0 and stop_at_bar:
            return i
        i += 1
    return n if depth == 0 else -1


def _split_bars(p: str) -> list[str] | None:
    out, start = [], 0
    while True:
        j = _scan_group(p, start, True)
        if j < 0:
            return None
        out.append(p[start:j])
        if j >= len(p):
            return out
        start = j + 1


_WRAPPER = re.compile(r"\(\?([aiLmsux-]*):")


def flatten(p: str) -> list[str] | None:
    """The branches of ``p``'s top-level alternation, with branches that are one non-capturing group
    ``(?:…)`` / ``(?flags:…)`` around an alternation flattened into their own branches (flags kept)."""
    parts = _split_bars(p)
    if parts is None:
        return None
    out: list[str] = []
    for b in parts:
        m = _WRAPPER.match(b)
        if m is not None and b.endswith(")") and _scan_group(b, m.end(), False) == len(b) - 1:
            inner = flatten(b[m.end():-1])
            if inner is None:
                return None
            flags = m.group(1)
            out.extend(f"(?{flags}:{x})" if flags else x for x in inner)
        else:
            out.append(b)
    return out
