"""Terminal control sequences in texts (colour codes, window titles, hyperlinks of pasted terminal
output): found and blanked with offsets kept, so that their parameters are not read as values of the
text (``\\x1b[0m`` is not the number 0) while addresses ``[start:end]`` stay those of the text.

Used by the claim extractor and the evidence index (:mod:`trajaudit.engine.claims`) and by the rule
language's ``step.said``.
"""

from __future__ import annotations

import re
from functools import lru_cache


def has_escapes(text: str) -> bool:
    """Whether ``text`` holds a character that opens a terminal control sequence: ESC, or the 8-bit C1
    controls CSI (U+009B) and OSC (U+009D). A text without them needs no :func:`mask_escapes` (three
    substring tests: far cheaper than a character-class search on long texts)."""
    return "\x1b" in text or "\x9b" in text or "\x9d" in text


@lru_cache(maxsize=1)
def _escape_re() -> re.Pattern[str]:
    # ECMA-48 / xterm control sequences, each alternative anchored on its introducer and with a body
    # that cannot hold the introducer (linear time, no backtracking across sequences):
    return re.compile(
        # CSI: ESC [, parameter bytes 0x30-0x3F, intermediate bytes 0x20-0x2F, a final byte 0x40-0x7E
        r"\x1b\[[0-?]*[ -/]*[@-~]"
        # OSC (titles, OSC 8 hyperlinks, clipboard): ESC ], ended by BEL or ST (ESC \ or U+009C)
        r"|\x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"
        # DCS (ESC P), SOS (ESC X), PM (ESC ^), APC (ESC _): ended by ST
        r"|\x1b[PX^_][^\x1b\x9c]*(?:\x1b\\|\x9c)"
        # 8-bit CSI (U+009B)
        r"|\x9b[0-?]*[ -/]*[@-~]"
        # 8-bit OSC (U+009D): a numbered command ("0;title", "8;;url") on one line, ended by BEL or ST.
        # U+009D/U+009C are also what mis-decoded UTF-8 quotes leave ("\u00e2\u20ac\x9d"): without the
        # number and the semicolon the text between two such quotes would be taken for a command.
        r"|\x9d[0-9]{1,4};[^\x07\x1b\x9c\x9d\n]*(?:\x07|\x1b\\|\x9c)"
        # any other ESC sequence: intermediates 0x21-0x2F, a final byte 0x30-0x7E (ESC 7, ESC c,
        # ESC ( B, a stray ST ESC \) -- not the introducers above, whose unfinished sequences are
        # left as they are
        r"|\x1b[!-/]*[0-OQ-WYZ\\`-~]"
    )


def mask_escapes(text: str) -> str:
    """``text`` with each terminal control sequence replaced by as many spaces: CSI (``ESC [`` … final
    byte, e.g. the colour reset ``\\x1b[0m``, and its 8-bit form ``\\x9b``), OSC (``ESC ]`` … BEL or
    ``ESC \\``: window titles, and OSC 8 hyperlinks, whose link text stays while their URL, not
    displayed, is blanked; 8-bit ``\\x9d`` with a numbered command), the string sequences DCS, SOS,
    PM and APC (``ESC P`` / ``X`` / ``^`` / ``_`` … ``ESC \\``) and the other ESC sequences
    (``ESC 7``, ``ESC ( B``). Their parameters are not values of the text ("0m", a title's number),
    and every other character keeps its offset (addresses ``[start:end]`` stay those of the text).
    An unfinished sequence is left as it is. Callers test :func:`has_escapes` first (most
    texts hold none of its characters)."""
    return _escape_re().sub(lambda x: " " * (x.end() - x.start()), text)


def escape_spans(text: str) -> list[tuple[int, int]]:
    """The ``[start, end)`` spans of ``text`` that :func:`mask_escapes` blanks, in order (adjacent
    sequences are separate spans). What a terminal does not display: the claim layer reads a number and
    its unit across them (``\\x1b[1m12\\x1b[0m%`` is 12 %)."""
    return [x.span() for x in _escape_re().finditer(text)]
