"""trajaudit's own outputs read back as traces: an ``audit`` diagnosis line or a ``check`` validation
log written into an input folder and handed to the next batch (each was "no known trace format
matches", the reason not said)."""

from __future__ import annotations

from typing import Any


def output_hint(doc: Any) -> str:
    """``"the document is a trajaudit diagnosis …"`` when ``doc`` is a line of ``audit``'s diagnoses
    or one of ``check``'s validation logs (an output written into the input folder and read back by the
    next batch: each line was "no known trace format matches", the reason not said), else ``""``."""
    if isinstance(doc, list) and doc:  # check --format json: a list of logs; a JSON list of diagnoses
        doc = doc[0]
    if not isinstance(doc, dict) or not isinstance(doc.get("trajectory_id"), str):
        return ""
    if "critical_step" in doc and "category" in doc:
        what = "a trajaudit diagnosis (a line of `trajaudit audit`'s output)"
    elif isinstance(doc.get("records"), list) and "summary" in doc:
        what = "a trajaudit validation log (`trajaudit check`'s output)"
    else:
        return ""
    return f"the document is {what}, not a run: leave that file out of the inputs"


__all__ = ["output_hint"]
