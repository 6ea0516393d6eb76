"""What the regex fast paths learn from a pattern's text, as plain data that the pack cache can store.

The literal prefilter (:mod:`~trajaudit.engine.dsl.regex.prefilter`) and the ASCII twins
(:mod:`~trajaudit.engine.dsl.regex.ascii`) parse every rule pattern again with ``re._parser`` to
decide how to search it: its required literals, anchor and required characters, whether its twin is
exact, and how its alternation splits into branches. Each decision is a pure function of the pattern
text and flags (and of the code and Python version, which key the pack cache's entries), so it is
kept here in plain JSON form, in a bounded per-process :class:`RecordingMemo`: ``pack_cache`` stores
the decisions a pack's patterns need in the pack's on-disk entry and seeds them back in the next
process, which then searches without parsing any pattern with ``re._parser``. Compiled patterns
(``re.compile``) are never stored: the twin and the branches are compiled from their text as before.

Exact or not used: a stored value is decoded with strict type checks; anything that does not decode
(an edited entry) is ignored and the decision is computed from the pattern again.

Keys: ``"<kind><flags>:<pattern>"`` with kind ``i`` (literals, anchor, characters: :func:`info_data`),
``t`` (the twin decision: ``[exact, uses_space]``), ``p`` (the branch texts, or ``[None]``), ``c`` (the
SRE program of a twin or branch pattern, :func:`compile_pattern`).

:func:`compile_pattern` is ``re.compile`` for rule regexes (``dsl.compiler.compile_regex``) and the patterns the
fast paths derive from them (ASCII twins, branches): on a
miss it compiles with ``re.compile`` and keeps the pattern's SRE program — the list of integers
CPython's ``re._compiler`` produces from the pattern text, with its group tables — once rebuilding
the pattern from it with ``_sre.compile`` gives a pattern equal to ``re.compile``'s (same text, flags,
program and groups); a later process rebuilds it from the stored program instead of parsing and
generating it again (≈ 0.15 ms per pattern, ≈ 275 patterns per audit with the shipped packs).
``_sre.compile`` validates every program it is given (CPython rejects code that could crash the
matcher), and the pack cache's key holds the exact Python version. Nothing is evaluated: a regex
program is matched by the regex engine, as the pattern ``re.compile`` would have built. Anything
unexpected (another Python implementation, a program ``_sre`` refuses) means ``re.compile``.

:func:`module_pattern` is the same for the patterns the package's own modules compile at import (the
claims stage's ≈ 90 module-level regexes, ≈ 20 ms of ``re.compile`` per process): their programs
are kept in one cache file of their own (:func:`save_module_patterns` writes it when a process made a
new one), keyed by the Python version alone — a program is a function of the pattern text, its flags
and CPython's regex compiler — and looked up by pattern text and flags, as the packs' programs are.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import sys
from array import array
from hashlib import sha256
from pathlib import Path
from typing import Any

from trajaudit.disk_cache import FORMAT, cache_dir, read_body, write_body
from trajaudit.engine.dsl.recording_memo import RecordingMemo

log = logging.getLogger(__name__)

try:  # CPython's regex compiler and matcher (private; stable in 3.11-3.13)
    if array("I").itemsize != 4:  # pragma: no cover - the code words are 32 bits
        raise ImportError("no 32-bit array type")
    import _sre
    from re import _compiler as _rc  # type: ignore[attr-defined]
    from re import _parser as _rp
except ImportError:  # pragma: no cover - another Python: re.compile always
    _sre = None

_MEMO = RecordingMemo(4096)
seed = _MEMO.seed
recording = _MEMO.recording
get = _MEMO.get
put = _MEMO.put

#: ``(pattern, program)`` built by :func:`compile_pattern` in this process, by key (as ``re``'s own cache:
#: equal patterns are one object, so they share their analyses and memoized results; like ``re``'s
#: cache, it is not emptied by :func:`clear_memo`, only bounded)
_PATTERNS: dict[str, tuple[re.Pattern[str], Any]] = {}


def clear_memo() -> None:
    """Forget every decision and program (the patterns already built stay, as in ``re``'s cache)."""
    _MEMO.clear()

Lits = frozenset[str]
Info = tuple[Lits | None, tuple[Lits, int] | None, tuple[frozenset[str], ...] | None]


def key(kind: str, rx: re.Pattern[str]) -> str:
    """The memo key of decision ``kind`` (``i``, ``t`` or ``p``) about ``rx`` (its text and flags)."""
    return f"{kind}{int(rx.flags)}:{rx.pattern}"


def _strs(v: Any) -> list[str]:
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        raise ValueError("not a list of strings")
    return v


def info_data(info: Info) -> list[Any]:
    """``(literals, anchor, characters)`` as JSON data: sets as sorted lists (order kept for the
    character sets, which are tested in turn)."""
    lits, anchor, chars = info
    return [None if lits is None else sorted(lits),
            None if anchor is None else [sorted(anchor[0]), anchor[1]],
            None if chars is None else [sorted(c) for c in chars]]


def info_from(d: Any) -> Info:
    """:func:`info_data` back to sets and tuples.

    Raises:
        ValueError: ``d`` is not what :func:`info_data` writes.
    """
    if not isinstance(d, list) or len(d) != 3:
        raise ValueError("not an analysis")
    lits, anchor, chars = d
    a = None
    if anchor is not None:
        if not (isinstance(anchor, list) and len(anchor) == 2 and type(anchor[1]) is int and anchor[1] >= 0):
            raise ValueError("not an anchor")
        a = (frozenset(_strs(anchor[0])), anchor[1])
    if chars is not None and not isinstance(chars, list):
        raise ValueError("not a list of character sets")
    return (None if lits is None else frozenset(_strs(lits)), a,
            None if chars is None else tuple(frozenset(_strs(c)) for c in chars))


def twin_from(d: Any) -> tuple[bool, bool]:
    """A stored twin decision ``[exact, uses_space]``.

    Raises:
        ValueError: not two booleans.
    """
    if not (isinstance(d, list) and len(d) == 2 and all(type(x) is bool for x in d)):
        raise ValueError("not a twin decision")
    return d[0], d[1]


def branches_from(d: Any) -> tuple[list[str] | None]:
    """A stored branch split ``[texts]`` or ``[None]`` (no usable split), as a 1-tuple.

    Raises:
        ValueError: neither.
    """
    if not (isinstance(d, list) and len(d) == 1):
        raise ValueError("not a branch split")
    return (None if d[0] is None else _strs(d[0]),)


def lookup(k: str, decode: Any) -> Any:
    """The decoded stored value of key ``k`` (``decode``: one of the ``*_from`` functions), or ``None``
    when there is none or it does not decode (then it is dropped and computed again)."""
    d = get(k)
    if d is None:
        return None
    try:
        return decode(d)
    except (ValueError, TypeError):  # the caller computes it and stores the fresh value over it
        return None


#: Keep and reuse SRE programs (:func:`compile_pattern`); ``False``: ``re.compile`` always.
SRE_PROGRAMS = True


def _program(pattern: str, flags: int) -> list[Any]:
    """``[flags, code, groups, groupindex, indexgroup]``: what ``re._compiler.compile`` hands to
    ``_sre.compile`` for ``pattern``, as JSON data; the code (a list of 32-bit words) as the base64 of
    its little-endian bytes (a JSON list of ~50k integers took ≈ 5 ms to read per process).

    Raises:
        OverflowError: a code word does not fit in 32 bits (then nothing is stored).
    """
    tree = _rp.parse(pattern, flags)
    code = array("I", _rc._code(tree, flags))
    if sys.byteorder == "big":
        code.byteswap()
    index = [None] * tree.state.groups
    for name, i in tree.state.groupdict.items():
        index[i] = name
    return [int(flags | tree.state.flags), base64.b64encode(code.tobytes()).decode("ascii"), tree.state.groups - 1,
            {name: int(i) for name, i in tree.state.groupdict.items()}, index]


def _from_program(pattern: str, d: Any) -> re.Pattern[str]:
    """The pattern rebuilt from a stored program (``_sre.compile`` validates it).

    Raises:
        ValueError: ``d`` is not a program's shape; whatever ``_sre.compile`` raises on a bad program.
    """
    if not (isinstance(d, list) and len(d) == 5 and type(d[0]) is int and isinstance(d[1], str)
            and type(d[2]) is int and isinstance(d[3], dict) and isinstance(d[4], list)):
        raise ValueError("not an SRE program")
    code = array("I")
    code.frombytes(base64.b64decode(d[1], validate=True))
    if sys.byteorder == "big":
        code.byteswap()
    return _sre.compile(pattern, d[0], code.tolist(), d[2], d[3], tuple(d[4]))


def _same(a: re.Pattern[str], b: re.Pattern[str]) -> bool:
    """Equal patterns (``==`` compares text, flags and program) with the same groups."""
    return a == b and a.groups == b.groups and a.groupindex == b.groupindex


def compile_pattern(pattern: str, flags: int) -> re.Pattern[str]:
    """``re.compile(pattern, flags)``, rebuilt from the stored SRE program when there is one (see the
    module docstring); a new program is stored only once it rebuilds a pattern equal to ``re.compile``'s.

    Raises:
        re.error: as ``re.compile``.
    """
    if _sre is None or not SRE_PROGRAMS or not isinstance(pattern, str):
        return re.compile(pattern, flags)
    flags = int(flags)  # not a RegexFlag: its text is the key, its value is stored
    k = f"c{flags}:{pattern}"
    d = get(k)
    hit = _PATTERNS.get(k)
    if hit is None:
        if len(_PATTERNS) >= 4096:
            _PATTERNS.clear()
        hit = _PATTERNS[k] = _built(pattern, flags, d)
    if hit[1] is not None and hit[1] is not d:  # a new program (or the memo was emptied): an open
        put(k, hit[1])  # recording sees it
    return hit[0]


def _built(pattern: str, flags: int, d: Any) -> tuple[re.Pattern[str], Any]:
    """``(pattern, its program or None)``: rebuilt from the stored program ``d``, else ``re.compile``'s
    (with its program when that rebuilds an equal pattern)."""
    if d is not None:
        try:
            return _from_program(pattern, d), d
        except Exception as e:  # noqa: BLE001 - a program that does not rebuild: compile it
            log.debug("stored regex program for %r not used: %s", pattern[:80], e)
    rx = re.compile(pattern, flags)
    try:
        prog = _program(pattern, flags)
        if _same(_from_program(pattern, prog), rx):
            return rx, prog
    except Exception as e:  # noqa: BLE001 - not stored; re.compile's pattern is used
        log.debug("no stored regex program for %r: %s", pattern[:80], e)
    return rx, None


#: ``{key: program}`` of :func:`module_pattern`'s patterns, read from their cache file on first use
#: (``None``: not read yet); ``_MODULE_NEW``: a program was added since (the file is out of date)
_MODULE: dict[str, Any] | None = None
_MODULE_NEW = False


def _module_file() -> Path | None:
    """The cache file of the module patterns' programs (``None``: the cache is off): one per Python
    version (the regex compiler's) and program format."""
    d = cache_dir()
    if d is None:
        return None
    magic = getattr(_sre, "MAGIC", "")
    return d / f"regex-{sha256(f'{FORMAT}|{sys.version}|{magic}'.encode()).hexdigest()}.json"


def _read_module_programs() -> dict[str, Any]:
    """The stored programs of the module patterns (empty when none or the file does not check out)."""
    p = _module_file()
    body = read_body(p) if p is not None else None
    if body is None:
        return {}
    try:
        d = json.loads(body)
    except ValueError as e:
        log.debug("module regex programs in %s not used: %s", p, e)
        return {}
    return d if isinstance(d, dict) else {}


def module_pattern(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(pattern, flags)`` for a pattern of the package's own code, rebuilt from its program
    in the module patterns' cache file when it has one (see the module docstring; the same check as
    :func:`compile_pattern`: a program is stored only once it rebuilds a pattern equal to ``re.compile``'s).

    Raises:
        re.error: as ``re.compile``.
    """
    global _MODULE, _MODULE_NEW
    if _sre is None or not SRE_PROGRAMS or not isinstance(pattern, str):
        return re.compile(pattern, flags)
    if _MODULE is None:
        _MODULE = _read_module_programs()
    flags = int(flags)
    k = f"c{flags}:{pattern}"
    d = _MODULE.get(k)
    hit = _PATTERNS.get(k)
    if hit is None:
        if len(_PATTERNS) >= 4096:
            _PATTERNS.clear()
        hit = _PATTERNS[k] = _built(pattern, flags, d)
    if hit[1] is not None and hit[1] is not d and hit[1] != d:  # a program the file lacks (an equal one
        _MODULE[k] = hit[1]  # built first by compile_pattern is no reason to write the file again)
        _MODULE_NEW = True
    return hit[0]


def save_module_patterns() -> None:
    """Write the module patterns' programs to their cache file if this process made a new one (nothing
    when the cache is off; a file that cannot be written is left: the next process compiles again)."""
    global _MODULE_NEW
    if not _MODULE_NEW or _MODULE is None:
        return
    p = _module_file()
    if p is None:
        return
    _MODULE_NEW = False
    try:
        write_body(p, json.dumps(_MODULE, sort_keys=True).encode())
    except OSError as e:
        log.debug("module regex programs not written to %s: %s", p, e)
