"""``trajaudit watch FILE``: follow a growing JSONL file of a run's messages (like ``tail -f``) and report
each violation as it is settled (issue 20).

Each line is one JSON object:

- an OpenAI chat message (``{"role": ..., "content": ..., "tool_calls": ...}``; Anthropic content blocks too),
- an event wrapping one: ``{"message": {...}}`` (other fields, e.g. a timestamp, are ignored),
- an IR step: ``{"step": {...}}`` (``Step.to_dict()``'s form),
- the end marker ``{"trajaudit": "end"}``: the run is over (the writer is done).

A file that does not exist yet is waited for (like ``tail -F``: a watch may start before the agent
writes its log), as long as its directory exists; ``until_idle`` counts the wait too. The run ends at
the end marker, when the file is removed or renamed (the path no longer names the file being read),
or after ``until_idle`` seconds without a new line; then the end-of-run rules are
settled (:meth:`Monitor.close`). A line that is not JSON or that the monitor cannot read is reported
(with its line number) and skipped. A partly written last line is read once its newline arrives.

The watch stops *before* the run's end when the alarm stops it (``stop_on_alarm``) or when the file
is truncated (it becomes shorter than what was read: copy-and-truncate log rotation or a rewrite;
the new lines cannot be told to continue the run read so far, so the watch stops rather than mix
two runs; start a new watch for the new content). The monitor is then closed on the run as cut and
those end-of-run verdicts are kept apart (``WatchResult.after_stop``). A FIFO (named pipe) is read
as its writers write; the end marker, ``until_idle`` or removing it ends the run.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trajaudit import safe_json
from trajaudit.engine.run.monitor import Monitor, MonitorError
from trajaudit.engine.schema import schema_errors
from trajaudit.engine.trace.ir import SCHEMA_VERSION, Source, Step
from trajaudit.engine.validation_log import Record

__all__ = ["CUT_REASONS", "END_MARKER", "WatchResult", "follow", "item_of", "watch"]

#: the line a writer appends when the run is over
END_MARKER = {"trajaudit": "end"}


@dataclass
class WatchResult:
    """How a watch ended.

    Attributes:
        reason: ``end-marker`` | ``removed`` (the path no longer names the file read) | ``idle``
            (``until_idle`` seconds without a line) | ``missing`` (the file was never created within
            ``until_idle`` seconds) | ``alarm`` (``stop_on_alarm``) | ``truncated`` (the file got
            shorter than what was read: log rotation by copy-and-truncate, or a rewrite).
        skipped: the lines skipped, ``[(line number, error)]``.
        records: the records settled for the run, in order (every verdict).
        after_stop: when the run was cut (``alarm``, ``truncated``): the records :meth:`Monitor.close`
            settled on the run as cut. They are verdicts on a run that did not reach its end (a call
            left unanswered because the watch stopped, a run that "ends" after a failed call, a
            claim no later turn could confirm), not the agent's violations; kept apart from
            ``records``. ``monitor.log`` holds both (it is the log of the cut run).
        lines: the number of lines read.
    """

    reason: str
    skipped: list[tuple[int, str]] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    after_stop: list[Record] = field(default_factory=list)
    lines: int = 0


#: the reasons a watch stops before the run's end (the end-of-run verdicts then go to ``after_stop``)
CUT_REASONS = ("alarm", "truncated")


def _wait_open(p: Path, until_idle: float | None, poll: float, sleep: Callable[[float], None],
               on_wait: Callable[[], None] | None) -> int | str:
    """``p`` opened for reading (a file descriptor, non-blocking: a FIFO with no writer yet opens at
    once and is waited on like a quiet file), once it exists; or why the wait ended (``missing``:
    ``until_idle`` seconds passed without it | ``removed``: the directory itself went away)."""
    start = time.monotonic()
    waiting = False
    while True:
        try:
            return os.open(p, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            pass
        if not p.parent.is_dir():
            return "removed"
        if not waiting and on_wait is not None:
            on_wait()
        waiting = True
        if until_idle is not None and time.monotonic() - start >= until_idle:
            return "missing"
        sleep(poll)


def _read(fd: int) -> bytes:
    """What is there to read now (``b""``: nothing yet; a FIFO whose writer has not written, or has none)."""
    try:
        return os.read(fd, 65536)
    except BlockingIOError:
        return b""


def _ended(p: Path, fd: int, ino: int, pos: int, fifo: bool) -> str | None:
    """Why the file being read no longer holds the run (``removed`` | ``truncated``), or ``None``."""
    try:
        if os.stat(p).st_ino != ino:
            return "removed"
    except FileNotFoundError:
        return "removed"
    if not fifo and os.fstat(fd).st_size < pos:
        return "truncated"
    return None


def follow(path: str | os.PathLike[str], *, until_idle: float | None = None, poll: float = 0.1,
           sleep: Callable[[float], None] = time.sleep,
           on_wait: Callable[[], None] | None = None,
           on_invalid: Callable[[int], None] | None = None) -> Iterator[tuple[int, str | None]]:
    """The complete lines of ``path`` as they are written: ``(line number, text)``. The generator's
    return value is the reason it ended (``removed`` | ``truncated`` | ``idle`` | ``missing``); the
    caller stops on the end marker itself. A ``path`` that does not exist yet is waited for
    (``on_wait()`` is called once when the wait starts; ``until_idle`` seconds of waiting end it as
    ``missing``: never created). A line that is not valid UTF-8 is decoded with its undecodable bytes
    replaced (U+FFFD), and ``on_invalid(line number)`` is called first.

    A FIFO (named pipe) is read as its writers write (a writer closing its end does not end the run:
    several may take turns); ``until_idle`` counts from its last line as for a file. A regular file
    that becomes shorter than what was read (copy-and-truncate rotation, a rewrite) ends as
    ``truncated``: the lines after it cannot be told to continue the run that was read. (A rewrite
    that makes the file longer than what was read between two polls is not seen, as with ``tail -F``.)

    Raises:
        FileNotFoundError: the directory of ``path`` does not exist (nothing could ever appear there).
    """
    p = Path(path)
    if not p.parent.is_dir():
        raise FileNotFoundError(f"{p}: its directory {p.parent} does not exist")
    fd = _wait_open(p, until_idle, poll, sleep, on_wait)
    if isinstance(fd, str):
        return fd
    try:
        st = os.fstat(fd)
        ino, fifo = st.st_ino, stat.S_ISFIFO(st.st_mode)
        parts: list[bytes] = []  # the pieces of a line not complete yet (joined once its newline arrives:
        n = pos = 0              # a long line read in many chunks costs O(its length), not O(length^2))
        last = time.monotonic()
        while True:
            chunk = _read(fd)
            if chunk:
                pos += len(chunk)
                last = time.monotonic()
                if b"\n" not in chunk:
                    parts.append(chunk)
                    continue
                *lines, rest = chunk.split(b"\n")
                if parts:
                    lines[0] = b"".join((*parts, lines[0]))
                parts = [rest] if rest else []
                for raw in lines:
                    n += 1
                    yield n, _decode(raw, n, on_invalid)
                continue
            why = _ended(p, fd, ino, pos, fifo)
            if why is None and until_idle is not None and time.monotonic() - last >= until_idle:
                why = "idle"
            if why is not None:
                buf = b"".join(parts)
                if buf.strip():  # a last line without its newline
                    n += 1
                    yield n, _decode(buf, n, on_invalid)
                return why
            sleep(poll)
    finally:
        os.close(fd)


def _step_errors(d: dict[str, Any]) -> list[str]:
    """Why ``d`` is not an IR step, by the IR schema (``trajectory.schema.json``'s ``step``), in the
    batch loader's words (``$.step.index``...); ``[]`` if it is one."""
    stub = {"schema_version": SCHEMA_VERSION, "id": "watch", "source": Source("ir").to_dict(), "steps": [d]}
    return [e.replace("$.steps[0]", "$.step", 1) for e in schema_errors("trajectory", stub, limit=3)]


def item_of(obj: Any, position: int | None = None) -> Any:
    """What a JSONL line gives :meth:`Monitor.add` (a message dict or a :class:`Step`), or
    :data:`END_MARKER`. ``position``: the step the line would be (named in the error).

    Raises:
        MonitorError: the object is none of the accepted shapes, or its ``step`` is not an IR step
            (the message names the schema's fault, e.g. ``$.step: 'index' is a required property``).
    """
    if obj == END_MARKER:
        return END_MARKER
    if isinstance(obj, dict):
        if "role" in obj:
            return obj
        if isinstance(obj.get("message"), dict):
            return obj["message"]
        if isinstance(obj.get("step"), dict):
            at = f" (it would be step {position})" if position is not None else ""
            errs = _step_errors(obj["step"])
            if errs:
                raise MonitorError(f"not an IR step{at}: " + "; ".join(errs))
            try:
                return Step.from_dict(obj["step"])
            except (KeyError, TypeError, ValueError) as e:  # the schema let it through: still said, not raised
                raise MonitorError(f"not an IR step{at}: {type(e).__name__}: {e}") from None
    raise MonitorError("expected a chat message (with 'role'), {'message': {...}}, {'step': {...}} or the end "
                       f"marker {json.dumps(END_MARKER)}; got {json.dumps(obj)[:120]}")


def _parse(text: str, position: int) -> Any:
    """The item of a line (see :func:`item_of`).

    Raises:
        MonitorError: not JSON, or none of the accepted shapes.
    """
    try:
        obj = safe_json.loads(text)  # the batch loader's limits: nesting, integer digits, string length
    except json.JSONDecodeError as e:
        raise MonitorError(f"not JSON: {e}") from None
    except ValueError as e:  # safe_json's LimitExceeded (nested too deeply, an integer literal too long …)
        raise MonitorError(f"not read: {e}") from None
    return item_of(obj, position)


def _decode(raw: bytes, n: int, on_invalid: Callable[[int], None] | None) -> str:
    """Line ``n``'s text; undecodable bytes replaced (U+FFFD), after ``on_invalid(n)``."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        if on_invalid is not None:
            on_invalid(n)
        return raw.decode("utf-8", "replace")


def watch(path: str | os.PathLike[str], monitor: Monitor, *, until_idle: float | None = None,
          stop_on_alarm: bool = False, on_records: Callable[[list[Record]], None] | None = None,
          on_skip: Callable[[int, str], None] | None = None, on_alarm: Callable[[Monitor], None] | None = None,
          poll: float = 0.1, on_wait: Callable[[], None] | None = None,
          on_after_stop: Callable[[list[Record]], None] | None = None,
          on_invalid: Callable[[int], None] | None = None) -> WatchResult:
    """Follow ``path`` into ``monitor`` until the run ends (see the module docstring), then close it.

    ``on_records`` is called with each batch of settled records (every verdict), ``on_skip`` with
    each unreadable line, ``on_alarm`` once when the alarm is raised (``stop_on_alarm``: the watch
    stops there), ``on_wait`` once if ``path`` does not exist yet and is waited for, ``on_invalid``
    with the number of each line that is not valid UTF-8 (read with its bad bytes replaced). When the watch
    stops before the run's end (``alarm``, ``truncated``: :data:`CUT_REASONS`), the monitor is still
    closed, but what :meth:`Monitor.close` settles goes to ``WatchResult.after_stop`` and
    ``on_after_stop``, not ``on_records``: verdicts on a cut run are not the agent's violations.

    A ``KeyboardInterrupt`` propagates, the monitor left open (what was settled was already handed
    to ``on_records``; ``trajaudit watch`` then reports the run as interrupted, without end-of-run verdicts).

    Raises:
        FileNotFoundError: the directory of ``path`` does not exist.
    """
    res = WatchResult("idle")
    gen = follow(path, until_idle=until_idle, poll=poll, on_wait=on_wait, on_invalid=on_invalid)
    while True:
        try:
            n, text = next(gen)
        except StopIteration as stop:
            res.reason = stop.value or "idle"
            break
        res.lines = n
        if text is None or not text.strip():
            continue
        try:
            item = _parse(text, len(monitor.steps))
            if item is END_MARKER:
                res.reason = "end-marker"
                break
            new = monitor.add(item)
        except MonitorError as e:
            res.skipped.append((n, str(e)))
            if on_skip:
                on_skip(n, str(e))
            continue
        res.records += new
        if new and on_records:
            on_records(new)
        if stop_on_alarm and monitor.check_alarm():
            if on_alarm:
                on_alarm(monitor)
            res.reason = "alarm"
            break
    gen.close()
    last = monitor.close()
    cut = res.reason in CUT_REASONS
    (res.after_stop if cut else res.records).extend(last)
    notify = on_after_stop if cut else on_records
    if last and notify:
        notify(last)
    return res
