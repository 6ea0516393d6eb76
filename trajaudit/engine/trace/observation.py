"""Observations embedded in a decision step's message (browsing and file agents).

Some agents do not return tool outputs as separate messages: the framework appends what the agent
observed to the agent's own message. Magentic-One's WebSurfer reports its action ("I typed 'X' into
the search bar.") and then the page it saw under fixed headings ("Here is a screenshot of [title](url).
…", "The following metadata was extracted from the webpage: {json}", "Automatic OCR of the page
screenshot has detected the following text: …"); its FileSurfer (and the text-mode WebSurfer) answer
with a viewer page ("Address: file:///…", "Title: …", "Viewport position: Showing page 1 of 3.");
a browser failure is appended as "Web surfing error: …" (Fourney et al., 2024, Magentic-One).

Policy: the text from the first such heading (at a line start) to the end of the message is an
*observation* — evidence the agent was shown, like a tool output — and the text before it is what
the agent *said* (its claims). The decision is made by the structure of the text only (the fixed
headings), never by the speaker's name, so any agent whose log embeds these sections is read the
same way. Used by the claim ledger (claims come from the said part, the observation is an evidence
source visible from the step itself on) and by the rule language (``step.said``, ``step.observed``).
"""

from __future__ import annotations

import re
from functools import lru_cache

#: Headings that open an embedded observation (each at a line start). Extend with care: a heading
#: must be produced by the framework, not written by the model in its own words.
OBSERVATION_HEADINGS: tuple[str, ...] = (
    r"Here is a screenshot of ",
    r"The following metadata was extracted from the webpage",
    r"Automatic OCR of the page screenshot has detected the following text",
    r"Web surfing error:",
    # a viewer page: the address line, an optional title line, then the viewport line
    r"Address: [^\n]*\n(?:Title: [^\n]*\n)?Viewport position: ",
)

_HEADING_RE = re.compile("^(?:" + "|".join(f"(?:{h})" for h in OBSERVATION_HEADINGS) + ")", re.M)


#: Texts up to this length are memoized (4096 of them, keyed by the text itself, so hits are exact);
#: longer ones are searched each time, so the memo never pins megabytes of message text.
MEMO_MAX_CHARS = 20_000


def _search(content: str) -> int | None:
    m = _HEADING_RE.search(content)
    return m.start() if m else None


_memo = lru_cache(maxsize=4096)(_search)


def clear_memo() -> None:
    """Empty the per-process memo of :func:`observation_start` (results are unchanged)."""
    _memo.cache_clear()


def observation_start(content: str) -> int | None:
    """The offset where ``content``'s embedded observation begins, or ``None`` when it has none.

    Args:
        content: a message text (any length; the search is one linear regex pass, memoized for texts
            of at most :data:`MEMO_MAX_CHARS` characters).

    Returns:
        The character offset of the first heading in :data:`OBSERVATION_HEADINGS` found at a line
        start (0 when the whole message is a viewer page), or ``None``.
    """
    if not content:
        return None
    return _memo(content) if len(content) <= MEMO_MAX_CHARS else _search(content)


def split_observation(content: str) -> tuple[str, str]:
    """``(said, observed)``: the text before the embedded observation and the observation itself.

    ``said + observed == content``; ``observed`` is ``""`` when the message embeds none.
    """
    k = observation_start(content)
    if k is None:
        return content, ""
    return content[:k], content[k:]
