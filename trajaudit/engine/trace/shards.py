"""Splitting a batch's input into shards for a cluster (``audit --scheduler``), and reading one shard.

A shard is what one task reads and audits: a whole ``.json`` file, a range of lines of a JSONL file
(byte offsets at line starts, found by :func:`plan_file`), or a range of rows of a Parquet file. Every
file is opened through fsspec, so a path can be a plain local path or a URL (``file://``,
``s3://``, ``gs://``, ``memory://``, … — whatever fsspec and its installed plugins read).

A shard's runs load exactly as the serial loader loads them (:func:`~trajaudit.engine.trace.loader.load_parts`):
the same sources (file name, record = the JSONL line in the whole file), the same problems. A file
read with a forced ``--input-format`` is never split (the loader reports a file that is not in that
format at all as one error, which needs every line).

Parquet inputs (docs/parquet.md) are read in one of two shapes, chosen by their columns
(:class:`ParquetMapping`): a **trace column** (default ``trace``) holding one run's JSON per row —
read like a JSONL line, the record is the row — or **one row per message** with a **run-id column**
(default ``run_id``): the rows of one run, in file order, become ``{"id": RUN_ID, "messages": [ROW,
…]}`` (each row's other non-null columns are the message's fields; a column ``NAME_json`` holding JSON
text becomes the field ``NAME`` parsed), read like any document; the record is the run's ordinal in
the file.

fsspec and pyarrow come with the optional extra ``trajaudit[dask]``; they are imported when a shard
is planned or read, never when trajaudit is imported.
"""

from __future__ import annotations

import glob
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from trajaudit import safe_json
from trajaudit.engine.trace.adapters import LoadOptions, MappingAdapter
from trajaudit.engine.trace.inputs import DEFAULT_SHARD_RUNS, PARQUET_SUFFIXES, is_url  # noqa: F401 - re-exported
from trajaudit.engine.trace.loader import (
    TRACE_SUFFIXES,
    LoadResult,
    expand_paths,
    load_document,
    load_parts,
)
from trajaudit.engine.trace.text import wide_encoding
from trajaudit.errors import ConfigError, Problem, TraceFormatError, cannot_read

#: Files that :func:`plan_file` reads to plan (others are one shard, planned without reading them).
SPLITTABLE = (".jsonl", ".ndjson", *PARQUET_SUFFIXES)


@dataclass(frozen=True)
class ParquetMapping:
    """How Parquet rows become runs (docs/parquet.md).

    Attributes:
        trace_column: the column holding one run's JSON document per row (text, binary, or a struct).
        run_column: used when ``trace_column`` is absent: the column naming each row's run; the
            file's rows are then messages, the other columns their fields.
        json_suffix: a message column ``NAME<suffix>`` holds JSON text, parsed into the field ``NAME``.
    """

    trace_column: str = "trace"
    run_column: str = "run_id"
    json_suffix: str = "_json"


@dataclass(frozen=True)
class Shard:
    """One task's share of the input.

    Attributes:
        url: what fsspec opens (a plain path or a URL).
        name: the file as sources and messages name it (the path as the serial loader names it, or the URL).
        kind: ``json`` (a whole trace file read as the loader reads it), ``jsonl`` (a line range),
            ``parquet-trace`` or ``parquet-messages`` (a row range).
        first: the first record number (JSONL line, Parquet row, or run ordinal) in the whole file.
        start, stop: byte offsets (``jsonl``) or rows (Parquet) of the range; ``stop=None``: to the end.
        expected: the runs the shard is expected to hold (a progress estimate).
        whole: the shard is the whole file.
    """

    url: str
    name: str
    kind: str = "json"
    first: int = 0
    start: int = 0
    stop: int | None = None
    expected: int = 1
    whole: bool = True

    def where(self) -> str:
        """``FILE`` or ``FILE, records A-B`` for messages."""
        if self.whole:
            return self.name
        return f"{self.name}, records from {self.first}"


def _natural(s: str) -> tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s))


def expand_inputs(paths: Iterable[str | os.PathLike[str]]) -> list[tuple[str, str]]:
    """``(url, name)`` of every input file under ``paths``, in the serial loader's order: plain paths
    as :func:`~trajaudit.engine.trace.loader.expand_paths` expands them (Parquet files included), URLs
    through fsspec (a folder: every trace or Parquet file under it; a glob; else the file itself), in
    the same natural order. A plain path's name is the loader's (``str(path)``) and its URL the absolute
    path; a URL's name is the URL.
    A missing file is listed as given (reading it reports it).

    Raises:
        ConfigError: a URL of an unknown protocol, or one whose fsspec plugin (s3fs, gcsfs …) is missing.
    """
    suffixes = TRACE_SUFFIXES + PARQUET_SUFFIXES
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for raw in paths:
        if not is_url(raw):
            for p in expand_paths([raw], suffixes=suffixes):
                key = str(p.resolve())
                if key not in seen:  # opened by its absolute path (a worker's folder may differ), named as given
                    seen.add(key)
                    out.append((os.path.abspath(p), str(p)))
            continue
        import fsspec.core

        try:
            fs, root = fsspec.core.url_to_fs(str(raw))
        except (ImportError, ValueError) as e:  # an unknown protocol, or its fsspec plugin is not installed
            raise ConfigError(f"{raw}: cannot open this URL: {e}") from None
        if fs.isdir(root):  # the files under it, named with the folder's URL as given
            found = sorted((p for p in fs.find(root) if p.lower().endswith(suffixes)), key=_natural)
            urls = [str(raw).rstrip("/") + "/" + p[len(root.rstrip("/")):].lstrip("/") for p in found]
        elif glob.has_magic(root) and not fs.exists(root):
            urls = [fs.unstrip_protocol(p) for p in sorted((p for p in fs.glob(root) if fs.isfile(p)), key=_natural)]
        else:
            urls = [str(raw)]
        for url in urls:
            if url not in seen:
                seen.add(url)
                out.append((url, url))
    return out


def _open(url: str, mode: str = "rb") -> Any:
    import fsspec

    return fsspec.open(url, mode)


def _read_error(e: OSError, name: str) -> TraceFormatError:
    return cannot_read(e, name)


def plan_file(url: str, name: str, *, shard_runs: int = DEFAULT_SHARD_RUNS, split: bool = True,
              parquet: ParquetMapping | None = None) -> list[Shard]:
    """The shards of one input file: a JSONL file of more than ``shard_runs`` lines is cut into line
    ranges (the file is read once, as a stream, to find line starts), a Parquet file into row ranges
    (only its footer and, for message rows, its run-id column are read); any other file, or any file
    when ``split`` is false (a forced input format), is one shard. A file that cannot be planned (it
    cannot be opened, is not Parquet …) is one whole shard: reading it reports the error.

    Runs on a worker when called by :mod:`trajaudit.engine.run.cluster` (files are read where they are audited).
    """
    low = name.lower()
    try:
        if low.endswith(PARQUET_SUFFIXES):
            return _plan_parquet(url, name, parquet or ParquetMapping(), shard_runs)
        if split and low.endswith((".jsonl", ".ndjson")):
            return _plan_jsonl(url, name, shard_runs)
    except (OSError, ValueError, TraceFormatError):
        pass
    except Exception:  # noqa: BLE001 - pyarrow's own errors (ArrowInvalid …): the reader reports them
        pass
    kind = "parquet-trace" if low.endswith(PARQUET_SUFFIXES) else "json"
    return [Shard(url, name, kind=kind)]


def _plan_jsonl(url: str, name: str, shard_runs: int, block: int = 1 << 24) -> list[Shard]:
    """Line ranges of ``shard_runs`` lines (blank lines count: records are line numbers)."""
    starts = [0]  # byte offsets of the shards' first lines
    line = 0
    offset = 0
    last = b"\n"
    with _open(url) as f:
        while True:
            chunk = f.read(block)
            if not chunk:
                break
            last = chunk[-1:]
            if offset == 0 and wide_encoding(chunk):
                return [Shard(url, name)]  # UTF-16/32: the loader refuses the whole file
            i = chunk.find(b"\n")
            while i >= 0:
                line += 1
                if line % shard_runs == 0:
                    starts.append(offset + i + 1)
                i = chunk.find(b"\n", i + 1)
            offset += len(chunk)
    if starts[-1] >= offset:  # the file ends with the newline that closed the last shard
        starts.pop()
    if len(starts) <= 1:
        return [Shard(url, name, kind="json", expected=max(1, line))]
    ends: list[int | None] = [*starts[1:], None]
    lines_total = line + (last != b"\n")  # a last line without its newline counts too
    return [Shard(url, name, kind="jsonl", first=k * shard_runs, start=s, stop=e,
                  expected=min(shard_runs, lines_total - k * shard_runs), whole=False)
            for k, (s, e) in enumerate(zip(starts, ends, strict=True))]


def _plan_parquet(url: str, name: str, mapping: ParquetMapping, shard_runs: int) -> list[Shard]:
    import pyarrow.parquet as pq

    with _open(url) as f:
        pf = pq.ParquetFile(f)
        columns = pf.schema_arrow.names
        rows = pf.metadata.num_rows
        if mapping.trace_column in columns:
            bounds = list(range(0, rows, shard_runs)) or [0]
            return [Shard(url, name, kind="parquet-trace", first=a, start=a, stop=min(rows, a + shard_runs),
                          expected=max(0, min(rows, a + shard_runs) - a), whole=len(bounds) == 1)
                    for a in bounds]
        if mapping.run_column not in columns:
            return [Shard(url, name, kind="parquet-trace")]  # reading it says which columns are missing
        ids = pf.read(columns=[mapping.run_column]).column(0).to_pylist()
    run_starts = [i for i in range(len(ids)) if i == 0 or ids[i] != ids[i - 1]]
    if len(set(ids)) != len(run_starts):  # a run's rows are not together: read the file as one shard
        return [Shard(url, name, kind="parquet-messages", stop=rows, expected=len(set(ids)))]
    cuts = run_starts[::shard_runs]
    if len(cuts) <= 1:
        return [Shard(url, name, kind="parquet-messages", stop=rows, expected=len(run_starts))]
    ends = [*cuts[1:], rows]
    return [Shard(url, name, kind="parquet-messages", first=k * shard_runs, start=a, stop=b,
                  expected=min(shard_runs, len(run_starts) - k * shard_runs), whole=False)
            for k, (a, b) in enumerate(zip(cuts, ends, strict=True))]


def read_shard(shard: Shard, *, format: str | None = None, mapping: MappingAdapter | None = None,
               options: LoadOptions | None = None, parquet: ParquetMapping | None = None) -> LoadResult:
    """Load the runs of one shard, as the serial loader loads them; a file that cannot be read at all
    is a result with one problem (as :func:`~trajaudit.engine.trace.loader.iter_load` reports it).

    Args:
        format, mapping, options: as for :func:`~trajaudit.engine.trace.loader.load_path` (``mapping`` an adapter).
        parquet: how Parquet rows become runs (default :class:`ParquetMapping`).
    """
    try:
        if shard.kind.startswith("parquet"):
            return _read_parquet(shard, format, mapping, options, parquet or ParquetMapping())
        return _read_text(shard, format, mapping, options)
    except TraceFormatError as e:
        return LoadResult(problems=[Problem(shard.name, e.record, str(e))])


def _read_text(shard: Shard, format: str | None, mapping: MappingAdapter | None,
               options: LoadOptions | None) -> LoadResult:
    try:
        with _open(shard.url) as f:
            if shard.start:
                f.seek(shard.start)
            data = f.read() if shard.stop is None else f.read(shard.stop - shard.start)
    except OSError as e:
        raise _read_error(e, shard.name) from None
    if not shard.whole and not data.strip():
        return LoadResult()  # a range of blank lines: nothing to read (the file as a whole is not empty)
    out = LoadResult()
    for part in load_parts(shard.name, format, mapping, options, data=data, first_line=shard.first):
        out.extend(part)
    return out


def _read_parquet(shard: Shard, format: str | None, mapping: MappingAdapter | None, options: LoadOptions | None,
                  pm: ParquetMapping) -> LoadResult:
    try:
        rows = _parquet_rows(shard)
    except OSError as e:
        raise _read_error(e, shard.name) from None
    except TraceFormatError:
        raise
    except Exception as e:  # noqa: BLE001 - pyarrow's errors (not a Parquet file, a bad footer …)
        raise TraceFormatError(f"cannot read as Parquet: {e}", file=shard.name) from None
    out = LoadResult()
    if not rows:
        return out
    if pm.trace_column in rows[0]:
        docs: Iterator[tuple[int, Any, str | None]] = _trace_docs(rows, pm.trace_column, shard.first)
    elif pm.run_column in rows[0]:
        docs = _message_docs(rows, pm, shard.first)
    else:
        raise TraceFormatError(f"Parquet file has neither a {pm.trace_column!r} column (one run's JSON per row) "
                               f"nor a {pm.run_column!r} column (one message per row); its columns: "
                               f"{', '.join(rows[0])} (docs/parquet.md)", file=shard.name)
    for rec, doc, err in docs:
        if err:
            out.problems.append(Problem(shard.name, rec, str(TraceFormatError(err, file=shard.name, record=rec))))
            continue
        try:
            out.extend(load_document(doc, file=shard.name, format=format, mapping=mapping, options=options, line=rec))
        except TraceFormatError as e:
            out.problems.append(Problem(shard.name, rec, str(e.located(file=shard.name, record=rec))))
    return out


def _parquet_rows(shard: Shard) -> list[dict[str, Any]]:
    """The shard's rows as dicts (only the row groups that overlap its range are read)."""
    import pyarrow.parquet as pq

    with _open(shard.url) as f:
        pf = pq.ParquetFile(f)
        stop = pf.metadata.num_rows if shard.stop is None else shard.stop
        groups, first_row, row = [], None, 0
        for g in range(pf.metadata.num_row_groups):
            n = pf.metadata.row_group(g).num_rows
            if row < stop and row + n > shard.start:
                groups.append(g)
                first_row = row if first_row is None else first_row
            row += n
        if not groups:
            return []
        table = pf.read_row_groups(groups)
    lo = shard.start - (first_row or 0)
    return table.slice(lo, stop - shard.start).to_pylist()


def _trace_docs(rows: list[dict[str, Any]], column: str, first: int) -> Iterator[tuple[int, Any, str | None]]:
    for k, row in enumerate(rows):
        rec, cell = first + k, row.get(column)
        if cell is None:
            yield rec, None, f"row {rec} has no {column!r} value"
        elif isinstance(cell, (dict, list)):
            yield rec, cell, None
        else:
            text = cell.decode("utf-8", errors="replace") if isinstance(cell, bytes) else str(cell)
            try:
                yield rec, safe_json.loads(text), None
            except safe_json.NestedTooDeep as e:
                yield rec, None, f"the {column!r} JSON of row {rec} {e}"
            except json.JSONDecodeError as e:
                yield rec, None, f"invalid JSON in column {column!r} of row {rec}: {e.msg} (column {e.colno})"


def _message_docs(rows: list[dict[str, Any]], pm: ParquetMapping, first: int
                  ) -> Iterator[tuple[int, Any, str | None]]:
    runs: dict[Any, list[dict[str, Any]]] = {}
    for row in rows:
        runs.setdefault(row[pm.run_column], []).append(row)
    for k, (rid, msgs) in enumerate(runs.items()):
        messages, err = [], None
        for row in msgs:
            m: dict[str, Any] = {}
            for col, v in row.items():
                if col == pm.run_column or v is None:
                    continue
                if col.endswith(pm.json_suffix) and isinstance(v, str):
                    try:
                        v = safe_json.loads(v)
                    except (json.JSONDecodeError, safe_json.NestedTooDeep) as e:
                        err = f"run {rid!r}: invalid JSON in column {col!r}: {e}"
                        break
                    col = col[: -len(pm.json_suffix)]
                m[col] = v
            messages.append(m)
        yield first + k, (None if err else {"id": str(rid), "messages": messages}), err


__all__ = ["DEFAULT_SHARD_RUNS", "PARQUET_SUFFIXES", "SPLITTABLE", "ParquetMapping", "Shard", "expand_inputs", "is_url",
           "plan_file", "read_shard"]
