"""Reports of batches that stream their results: per-run sections spooled, one summary row per run kept.

A batch report used to need every run's result until the end (the summary table comes first): with
the trajectories and validation logs, ~200 KiB per tau run. ``audit`` now renders each run's section
when its result arrives (``audit_paths``'s ``on_result``, in completion order under ``--jobs``) into a
spooled temporary file and keeps only a summary row (Markdown: a :class:`RunRow`; HTML: the run's
summary dict, its section being the run's detail JSON); the document is put together in index order
at the end, byte for byte what rendering the whole list gives (the renderers use this same path).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from trajaudit.engine.run.pipeline import AuditResult

#: Stands for the run's position in the report inside a spooled section, for a renderer whose sections
#: name their position (a position is known only once every run has arrived): the spool replaces it on
#: the way out. Such a renderer must make sure its sections cannot otherwise contain it. The shipped
#: renderers do not use it (the HTML report's detail blocks get their position from the template;
#: Markdown sections have none).
RUN_TOKEN = "<RUN>"


@dataclass(frozen=True, slots=True)
class RunRow:
    """What a report's summary needs of one run.

    Attributes:
        id: the trajectory id.
        critical_step / category / agent / confidence / basis: the diagnosis' fields (``basis``:
            finding, weak, fallback, or ``None`` when the strategy does not say).
        file: the run's source file ("" when it came from memory).
        preview: an 80-character preview of the critical step ("" without one).
        degraded: the run's rule evaluation ran out of time (``metadata.degraded``): the diagnosis rests
            on partial evidence.
    """

    id: str
    critical_step: int | None
    category: str
    agent: str | None
    confidence: float
    file: str
    preview: str
    basis: str | None = None
    degraded: bool = False

    @classmethod
    def of(cls, r: AuditResult) -> RunRow:
        """The row of an audited run."""
        d, t = r.diagnosis, r.trajectory
        prev = t.steps[d.critical_step].preview(80) if d.critical_step is not None else ""
        return cls(t.id, d.critical_step, d.category, d.agent, d.confidence, t.source.file or "", prev, d.basis,
                   bool(d.metadata.get("degraded")))


class SectionSpool:
    """Rendered per-run sections, by run index, in a spooled temporary file (memory up to 8 MiB, then
    disk), and one summary row per run. Sections are read back in index order by
    :meth:`sections`, with ``position_token`` (when given) replaced by the run's 0-based position
    among the runs — only for renderers whose output cannot contain the token otherwise (HTML:
    :data:`RUN_TOKEN`). Text round-trips exactly (lone surrogates included). Not thread-safe;
    ``audit`` adds from the thread that collects results.

    Args:
        position_token: the placeholder sections use for their run's position, or ``None``.
    """

    def __init__(self, position_token: str | None = None) -> None:
        self._token = position_token
        self._file = tempfile.SpooledTemporaryFile(max_size=8 << 20)
        self._at: dict[int, tuple[int, int]] = {}
        self._rows: dict[int, Any] = {}

    def put(self, index: int, row: Any, section: str) -> None:
        """Keep run ``index``'s summary row and rendered section (a later put of the index replaces it)."""
        data = section.encode("utf-8", "surrogatepass")
        self._file.seek(0, 2)
        self._at[index] = (self._file.tell(), len(data))
        self._file.write(data)
        self._rows[index] = row

    def rows(self) -> list[Any]:
        """The summary rows in index order (:class:`RunRow` for Markdown, the summary dicts of
        :func:`trajaudit.report.rundata.summary` for HTML)."""
        return [self._rows[i] for i in sorted(self._rows)]

    def sections(self) -> Iterator[str]:
        """The sections in index order, each with its position in place of the position token."""
        for pos, i in enumerate(sorted(self._at)):
            start, size = self._at[i]
            self._file.seek(start)
            text = self._file.read(size).decode("utf-8", "surrogatepass")
            yield text.replace(self._token, str(pos)) if self._token else text

    def close(self) -> None:
        """Drop the spooled sections (the temporary file is deleted)."""
        self._file.close()

    def __len__(self) -> int:
        return len(self._rows)
