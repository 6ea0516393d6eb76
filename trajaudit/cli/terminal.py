"""Trace text as a terminal shows it: control, bidi and separator characters by name (``\\x1b``,
``\\u202e``), never obeyed. Imports nothing of trajaudit, so the command group itself (its log lines)
can use it before any command module is imported."""

from __future__ import annotations

import logging

#: C0 controls but tab and newline, DEL and C1 controls -> ``\\xNN``: trace text (an agent's message, a
#: tool output) printed to a terminal must not move the cursor, recolour or retitle it (ESC sequences).
#: The Unicode bidi controls (marks U+061C, U+200E/F; embeddings and overrides U+202A-202E; isolates
#: U+2066-2069) and line/paragraph separators (U+2028/2029) -> ``\\uNNNN``: they reorder or break what
#: is shown after them ("Trojan Source"), so a preview would not show the text as it is.
_TERMINAL_SAFE = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F, *range(0x80, 0xA0))}
_TERMINAL_SAFE.update({c: f"\\u{c:04x}" for c in (0x061C, 0x200E, 0x200F, 0x2028, 0x2029, *range(0x202A, 0x202F),
                                                    *range(0x2066, 0x206A))})


def terminal_safe(text: str) -> str:
    """``text`` with every control character but tab and newline shown as ``\\xNN`` (ESC, CR, BEL …),
    and the bidi controls and line/paragraph separators as ``\\uNNNN`` (U+202E as ``\\u202e``)."""
    return text.translate(_TERMINAL_SAFE)


class SafeLogFormatter(logging.Formatter):
    """A log formatter whose lines pass through :func:`terminal_safe`: a log line can quote trace text
    (a run id in "rule … raised at step 3 of RUN"), which must not drive the terminal either."""

    def format(self, record: logging.LogRecord) -> str:
        return terminal_safe(super().format(record))


__all__ = ["SafeLogFormatter", "terminal_safe"]
