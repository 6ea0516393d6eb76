"""The benchmarks' own imports of trajaudit resolve (they are scripts no other test runs).

``benchmarks/bench_audit.py`` imported ``audit_trajectories`` from its pre-redesign module inside
the source string of its fresh-process probe, so the benchmark died at that line with ImportError
while every test passed. This reads every ``from trajaudit... import ...`` line of the scripts —
code and source strings handed to ``python -c`` alike — and imports each name; lines in an
``except ImportError:`` branch (``bench_vs_release.py`` also drives the previous release's layout)
are the only ones exempt.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
IMPORT = re.compile(r"^(\s*)from (trajaudit[\w.]*) import ([\w, ]+?)(?:\s*#.*)?$")


def _imports() -> list[tuple[str, int, str, list[str]]]:
    """``(script, line number, module, names)`` of every trajaudit import outside a fallback."""
    out = []
    for script in sorted((ROOT / "benchmarks").glob("*.py")):
        fallback_indent: int | None = None
        for no, line in enumerate(script.read_text(encoding="utf-8").splitlines(), 1):
            indent = len(line) - len(line.lstrip())
            if line.strip().startswith("except ImportError"):
                fallback_indent = indent
                continue
            if fallback_indent is not None and line.strip() and indent <= fallback_indent:
                fallback_indent = None
            m = IMPORT.match(line)
            if m and fallback_indent is None:
                names = [n.split(" as ")[0].strip() for n in m.group(3).split(",") if n.strip()]
                out.append((script.name, no, m.group(2), names))
    return out


def test_the_scripts_import_trajaudit() -> None:
    assert len(_imports()) >= 40  # the scan finds the scripts' imports (66 lines when written)


@pytest.mark.parametrize(("script", "line", "module", "names"), _imports(),
                         ids=lambda v: v if isinstance(v, str) else None)
def test_benchmark_import_resolves(script: str, line: int, module: str, names: list[str]) -> None:
    mod = importlib.import_module(module)
    missing = [n for n in names if not hasattr(mod, n)]
    assert not missing, f"benchmarks/{script}:{line}: {module} has no {', '.join(missing)}"
