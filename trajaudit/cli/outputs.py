"""Output files that never destroy inputs or each other, and survive a full disk or a kill.

- :func:`refuse_clobbering`: before any output opens, every output path is compared with every input
  file — folders and globs expanded as the loader expands them, so a trace found inside an audited
  folder counts — and with the other outputs (``-o X.html --report X.html`` wrote the JSONL and then
  replaced it with the HTML).
- :func:`atomic_write`: an output is written to a temporary file in the target's folder, flushed and
  fsynced, then renamed over the target: on a full disk (or a file-size limit, or an exception while
  rendering) the old file survives intact and no torn file is left (``open(path, "wb")`` truncated the
  old diagnoses first, then died with a torn last line).
- :class:`OutputSet`: a command's several outputs (``audit -o --report``, ``eval -o --report
  --save-pred``) are all staged as temporary files first and renamed together at the end, with SIGINT
  and SIGTERM held during the renames: all new, or all as they were (``audit`` replaced ``-o``, then
  rendered the report: a Ctrl-C in between left new diagnoses beside the old report).
- :class:`JsonlAppender` and :func:`read_resumable`: ``audit --resume`` appends one complete line per
  finished run to ``-o`` (flushed as it is written), so a process killed mid-batch leaves a valid
  prefix of complete lines; resuming cuts a torn last line away and skips the runs already there. A
  file that holds anything but diagnoses is refused (:meth:`ResumeJournal.for_spec`), never appended to
  nor cut.
- :func:`select_inputs`: the files a folder or glob expands to, without trajaudit's own diagnoses files
  (``audit runs/`` wrote ``runs/diagnoses.jsonl``; the next ``audit runs/`` or ``check runs/`` read it
  as a trace).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import json
import logging
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from trajaudit.cli import signals
from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.run.pipeline import AuditSpec
from trajaudit.engine.trace.inputs import is_url
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.engine.trace.loader import expand_paths
from trajaudit.errors import TrajauditError
from trajaudit.regular_files import file_kind

_log = logging.getLogger(__name__)


def _key(path: str) -> tuple[str, Any]:
    """What identifies a file: its (device, inode) when it exists (links and hard links included),
    else its resolved path. The path is also tried as :func:`atomic_write` resolves it
    (``os.path.realpath``): ``13.json/`` and ``sub/../13.json`` (``sub`` missing) are no file to
    ``os.stat``, but their real path is ``13.json``, the file that would be replaced."""
    for p in (path, os.path.realpath(path)):
        try:
            st = os.stat(p)
            return "inode", (st.st_dev, st.st_ino)
        except OSError:
            continue
    return "path", os.path.realpath(os.path.abspath(path))


def _missing_folder(folder: str) -> str:
    """The first leading part of ``folder`` (as the system walks it, ``..`` included) that is no folder."""
    parts = folder.split(os.sep)
    for n in range(1, len(parts) + 1):
        head = os.sep.join(parts[:n]) or os.sep
        if not os.path.isdir(head):
            return head
    return folder


def output_problem(path: str | os.PathLike[str]) -> str | None:
    """Why the system would not open ``path`` as a file to write, in words (``None``: it would, as far
    as the path goes). A trailing ``/`` names a folder (``13.json/``); a ``..`` after a folder that does
    not exist cannot be followed (``sub/../x.json``); the folder may be missing or a file.
    ``os.path.abspath``/``realpath`` tidy both away, so a check on the tidied path passed and the write
    (through the tidied path) replaced ``13.json`` — an input, once.

    The text follows ``'PATH': `` (e.g. ``the folder '/a/b' does not exist; create it first``).
    """
    p = os.fspath(path)
    if os.path.isdir(p):
        return "is a folder, not a file"
    if p.endswith(("/", os.sep)) or os.path.basename(p) in (".", ".."):
        return "ends with '/', which names a folder, not a file: drop the trailing '/'"
    folder = os.path.dirname(p) or "."
    if os.path.isdir(folder):
        return None
    if os.path.exists(folder):
        return f"the folder {os.path.abspath(folder)!r} is a file, not a folder"
    missing = _missing_folder(folder)
    if os.path.isdir(os.path.abspath(folder)):  # only '..' after a missing folder makes it unreachable
        return (f"the folder {folder!r} cannot be followed: {missing!r} does not exist, and the system "
                "resolves '..' after it, not before; create it or drop the '..'")
    return f"the folder {os.path.abspath(folder)!r} does not exist; create it first"


def input_files(inputs: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Every input file under ``inputs``: files as given, folders and globs expanded as the loader
    expands them (:func:`~trajaudit.engine.loader.expand_paths`)."""
    return [str(p) for p in expand_paths([str(x) for x in inputs if x])]


#: How a diagnosis line written by trajaudit begins (:meth:`~trajaudit.engine.diagnosis.Diagnosis.to_json`).
_DIAGNOSIS_START = b'{"schema_version": '
_DIAGNOSIS_LINE = re.compile(rb'\A(?:\xef\xbb\xbf)?\s*\{"schema_version": \d+, "trajectory_id": ')
#: How ``check --format json`` / ``check -o`` output begins: a list of validation logs (indented).
_CHECK_LOGS = re.compile(rb'\A(?:\xef\xbb\xbf)?\s*\[\s*\{\s*"schema_version": \d+,\s*"trajectory_id": [^\n]*\n'
                         rb'\s*"summary": \{')
#: How trajaudit's SARIF (``--format sarif``, indented) and JUnit XML (``--format junit``) begin: a
#: SARIF log whose first run's tool is trajaudit; a ``testsuites`` element named ``trajaudit`` (a
#: ``check runs/ --format sarif -o runs/trajaudit.sarif.json`` — the name the SARIF spec suggests —
#: was read back by the next ``check runs/`` as a trace and failed the gate)
_SARIF_LOG = re.compile(rb'\A(?:\xef\xbb\xbf)?\s*\{\s*"\$schema": "[^"\n]*sarif[^"\n]*",\s*"version": "[^"\n]*",\s*'
                        rb'"runs": \[\s*\{\s*"tool": \{\s*"driver": \{\s*"name": "trajaudit"')
_JUNIT_XML = re.compile(rb'\A(?:\xef\xbb\xbf)?\s*(?:<\?xml[^>]*\?>\s*)?<testsuites name="trajaudit"')


def is_diagnosis(d: Any) -> bool:
    """Whether a parsed JSONL line is a diagnosis (``Diagnosis.to_dict()``'s form: a JSON object with
    ``trajectory_id``, ``critical_step``, ``category`` and ``strategy``)."""
    return isinstance(d, dict) and d.get("trajectory_id") is not None and all(
        k in d for k in ("critical_step", "category", "strategy"))


def _head(path: str | os.PathLike[str], size: int = 4096) -> bytes:
    """The first ``size`` bytes of a regular file (``b""`` for anything else or an unreadable file)."""
    if file_kind(path) is not None:
        return b""
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except OSError:
        return b""


def is_diagnoses_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a regular file whose first line begins as trajaudit writes a diagnosis
    (``{"schema_version": N, "trajectory_id": ``: ``audit -o``, ``eval --save-pred``). Reads 256 bytes;
    never opens anything but a regular file."""
    return _DIAGNOSIS_LINE.match(_head(path, 256)) is not None


def is_own_output(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` holds trajaudit output rather than traces: diagnoses (:func:`is_diagnoses_file`),
    ``check``'s JSON list of validation logs (``check -o``, ``check --format json``), or the SARIF and
    JUnit XML that ``audit``/``check --format sarif|junit`` write."""
    head = _head(path)
    return any(p.match(head) is not None for p in (_DIAGNOSIS_LINE, _CHECK_LOGS, _SARIF_LOG, _JUNIT_XML))


def _expands(raw: str) -> bool:
    """Whether an input path is a folder or a glob (expanded), not a file named as such."""
    p = os.fspath(raw)
    return os.path.isdir(p) or (any(ch in p for ch in "*?[") and not os.path.exists(p))


def select_inputs(paths: Iterable[str]) -> tuple[list[str], list[str]]:
    """The input files of ``paths`` (folders and globs expanded as the loader expands them, in its
    order), and apart those of them left out: files found by expanding a folder or glob that are
    trajaudit output (:func:`is_own_output`: diagnoses, ``check`` results; ``audit runs/`` writes ``runs/diagnoses.jsonl`` by
    default, which the next ``audit runs/``, ``--resume`` or ``check runs/`` read as a trace). A file named
    as such is kept (the output guards refuse writing over it). URLs are kept as given.

    Returns:
        ``(files, left_out)``.
    """
    files: list[str] = []
    left_out: list[str] = []
    for raw in paths:
        if is_url(raw):
            files.append(raw)
            continue
        expanded = _expands(raw)
        for f in input_files([raw]):
            (left_out if expanded and is_own_output(f) else files).append(f)
    return files, left_out


def without_own_outputs(paths: tuple[str, ...], say: Callable[[str], None]) -> tuple[str, ...]:
    """``paths`` as given when :func:`select_inputs` leaves nothing out, else the files it keeps, after
    ``say`` (a note line on stderr) named the files left out."""
    files, left_out = select_inputs(paths)
    if not left_out:
        return paths
    say(left_out_note(left_out))
    return tuple(files)


def left_out_note(left_out: list[str]) -> str:
    """The note naming the files :func:`select_inputs` left out (the first five, then a count)."""
    named = ", ".join(left_out[:5]) + (f" and {len(left_out) - 5} more" if len(left_out) > 5 else "")
    return (f"note: left out {len(left_out)} file(s) under the inputs that hold trajaudit output (diagnoses, check "
            f"results, SARIF, JUnit), not traces: {named}")


def refuse_clobbering(outputs: Mapping[str, str | os.PathLike[str] | None],
                      inputs: Iterable[str | os.PathLike[str]] = (), roles: Mapping[str, str] | None = None) -> None:
    """Refuse, before anything is written, an output that is an input file or another output.

    Args:
        outputs: ``{option: path}`` of the command's outputs (``None`` and ``"-"`` = not a file).
        inputs: input paths: files, folders, globs (expanded), rule packs, tools, mappings, gold files.
        roles: what an input (as given in ``inputs``) is, for the message: ``{"tools.json": "the --tools
            file"}``; an input not named is a trace ("would overwrite the trace").

    Raises:
        TrajauditError: naming the option(s) and the file.
    """
    given = {opt: str(p) for opt, p in outputs.items() if p and str(p) != "-"}
    if not given:
        return
    seen: dict[tuple[str, Any], str] = {}
    for opt, path in given.items():
        k = _key(path)
        if k in seen:
            raise TrajauditError(f"{seen[k]} and {opt} name the same file {path!r}: the second would replace the "
                                 "first; choose two different paths")
        seen[k] = opt
    wanted = {_key(p)[1]: (opt, p) for opt, p in given.items() if _key(p)[0] == "inode"}
    if not wanted:
        return  # no output exists yet: none can be an input
    for item in inputs:
        what = (roles or {}).get(str(item))
        for f in input_files([item]):
            k = _key(f)
            if k[0] == "inode" and k[1] in wanted:
                opt, path = wanted[k[1]]
                if what is None and is_diagnoses_file(f):
                    raise TrajauditError(f"{opt} {path!r} is the input file {f!r} (trajaudit diagnoses, read as a "
                                         "trace): writing it would overwrite it; choose another output path")
                if what is None:
                    raise TrajauditError(f"{opt} {path!r} is the input file {f!r}: writing it would overwrite the "
                                         "trace; choose another output path")
                raise TrajauditError(f"{opt} {path!r} is {what} {f!r}: writing it would overwrite it; choose another "
                                     "output path")


def _mode_for(target: str) -> int:
    """The permission bits a replaced file keeps, or a new file gets (0666 minus the umask)."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def _fsync_dir(folder: str) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def is_special_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` exists (links followed, as ``open`` follows them) and is neither a regular file
    nor a folder: a device, a FIFO, a pipe behind ``/dev/stdout`` or ``/proc/self/fd/1``."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def atomic_write(path: str | os.PathLike[str], parts: Iterable[str]) -> None:
    """Write the concatenation of ``parts`` (UTF-8; a lone surrogate as its ``\\udXXX`` escape) to
    ``path`` atomically: a temporary file in the same folder, flushed and fsynced, renamed over the
    target (a symbolic link's target is replaced, the link kept) — :class:`OutputSet` with one output.
    On any error (a ``KeyboardInterrupt`` or SIGTERM too) the temporary file is removed and the old
    file is untouched. A target that exists and is not a regular file (``/dev/null``, a FIFO the user
    named, ``/dev/stdout`` or ``/proc/self/fd/1`` when stdout is a pipe or a terminal) is opened as
    given and written through directly (no temporary file: the link to a pipe resolves to
    ``pipe:[…]``, no path to write beside).

    A path the system would not open as a file (:func:`output_problem`: ``x.json/``, ``sub/../x.json``
    with ``sub`` missing) is refused, not tidied into another file by ``realpath``.

    Raises:
        OSError: the file cannot be written (disk full, file-size limit, permissions), or the path is
            refused (its ``strerror`` says why).
    """
    with OutputSet() as outs:
        outs.write(path, parts)
        outs.commit()


def _encoded(parts: Iterable[str]) -> Callable[[BinaryIO], None]:
    def fill(f: BinaryIO) -> None:
        for part in parts:
            f.write(part.encode("utf-8", "backslashreplace"))
    return fill


#: a temporary output file: ``.NAME.PID.XXXXXXXX.tmp`` beside ``NAME`` (PID: the writing process)
_TEMPORARY = re.compile(r"\.(?P<name>.+)\.(?P<pid>[0-9]+)\.[a-z0-9_]{8}\.tmp")
#: a temporary output file of an older trajaudit, without the writer's process id
_OLD_TEMPORARY = re.compile(r"\.(?P<name>.+)\.[a-z0-9_]{8}\.tmp")


def _running(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (on Windows, where ``os.kill(pid, 0)`` would end
    it, always assumed)."""
    if os.name == "nt" or pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def stale_temporaries(target: str) -> tuple[list[str], list[str]]:
    """The temporary files beside ``target`` (a real path) that a killed writer left (SIGKILL, a power
    cut: no process can clean up after those): ``(removable, unknown)`` — names of the form
    ``.NAME.PID.XXXXXXXX.tmp`` whose process no longer runs on this machine, and ``.NAME.XXXXXXXX.tmp``
    (written by an older trajaudit, without the process id: whether a writer still runs is not known)."""
    folder, name = os.path.dirname(target) or ".", os.path.basename(target)
    removable, unknown = [], []
    try:
        entries = [e.name for e in os.scandir(folder) if e.name.startswith(f".{name}.") and e.name.endswith(".tmp")]
    except OSError:
        return [], []
    for entry in sorted(entries):
        m = _TEMPORARY.fullmatch(entry)
        if m and m["name"] == name:
            if not _running(int(m["pid"])):
                removable.append(os.path.join(folder, entry))
            continue
        m = _OLD_TEMPORARY.fullmatch(entry)
        if m and m["name"] == name:
            unknown.append(os.path.join(folder, entry))
    return removable, unknown


def _clear_stale(target: str, given: str) -> None:
    """Remove the temporary files a killed writer of ``target`` left (:func:`stale_temporaries`), saying
    so (a warning), and warn of those that may still be in use."""
    removable, unknown = stale_temporaries(target)
    gone = []
    for path in removable:
        with contextlib.suppress(OSError):
            os.unlink(path)
            gone.append(os.path.basename(path))
    if gone:
        _log.warning("removed %d temporary file(s) beside %s left by a trajaudit process that no longer runs "
                     "(killed while writing): %s", len(gone), given, ", ".join(gone))
    if unknown:
        _log.warning("%d temporary file(s) beside %s may be left by a killed trajaudit (an older version): %s; "
                     "remove them when no trajaudit is writing %s", len(unknown), given,
                     ", ".join(os.path.basename(p) for p in unknown), given)


class OutputSet:
    """A command's output files, replaced together: each is written to a temporary file in its
    target's folder (flushed, fsynced) by :meth:`write`, and :meth:`commit` renames them all over their
    targets in one short step where SIGINT and SIGTERM wait
    (:func:`~trajaudit.cli.signals.signals_deferred`). A signal, an error or a full disk before the
    commit leaves every old file as it was; a signal during it is acted on once every output is new.
    Leaving the ``with`` block removes the temporary files not committed, whatever ends it.

    A target that is not a regular file (a device, a FIFO, ``/dev/stdout`` on a pipe) cannot be staged:
    it is written through when :meth:`write` is called. Temporary files are named
    ``.NAME.PID.XXXXXXXX.tmp``; those of a writer killed outright (SIGKILL, which no process can clean up
    after) are removed by the next write of the same target (:func:`stale_temporaries`).
    """

    def __init__(self) -> None:
        self._staged: list[tuple[str, str, str]] = []  # (temporary, target, path as given)

    def __enter__(self) -> OutputSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()

    def write(self, path: str | os.PathLike[str], parts: Iterable[str]) -> None:
        """Stage the concatenation of ``parts`` (UTF-8; a lone surrogate as its ``\\udXXX`` escape) for
        ``path`` (see :func:`atomic_write` for the paths refused and the special files).

        Raises:
            OSError: the temporary file cannot be written, or the path is refused (named as given).
        """
        self.write_with(path, _encoded(parts))

    def write_with(self, path: str | os.PathLike[str], fill: Callable[[BinaryIO], None]) -> None:
        """Stage the bytes ``fill`` writes to the binary file it is given (e.g. a Parquet table) for ``path``.

        Raises:
            OSError: as :meth:`write`.
        """
        given = os.fspath(path)
        problem = output_problem(given)
        if problem is not None:  # realpath would tidy it into another file (13.json/ -> 13.json)
            raise OSError(errno.ENOENT, problem, given)
        if is_special_file(given):  # /dev/stdout on a pipe: its realpath is '/proc/…/fd/pipe:[…]', no folder
            try:
                with open(given, "wb") as f:
                    fill(f)
            except OSError as e:  # /dev/full: "No space left on device", named
                raise OSError(e.errno, e.strerror, given) from None
            return
        target = os.path.realpath(given)
        folder = os.path.dirname(target) or "."
        _clear_stale(target, given)
        try:  # a signal waits until the file is known to discard() (one sent the moment it appears left it)
            with signals.signals_deferred():
                fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.{os.getpid()}.", suffix=".tmp",
                                           dir=folder)
                self._staged.append((tmp, target, given))  # removed by discard() whatever happens next
        except OSError as e:  # named as the file the user gave, not the temporary one
            raise OSError(e.errno, e.strerror, given) from None
        try:
            with os.fdopen(fd, "wb") as f:
                fill(f)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, _mode_for(target))
        except OSError as e:  # disk full, file-size limit …: named as the file the user gave
            raise OSError(e.errno, e.strerror, given) from None

    def commit(self) -> None:
        """Rename every staged file over its target, SIGINT and SIGTERM held until all are renamed
        (:data:`trajaudit.cli.signals.COMMITTED` then names them, for the message of a signal acted on
        after). A rename fails only when the folder changed meanwhile (removed, made read-only).

        Raises:
            OSError: a rename failed (named as given; the outputs renamed before it are new).
        """
        folders = dict.fromkeys(os.path.dirname(target) or "." for _, target, _ in self._staged)
        first = True
        signals.debug_pause("before")
        try:
            with signals.signals_deferred():
                while self._staged:
                    tmp, target, given = self._staged[0]
                    try:
                        os.replace(tmp, target)
                    except OSError as e:  # the staged files left are removed by discard()
                        raise OSError(e.errno, e.strerror, given) from None
                    del self._staged[0]
                    signals.COMMITTED.append(given)
                    if first and self._staged:
                        signals.debug_pause("between")
                    first = False
        finally:
            for folder in folders:
                _fsync_dir(folder)

    def discard(self) -> None:
        """Remove the staged temporary files not committed (the targets are left as they were)."""
        with signals.signals_deferred():  # a second Ctrl-C does not leave the rest behind
            staged, self._staged = self._staged, []
            for tmp, _, _ in staged:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


# --- resumable JSONL ----------------------------------------------------------------------------------

#: The diagnosis metadata key holding the options fingerprint of ``audit --resume`` lines.
RESUME_KEY = "resume_key"


def options_key(options: Mapping[str, Any], files: Iterable[str | os.PathLike[str] | None] = ()) -> str:
    """A short fingerprint (16 hex digits) of the options that produce a diagnosis: their canonical
    JSON plus the content of the files they name (rule packs, tools, mapping), so an edited pack
    makes its runs be diagnosed again."""
    h = hashlib.sha256(json.dumps(options, sort_keys=True, default=str).encode())
    for f in files:
        if f and os.path.isfile(f):
            with open(f, "rb") as fh:
                h.update(hashlib.sha256(fh.read()).digest())
    return h.hexdigest()[:16]


def resume_key_of(spec: AuditSpec, fmt: str | None, mapping: str | None) -> str:
    """The fingerprint (:func:`options_key`) of the options a diagnosis is made with: strategy, packs and
    their contents, tools, mapping, taxonomy, seed, repair, time budget, LLM settings, input format."""
    llm = spec.llm
    options = {"strategy": spec.strategy, "rules": list(map(str, spec.rules)), "tools": spec.tools,
               "taxonomy": spec.config.taxonomy, "seed": spec.config.seed, "default_packs": spec.default_packs,
               "repair": spec.repair, "run_timeout": spec.config.run_timeout, "format": fmt, "mapping": mapping,
               "llm": None if llm is None else [llm.base_url, llm.model, llm.temperature, llm.max_tokens,
                                                llm.seed, llm.structured]}
    files = [r for r in spec.rules if isinstance(r, str)] + [spec.tools if isinstance(spec.tools, str) else None,
                                                             mapping]
    return options_key(options, files)


def run_key(file: str | None, record: int | None, run_id: str, options: str) -> tuple[str, int | None, str, str]:
    """What identifies a finished run in a resumable output: file, record, run id, options key."""
    return (os.path.abspath(file) if file else "", record, str(run_id), options)


@dataclass
class Resumable:
    """What :func:`read_resumable` found in an existing output.

    Attributes:
        done: run keys (:func:`run_key`) of the diagnoses already there.
        lines: complete lines kept. torn: bytes of a torn last line cut away (0 when none).
        unreadable: 1-based numbers of complete lines that are not diagnoses (not JSON, or a JSON value
            that is no diagnosis: :func:`is_diagnosis`); :meth:`ResumeJournal.for_spec` refuses the file.
        foreign_tail: the bytes after the last newline do not begin as a diagnosis line does (not a
            line trajaudit was killed writing); never cut.
    """

    done: set[tuple[str, int | None, str, str]] = field(default_factory=set)
    lines: int = 0
    torn: int = 0
    unreadable: list[int] = field(default_factory=list)
    #: diagnoses without a ``resume_key`` (written by a plain ``audit``): kept, never counted as done
    unkeyed: int = 0
    #: the resume keys found (one per set of options that wrote lines there)
    keys: set[str] = field(default_factory=set)
    foreign_tail: bool = False


def _whole_diagnosis(tail: bytes) -> bool:
    """Whether a last line without its newline is a whole diagnosis (a file ended by hand or by a tool
    that strips the final newline), not one cut mid-write."""
    try:
        return is_diagnosis(json.loads(tail.lstrip(b"\xef\xbb\xbf")))
    except ValueError:
        return False


def read_resumable(path: str | os.PathLike[str], *, repair: bool = True) -> Resumable:
    """Read an existing ``audit --resume`` output: the runs it holds (lines with a ``resume_key``), and
    cut a torn last line (a process killed mid-write: no final newline) away when ``repair`` — only one
    that begins as a diagnosis line does (``foreign_tail`` is never cut); a last line that is a whole
    diagnosis without its newline is kept (``repair``: the newline is added).

    Raises:
        OSError: the file exists but cannot be read or truncated.
    """
    out = Resumable()
    p = os.fspath(path)
    if not os.path.exists(p):
        return out
    with open(p, "rb") as f:
        data = f.read()
    end = data.rfind(b"\n") + 1
    if end < len(data) and _whole_diagnosis(data[end:]):  # complete, only its newline missing: kept
        if repair:
            with open(p, "ab") as f:
                f.write(b"\n")
        data += b"\n"
        end = len(data)
    if end < len(data):
        out.torn = len(data) - end
        tail = data[end:].lstrip(b"\xef\xbb\xbf" if end == 0 else b"")
        out.foreign_tail = bool(tail.strip()) and not (tail.startswith(_DIAGNOSIS_START)
                                                       or _DIAGNOSIS_START.startswith(tail))
        if repair and not out.foreign_tail:
            with open(p, "r+b") as f:
                f.truncate(end)
                f.flush()
                os.fsync(f.fileno())
    for n, raw in enumerate(data[:end].splitlines(), 1):
        if not raw.strip():
            continue
        out.lines += 1
        try:
            d = json.loads(raw)
        except ValueError:
            out.unreadable.append(n)
            continue
        if not is_diagnosis(d):
            out.unreadable.append(n)
            continue
        key = (d.get("metadata") or {}).get(RESUME_KEY) if isinstance(d.get("metadata"), dict) else None
        if isinstance(key, str):
            out.done.add(run_key(d.get("file"), d.get("record"), d["trajectory_id"], key))
            out.keys.add(key)
        else:
            out.unkeyed += 1
    return out


class JsonlAppender:
    """Append complete lines to a file, each written whole and flushed as it comes (a process killed
    between two lines leaves a valid prefix); fsynced when closed.

    Raises:
        OSError: the file cannot be opened or written.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)

    def write(self, line: str) -> None:
        """Append ``line`` plus a newline in one ``write`` call."""
        data = (line + "\n").encode("utf-8", "backslashreplace")
        while data:
            n = os.write(self._fd, data)
            data = data[n:]

    def close(self) -> None:
        """fsync and close."""
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ResumeJournal:
    """``audit --resume`` / ``eval --resume``: the runs already diagnosed in the output (with the same options: strategy, packs
    and their contents, tools, mapping, taxonomy, seed, repair, time budget, LLM settings), and the
    appender that adds each new diagnosis as one complete line as soon as it finishes (a process
    killed mid-batch leaves a valid prefix; a torn last line is cut away when the file is opened
    again). Each line carries the options' fingerprint in ``metadata.resume_key``."""

    def __init__(self, output: str, key: str, found: Resumable) -> None:
        self.output, self.key, self.found = output, key, found
        self.writer: JsonlAppender | None = None

    @classmethod
    def for_spec(cls, output: str, spec: AuditSpec, fmt: str | None, mapping: str | None,
                 option: str = "-o") -> ResumeJournal:
        """The journal of ``output`` for the options of ``spec`` (and the input format or mapping).

        Raises:
            TrajauditError: ``output`` holds something else than trajaudit diagnoses (a line that is no
                diagnosis, or an unfinished last line that does not begin as one): it is left as it is
                (``option`` names it in the message).
        """
        found = read_resumable(output, repair=False)
        if found.unreadable or found.foreign_tail:
            where = (f"line {found.unreadable[0]} is not a trajaudit diagnosis" if found.unreadable
                     else "its unfinished last line is not a diagnosis trajaudit was writing")
            raise TrajauditError(f"--resume appends diagnoses to {option} {output!r}, but it holds other content "
                                 f"({where}): it was left as it is; give a new file, or the diagnoses file of an "
                                 "earlier audit or eval --save-pred")
        return cls(output, resume_key_of(spec, fmt, mapping), found)

    @staticmethod
    def tagged(d: Diagnosis, key: str) -> Diagnosis:
        """``d`` with the options' fingerprint ``key`` in ``metadata.resume_key`` (every diagnosis
        ``audit -o`` and ``eval --save-pred`` write carries it, so ``--resume`` can go on from any of them)."""
        return dataclasses.replace(d, metadata={**d.metadata, RESUME_KEY: key})

    def done(self, t: Trajectory) -> bool:
        """Whether run ``t`` is already diagnosed in the file with these options."""
        return run_key(t.source.file, t.source.record, t.id, self.key) in self.found.done

    def append(self, d: Diagnosis) -> str:
        """Append ``d`` (with the fingerprint) as one line; the line is returned. The file is opened on
        the first diagnosis (after the batch's rules, tools and runs were checked), a torn last line
        cut away first."""
        line = self.tagged(d, self.key).to_json()
        if self.writer is None:
            read_resumable(self.output, repair=True)
            self.writer = JsonlAppender(self.output)
        self.writer.write(line)
        return line

    def close(self) -> None:
        """fsync and close the file (when a diagnosis was appended)."""
        if self.writer is not None:
            self.writer.close()

    def summary(self, skipped: int) -> str:
        """What resuming did, in words (``resumed FILE: …``)."""
        notes = []
        if self.found.torn:
            notes.append(f"a torn last line ({self.found.torn} bytes, a run killed mid-write) was cut away")
        if self.found.unkeyed:
            # older versions wrote audit -o and eval --save-pred lines without the key
            notes.append(f"warning: {self.found.unkeyed} diagnosis line(s) without a resume key (written by an "
                         "older version or another program) were kept and their runs diagnosed again: the file now holds "
                         "duplicates (eval --pred scores the last line of each run)")
        if self.found.keys - {self.key}:
            notes.append("warning: the file also holds diagnoses made with other options (those runs were diagnosed "
                         "again with these options)")
        notes.append(f"{skipped} run(s) already diagnosed there were skipped")
        return f"resumed {self.output}: " + "; ".join(notes)



__all__: list[str] = ["RESUME_KEY", "JsonlAppender", "OutputSet", "Resumable", "atomic_write", "input_files",
                      "is_diagnosis", "is_diagnoses_file", "is_own_output", "is_special_file", "left_out_note",
                      "options_key", "output_problem", "read_resumable", "refuse_clobbering", "resume_key_of",
                      "run_key", "select_inputs", "stale_temporaries", "without_own_outputs", "ResumeJournal"]
