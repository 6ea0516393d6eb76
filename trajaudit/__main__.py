"""``python -m trajaudit`` and the ``trajaudit`` console script (:func:`run`) run the command line.

Ctrl-C while the command starts says ``interrupted`` on stderr and exits 130, as a command
interrupted later does (``trajaudit.cli.common.EXIT_INTERRUPTED``), not with a ``KeyboardInterrupt``
traceback: while this package is imported (``trajaudit/__init__.py``), while the command line is
(here), and while click parses or dispatches the command (:class:`trajaudit.cli.LazyGroup`).
"""

import sys
from typing import NoReturn


def _interrupted() -> NoReturn:
    sys.stderr.write("interrupted\n")
    raise SystemExit(130) from None


try:
    from trajaudit.cli import main
except KeyboardInterrupt:
    _interrupted()


def run() -> None:
    """Run the ``trajaudit`` command line (exits with its code; 130 when interrupted)."""
    try:
        main()
    except KeyboardInterrupt:
        _interrupted()


if __name__ == "__main__":
    run()
