"""Ctrl-C while a command starts (Python imports trajaudit, the command line, the command's module):
``interrupted`` on stderr and exit 130, as once the command runs (handle_errors) — not a
``KeyboardInterrupt`` traceback (during the imports) nor click's ``Aborted!`` with exit 1 (during the
dispatch), which ``audit`` and ``check`` use for "some run was skipped".

A real process gets a real SIGINT at a point the test can see: a ``sitecustomize`` of the test's own
(on ``PYTHONPATH``, not trajaudit's code) stalls the import of one module, says so in a file, and
sleeps until the signal arrives."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib

import pytest
from conftest import ROOT
from hostile_kit import good_run, write_json

STALL = '''
import os, sys, time

class _Stall:
    def find_spec(self, name, path=None, target=None):
        if name == os.environ["STALL_AT"]:
            sys.meta_path.remove(self)
            with open(os.environ["STALL_READY"] + ".tmp", "w") as f:
                f.write(name)
            os.replace(os.environ["STALL_READY"] + ".tmp", os.environ["STALL_READY"])  # whole when seen
            for _ in range(2400):  # the test's SIGINT ends it: KeyboardInterrupt inside this import (short
                time.sleep(0.05)   # sleeps: a signal that lands just before one sleep is acted on after it)
        return None

sys.meta_path.insert(0, _Stall())
'''

#: the module stalled -> where the interrupt lands
WINDOWS = {
    "trajaudit.engine.trace.loader": "the package's own imports (trajaudit/__init__.py)",
    "trajaudit.cli": "the command line's import, before click runs",
    "trajaudit.cli.audit": "the dispatch: click imports the command's module",
}


def _console_script(tmp_path) -> list[str]:
    """The ``trajaudit`` console script as pip writes it for pyproject's [project.scripts] entry."""
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["trajaudit"]
    module, func = spec.split(":")
    script = tmp_path / "bin" / "trajaudit"
    script.parent.mkdir()
    script.write_text(f"import re\nimport sys\nfrom {module} import {func}\nif __name__ == '__main__':\n"
                      f"    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
                      f"    sys.exit({func}())\n")
    return [sys.executable, str(script)]


def _interrupt_while_importing(tmp_path, module: str, command: list[str]) -> subprocess.CompletedProcess:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(STALL)
    ready = tmp_path / "ready"
    ready.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "STALL_AT": module,
           "STALL_READY": str(ready)}
    # SIGINT as the default action in the child (a shell's background job starts with it ignored)
    p = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not ready.exists() and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    if not (p.poll() is None and ready.exists() and ready.read_text() == module):
        p.kill()
        pytest.fail(f"the import of {module} was not stalled: {p.communicate()}")
    os.kill(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=60)
    return subprocess.CompletedProcess(command, p.returncode, out, err)


@pytest.mark.parametrize("module", list(WINDOWS))
@pytest.mark.parametrize("entry", ["-m", "script"])
def test_ctrl_c_while_a_command_starts_says_interrupted_and_exits_130(tmp_path, module, entry):
    run = write_json(tmp_path / "run.json", good_run("r1"))
    out = tmp_path / "out.jsonl"
    out.write_text("KEEP\n")
    start = [sys.executable, "-m", "trajaudit"] if entry == "-m" else _console_script(tmp_path)
    r = _interrupt_while_importing(tmp_path, module, [*start, "audit", str(run), "-o", str(out)])
    assert (r.returncode, r.stderr, r.stdout) == (130, "interrupted\n", ""), WINDOWS[module]
    assert out.read_text() == "KEEP\n"


def test_ctrl_c_while_a_library_user_imports_trajaudit_is_left_to_python(tmp_path):
    # only the command exits 130: a program importing trajaudit gets its KeyboardInterrupt as usual
    r = _interrupt_while_importing(tmp_path, "trajaudit.engine.trace.loader",
                                   [sys.executable, "-c", "import trajaudit"])
    assert r.returncode == -signal.SIGINT and "KeyboardInterrupt" in r.stderr and "interrupted\n" not in r.stderr


def test_a_command_that_is_not_interrupted_is_unchanged(tmp_path):
    # the console script entry runs the command line as `python -m trajaudit` does
    run = write_json(tmp_path / "run.json", good_run("r1"))
    r = subprocess.run([*_console_script(tmp_path), "audit", str(run), "-o", "-", "-q"], cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["trajectory_id"] == "r1"
