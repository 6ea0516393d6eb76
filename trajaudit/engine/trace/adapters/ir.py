"""The trajaudit IR itself (what ``trajaudit convert`` writes): one trajectory object, a list of them,
or JSONL lines. Reading it back makes ``convert`` round-trip through every command.

Step numbering: as stored (``Step.index``, 0-based position in the original message list).
"""

from __future__ import annotations

from typing import Any

from trajaudit.engine.schema import schema_errors
from trajaudit.engine.trace.adapters.base import LoadOptions, Sniff, is_run_list
from trajaudit.engine.trace.ir import SCHEMA_VERSION, Source, Trajectory
from trajaudit.errors import TraceFormatError


def _is_ir(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("schema_version") == SCHEMA_VERSION and "steps" in doc and "source" in doc


class IRAdapter:
    """Trajectories in the trajaudit IR (``trajectory.schema.json``)."""

    name = "ir"
    description = "the trajaudit IR written by 'trajaudit convert' (one object, a list, or JSONL)"

    def sniff(self, doc: Any) -> Sniff:
        """Match an IR object or a non-empty list of them."""
        if _is_ir(doc) or is_run_list(doc, _is_ir):  # a broken element is reported alone when converted
            return Sniff(True)
        return Sniff(False, "not a trajaudit IR object (schema_version, source, steps)")

    def records(self, doc: Any) -> list[Any]:
        """One record per trajectory."""
        return list(doc) if isinstance(doc, list) else [doc]

    def convert(self, run: Any, *, source: Source, options: LoadOptions) -> Trajectory:
        """Validate against the schema and rebuild; the original ``source`` (format, file) is kept."""
        errs = schema_errors("trajectory", run, limit=3)
        if errs:
            raise TraceFormatError("invalid trajaudit IR: " + "; ".join(errs), adapter=self.name)
        return Trajectory.from_dict(run)
