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
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from trajaudit.engine.run.monitor import Monitor, MonitorError
from trajaudit.engine.trace.ir import Step
from trajaudit.engine.validation_log import Record

__all__ = ["END_MARKER", "WatchResult", "follow", "item_of", "watch"]

#: the line a writer appends when the run is over
END_MARKER = {"trajaudit": "end"}


@dataclass
class WatchResult:
    """How a watch ended: ``reason`` (``end-marker`` | ``removed`` | ``idle`` | ``alarm`` | ``missing``:
    the file was never created within ``until_idle`` seconds), the lines
    skipped (``[(line number, error)]``) and the records settled, in order."""

    reason: str
    skipped: list[tuple[int, str]] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)


def _wait_open(p: Path, until_idle: float | None, poll: float, sleep: Callable[[float], None],
               on_wait: Callable[[], None] | None) -> BinaryIO | str:
    """``p`` opened for reading, once it exists; or why the wait ended (``missing``: ``until_idle``
    seconds passed without it | ``removed``: the directory itself went away)."""
    start = time.monotonic()
    waiting = False
    while True:
        try:
            return p.open("rb")
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


def follow(path: str | os.PathLike[str], *, until_idle: float | None = None, poll: float = 0.1,
           sleep: Callable[[float], None] = time.sleep,
           on_wait: Callable[[], None] | None = None) -> Iterator[tuple[int, str | None]]:
    """The complete lines of ``path`` as they are written: ``(line number, text)``. The generator's
    return value is the reason it ended (``removed`` | ``idle`` | ``missing``); the caller stops on
    the end marker itself. A ``path`` that does not exist yet is waited for (``on_wait()`` is called
    once when the wait starts; ``until_idle`` seconds of waiting end it as ``missing``: never created).

    Raises:
        FileNotFoundError: the directory of ``path`` does not exist (nothing could ever appear there).
    """
    p = Path(path)
    if not p.parent.is_dir():
        raise FileNotFoundError(f"{p}: its directory {p.parent} does not exist")
    opened = _wait_open(p, until_idle, poll, sleep, on_wait)
    if isinstance(opened, str):
        return opened
    with opened as f:
        ino = os.fstat(f.fileno()).st_ino
        buf = b""
        n = 0
        last = time.monotonic()
        while True:
            chunk = f.read(65536)
            if chunk:
                buf += chunk
                last = time.monotonic()
                *lines, buf = buf.split(b"\n")
                for raw in lines:
                    n += 1
                    yield n, raw.decode("utf-8", "replace")
                continue
            try:
                gone = os.stat(p).st_ino != ino
            except FileNotFoundError:
                gone = True
            if gone:
                if buf.strip():
                    n += 1
                    yield n, buf.decode("utf-8", "replace")
                return "removed"
            if until_idle is not None and time.monotonic() - last >= until_idle:
                if buf.strip():
                    n += 1
                    yield n, buf.decode("utf-8", "replace")
                return "idle"
            sleep(poll)


def item_of(obj: Any) -> Any:
    """What a JSONL line gives :meth:`Monitor.add` (a message dict or a :class:`Step`), or
    :data:`END_MARKER`.

    Raises:
        MonitorError: the object is none of the accepted shapes.
    """
    if obj == END_MARKER:
        return END_MARKER
    if isinstance(obj, dict):
        if "role" in obj:
            return obj
        if isinstance(obj.get("message"), dict):
            return obj["message"]
        if isinstance(obj.get("step"), dict):
            try:
                return Step.from_dict(obj["step"])
            except (KeyError, TypeError, ValueError) as e:
                raise MonitorError(f"not an IR step: {e}") from None
    raise MonitorError("expected a chat message (with 'role'), {'message': {...}}, {'step': {...}} or the end "
                       f"marker {json.dumps(END_MARKER)}; got {json.dumps(obj)[:120]}")


def watch(path: str | os.PathLike[str], monitor: Monitor, *, until_idle: float | None = None,
          stop_on_alarm: bool = False, on_records: Callable[[list[Record]], None] | None = None,
          on_skip: Callable[[int, str], None] | None = None, on_alarm: Callable[[Monitor], None] | None = None,
          poll: float = 0.1, on_wait: Callable[[], None] | None = None) -> WatchResult:
    """Follow ``path`` into ``monitor`` until the run ends (see the module docstring), then close it.

    ``on_records`` is called with each batch of settled records (every verdict), ``on_skip`` with
    each unreadable line, ``on_alarm`` once when the alarm is raised (``stop_on_alarm``: the watch
    stops there, the run is closed), ``on_wait`` once if ``path`` does not exist yet and is waited for.

    Raises:
        FileNotFoundError: the directory of ``path`` does not exist.
    """
    res = WatchResult("idle")
    gen = follow(path, until_idle=until_idle, poll=poll, on_wait=on_wait)
    while True:
        try:
            n, text = next(gen)
        except StopIteration as stop:
            res.reason = stop.value or "idle"
            break
        if text is None or not text.strip():
            continue
        try:
            item = item_of(json.loads(text))
        except json.JSONDecodeError as e:
            res.skipped.append((n, f"not JSON: {e}"))
            if on_skip:
                on_skip(n, res.skipped[-1][1])
            continue
        except MonitorError as e:
            res.skipped.append((n, str(e)))
            if on_skip:
                on_skip(n, str(e))
            continue
        if item is END_MARKER:
            res.reason = "end-marker"
            break
        try:
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
    res.records += last
    if last and on_records:
        on_records(last)
    return res
