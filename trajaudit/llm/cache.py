"""The persistent response cache: sqlite, keyed by a sha256 of the request.

Re-running an audit with the same model, prompts and parameters is free and reproducible: every
successful (validated) answer is stored under :func:`request_key` and served without a call.
Only answers that passed validation are stored; refusals and errors never are.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from trajaudit.errors import ConfigError

log = logging.getLogger(__name__)

CACHE_FORMAT = 1


def request_key(model: str, messages: list[dict[str, Any]], params: dict[str, Any],
                schema: dict[str, Any] | None) -> str:
    """sha256 (hex) of the canonical JSON of (cache format, model, messages, parameters, schema).

    ``params`` are the sampling parameters that change the answer (temperature, max_tokens, seed);
    the endpoint URL is not part of the key (the model name identifies the model).
    """
    blob = json.dumps({"v": CACHE_FORMAT, "model": model, "messages": messages, "params": params,
                       "schema": schema}, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """A sqlite key-value store of answers, safe to share between threads (one connection + a lock).

    Args:
        path: the sqlite file; parent directories are created.

    Raises:
        ConfigError: the file cannot be created or is not a sqlite database.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, name TEXT, model TEXT, "
                "value TEXT NOT NULL, created REAL NOT NULL)"
            )
            self._db.commit()
        except (OSError, sqlite3.Error) as e:
            raise ConfigError(f"{self.path}: cannot open the LLM cache: {e}") from None

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored value for ``key``, or ``None``. A corrupt entry is logged and treated as a miss."""
        with self._lock:
            row = self._db.execute("SELECT value FROM answers WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            value = json.loads(row[0])
        except json.JSONDecodeError:
            log.warning("LLM cache %s: corrupt entry %s ignored", self.path, key[:12])
            return None
        return value if isinstance(value, dict) else None

    def put(self, key: str, value: dict[str, Any], *, name: str = "", model: str = "") -> None:
        """Store ``value`` (a JSON-serializable dict) under ``key``, replacing any previous entry."""
        text = json.dumps(value, ensure_ascii=False)
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?)",
                             (key, name, model, text, time.time()))
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._db.close()
