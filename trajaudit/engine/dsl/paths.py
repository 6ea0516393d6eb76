"""Compiled reads of paths (``v.f.x…``) for the rule compiler: the fast closures that read a view's
field straight from its table, and the shared helpers that follow the remaining keys and record the
value read as evidence (see :mod:`trajaudit.engine.dsl.compiler`)."""

from __future__ import annotations

from typing import Any, Callable

from trajaudit.engine.dsl.runtime import CALL_FIELDS, STEP_FIELDS, CallView, Env, StepView, View, child

Fn = Callable[[Env], Any]
Loc = Callable[[Env], "tuple[Any, str | None]"]


def var_path(name: str, typ: str, keys: list[str], gfn: Fn, gloc: Loc) -> tuple[Fn, Loc] | None:
    """``v.f.x…`` on a variable (typed step, call or any): when the value is a step or call view whose
    field table has the first key, that field is read straight from the table (what ``View.field``
    does); anything else (null, JSON values, an unknown field) takes ``gfn``/``gloc``, the reference
    closures. Returns ``(fn, loc)``, or ``None`` when no view field can have the first key."""
    entries: dict[type, tuple[Any, str]] = {}
    if typ in ("step", "any") and keys[0] in STEP_FIELDS:
        entries[StepView] = STEP_FIELDS[keys[0]]
    if typ in ("call", "any") and keys[0] in CALL_FIELDS:
        entries[CallView] = CALL_FIELDS[keys[0]]
    if not entries:
        return None
    rest = keys[1:]
    lookup = entries.get

    def loc(env: Env) -> tuple[Any, str | None]:
        v = env.vars.get(name)
        entry = lookup(v.__class__)
        if entry is None:
            return gloc(env)
        return follow(entry[0](v), v.address + entry[1], rest)

    if not rest:
        def fn(env: Env) -> Any:
            v = env.vars.get(name)
            entry = lookup(v.__class__)
            if entry is None:
                return gfn(env)
            val = entry[0](v)
            env.seen.append((v.address + entry[1], val, None))
            return val
    else:
        fn = recording(loc)
    return fn, loc


def follow(v: Any, addr: str, keys: list[str]) -> tuple[Any, str | None]:
    """Read constant ``keys`` from ``v`` (at ``addr``): view fields through their table, JSON by
    :func:`child`; ``(None, None)`` once a value on the way is null."""
    for k in keys:
        if v is None:
            return None, None
        if isinstance(v, View):
            v, addr = v.field(k)
        else:
            v = child(v, k)
            addr = f"{addr}.{k}"
    return v, addr


def recording(loc: Callable[[Env], tuple[Any, str | None]]) -> Fn:
    """The value closure of a path: ``loc``'s value, its address recorded as evidence."""
    def fn(env: Env) -> Any:
        v, addr = loc(env)
        if addr is not None:
            env.seen.append((addr, v, None))
        return v
    return fn
