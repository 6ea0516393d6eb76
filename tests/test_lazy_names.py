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
    assert [n for n in names if n.startswith("_")] == []
    for sub in (n for n in names if n not in module.__all__):  # the rest are its submodules
        assert importlib.import_module(f"{name}.{sub}").__name__ == f"{name}.{sub}"
