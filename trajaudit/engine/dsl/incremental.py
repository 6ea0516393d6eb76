"""Incremental evaluation of values derived from a run's prefix (issue 20: a monitor's cost per step).

A closed comprehension over the prefix (``[p.json for p in outputs(earlier, "t") where …]``,
:func:`~trajaudit.engine.dsl.columnar.prefix_comprehension`) grows only by appending as the prefix
grows. So does everything computed from it element by element: ``flatten(S)``, a comprehension
``[ELT for v in S where COND]`` whose ``ELT``/``COND`` read only ``v``, parameters and ``traj`` —
whether ``S`` is written inline or bound by a ``let``. Such a value is returned as a
:class:`PrefixSlice`: a plain list (equal to, and used as, the reference's list) that also names the
append-only :class:`Series` it is a prefix of. The operations below recognize a ``PrefixSlice``
operand and answer from per-run state extended with the new suffix only:

- :func:`derived_comprehension`: each element's outcome (kept value, or the exception it raised)
  and the budget operations its evaluation charged (a nested comprehension charges its length) are
  computed once per run; a query charges the slice's length plus the elements' operations — the
  reference's total — and raises the first element's error, as the reference does;
- :func:`flatten_call`: ``flatten`` of a slice, filed once per run (``flatten`` charges nothing);
- :func:`member_fast`: ``x in S`` from an index of the series (first position of each string, of
  each distinct number, of ``true``/``false``), exactly :func:`~trajaudit.engine.dsl.runtime.member`'s
  answer: a number matches a number equal within the language's tolerance or a boolean equal under
  Python's ``==``; other needles, and series holding values of other types, take the reference scan.

The reference path stays the definition: with ``dsl.columnar.ENABLED = False`` no ``PrefixSlice`` is
made and every operation is the reference one (``tests/engine/dsl/test_incremental.py`` compares
results, errors, evidence and budget charges). A comprehension records no evidence and ``in`` and
``flatten`` none either, so the evidence is unchanged. Nothing is generated or executed.
"""

from __future__ import annotations

import math
import sys
from bisect import bisect_left, bisect_right, insort
from typing import Any, Callable

from trajaudit.engine.dsl import ast as A
from trajaudit.engine.dsl.runtime import Env, PrefixSlice, equal, is_num, member

Fn = Callable[[Env], Any]

__all__ = ["PREFILL", "Series", "closed_elementwise", "derived_comprehension", "extend_elements", "flatten_call",
           "member_fast", "prefill", "prefill_series", "register_prefill"]


class Series:
    """An append-only list of values (``vals``) and, per element of its source, the outcome so far.

    Attributes:
        vals: the values, in order (only ever appended to).
        kept: ``kept[j]`` = how many values the first ``j`` source elements gave.
        ops: ``ops[j]`` = budget operations charged evaluating the first ``j`` source elements.
        err_at, err, err_ops: the first source element that raised, its exception and the
            operations charged by it before it raised (``None`` while none raised).
    """

    __slots__ = ("vals", "kept", "ops", "err_at", "err", "err_ops", "index")

    def __init__(self) -> None:
        self.vals: list[Any] = []
        self.kept: list[int] = [0]
        self.ops: list[int] = [0]
        self.err_at: int | None = None
        self.err: BaseException | None = None
        self.err_ops = 0
        self.index: _Index | None = None

    def slice(self, n_src: int) -> PrefixSlice:
        """The values of the first ``n_src`` source elements (no error among them), as a slice of this series."""
        return PrefixSlice(self.vals[:self.kept[n_src]], self)

    def charge_for(self, n_src: int) -> int:
        """Operations the reference charges evaluating the first ``n_src`` elements (up to the error)."""
        if self.err_at is not None and self.err_at < n_src:
            return self.ops[self.err_at] + self.err_ops
        return self.ops[n_src]


def closed_elementwise(parts: list[A.Expr | None], var: str, free: Callable[..., set[str]]) -> bool:
    """Whether ``parts`` (an element expression and filter over ``var``) read only ``var``,
    parameters and ``traj`` and nest no quantifier (whose witness would leak into the rule's
    message); nested comprehensions are allowed (their charges are recorded per element)."""
    for part in parts:
        if part is None:
            continue
        if free(part, frozenset({var})) - {"params", "traj"}:
            return False
        if any(isinstance(n, A.Quant) for n in part.walk()):
            return False
    return True


def extend_elements(st: Series, env: Env, elements: Any, hi: int, var: str, where: Fn | None, elt: Fn) -> None:
    """Evaluate source elements ``len(st.kept)-1 .. hi-1`` (``elements(j)`` gives element ``j``) into
    ``st``: kept values, operations charged by each (measured, then taken back: the query charges
    them), the first error. The rule's budget is not in force while extending (the query charges)."""
    done = len(st.kept) - 1
    if done >= hi or st.err_at is not None:
        return
    tc = env.tc
    scratch = Env(tc, env.k)
    vars_ = scratch.vars
    vals, kept, ops = st.vals, st.kept, st.ops
    ops0, budget0 = tc.ops, tc.budget
    tc.budget = sys.maxsize
    try:
        for j in range(done, hi):
            before = tc.ops
            vars_[var] = elements(j)
            try:
                if where is None or where(scratch):
                    vals.append(elt(scratch))
            except Exception as e:  # noqa: BLE001 - re-raised by every query whose prefix holds it
                st.err_at, st.err, st.err_ops = j, e, tc.ops - before
                break
            kept.append(len(vals))
            ops.append(ops[-1] + tc.ops - before)
    finally:
        tc.ops, tc.budget = ops0, budget0


#: ``tc.cache`` key of the prefill list: callables ``f(tc)`` that extend one piece of prefix state
#: to the run's current length (registered when a query creates the state on a growing run)
PREFILL = ("prefill",)


def register_prefill(tc: Any, fn: Callable[[Any], None]) -> None:
    """Have :func:`prefill` extend a piece of prefix state of ``tc`` (a growing run) at each step."""
    tc.cache.setdefault(PREFILL, []).append(fn)


def prefill(tc: Any) -> None:
    """Extend every registered piece of prefix state of ``tc`` over the steps appended so far, in
    the order they were registered (a source before what is derived from it), charging nothing:
    what a query would evaluate anyway, done step by step rather than all at the next query (a
    monitor's per-step latency; ``LiveContext.append`` calls it). Queries charge as before."""
    for fn in tc.cache.get(PREFILL, ()):
        fn(tc)


def prefill_series(st: Series, tc: Any, elements: Callable[[int], Any], n: int, var: str, where: Fn | None,
                   elt: Fn) -> None:
    """:func:`extend_elements` of ``st`` to ``n`` source elements, ahead of the queries."""
    if len(st.kept) - 1 < n and st.err_at is None and tc.views:
        extend_elements(st, Env(tc, len(tc.views) - 1), elements, n, var, where, elt)


def derived_comprehension(node: A.Comprehension, where: Fn | None, elt: Fn, seq: Fn,
                          reference: Callable[[Env, Any], Any], free: Callable[..., set[str]]) -> Fn | None:
    """``[ELT for v in SEQ where COND]`` with ``ELT``/``COND`` closed (:func:`closed_elementwise`):
    a closure that evaluates ``SEQ`` and, when it is a :class:`PrefixSlice`, answers from a per-run
    series over the slice's series; otherwise calls ``reference(env, value)``. ``None`` for other shapes."""
    var = node.var
    if not closed_elementwise([node.elt, node.where], var, free):
        return None
    key = ("derived-list", id(node))

    def run(env: Env) -> Any:
        val = seq(env)
        if val.__class__ is not PrefixSlice:
            return reference(env, val)
        src, n = val.src, len(val)
        tc = env.tc
        tc.charge(n)  # the reference charges the materialized list's length first
        states = tc.cache.get(key)
        if states is None:
            states = tc.cache[key] = {}
        hit = states.get(id(src))
        if hit is None:
            hit = states[id(src)] = (src, Series())  # the source held: its id is not reused while cached
            if tc.lazy:
                d = hit[1]
                register_prefill(tc, lambda t: prefill_series(d, t, src.vals.__getitem__, len(src.vals), var,
                                                              where, elt))
        st = hit[1]
        svals = src.vals
        extend_elements(st, env, svals.__getitem__, n, var, where, elt)
        extra = st.charge_for(n)
        if extra:
            tc.charge(extra)
        if st.err_at is not None and st.err_at < n:
            raise st.err  # type: ignore[misc]
        return st.slice(n)

    return run


def flatten_call(plain: Callable[[Any], Any], arg: Fn, node: A.Call) -> Fn:
    """``flatten(X)``: ``plain(X's value)`` (the built-in with its error wrapping) unless ``X`` is a
    :class:`PrefixSlice`, then the flattened slice from a per-run series (``flatten`` charges
    nothing and cannot raise on a list)."""
    key = ("flatten", id(node))

    def run(env: Env) -> Any:
        val = arg(env)
        if val.__class__ is not PrefixSlice:
            return plain(val)
        src, n = val.src, len(val)
        tc = env.tc
        states = tc.cache.get(key)
        if states is None:
            states = tc.cache[key] = {}
        hit = states.get(id(src))
        if hit is None:
            hit = states[id(src)] = (src, Series())
            if tc.lazy:
                f = hit[1]
                register_prefill(tc, lambda t: _extend_flat(f, src, len(src.vals)))
        st = hit[1]
        _extend_flat(st, src, n)
        return st.slice(n)

    return run


def _extend_flat(st: Series, src: Series, n: int) -> None:
    done = len(st.kept) - 1
    if done < n:
        vals, kept, ops = st.vals, st.kept, st.ops
        for x in src.vals[done:n]:
            if isinstance(x, list):
                vals.extend(x)
            else:
                vals.append(x)
            kept.append(len(vals))
            ops.append(0)


# ---- membership ------------------------------------------------------------------------------

class _Index:
    """First positions in a series' values: of each string, each distinct finite number (a sorted
    list of them for the tolerance window), each infinite number, ``True``/``False``; ``odd`` the
    first position of a value of any other type (a list, object, view, null is fine: it equals no
    string or number) after which the index does not answer."""

    __slots__ = ("upto", "strs", "nums", "sorted", "bools", "odd")

    def __init__(self) -> None:
        self.upto = 0
        self.strs: dict[str, int] = {}
        self.nums: dict[Any, int] = {}
        self.sorted: list[float] = []
        self.bools: dict[bool, int] = {}
        self.odd: int | None = None

    def extend(self, vals: list[Any], hi: int) -> None:
        for j in range(self.upto, hi):
            if self.odd is not None:
                break
            y = vals[j]
            c = y.__class__
            if c is str:
                self.strs.setdefault(y, j)
            elif c is int or c is float:
                if y != y:  # NaN equals nothing
                    continue
                if y not in self.nums:
                    try:
                        f = float(y)
                    except OverflowError:
                        self.odd = j
                        break
                    self.nums[y] = j
                    if math.isfinite(f):
                        insort(self.sorted, f)
            elif c is bool:
                self.bools.setdefault(y, j)
            elif y is None or c is list or c is dict:
                continue  # equals no string or number (equal(): a == b)
            else:
                self.odd = j
        self.upto = max(self.upto, hi)

    def holds(self, x: Any, n: int) -> bool:
        """``any(equal(x, y) for y in vals[:n])`` for a string or number ``x`` (``odd`` past ``n`` not set)."""
        if x.__class__ is str:
            return self.strs.get(x, n) < n
        for b, p in self.bools.items():  # a number == a boolean under Python's == (1 == True)
            if p < n and x == b:
                return True
        if x != x:
            return False
        if not math.isfinite(x):
            return self.nums.get(x, n) < n
        w = 4e-9 * (abs(x) + 1.0)  # any y with equal(x, y) lies within this window (see tests)
        s = self.sorted
        for f in s[bisect_left(s, x - w):bisect_right(s, x + w)]:
            if self._first(f, n) is not None and equal(x, f):
                return True
        return self.nums.get(x, n) < n  # exact equality of a large int that floats round

    def _first(self, f: float, n: int) -> int | None:
        p = self.nums.get(f)
        if p is None:  # an int key whose float is f (float(int) rounds only past 2**53)
            p = min((q for k, q in self.nums.items() if float(k) == f), default=None)
        return p if p is not None and p < n else None


def member_fast(x: Any, container: Any) -> bool:
    """:func:`~trajaudit.engine.dsl.runtime.member`, from the series' index when ``container`` is a
    :class:`PrefixSlice` and ``x`` a string or number (not a boolean); the reference otherwise."""
    if container.__class__ is not PrefixSlice or not (x.__class__ is str or is_num(x)) \
            or (x.__class__ is int and abs(x) > 2 ** 53):
        return member(x, container)
    src, n = container.src, len(container)
    idx = src.index
    if idx is None:
        idx = src.index = _Index()
    if idx.upto < n:
        idx.extend(src.vals, n)
    if idx.odd is not None and idx.odd < n:
        return member(x, container)
    return idx.holds(x, n)
