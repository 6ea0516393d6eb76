"""On-disk cache of the rule grammar's LALR parser tables, as JSON (never pickle).

Building the parser for ``rules.lark`` (reading the grammar, computing the LALR tables) takes
≈ 55 ms in every process that parses an expression: the first audit with a new or edited pack,
every ``trajaudit rules …`` command, rule synthesis. lark can rebuild a parser from its own
serialized form (``memo_serialize`` / ``_load_from_dict``, what its ``cache=True`` option and its
standalone generator use; ``cache=True`` stores it with pickle, which trajaudit never uses). That form
is plain data — dicts, lists, tuples, strings, numbers — stored here as tagged JSON.

Exact or not taken: the key hashes the grammar text, the parser options, the lark and Python versions
and this module; an entry is written only when the parser rebuilt from the JSON serializes back to
exactly the same data (so its tables are the built parser's); the shared digest header of
:mod:`pack_cache` guards the file; any problem (missing, corrupt, another lark, unwritable folder)
builds the parser normally. ``TRAJAUDIT_NO_CACHE=1`` turns it off with the pack cache.
"""

from __future__ import annotations

import json
import logging
import sys
from hashlib import sha256
from pathlib import Path
from typing import Any

from trajaudit import disk_cache
from trajaudit.engine.dsl.ast import same_data

log = logging.getLogger(__name__)

# options that only matter while reading the grammar text (and are not data)
_DROP_OPTIONS = ("import_paths", "source_path")


def _enc(x: Any) -> Any:
    """Tagged JSON: ``["L", …]`` list, ``["T", …]`` tuple, ``["D", [k, v], …]`` dict; scalars as they are."""
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, list):
        return ["L", *map(_enc, x)]
    if isinstance(x, tuple):
        return ["T", *map(_enc, x)]
    if isinstance(x, dict):
        return ["D", *([_enc(k), _enc(v)] for k, v in x.items())]
    raise TypeError(f"not plain data: {type(x).__name__}")


def _dec(x: Any) -> Any:
    if not isinstance(x, list):
        return x
    tag, items = x[0], x[1:]
    if tag == "L":
        return [_dec(i) for i in items]
    if tag == "T":
        return tuple(_dec(i) for i in items)
    if tag == "D":
        return {_dec(k): _dec(v) for k, v in items}
    raise ValueError(f"unknown tag {tag!r}")


def _serialized(parser: Any) -> tuple[Any, Any]:
    from lark.grammar import Rule
    from lark.lexer import TerminalDef

    data, memo = parser.memo_serialize([TerminalDef, Rule])
    data = dict(data, options={k: v for k, v in data["options"].items() if k not in _DROP_OPTIONS})
    return data, memo


def _path(grammar_text: str, options: dict[str, Any]) -> Path | None:
    import lark

    d = disk_cache.cache_dir()
    if d is None:
        return None
    h = sha256(json.dumps([disk_cache.FORMAT, lark.__version__, sys.version, grammar_text, sorted(options.items()),
                           Path(__file__).read_bytes().decode("utf-8")]).encode())
    return d / f"grammar-{h.hexdigest()}.json"


def load(grammar_text: str, options: dict[str, Any]) -> Any:
    """The LALR parser for ``grammar_text`` and ``options`` from the cache, or ``None``."""
    try:
        p = _path(grammar_text, options)
        body = disk_cache.read_body(p) if p is not None else None
        if body is None:
            return None
        from lark import Lark

        d = _dec(json.loads(body))
        return Lark._load_from_dict(d["data"], d["memo"])
    except Exception as e:  # noqa: BLE001 - any problem: build the parser normally
        log.debug("grammar cache: not used: %s", e)
        return None


def store(parser: Any, grammar_text: str, options: dict[str, Any]) -> None:
    """Write ``parser``'s tables, if they round-trip exactly (see the module docstring)."""
    try:
        p = _path(grammar_text, options)
        if p is None:
            return
        from lark import Lark

        data, memo = _serialized(parser)
        text = json.dumps(_enc({"data": data, "memo": memo}), ensure_ascii=False, allow_nan=False,
                          separators=(",", ":"))
        back = _dec(json.loads(text))
        rebuilt = Lark._load_from_dict(back["data"], back["memo"])
        if not same_data(_serialized(rebuilt), (data, memo)):
            log.debug("grammar cache: the parser does not round-trip; not cached")
            return
        disk_cache.write_body(p, text.encode("utf-8"))
    except Exception as e:  # noqa: BLE001 - a cache that cannot be written is simply not used
        log.debug("grammar cache: cannot write: %s", e)
