"""Names of a package imported on first use (PEP 562), so importing the package stays cheap."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_names(package: str, namespace: dict[str, Any], names: Mapping[str, str],
               submodules: frozenset[str] = frozenset(),
               public_modules: Iterable[str] | None = None) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of a package whose public names load on first use.

    Args:
        package: the package's ``__name__``.
        namespace: its ``globals()``; a name, once imported, is stored there (later reads are plain).
        names: public name -> defining module, relative to ``package`` (``"client"``) or absolute
            (``"trajaudit.engine.run.pipeline"``).
        submodules: submodules reachable as attributes before they are imported
            (``trajaudit.report.ci.sarif_text``), public or not.
        public_modules: the package's public submodules and subpackages; default: every one whose
            name has no leading underscore (found next to its ``__init__``, once). They are reachable
            as attributes before they are imported too.

    Returns:
        ``(__getattr__, __dir__)``; ``__getattr__`` raises AttributeError for any other name;
        ``__dir__`` lists the public names only, whatever was imported before: ``names``, ``__all__``,
        the public modules and ``__version__`` if the package has one (not ``TYPE_CHECKING``,
        ``annotations``, the ``lazy_names`` helper, internal modules or the other dunders).
    """
    found: list[frozenset[str]] = []

    def public() -> frozenset[str]:
        if not found:
            given = public_modules if public_modules is not None else (
                m.name for m in pkgutil.iter_modules(namespace.get("__path__", ())) if not m.name.startswith("_"))
            found.append(frozenset(given))
        return found[0]

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            if name in submodules or (not name.startswith("_") and name in public()):
                return importlib.import_module(f"{package}.{name}")
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module if "." in module else f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        version = {"__version__"} & namespace.keys()
        return sorted(set(names) | set(namespace.get("__all__", ())) | public() | version)

    return __getattr__, __dir__
