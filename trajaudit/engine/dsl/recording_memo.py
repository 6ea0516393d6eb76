"""A bounded per-process memo of a pure function of a text, whose hits and stores can be recorded.

``pack_cache`` seeds such memos from its on-disk entries (parsed expressions, regex-safety verdicts)
and, with :meth:`RecordingMemo.recording`, collects the values a pack's compile used, to store them
with the pack. Used by ``rule_parser`` and ``regex_safety``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class RecordingMemo:
    """``{text: value}`` (values never ``None``), at most ``size`` entries (emptied when full).

    Args:
        size: the bound.
    """

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._memo: dict[str, Any] = {}
        self._recorders: list[dict[str, Any]] = []

    def get(self, key: str) -> Any:
        """The value stored for ``key`` (reported to every open recording), else ``None``."""
        hit = self._memo.get(key)
        if hit is not None:
            for r in self._recorders:
                r[key] = hit
        return hit

    def put(self, key: str, value: Any) -> Any:
        """Store ``value`` for ``key`` (and report it to every open recording); returns ``value``."""
        if len(self._memo) >= self.size:
            self._memo.clear()
        self._memo[key] = value
        for r in self._recorders:
            r[key] = value
        return value

    def seed(self, items: dict[str, Any]) -> None:
        """Store every pair of ``items``."""
        for key, value in items.items():
            self.put(key, value)

    @contextmanager
    def recording(self) -> Iterator[dict[str, Any]]:
        """Collect ``{key: value}`` of every hit and store inside the block."""
        got: dict[str, Any] = {}
        self._recorders.append(got)
        try:
            yield got
        finally:  # by identity: two recordings may hold equal contents
            del self._recorders[next(i for i, r in enumerate(self._recorders) if r is got)]

    def clear(self) -> None:
        """Empty the memo."""
        self._memo.clear()
