"""Reading input files only when they are regular files.

A FIFO given as a trace path made ``audit`` and ``show`` block forever (``open`` waits for a writer);
a FIFO, socket, device or dangling ``*.json`` link inside an audited folder was dropped without a
word. Every input is therefore read through :func:`read_bytes`/:func:`read_text`, which look at the
file's kind first (``stat``, never ``open``) and refuse anything but a regular file with
:class:`NotRegularFile` — an ``OSError``, so each caller's "cannot read" path reports it with the file
name — and then open without blocking and check the opened file again (a file swapped for a FIFO
between the two is refused too).
"""

from __future__ import annotations

import errno
import glob
import os
import re
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

#: The suffixes of trace files a folder is searched for.
TRACE_SUFFIXES = (".json", ".jsonl", ".ndjson", ".eval")

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder"))


class NotRegularFile(OSError):
    """An input path that is not a regular file (``strerror`` says what it is); it was not opened.

    Attributes:
        kind: ``"a FIFO (named pipe)"``, ``"a socket"``, ``"a character device"``, ``"a block device"``,
            ``"a folder"``, ``"a dangling symbolic link"``.
    """

    def __init__(self, path: str | os.PathLike[str], kind: str) -> None:
        self.kind = kind
        super().__init__(errno.EINVAL, f"{kind}, not a regular file (not opened)", str(path))


def kind_of(mode: int) -> str | None:
    """What a ``st_mode`` is, in words, or ``None`` for a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def file_kind(path: str | os.PathLike[str]) -> str | None:
    """``None`` when ``path`` is a regular file (through links), else what it is in words; a missing
    path is ``"missing"``. Never opens the file."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "a dangling symbolic link" if os.path.islink(path) else "missing"
    except OSError:
        return "unreadable"
    return kind_of(st.st_mode)


def check_regular(path: str | os.PathLike[str]) -> None:
    """Refuse a path that exists but is not a regular file (a missing one is left to the reader).

    Raises:
        NotRegularFile: a FIFO, socket, device, folder or dangling link.
    """
    kind = file_kind(path)
    if kind is not None and kind not in ("missing", "unreadable"):
        raise NotRegularFile(path, kind)


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a regular file.

    Raises:
        NotRegularFile: not a regular file (never opened, or opened without blocking and closed).
        OSError: missing or unreadable.
    """
    check_regular(path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        kind = kind_of(os.fstat(fd).st_mode)
        if kind is not None:
            raise NotRegularFile(path, kind)
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike[str], encoding: str = "utf-8", errors: str = "strict") -> str:
    """:func:`read_bytes` decoded (``Path.read_text`` for regular files only).

    Raises:
        NotRegularFile, OSError: as :func:`read_bytes`. UnicodeDecodeError: not in ``encoding``.
    """
    return read_bytes(path).decode(encoding, errors)


def is_candidate(p: Path) -> bool:
    """Whether a folder entry is reported as an input: anything but a folder (a regular file, and also
    a FIFO, socket, device or dangling link, which the loader then reports instead of dropping)."""
    try:
        return not p.is_dir()
    except OSError:
        return True


#: documentation beside the runs (a dataset's README.md, NOTICE.md): never a trace, not worth a note
_DOC_SUFFIXES = (".md", ".markdown", ".rst")


def unread_files(paths: Iterable[str | os.PathLike[str]], suffixes: tuple[str, ...] = TRACE_SUFFIXES) -> list[Path]:
    """The files under the folders among ``paths`` that :func:`expand_paths` leaves out: not ending in
    ``suffixes`` (``runs/a.json.gz``, ``runs/b.log``), sorted; hidden ones (``.DS_Store``, a file
    under a ``.git`` folder) and documentation (``.md``, ``.rst``: the bundled examples' NOTICE.md
    made the README's first command print a note) are not listed. Files and globs named directly are
    not looked at."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if not p.is_dir():
            continue
        for q in p.rglob("*"):
            rel = q.relative_to(p).parts
            if (q.suffix.lower() not in suffixes and q.suffix.lower() not in _DOC_SUFFIXES
                    and not any(part.startswith(".") for part in rel) and is_candidate(q)):
                out.append(q)
    return sorted(out)


def expand_paths(paths: Iterable[str | os.PathLike[str]], suffixes: tuple[str, ...] = TRACE_SUFFIXES) -> Iterator[Path]:
    """Expand files, folders (recursively: files ending in ``suffixes``, default ``*.json``, ``*.jsonl``,
    ``*.ndjson``) and glob patterns.

    Yields paths in a stable (sorted, natural-number-aware) order. Non-existent paths are yielded
    as given so that the caller reports them.
    """

    def natural(p: Path) -> tuple:
        return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(p)))

    seen: set[Path] = set()

    def once(found: Iterable[Path]) -> Iterator[Path]:
        for q in found:  # the same file reached twice (named twice, or inside a named folder) loads once
            # (a dangling link is itself: two links to the same missing file are two paths to report)
            key = q.resolve() if q.exists() else q.absolute()
            if key not in seen:
                seen.add(key)
                yield q

    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            yield from once(sorted((q for q in p.rglob("*") if q.suffix.lower() in suffixes
                                    and is_candidate(q)),
                                   key=natural))
        elif any(ch in str(raw) for ch in "*?[") and not p.exists():
            yield from once(sorted((Path(q) for q in glob.glob(str(raw), recursive=True)
                                    if is_candidate(Path(q))),
                                   key=natural))
        else:
            yield from once([p])
