"""Checksummed cache files on disk, and where they live: shared by the pack cache
(:mod:`trajaudit.engine.packs.cache`) and the grammar cache (:mod:`trajaudit.engine.dsl.grammar_cache`).

:func:`cache_dir` (with :func:`cache_home`) is the one place that reads the cache's environment
variables (``TRAJAUDIT_CACHE_DIR``, ``TRAJAUDIT_NO_CACHE``, ``XDG_CACHE_HOME``, the home folder): the
caches call it for their directory, the CLI's LLM answer cache calls :func:`cache_home`; nothing
deeper reads the environment. An entry file is one header line
(``MAGIC FORMAT sha256-of-body``) and the body; :func:`read_body` returns ``None`` for anything that
does not check out, :func:`write_body` writes atomically.
"""

from __future__ import annotations

import logging
import os
import stat
import tempfile
from collections.abc import Mapping
from hashlib import sha256
from pathlib import Path

log = logging.getLogger(__name__)

FORMAT = 2
MAGIC = "trajaudit-pack-cache"
#: the largest entry file read (the largest pack entries are ~400 KB, the grammar file ~100 KB): a
#: larger file — or a link to /dev/zero, which never ends — is a damaged entry
MAX_ENTRY_BYTES = 64 << 20


def cache_home(environ: Mapping[str, str] | None = None) -> Path | None:
    """trajaudit's folder of per-user caches (``$XDG_CACHE_HOME/trajaudit`` when that is absolute,
    else ``~/.cache/trajaudit``), or ``None`` when no home folder is known: ``$HOME`` set but empty
    (``expanduser`` would answer ``/``), not absolute, or a folder that does not exist (a service
    account's ``HOME=/nonexistent``) — ``~/.cache`` may be created, the home folder itself never is.

    Args:
        environ: the environment to read (default: ``os.environ`` at the time of the call).
    """
    env = os.environ if environ is None else environ
    xdg = env.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):  # the XDG spec: a relative value is ignored
        return Path(xdg) / "trajaudit"
    if env.get("HOME") == "":
        return None
    home = env["HOME"] if env.get("HOME") else os.path.expanduser("~")
    if not os.path.isabs(home):  # no home directory: no default cache (never one in the working directory)
        return None
    if not os.path.isdir(home):  # HOME=/nonexistent (a service account): the cache never creates a home
        log.debug("cache: home folder %s does not exist; running without the on-disk cache", home)
        return None
    return Path(home) / ".cache" / "trajaudit"


def cache_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """The pack cache directory (:func:`cache_home`'s ``packs``, or ``$TRAJAUDIT_CACHE_DIR``), or
    ``None`` when ``TRAJAUDIT_NO_CACHE`` is set (to anything but ``0``/empty) or no location is known.

    Args:
        environ: the environment to read (default: ``os.environ`` at the time of the call).
    """
    env = os.environ if environ is None else environ
    if env.get("TRAJAUDIT_NO_CACHE", "") not in ("", "0"):
        return None
    explicit = env.get("TRAJAUDIT_CACHE_DIR")
    if explicit:
        return Path(explicit)
    home = cache_home(env)
    return None if home is None else home / "packs"


def _read_bounded(p: Path, limit: int) -> bytes | None:
    """The bytes of the regular file ``p``, or ``None`` when it is something else (a link to
    ``/dev/zero``, a FIFO: opened without blocking, never read) or holds more than ``limit`` bytes.

    Raises:
        OSError: missing or unreadable.
    """
    fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        chunks: list[bytes] = []
        left = limit + 1  # one byte more than allowed tells a file that grew past the limit
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        return None if left <= 0 else b"".join(chunks)
    finally:
        os.close(fd)


def read_body(p: Path, limit: int = MAX_ENTRY_BYTES) -> bytes | None:
    """The body of the entry file ``p`` when its header and SHA-256 check out, else ``None`` (missing,
    unreadable, truncated or edited files alike, and anything but a regular file of at most ``limit``
    bytes, which is treated as a damaged entry; a debug log says why)."""
    try:
        raw = _read_bounded(p, limit)
    except FileNotFoundError:
        return None
    except OSError as e:
        log.debug("cache: cannot read %s: %s", p, e)
        return None
    if raw is None:
        log.debug("cache: ignoring %s (not a regular file of at most %d bytes)", p, limit)
        return None
    head, _, body = raw.partition(b"\n")
    try:
        magic, fmt, digest = head.decode("ascii").split(" ")
    except ValueError:
        magic = fmt = digest = ""
    if magic != MAGIC or fmt != str(FORMAT) or sha256(body).hexdigest() != digest:
        log.debug("cache: ignoring %s (bad header or digest)", p)
        return None
    return body


def write_body(p: Path, body: bytes) -> None:
    """Write ``body`` with its header and SHA-256 to ``p`` atomically (a temp file, then a rename).

    Raises:
        OSError: the folder cannot be created or written.
    """
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(f"{MAGIC} {FORMAT} {sha256(body).hexdigest()}\n".encode("ascii") + body)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
