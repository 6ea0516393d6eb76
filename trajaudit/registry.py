"""A small typed name registry (one per kind: adapter, checker, judge, strategy).

Lookups of unknown names raise :class:`LookupError` with close-match suggestions; duplicate
registrations raise :class:`ValueError`. An entry may be registered *lazily* (a factory called on
its first lookup), so that a name can be listed without importing what it stands for. Registries are plain objects passed explicitly, not
module-global state.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


def close_hint(word: str, candidates: Iterable[str]) -> str:
    """``"; did you mean a, b?"`` with up to three candidates close to ``word`` (difflib's defaults,
    case-sensitive), or ``""`` — the suffix of the engine's unknown-name messages."""
    close = difflib.get_close_matches(str(word), list(candidates), n=3)
    return f"; did you mean {', '.join(close)}?" if close else ""


class Registry(Generic[T]):
    """Maps names to objects of one kind.

    Args:
        kind: a human word for the kind ("adapter", "checker", ...), used in error messages.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._factories: dict[str, Callable[[], T]] = {}

    def register(self, name: str, obj: T) -> T:
        """Register ``obj`` under ``name``; raises ``ValueError`` if the name is taken."""
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._items[name] = obj
        return obj

    def register_lazy(self, name: str, factory: Callable[[], T]) -> None:
        """Register ``name`` now and build its object with ``factory()`` on its first lookup.

        Raises:
            ValueError: the name is taken (at registration); the built object's ``name`` attribute,
                when it has one, differs from ``name`` (at the first lookup).
        """
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._items[name] = None  # type: ignore[assignment] - a placeholder keeping registration order
        self._factories[name] = factory

    def _built(self, name: str) -> T:
        factory = self._factories.get(name)
        if factory is not None:  # the factory stays registered until it has built a valid object
            obj = factory()
            if getattr(obj, "name", name) != name:
                raise ValueError(f"{self.kind} {name!r}: its factory built {obj.name!r}")
            self._items[name] = obj
            del self._factories[name]
        return self._items[name]

    def get(self, name: str) -> T:
        """Return the object named ``name``; raises ``LookupError`` suggesting close names."""
        try:
            return self._built(name)
        except KeyError:
            hint = close_hint(name, list(self._items))
            known = ", ".join(sorted(self._items)) or "none"
            raise LookupError(f"unknown {self.kind} {name!r}{hint} (known: {known})") from None

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def items(self) -> list[tuple[str, T]]:
        """All (name, object) pairs in registration order (builds the lazy entries)."""
        return [(name, self._built(name)) for name in list(self._items)]

    def __len__(self) -> int:
        return len(self._items)
