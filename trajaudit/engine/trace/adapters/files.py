"""Whole-file readings the line-by-line loader cannot do: span lines joined into one document (a
trace is spread over many export batches, one per line), and Inspect AI's ``.eval`` archives.

- :func:`joins_lines`: a JSON-lines file whose first document is an OTLP/JSON batch, an SDK span, a
  Phoenix span or a LangSmith run holds pieces of traces, not one run per line: the loader joins every line into
  one document (:func:`join_lines`), so a trace is one run whatever the batching; a line that is
  not JSON (a truncated batch) is reported alone and the others are read.
- :func:`is_eval_archive`/:func:`read_eval_archive`: an ``.eval`` file is a zip (``header.json``,
  ``samples/*.json``); it is read as the JSON log Inspect writes (``{"version", "eval", "samples"}``),
  by Inspect's own ``read_eval_log`` when ``inspect_ai`` is installed, else from the documented zip
  layout.
"""

from __future__ import annotations

import io
import re
import struct
import zipfile
import zlib
from collections.abc import Iterator
from typing import Any

from trajaudit import safe_json
from trajaudit.engine.trace.adapters.span_shapes import (
    as_list,
    is_langsmith_run,
    is_phoenix_span,
    is_span_document,
)
from trajaudit.engine.trace.text import decode, documents
from trajaudit.errors import TraceFormatError

ZIP_MAGIC = b"PK\x03\x04"
MAX_MEMBER_BYTES = 512 * 1024 * 1024  # one sample's JSON, uncompressed: a zip bomb is refused, not inflated
#: every member of one ``.eval`` together, uncompressed (many members each under the per-member limit)
MAX_TOTAL_BYTES = 2 * 1024 * 1024 * 1024
#: the most a member over :data:`RATIO_FLOOR_BYTES` may inflate (uncompressed / compressed size):
#: JSON logs deflate some 5-50x; a member inflating more is a zip bomb (a 1.4 MB .eval holding a
#: 500 MB sample, just under the per-member limit, took 1.7 GB of memory and 28 s to read)
MAX_RATIO = 200
RATIO_FLOOR_BYTES = 32 * 1024 * 1024  # below it, a small member may compress as well as it likes


def joins_lines(doc: Any) -> bool:
    """Whether a JSON-lines file whose first document is ``doc`` is read as one joined document."""
    return is_span_document(doc) or is_langsmith_run(doc) or is_phoenix_span(doc)


def read_text(data: bytes, file: str, whole_files: bool = True) -> tuple[str, bool, Any]:
    """A trace file's bytes → ``(text, lossy, archive)``: an Inspect ``.eval`` zip (when ``whole_files``)
    is read whole and never decoded as text (``("", False, its log document)``); any other file is
    decoded (:func:`~trajaudit.engine.trace.text.decode`: ``(text, lossy, None)``).

    Raises:
        TraceFormatError: an unreadable ``.eval`` archive, or what ``decode`` raises.
    """
    if whole_files and is_eval_archive(data, file):
        return "", False, read_eval_archive(data, file)
    text, lossy = decode(data, file)
    return text, lossy, None


def trace_documents(text: str, file: str, jsonl: bool, lossy: bool, archive: Any = None, whole_files: bool = True,
                    first_line: int = 0) -> Iterator[tuple[int | None, Any, str | None]]:
    """The loader's ``(line, doc, error)`` items (as :func:`~trajaudit.engine.trace.text.documents`),
    with the whole-file readings: an archive read by :func:`read_text` is one document; a JSON-lines
    file whose first line :func:`joins_lines` (when ``whole_files``) is one joined document (line
    ``None``: its runs are traces, not lines), followed by an error item per line that is no JSON (a
    truncated batch: reported alone, the other lines read). ``first_line``: the number of the text's
    first line (a shard of a JSON-lines file; its span lines are joined within the shard).
    """
    if archive is not None:
        yield None, archive, None
        return
    items = documents(text, file, jsonl, lossy=lossy, first_line=first_line)
    first = next(items, None)
    if first is None:
        return
    if not whole_files or first[0] is None or first[2] is not None or not joins_lines(first[1]):
        yield first
        yield from items
        return
    docs: list[Any] = [first[1]]
    bad: list[tuple[int | None, Any, str | None]] = []
    for n, d, e in items:
        if e:
            bad.append((n, None, e))
        else:
            docs.append(d)
    yield None, join_lines(docs), None
    yield from bad


def join_lines(docs: list[Any]) -> Any:
    """The documents of a span/run JSON-lines file as one: OTLP batches merged into one
    ``{"resourceSpans", "resourceLogs"}``, anything else (SDK spans, runs) as one list."""
    if all(isinstance(d, dict) and ("resourceSpans" in d or "resourceLogs" in d) for d in docs):
        return {"resourceSpans": [rs for d in docs for rs in as_list(d.get("resourceSpans"))],
                "resourceLogs": [rl for d in docs for rl in as_list(d.get("resourceLogs"))]}
    out: list[Any] = []
    for d in docs:
        out.extend(d if isinstance(d, list) else [d])
    return out


def is_eval_archive(data: bytes, file: str) -> bool:
    """An Inspect ``.eval`` log (by its suffix, or a zip's magic bytes)."""
    return file.lower().endswith(".eval") or data[:4] == ZIP_MAGIC


def _natural(name: str) -> tuple[Any, ...]:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def read_eval_archive(data: bytes, file: str) -> dict[str, Any]:
    """An Inspect ``.eval`` zip → ``{"version", "status", "eval", "samples": [...]}`` (the JSON log's shape).

    The zip's directory is checked first (a zip at all, Inspect's layout, the size limits of
    :func:`_check_sizes`: per member, per compression ratio, in total); then the log is read by ``inspect_ai.log.read_eval_log``
    when Inspect is installed, else (or when Inspect cannot read it) from the documented layout.

    Raises:
        TraceFormatError: not a zip, no ``header.json``/``samples/``, a member too large or inflating
            too much, members too large together, or a member that is not JSON.
    """
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = zf.namelist()
            samples = sorted((n for n in names if n.startswith("samples/") and n.endswith(".json")), key=_natural)
            head = next((n for n in ("header.json", "_journal/start.json") if n in names), None)
            if head is None and not samples:
                raise TraceFormatError("not an Inspect .eval log: no header.json or samples/ in the zip", file=file)
            _check_sizes(zf.infolist(), file)
            by_inspect = _inspect_read(file)
            if by_inspect is not None:
                return by_inspect
            header = safe_json.loads(_member(zf, head, file)) if head is not None else {}
            header = header if isinstance(header, dict) else {}
            return {"version": header.get("version"), "status": header.get("status"),
                    "eval": header.get("eval") if isinstance(header.get("eval"), dict) else {"task": "task"},
                    "samples": [safe_json.loads(_member(zf, n, file)) for n in samples]}
    except TraceFormatError:
        raise
    except zipfile.BadZipFile:
        raise TraceFormatError("not an Inspect .eval log: the file is not a zip archive", file=file) from None
    except (ValueError, KeyError, OSError, EOFError, RuntimeError, NotImplementedError, struct.error, zlib.error) as e:
        raise TraceFormatError(f"unreadable Inspect .eval log: {type(e).__name__}: {e}", file=file) from None


def _check_sizes(members: list[zipfile.ZipInfo], file: str) -> None:
    """Refuse, from the zip's directory (nothing inflated yet), a member over :data:`MAX_MEMBER_BYTES`,
    a member over :data:`RATIO_FLOOR_BYTES` inflating more than :data:`MAX_RATIO` times, members over
    :data:`MAX_TOTAL_BYTES` together, and members over :data:`RATIO_FLOOR_BYTES` together inflating more
    than :data:`MAX_RATIO` times (a bomb split into members each under the floor) — each message names
    the member where there is one (the error, the file).

    Raises:
        TraceFormatError: one of those limits is exceeded.
    """
    total = packed = 0
    for i in members:
        if i.file_size > MAX_MEMBER_BYTES:
            raise TraceFormatError(f"Inspect .eval member {i.filename} is larger than {MAX_MEMBER_BYTES:,} bytes "
                                   "uncompressed (refused)", file=file)
        if i.file_size > RATIO_FLOOR_BYTES and i.file_size > MAX_RATIO * max(i.compress_size, 1):
            raise TraceFormatError(f"Inspect .eval member {i.filename} inflates {i.compress_size:,} bytes to "
                                   f"{i.file_size:,} ({i.file_size // max(i.compress_size, 1):,}x; at most "
                                   f"{MAX_RATIO}x for a member over {RATIO_FLOOR_BYTES:,} bytes): refused as a "
                                   "zip bomb", file=file)
        total += i.file_size
        packed += i.compress_size
        if total > MAX_TOTAL_BYTES:
            raise TraceFormatError(f"Inspect .eval members are larger than {MAX_TOTAL_BYTES:,} bytes uncompressed "
                                   f"together (refused at member {i.filename})", file=file)
    if total > RATIO_FLOOR_BYTES and total > MAX_RATIO * max(packed, 1):  # the bomb split into members
        raise TraceFormatError(f"Inspect .eval members inflate {packed:,} bytes to {total:,} together "
                               f"({total // max(packed, 1):,}x; at most {MAX_RATIO}x over {RATIO_FLOOR_BYTES:,} "
                               "bytes): refused as a zip bomb", file=file)


#: The zip compression method Inspect writes (Zstandard), which Python's zipfile cannot read.
ZIP_ZSTANDARD = 93


def _member(zf: zipfile.ZipFile, name: str, file: str) -> bytes:
    """One member's bytes; a Zstandard member (what Inspect writes) through the ``zstandard`` package,
    bounded by the uncompressed size the zip declares (``zipfile`` bounds the other methods so).

    Raises:
        TraceFormatError: a Zstandard member and neither ``zstandard`` nor ``inspect_ai`` installed, or
            one inflating to more than its declared size.
    """
    info = zf.getinfo(name)
    if info.compress_type != ZIP_ZSTANDARD:
        try:
            return zf.read(name)
        except zipfile.BadZipFile as e:  # a bad CRC, a short member: the zip is one, its member is damaged
            raise TraceFormatError(f"Inspect .eval member {name} is damaged: {e}", file=file) from None
    try:
        import zstandard  # optional: trajaudit[inspect] (and dev)
    except ImportError:
        raise TraceFormatError(f"Inspect .eval member {name} is Zstandard-compressed: install "
                               "'trajaudit[inspect]' (or the zstandard package) to read it", file=file) from None
    # zipfile does not decompress an unknown method: read the stored bytes after the local file header
    start = info.header_offset
    zf.fp.seek(start)  # type: ignore[union-attr]
    local = zf.fp.read(30)  # type: ignore[union-attr]
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    zf.fp.seek(start + 30 + name_len + extra_len)  # type: ignore[union-attr]
    compressed = zf.fp.read(info.compress_size)  # type: ignore[union-attr]
    # bounded by the size the zip declares (what _check_sizes checked): decompress(max_output_size=)
    # is ignored for a frame that states its own content size, which a crafted member can set to anything
    limit = min(info.file_size, MAX_MEMBER_BYTES)
    try:
        with zstandard.ZstdDecompressor().stream_reader(compressed) as reader:
            out = reader.read(limit + 1)
    except zstandard.ZstdError as e:  # corrupt or truncated frame ("internal error while loading" before)
        raise TraceFormatError(f"Inspect .eval member {name} is not valid Zstandard data: {e}", file=file) from None
    if len(out) > limit:
        raise TraceFormatError(f"Inspect .eval member {name} inflates to more than the {info.file_size:,} bytes "
                               "the zip declares for it (refused)", file=file)
    return out


def _inspect_read(file: str) -> dict[str, Any] | None:
    """The log as Inspect's own reader gives it (JSON form), or ``None`` when ``inspect_ai`` is not
    installed or cannot read it (the documented layout is read instead, and names any fault)."""
    try:
        import inspect_ai.log as inspect_log  # optional: trajaudit[inspect]
    except ImportError:
        return None
    try:
        return inspect_log.read_eval_log(file).model_dump(mode="json", exclude_none=True)
    except Exception:  # noqa: BLE001 - any failure of the optional reader falls back to the documented layout
        return None
