"""trajaudit/lazy_names.py: the ``__dir__`` of the packages whose public names load on first use."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("name", ["trajaudit", "trajaudit.llm", "trajaudit.engine.packs", "trajaudit.engine.run",
                                  "trajaudit.report"])
def test_dir_of_a_lazy_package_lists_its_public_names_only(name):
    """dir() of a package with lazy names listed TYPE_CHECKING, annotations, the lazy_names helper and
    the private tables (fresh-user pass): it lists ``__all__``, the lazy names and the submodules."""
    module = importlib.import_module(name)
    names = dir(module)
    assert names == sorted(set(names))
    assert set(module.__all__) <= set(names)
    assert not {"TYPE_CHECKING", "annotations", "lazy_names"} & set(names)
    assert [n for n in names if n.startswith("_")] == (["__version__"] if name == "trajaudit" else [])
    for sub in (n for n in names if n not in module.__all__ and n != "__version__"):  # the rest: its submodules
        assert importlib.import_module(f"{name}.{sub}").__name__ == f"{name}.{sub}"


_PACKAGES = ["trajaudit", "trajaudit.llm", "trajaudit.engine.packs", "trajaudit.engine.run", "trajaudit.report"]
_DIRS = ("import importlib, json, sys\n"
         "first = {n: dir(importlib.import_module(n)) for n in sys.argv[1:]}\n"
         "import trajaudit.disk_cache, trajaudit.gc_pause, trajaudit.regular_files, trajaudit.safe_json, trajaudit.cli\n"
         "import trajaudit.llm.prompt_run, trajaudit.engine.packs.lint, trajaudit.report.eval_html\n"
         "then = {n: dir(importlib.import_module(n)) for n in sys.argv[1:]}\n"
         "reachable = all(getattr(importlib.import_module(n), a) is not None for n in first for a in first[n])\n"
         "print(json.dumps([first, then, reachable]))\n")


def test_dir_is_the_public_api_whatever_was_imported_before():
    """dir(trajaudit) omitted __version__ and listed the helper modules disk_cache, regular_files,
    safe_json, gc_pause only after something had imported them (fresh-user pass): it lists the public
    names, __version__ and the public subpackages, the same in a fresh interpreter and after imports;
    every name listed is an attribute (a public subpackage is imported on first use)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", _DIRS, *_PACKAGES], capture_output=True, text=True, env=env,
                         check=True, cwd=root)
    first, then, reachable = json.loads(out.stdout)
    assert first == then and reachable
    top = set(first["trajaudit"])
    assert {"__version__", "audit", "load", "engine", "llm", "report", "eval", "cli", "errors", "distributed"} <= top
    assert not {"disk_cache", "regular_files", "safe_json", "gc_pause", "safe_yaml", "lazy_names", "api_args"} & top
    assert {"prompt_run", "client"} <= set(first["trajaudit.llm"])
    assert {"lint", "pack", "messages"} <= set(first["trajaudit.engine.packs"])
    assert {"eval_html", "ci"} <= set(first["trajaudit.report"])
