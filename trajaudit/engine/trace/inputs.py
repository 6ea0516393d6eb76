"""What the ``audit`` command needs to know about its inputs before any is read: whether a path is a
URL, which suffixes are Parquet, the default shard size. Kept apart from :mod:`.shards` (the cluster's
planning and reading, ≈ 17 kB) so that a local audit, which shards nothing, does not import that."""

from __future__ import annotations

import os

PARQUET_SUFFIXES = (".parquet", ".pq")

#: Runs (JSONL lines, Parquet rows or runs) per shard by default.
DEFAULT_SHARD_RUNS = 64


def is_url(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a URL (``PROTOCOL://…``) rather than a plain local path."""
    return "://" in str(path)
