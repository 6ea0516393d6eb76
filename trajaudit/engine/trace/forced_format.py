"""A forced input format (``--input-format`` / ``format=``) or a mapping: what the loader does with it.

The forced adapter's shape check runs run by run (:func:`misfits`): a run it refuses is a per-run
problem and the others load; a document none of whose runs fits is one :class:`FormatMismatchError`,
and a JSONL file none of whose lines fits is one error for the file (:class:`MisfitTally`), not one
copy per line. A mapping is a format of its own and cannot be combined with a forced one
(:func:`mapping_for`). Behaviour and messages: docs/input.md "Forcing a format on a batch".
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from trajaudit.engine.trace.adapters import Adapter, MappingAdapter
from trajaudit.engine.trace.adapters.base import message_like
from trajaudit.errors import ConfigError, FormatMismatchError, TraceFormatError


def misfits(adapter: Adapter, indexed: list[tuple[int | None, Any]], *, file: str | None, line: int | None
            ) -> dict[int, FormatMismatchError]:
    """The forced format's own shape check, run by run: ``{position in indexed: error}`` for the runs
    ``adapter`` cannot read (each then goes the per-run problem path of
    :func:`~trajaudit.engine.trace.loader.load_document`, so the others load).

    ``--input-format`` skips detection among formats, not the format's shape check (``accepts`` when
    the adapter has one, else ``sniff``): forcing 'openai' on a tau file must not produce 29 empty
    "<missing>" steps.

    Args:
        adapter: the forced adapter.
        indexed: ``(record number or None, run)`` as the adapter's ``records`` split the document.
        file, line: where the document came from (for the error).

    Raises:
        FormatMismatchError: no run fits — the document is not in that format at all: one error naming
            the format and what it expected (the first run's reason), not one per run; its ``records``
            counts the runs only when the document was split into runs (a message list, which a
            forced list format splits element by element, is one run).
    """
    check = getattr(adapter, "accepts", adapter.sniff)
    bad: dict[int, FormatMismatchError] = {}
    for i, (_, run) in enumerate(indexed):
        s = check(run)
        if not s.ok:
            bad[i] = FormatMismatchError(f"not in the {adapter.name!r} format: {s.reason}", adapter=adapter.name)
    if len(bad) == len(indexed):
        where = line if line is not None else (indexed[0][0] if len(indexed) == 1 else None)  # a record picked
        # counted in runs only when the document was split into runs: the "records" of a message list
        # (a forced list format splits any list) are the messages of one run
        runs = len(indexed) if not any(message_like(run) for _, run in indexed) else 1
        raise FormatMismatchError(bad[0].reason, records=runs, file=file, record=where, adapter=adapter.name)
    return bad


@dataclass
class MisfitTally:
    """The lines of a JSONL file that the forced format refused whole (:func:`misfits` raised), to
    report a file not in that format at all as one error.

    Attributes:
        first: the first such line's error. lines: how many lines. records: the runs on them (a line
            holding a list of runs counts each run).
    """

    first: FormatMismatchError | None = None
    lines: int = 0
    records: int = 0

    def add(self, e: TraceFormatError) -> None:
        """Count ``e`` when it is a :class:`FormatMismatchError` (other errors are not misfits)."""
        if isinstance(e, FormatMismatchError):
            self.first = self.first or e
            self.lines += 1
            self.records += e.records

    def file_error(self, file: str, problems: int, loaded: bool) -> FormatMismatchError | None:
        """The one error for ``file`` when it is not in the forced format at all — two or more lines,
        every one refused and nothing else wrong (``problems`` lines reported, none ``loaded``) —
        else ``None`` (the lines stay separate problems, so none is hidden)."""
        if self.first is None or loaded or self.lines < 2 or self.lines != problems:
            return None
        return FormatMismatchError(self.first.reason, records=self.records, file=file, adapter=self.first.adapter)


def mapping_for(format: str | None, mapping: str | os.PathLike[str] | MappingAdapter | None) -> MappingAdapter | None:
    """The mapping adapter to read with (a mapping file is read here), refusing a forced ``format``
    beside it: a mapping *is* the format, and the forced one would be silently ignored.

    Raises:
        ConfigError: both are given. TraceFormatError: the mapping file cannot be read.
    """
    if format and mapping is not None:
        raise ConfigError(f"give either an input format ({format!r}) or a mapping, not both: "
                          "a mapping describes its own format")
    return MappingAdapter.from_file(mapping) if isinstance(mapping, (str, os.PathLike)) else mapping


__all__ = ["MisfitTally", "mapping_for", "misfits"]
