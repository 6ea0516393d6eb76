"""SIGTERM stops a command as Ctrl-C does, and a signal waits while a command's outputs are replaced.

- :class:`Terminated`: what SIGTERM raises once :func:`terminate_like_interrupt` is set up (the
  ``trajaudit`` command does, :func:`trajaudit.__main__.run`). It is a ``KeyboardInterrupt``, so every
  path that cleans up after Ctrl-C (temporary files removed, a worker pool stopped, the ``--resume``
  journal closed) runs for SIGTERM too — what ``timeout``, systemd and ``docker stop`` send. Before,
  SIGTERM killed the process at once: no message, exit 143 from the shell, a hidden
  ``.NAME.*.tmp`` temporary file left beside an output.
- :func:`signals_deferred`: SIGINT and SIGTERM arriving inside the block are held and acted on when it
  ends (:meth:`trajaudit.cli.outputs.OutputSet.commit` renames a command's outputs inside it, so they
  are all replaced or none is).
- :func:`stop_message`: the line and exit code of a command stopped by a signal (``interrupted``, 130;
  ``terminated``, 143), saying when the outputs had already been replaced (:data:`COMMITTED`).

Imports nothing of trajaudit (``trajaudit.__main__`` uses it before the command runs).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

#: exit code of a command stopped by Ctrl-C (SIGINT): 128 + 2, the shell's convention
EXIT_INTERRUPTED = 130
#: exit code of a command stopped by SIGTERM (``kill``, ``timeout``, systemd, ``docker stop``): 128 + 15
EXIT_TERMINATED = 143

#: The outputs a command replaced in its commit step (their paths as given), so a signal acted on
#: afterwards says they are already new; emptied when a command starts (``handle_errors``).
COMMITTED: list[str] = []

#: A debug hook for tests of the commit step: ``before`` or ``between`` (optionally ``:SECONDS``, default
#: 5) makes :meth:`~trajaudit.cli.outputs.OutputSet.commit` say ``commit pause (WHERE)`` on stderr and
#: sleep there: ``before`` the first rename (a signal then ends the command with no output replaced),
#: ``between`` the first and the second rename (signals are held: every output is replaced first).
PAUSE_ENV = "TRAJAUDIT_DEBUG_COMMIT_PAUSE"


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised by the handler :func:`terminate_like_interrupt` sets (a ``KeyboardInterrupt``:
    handled wherever Ctrl-C is)."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated()


def terminate_like_interrupt() -> None:
    """Make SIGTERM raise :class:`Terminated` in this process (from the main thread only; elsewhere, and
    where SIGTERM is ignored — a job started with it ignored — nothing is changed)."""
    if threading.current_thread() is not threading.main_thread():
        return
    with contextlib.suppress(ValueError, OSError):
        if signal.getsignal(signal.SIGTERM) != signal.SIG_IGN:
            signal.signal(signal.SIGTERM, _raise_terminated)


def ignore_stop_signals() -> None:
    """Ignore SIGINT and SIGTERM from here on (the main thread only): called once a command has ended
    and written its outputs, so a signal in the interpreter's last moments (≈ 0.3 s of teardown after
    a large batch) neither kills the process by the default action — no message, the exit code lost —
    nor prints a traceback from an exit handler; the command's own exit code and message stand."""
    if threading.current_thread() is not threading.main_thread():
        return
    with contextlib.suppress(ValueError, OSError):
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)


def stop_message(exc: BaseException) -> tuple[str, int]:
    """The stderr line and exit code of a command stopped by ``exc`` (a ``KeyboardInterrupt``; a
    :class:`Terminated` for SIGTERM): ``interrupted``/130 or ``terminated``/143, plus — when the signal
    came during or after the commit step — that the outputs were already replaced, naming them."""
    word, code = ("terminated", EXIT_TERMINATED) if isinstance(exc, Terminated) else ("interrupted", EXIT_INTERRUPTED)
    if COMMITTED:
        return f"{word} after the output files were written (all of them are new): {', '.join(COMMITTED)}", code
    return word, code


def exit_stopped(exc: BaseException) -> None:
    """Print :func:`stop_message` on stderr and exit with its code (``SystemExit``)."""
    text, code = stop_message(exc)
    sys.stderr.write(text + "\n")
    sys.stderr.flush()
    raise SystemExit(code) from None


def debug_pause(where: str) -> None:
    """The :data:`PAUSE_ENV` debug hook at point ``where`` of the commit step (nothing when unset)."""
    value = os.environ.get(PAUSE_ENV, "")
    point, _, seconds = value.partition(":")
    if point != where:
        return
    sys.stderr.write(f"commit pause ({where})\n")
    sys.stderr.flush()
    time.sleep(float(seconds or 5))


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM while the block runs; a signal that arrived is then raised again, as the
    handler that was in place acts on it (``KeyboardInterrupt``, :class:`Terminated`, or the default
    action), after the block is done. Outside the main thread (where Python runs signal handlers and
    only it can set them) nothing is held."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []

    def hold(signum: int, frame: Any) -> None:
        got.append(signum)

    old: dict[int, Any] = {}
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous = signal.getsignal(sig)
            if previous not in (signal.SIG_IGN, None):
                old[sig] = signal.signal(sig, hold)
        yield
    finally:
        for held, previous in old.items():
            signal.signal(held, previous)
        for number in dict.fromkeys(got):
            signal.raise_signal(number)


__all__ = ["COMMITTED", "EXIT_INTERRUPTED", "EXIT_TERMINATED", "PAUSE_ENV", "Terminated", "exit_stopped",
           "signals_deferred", "stop_message", "terminate_like_interrupt", "debug_pause", "ignore_stop_signals"]
