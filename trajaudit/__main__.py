"""``python -m trajaudit`` and the ``trajaudit`` console script (:func:`run`) run the command line.

Ctrl-C while the command starts says ``interrupted`` on stderr and exits 130, as a command
interrupted later does (``trajaudit.cli.common.EXIT_INTERRUPTED``), not with a ``KeyboardInterrupt``
traceback: while this package is imported (``trajaudit/__init__.py``), while the command line is
(here), and while click parses or dispatches the command (:class:`trajaudit.cli.LazyGroup`).

SIGTERM (``kill``, ``timeout``, systemd, ``docker stop``) is handled as Ctrl-C once the command line is
imported (:func:`trajaudit.cli.signals.terminate_like_interrupt`): ``terminated`` on stderr, exit 143,
temporary output files removed and earlier outputs left as they were. Before that (the imports) it
has its default action: the process ends, having written nothing.
"""

import sys
from typing import NoReturn


def _interrupted(exc: BaseException) -> NoReturn:
    if type(exc).__name__ == "Terminated":  # trajaudit.cli.signals.Terminated: SIGTERM
        sys.stderr.write("terminated\n")
        raise SystemExit(143) from None
    sys.stderr.write("interrupted\n")
    raise SystemExit(130) from None


try:
    from trajaudit.cli import main
    from trajaudit.cli.signals import exit_stopped, ignore_stop_signals, terminate_like_interrupt
except KeyboardInterrupt as e:
    _interrupted(e)


def run() -> None:
    """Run the ``trajaudit`` command line (exits with its code; 130 when interrupted, 143 on SIGTERM)."""
    terminate_like_interrupt()
    try:
        main()
    except KeyboardInterrupt as e:
        exit_stopped(e)
    finally:  # the command is over, its outputs written: a signal now would only kill the exit unsaid
        ignore_stop_signals()


if __name__ == "__main__":
    run()
