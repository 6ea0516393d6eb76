"""Reading a trace file's bytes as text and splitting it into JSON documents (the loader's first
step): UTF-8 with a BOM or with bytes replaced (flagged), UTF-16/32 refused with an iconv hint, one JSON
document or JSONL lines parsed lazily (:func:`documents`)."""

from __future__ import annotations

import codecs
import json
import shlex
from collections.abc import Iterator
from typing import Any

from trajaudit import safe_json
from trajaudit.errors import TraceFormatError

_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32", "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32", "UTF-32"),
         (codecs.BOM_UTF16_LE, "UTF-16", "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16", "UTF-16"))


def wide_encoding(data: bytes) -> tuple[str, str] | None:
    """``(family, iconv name)`` when ``data`` looks UTF-16 or UTF-32 encoded, else ``None``.

    A byte-order mark decides; without one, NUL bytes decide: UTF-8 JSON never holds a NUL byte,
    while UTF-16/32 text puts NULs beside (mostly ASCII) JSON characters, in the high-order bytes
    of each 2- or 4-byte unit. Only the first 64 bytes are looked at.
    """
    for bom, family, name in _BOMS:  # UTF-32-LE's BOM starts with UTF-16-LE's: check UTF-32 first
        if data.startswith(bom):
            return family, name
    head = data[:64]
    if b"\x00" not in head:
        return None
    quads = max(1, len(head) // 4)
    nul4 = [sum(1 for i in range(k, len(head), 4) if head[i] == 0) / quads for k in range(4)]
    if nul4[2] >= 0.75 and nul4[3] >= 0.75:
        return "UTF-32", "UTF-32LE"
    if nul4[0] >= 0.75 and nul4[1] >= 0.75:
        return "UTF-32", "UTF-32BE"
    pairs = max(1, len(head) // 2)
    even = sum(1 for i in range(0, len(head), 2) if head[i] == 0) / pairs
    odd = sum(1 for i in range(1, len(head), 2) if head[i] == 0) / pairs
    if odd >= 0.5 > even:
        return "UTF-16", "UTF-16LE"
    if even >= 0.5 > odd:
        return "UTF-16", "UTF-16BE"
    return None


def decode(data: bytes, file: str) -> tuple[str, bool]:
    """Decode UTF-8 (BOM allowed); ``(text, lossy)`` where lossy means bytes were replaced.

    Raises:
        TraceFormatError: the file is empty, or UTF-16/32 encoded (the message gives an iconv command).
    """
    wide = wide_encoding(data)
    if wide:
        family, name = wide
        raise TraceFormatError(f"looks {family} encoded; trajaudit reads UTF-8 (convert it, e.g. iconv -f {name} "
                               f"-t UTF-8 {shlex.quote(file)} > converted.json)", file=file)
    try:
        text, lossy = data.decode("utf-8-sig"), False
    except UnicodeDecodeError:
        text, lossy = data.decode("utf-8", errors="replace"), True
    if not text or text.isspace():  # also a byte-order mark and blanks (no copy of a big text)
        raise TraceFormatError("file is empty", file=file)
    return text, lossy


def lossy_note(e: TraceFormatError) -> TraceFormatError:
    """``e`` with a note that the file is not valid UTF-8 (a likely cause of a whole-file failure)."""
    return type(e)(f"{e.message} (the file is not valid UTF-8; undecodable bytes were replaced)",
                   file=e.file, record=e.record, json_path=e.json_path, adapter=e.adapter)


def documents(text: str, file: str, jsonl: bool, *, lossy: bool = False, first_line: int = 0
              ) -> Iterator[tuple[int | None, Any, str | None]]:
    """Parse text into ``(line_or_None, doc, error)`` items, lazily for JSONL (one line parsed when
    asked for); JSONL when asked or when the JSON has extra lines (then every item has its line).
    ``first_line``: the 0-based line number of the text's first line in its file (a range of a file's
    lines), counted in the items and the messages.

    Raises:
        TraceFormatError: (when iterated) not JSON, too deeply nested, or no JSON line at all; with
            :func:`lossy_note` when ``lossy`` (the text was decoded with bytes replaced).
    """
    try:
        yield from _documents(text, file, jsonl, first_line)
    except TraceFormatError as e:
        raise (lossy_note(e) if lossy else e) from None


def _documents(text: str, file: str, jsonl: bool, first_line: int = 0) -> Iterator[tuple[int | None, Any, str | None]]:
    if not jsonl:
        try:
            doc = safe_json.loads(text)
        except safe_json.NestedTooDeep as e:
            raise TraceFormatError(str(e), file=file) from None
        except json.JSONDecodeError as e:
            if not (e.msg.startswith("Extra data") and "\n" in text.strip()):
                raise TraceFormatError(f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}", file=file) from None
        else:
            yield None, doc, None
            return
    found = False
    for n, line in enumerate(jsonl_lines(text), first_line):
        if not line.strip():
            continue
        found = True
        try:
            yield n, safe_json.loads(line), None
        except safe_json.NestedTooDeep as e:
            yield n, None, f"JSON on line {n + 1} {e}"
        except json.JSONDecodeError as e:
            yield n, None, f"invalid JSON on line {n + 1} column {e.colno}: {e.msg}"
    if not found:
        raise TraceFormatError("file has no JSON lines", file=file)


def jsonl_lines(text: str) -> list[str]:
    """The lines of a JSONL text, split at ``"\n"`` only (a trailing ``"\r"`` dropped): ``str.splitlines``
    also breaks at U+2028/U+2029 and U+0085, which JSON allows raw inside strings
    (``json.dumps(..., ensure_ascii=False)`` writes them so) — a record would be cut in two and every
    later record number shifted."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    if lines and lines[-1] == "":  # a final newline ends the last line, as for str.splitlines
        lines.pop()
    return lines
