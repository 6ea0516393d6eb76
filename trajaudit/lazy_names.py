"""Names of a package imported on first use (PEP 562), so importing the package stays cheap."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any


def lazy_names(package: str, namespace: dict[str, Any], names: Mapping[str, str],
               submodules: frozenset[str] = frozenset()) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of a package whose public names load on first use.

    Args:
        package: the package's ``__name__``.
        namespace: its ``globals()``; a name, once imported, is stored there (later reads are plain).
        names: public name -> defining module, relative to ``package`` (``"client"``) or absolute
            (``"trajaudit.engine.run.pipeline"``).
        submodules: submodules reachable as attributes before they are imported
            (``trajaudit.report.ci.sarif_text``).

    Returns:
        ``(__getattr__, __dir__)``; ``__getattr__`` raises AttributeError for any other name;
        ``__dir__`` lists the public names only: ``names``, ``__all__``, the ``submodules`` and the
        package's submodules imported so far (not ``TYPE_CHECKING``, ``annotations``, the
        ``lazy_names`` helper or the module's dunders).
    """

    def __getattr__(name: str) -> Any:
        if name in submodules:
            return importlib.import_module(f"{package}.{name}")
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module if "." in module else f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        loaded = {k for k, v in namespace.items()
                  if isinstance(v, ModuleType) and v.__name__ == f"{package}.{k}" and not k.startswith("_")}
        return sorted(set(names) | submodules | set(namespace.get("__all__", ())) | loaded)

    return __getattr__, __dir__
