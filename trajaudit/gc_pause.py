"""A block without cyclic garbage collection, for work that builds many long-lived objects."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection in the block (restored after; nesting is fine, and a collector the
    caller disabled stays disabled). Loading and compiling rule packs or building an audit context
    allocate many long-lived objects (AST nodes, closures, schemas) and would otherwise trigger
    collections that re-traverse everything already alive (e.g. loaded runs, the packs built first).
    Reference counting still frees everything that is not in a cycle."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
