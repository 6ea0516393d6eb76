"""Columnar (prefix-state) evaluation of the rule language's quantifiers over a run (issue 22).

A quantifier over a step or call range whose filter is *closed* (it reads only the bound variable,
pack parameters and run constants — see :mod:`trajaudit.engine.rule_queries`) has an answer that is a
function of the range alone: "the latest earlier tool output of ``find_user_id_by_email``", "how many
earlier user turns mention a refund", "is there an earlier successful authentication". The compiler
recognizes these shapes and compiles them, instead of the generic :meth:`QuantPlan.run`, into a
closure over *prefix state* (:class:`PrefixFilter`): the positions of the run's steps (calls) where
the filter holds, or raised, extended once per step and queried in O(1) for ``earlier`` /
``calls(earlier)`` (O(log n) for ``since(x)`` and other windows). Recognized shapes:

- ``exists | first | latest | count  v in RANGE where CLOSED`` — ``RANGE`` any step or call range
  (``earlier``, ``calls(earlier)``, ``since(latest x in earlier where …)``, ``later``, ``steps`` …);
- ``forall v in RANGE [where CLOSED]: CLOSED_BODY`` (the prefix state of the violators);
- ``latest | first | exists  v in RANGE where CLOSED and KEY(v) == VALUE and … [: BODY]`` with
  ``VALUE`` not reading ``v`` (a string, or a not too large int, at run time): an *equality join* — the prefix state also files each candidate under the string
  ``KEY(v)``, so ``latest o in earlier where o.kind == "tool" and o.json.order_id == call.args.order_id``
  goes straight to the candidates holding that order id instead of scanning every earlier output;
- ``latest | first | exists  v in RANGE where [CLOSED and] NEEDLE in COLL(v) [or NEEDLE2 in COLL2(v) …] and …``
  with string needles: a *membership join* (:class:`MemberIndex`, :func:`_member_closure`), ``RANGE``
  a step or call range with a closed filter, or ``outputs(earlier[, "NAME"])`` without one.

Anything else (open conditions of other forms, bodies that read the current step, sequences that are
lists) keeps :meth:`QuantPlan.run`. Nothing is generated or executed: these are closures built from
the same compiled sub-closures.

Exactness (the reference is :meth:`QuantPlan.run`; ``tests/test_rule_columnar.py`` compares them):
the result, the witness binding, the evidence entries (addresses, values, notes) and the budget
charges are those of the reference path. The state is the reference's own per-run index
(``QuantPlan._matches``: the closed filter over the whole universe, charged once) when the run is
complete (a batch); a :class:`~trajaudit.engine.rule_runtime.TrajContext` with ``lazy`` set (a run
growing one step at a time, e.g. a runtime monitor) extends it only as far as the queries need and
charges each element when it is first evaluated — the same answers, and a budget counted in
elements actually evaluated.
"""

from __future__ import annotations

import sys
import weakref
from bisect import bisect_left
from typing import Any, Callable

from trajaudit.engine.dsl import ast as A
from trajaudit.engine.dsl.builtins import CallRange, StepRange, tool_views
from trajaudit.engine.dsl.incremental import (
    Series,
    closed_elementwise,
    extend_elements,
    prefill_series,
    register_prefill,
)
from trajaudit.engine.dsl.queries import QuantPlan, _range_addr
from trajaudit.engine.dsl.regex.prefilter import lower_text
from trajaudit.engine.dsl.runtime import CallView, Env, EvalError, StepView, is_num, member

Fn = Callable[[Env], Any]

__all__ = ["KeyIndex", "PrefixFilter", "columnar_quant", "eq_join_parts", "prefix_comprehension", "warm_quant"]

#: Compile recognized quantifiers to prefix-state closures. Tests set it to ``False`` to compile the
#: reference closures (:meth:`QuantPlan.run` everywhere) and compare.
ENABLED = True

#: the prefix-state closures compiled so far, by quantifier (or comprehension) node id, while their
#: rule is alive; each has a ``warm(env, seq_pure, label)`` attribute that creates its lazy prefix state
#: (:func:`warm_quant`)
_WARM: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()


def _warmable(node_id: int, run: Fn, warm: Callable[[Env, bool, str], bool]) -> Fn:
    run.warm = warm  # type: ignore[attr-defined]
    _WARM[node_id] = run
    return run


def _warm_universe(seq_fn: Fn, env: Env, seq_pure: bool) -> tuple[list[Any], Any] | None:
    """The universe (step or call views) of a quantifier's range, read by evaluating its sequence in
    ``env`` — only when the sequence reads no query (``seq_pure``: nothing charged or cached)."""
    if not seq_pure:
        return None
    try:
        seq = seq_fn(env)
    except Exception:  # noqa: BLE001 - not warmed: the first query builds the state, as before
        return None
    if seq.__class__ is not StepRange and seq.__class__ is not CallRange:
        return None
    return _ranged(env, seq)[0], seq


def warm_quant(node_id: int, label: str, env: Env, seq_pure: bool) -> bool:
    """Create, on a growing run (``env.tc.lazy``), the prefix state the quantifier or comprehension
    node ``node_id`` (compiled to a prefix-state closure, source text ``label``) would create at its
    first query — a filter's :class:`PrefixFilter`, a join's :class:`KeyIndex`, a prefix
    comprehension's :class:`~trajaudit.engine.dsl.incremental.Series` — empty and registered for
    :func:`~trajaudit.engine.dsl.incremental.prefill`, so it is filled step by step from now on
    instead of over the whole prefix at that first query (a monitor's per-step latency). Nothing is
    evaluated or charged here: the queries charge exactly what they charged before (the state's
    ``charged`` count is untouched). ``seq_pure``: the quantifier's sequence reads no query (the
    range is read to choose the step or call views). Whether a state was created."""
    run = _WARM.get(node_id)
    if run is None or not env.tc.lazy:
        return False
    return bool(run.warm(env, seq_pure, label))


class PrefixFilter:
    """The prefix state of one filter over one universe (a run's step views or call views).

    Attributes:
        matches: sorted positions ``i < upto`` where the filter held or raised.
        err_pos: sorted positions where it raised; ``errors`` their messages.
        upto: how many elements of the universe have been filed.
        charged: how many elements queries have charged (``<= upto`` once :meth:`prefill` ran ahead);
            ``owed`` the operations nested queries charged while prefilling element ``i``, charged
            when a query first covers ``i``; ``stuck``: prefilling stopped (an element raised
            something other than :class:`EvalError`; queries evaluate the rest as before).
    """

    __slots__ = ("matches", "err_pos", "errors", "upto", "charged", "owed", "stuck")

    def __init__(self) -> None:
        self.matches: list[int] = []
        self.err_pos: list[int] = []
        self.errors: dict[int, str] = {}
        self.upto = 0
        self.charged = 0
        self.owed: dict[int, int] = {}
        self.stuck = False

    def extend(self, env: Env, universe: list[Any], hi: int, var: str, pred: Fn | None, charge: bool) -> None:
        """File elements ``upto..hi-1`` of ``universe``: evaluate ``pred`` (``None``: always true) on
        each (in a scratch environment: nothing it records is kept). ``charge``: count each element
        below ``hi`` against the current rule's budget the first time a query covers it (elements
        :meth:`prefill` filed ahead are charged then, with what their evaluation charged)."""
        if hi > self.charged:
            if charge:
                n = hi - self.charged
                if self.owed:
                    n += sum(v for i, v in self.owed.items() if self.charged <= i < hi)
                env.tc.charge(n)
            self.charged = hi
        if hi <= self.upto:
            return
        lo = self.upto
        scratch = Env(env.tc, env.k)
        vars_ = scratch.vars
        matches, errors = self.matches, self.errors
        for i in range(lo, hi):
            vars_[var] = universe[i]
            if pred is not None:
                try:
                    if not pred(scratch):
                        continue
                except EvalError as e:
                    matches.append(i)
                    self.err_pos.append(i)
                    errors[i] = str(e)
                    continue
            matches.append(i)
        self.upto = hi

    def prefill(self, tc: Any, universe: list[Any], var: str, pred: Fn | None) -> None:
        """File the elements of ``universe`` not filed yet, ahead of any query and charging nothing
        (a monitor's add: the work is spread over the steps instead of falling on the next query).
        What an element's evaluation charges (a nested query) is kept in ``owed`` for the query."""
        hi = len(universe)
        if self.stuck or hi <= self.upto:
            return
        scratch = Env(tc, len(tc.views) - 1)
        vars_ = scratch.vars
        matches, errors = self.matches, self.errors
        ops0, budget0 = tc.ops, tc.budget
        tc.budget = sys.maxsize
        try:
            for i in range(self.upto, hi):
                vars_[var] = universe[i]
                before = tc.ops
                try:
                    held = pred is None or pred(scratch)
                except EvalError as e:
                    matches.append(i)
                    self.err_pos.append(i)
                    errors[i] = str(e)
                    held = False
                except Exception:  # noqa: BLE001 - left to the query, which raises it where the reference does
                    self.stuck = True
                    return
                if tc.ops != before:
                    self.owed[i] = tc.ops - before
                if held:
                    matches.append(i)
                self.upto = i + 1
        finally:
            tc.ops, tc.budget = ops0, budget0


class KeyIndex:
    """The join keys of a filter's matches (:func:`eq_join_parts`), filed in position order as far as
    queries need: ``keys`` ``{key: [positions, sorted]}`` for string, int and bool keys, ``key_bad``
    the sorted positions whose key raised or is of a class ``equal`` may find close (floats, others);
    null, lists, objects and views are filed nowhere (they never equal a string or int VALUE).
    Evaluating a key is a pure read (the reference scan evaluates it on the elements it visits
    without a charge of its own), so filing charges nothing."""

    __slots__ = ("keys", "key_bad", "done", "stuck")

    def __init__(self) -> None:
        self.keys: dict[Any, list[int]] = {}
        self.key_bad: list[int] = []
        self.done = 0  # matches[:done] are filed
        self.stuck = False  # prefilling stopped (a key charged or raised other than EvalError)

    def prefill(self, tc: Any, universe: list[Any], matches: list[int], errors: dict[int, str], var: str,
                key: Fn) -> None:
        """File every match filed so far, ahead of the queries (a monitor's add). A key whose
        evaluation charges the budget or raises something other than :class:`EvalError` stops the
        prefilling: that match and the later ones are filed by the queries, as before."""
        end = len(matches)
        if self.stuck or end <= self.done:
            return
        scratch = Env(tc, len(tc.views) - 1)
        vars_ = scratch.vars
        ops0, budget0 = tc.ops, tc.budget
        tc.budget = sys.maxsize
        try:
            for t in range(self.done, end):
                i = matches[t]
                if i not in errors:
                    vars_[var] = universe[i]
                    try:
                        k, bad = key(scratch), False
                    except EvalError:
                        k, bad = None, True
                    except Exception:  # noqa: BLE001 - left to the query
                        self.stuck = True
                        return
                    if tc.ops != ops0:
                        self.stuck = True
                        return
                    self._file(k, bad, i)
                self.done = t + 1
        finally:
            tc.ops, tc.budget = ops0, budget0

    def extend(self, env: Env, universe: list[Any], matches: list[int], errors: dict[int, str], hi: int, var: str,
               key: Fn) -> None:
        """File the matches below position ``hi`` (those whose filter raised are not keyed)."""
        end = bisect_left(matches, hi, self.done)
        if end <= self.done:
            return
        scratch = Env(env.tc, env.k)
        vars_ = scratch.vars
        for t in range(self.done, end):
            i = matches[t]
            if i in errors:
                continue
            vars_[var] = universe[i]
            self._file_key(scratch, key, i)
        self.done = end

    def _file_key(self, scratch: Env, key: Fn, i: int) -> None:
        try:
            k = key(scratch)
        except EvalError:
            self.key_bad.append(i)
            return
        self._file(k, False, i)

    def _file(self, k: Any, bad: bool, i: int) -> None:
        if bad:
            self.key_bad.append(i)
            return
        c = k.__class__
        if c is str or c is int or c is bool:
            self.keys.setdefault(k, []).append(i)
        elif c not in _NEVER_EQUAL:  # a float (compared with a tolerance) or anything unusual: visited
            self.key_bad.append(i)



class MemberIndex(KeyIndex):
    """The :class:`KeyIndex` of a membership join (:func:`member_join_parts`): each match is filed
    under every string its collection ``COLL(v)`` holds — the string elements of a list, the string
    keys of an object — which are exactly the collections where ``NEEDLE in COLL(v)`` holds for a
    string ``NEEDLE`` (``member``: a string equals only an equal string; an object holds its keys).
    Null holds nothing and is filed nowhere; a string (a substring test), anything ``in`` rejects
    (it raises), and a collection holding a ``str`` subclass are filed in ``key_bad`` (visited the
    reference way)."""

    __slots__ = ()

    def _file(self, k: Any, bad: bool, i: int) -> None:
        if bad:
            self.key_bad.append(i)
            return
        c = k.__class__
        if k is None:
            return
        if isinstance(k, (list, tuple)) or c is dict:
            found: set[str] = set()
            for e in k:
                if e.__class__ is str:
                    found.add(e)
                elif isinstance(e, str):
                    self.key_bad.append(i)
                    return
            keys = self.keys
            for e in found:
                keys.setdefault(e, []).append(i)
            return
        self.key_bad.append(i)


#: an equality join scans (the reference way) when it has at most this many candidates in range,
#: and files and reads keys only above it (a short run's few candidates cost less to scan)
JOIN_MIN = 12

#: key classes that ``equal`` never finds equal to a string or an int VALUE (and compares without raising)
_NEVER_EQUAL = frozenset({type(None), list, dict, tuple, StepView, CallView})

#: int VALUEs a join looks up exactly: for ints of smaller magnitude, ``equal``'s 1e-9 relative
#: tolerance is below 1, so it holds only for equal ints (and ``True``/``False`` for 1/0, which a dict
#: lookup finds too); larger ones take the reference path
_INT_LIMIT = 500_000_000


def _joinable(value: Any) -> bool:
    c = value.__class__
    return c is str or (c is int and -_INT_LIMIT < value < _INT_LIMIT)


def _ranged(env: Env, seq: Any) -> tuple[list[Any], int, int]:
    """``(universe, lo, hi)`` of a step or call range (what ``QuantPlan._universe`` computes)."""
    tc = env.tc
    if seq.__class__ is StepRange:
        views = tc.views
        n = len(views)
        lo, hi = seq.lo, seq.hi
        return views, (lo if 0 <= lo <= n else 0 if lo < 0 else n), (hi if 0 <= hi <= n else 0 if hi < 0 else n)
    cs = tc.call_steps
    return tc.all_calls, bisect_left(cs, seq.lo), bisect_left(cs, seq.hi)


def _state(plan: QuantPlan, env: Env, universe: list[Any], hi: int, tag: str, pred: Fn | None) -> tuple[Any, ...]:
    """``(matches, err_pos, errors)`` of ``plan`` on ``universe``, covering at least ``[0, hi)``.

    A complete run (``tc.lazy`` false) uses the reference index :meth:`QuantPlan._matches` (the same
    cache entry, charge and sharing between rules). A lazy run extends a :class:`PrefixFilter` to ``hi``."""
    tc = env.tc
    if not tc.lazy:
        return plan._matches(env, universe, tag, pred)  # type: ignore[arg-type]
    ck = (plan.key, tag + "-lazy", id(universe))
    pf = tc.cache.get(ck)
    if pf is None:
        pf = tc.cache[ck] = PrefixFilter()
        var = plan.var
        register_prefill(tc, lambda t: pf.prefill(t, universe, var, pred))
    pf.extend(env, universe, hi, plan.var, pred, charge=True)
    return pf.matches, pf.err_pos, pf.errors


def _key_index(plan: QuantPlan, env: Env, universe: list[Any], matches: list[int], errors: dict[int, str], hi: int,
               key: Fn, tag: Any = "join-keys", cls: type[KeyIndex] = KeyIndex) -> KeyIndex:
    cache = env.tc.cache
    ck = (plan.key, tag, id(universe), id(matches))
    ki = cache.get(ck)
    if ki is None:
        ki = cache[ck] = cls()
        if env.tc.lazy:
            var = plan.var
            register_prefill(env.tc, lambda t: ki.prefill(t, universe, matches, errors, var, key))
    ki.extend(env, universe, matches, errors, hi, plan.var, key)
    return ki


def _first_error_in(err_pos: list[int], errors: dict[int, str], lo: int, hi: int) -> None:
    if err_pos:
        j = bisect_left(err_pos, lo)
        if j < len(err_pos) and err_pos[j] < hi:
            raise EvalError(errors[err_pos[j]])


def eq_join_parts(open_parts: list[A.Expr], var: str, free: Callable[..., set[str]]) -> tuple[A.Expr, A.Expr] | None:
    """``(KEY, VALUE)`` when the first open conjunct is ``KEY == VALUE`` (either order) with ``KEY`` a
    path on ``var`` (``v.f.g``, constant keys) and ``VALUE`` not reading ``var``, neither nesting a
    quantifier or comprehension; else ``None``. (Only the first conjunct: the reference evaluates the
    conjuncts in order, so a later one is never evaluated on an element whose key differs.)"""
    if not open_parts:
        return None
    e = open_parts[0]
    if not (isinstance(e, A.Binary) and e.op == "=="):
        return None
    for key, value in ((e.left, e.right), (e.right, e.left)):
        node = key
        while isinstance(node, A.Attr):
            node = node.obj
        if not (isinstance(key, A.Attr) and isinstance(node, A.Name) and node.id == var):
            continue
        if var in free(value) or any(isinstance(n, (A.Quant, A.Comprehension)) for n in (*key.walk(), *value.walk())):
            continue
        return key, value
    return None


def member_join_parts(open_parts: list[A.Expr], var: str, free: Callable[..., set[str]]) -> list[tuple[A.Expr, A.Expr]] | None:
    """``[(COLL, NEEDLE), ...]`` when the first open conjunct is ``NEEDLE in COLL`` or a disjunction
    (``or``) of such tests, each ``COLL`` reading ``var`` and each ``NEEDLE`` not, none nesting a
    quantifier or comprehension (a *membership join*: ``latest p in outputs(earlier, "t") where x in
    keys(p.json.variants)``); else ``None``. Only the first conjunct, as :func:`eq_join_parts`."""
    if not open_parts:
        return None
    out: list[tuple[A.Expr, A.Expr]] = []
    todo = [open_parts[0]]
    while todo:
        e = todo.pop(0)
        if isinstance(e, A.Binary) and e.op == "or":
            todo[:0] = [e.left, e.right]
            continue
        if not (isinstance(e, A.Binary) and e.op == "in") or var in free(e.left) or var not in free(e.right) \
                or any(isinstance(n, (A.Quant, A.Comprehension)) for n in (*e.left.walk(), *e.right.walk())):
            return None
        out.append((e.right, e.left))
    return out


def outputs_seq(node: A.Expr) -> tuple[str | None] | None:
    """``(NAME,)`` for the sequence ``outputs(earlier, "NAME")`` (``(None,)`` for ``outputs(earlier)``),
    else ``None``. The caller checks that ``earlier`` is not shadowed."""
    if not (isinstance(node, A.Call) and node.func == "outputs" and node.args and isinstance(node.args[0], A.Name)
            and node.args[0].id == "earlier"):
        return None
    if len(node.args) == 1:
        return (None,)
    if len(node.args) == 2 and isinstance(node.args[1], A.Literal) and isinstance(node.args[1].value, str):
        return (node.args[1].value,)
    return None


def columnar_quant(plan: QuantPlan, join: tuple[Fn, Fn] | None = None,
                   members: tuple[list[tuple[Fn, Fn]], tuple[str | None] | None] | None = None) -> Fn | None:
    """The prefix-state closure of ``plan`` (see the module docstring), or ``None`` when its shape is
    not one of the recognized ones (the caller keeps ``plan.run``).

    Args:
        plan: the compiled quantifier.
        join: for a plan whose first open conjunct is an equality join (:func:`eq_join_parts`), the
            compiled ``(KEY, VALUE)`` closures.
        members: for a membership join (:func:`member_join_parts`), the compiled ``(COLL, NEEDLE)``
            closures and :func:`outputs_seq` of the sequence (``None``: another sequence).

    Returns:
        ``fn(env) -> value`` with :meth:`QuantPlan.run`'s result, witness, evidence and charges; for a
        sequence that is not a step or call range it calls ``plan.run``.
    """
    kind, var, label = plan.kind, plan.var, plan.label
    if not ENABLED:
        return None
    reference = plan.run
    if plan.substring is not None:
        return _substring_closure(plan, reference)
    seq_fn = _seq_value(plan)
    miss_note = f"no match: {label}"
    if kind == "forall":
        if not plan.body_closed or plan.open is not None:
            return None
        body, closed = plan.body, plan.closed
        pred: Fn = (lambda e: not body(e)) if closed is None else (lambda e: closed(e) and not body(e))  # type: ignore[misc]

        def run_forall(env: Env) -> Any:
            seq = seq_fn(env)
            if seq.__class__ is not StepRange and seq.__class__ is not CallRange:
                return reference(env)
            universe, lo, hi = _ranged(env, seq)
            matches, err_pos, errors = _state(plan, env, universe, hi, "forall", pred)
            _first_error_in(err_pos, errors, lo, hi)
            a = bisect_left(matches, lo) if lo else 0
            if a < len(matches) and matches[a] < hi:
                item = universe[matches[a]]
                env.witness[var] = item
                env.seen.append((item.address, item, var))
                return False
            return True

        def warm_forall(env: Env, seq_pure: bool, text: str) -> bool:
            got = _warm_universe(seq_fn, env, seq_pure) if text == label else None
            if got is not None:
                _state(plan, env, got[0], 0, "forall", pred)
            return got is not None
        return _warmable(plan.key, run_forall, warm_forall)
    if members is not None and kind in _FINDS:  # (the compiler gives members only without join)
        return _member_closure(plan, members[0], members[1], reference, miss_note)
    if plan.body is not None and (join is None or kind == "count"):
        return None
    if plan.closed is None:
        return _bare_closure(plan, reference, miss_note) if plan.open is None else None
    if plan.open is not None and (join is None or kind == "count"):
        return None
    closed = plan.closed
    if join is None:
        def run(env: Env) -> Any:
            seq = seq_fn(env)
            if seq.__class__ is not StepRange and seq.__class__ is not CallRange:
                return reference(env)
            universe, lo, hi = _ranged(env, seq)
            matches, err_pos, errors = _state(plan, env, universe, hi, "filter", closed)
            a = bisect_left(matches, lo) if lo else 0
            b = bisect_left(matches, hi)
            if kind == "count":
                _first_error_in(err_pos, errors, lo, hi)
                return b - a
            if a < b:
                env.tc.charge()  # the one element the reference scan visits
                i = matches[b - 1] if kind == "latest" else matches[a]
                if i in errors:
                    raise EvalError(errors[i])
                item = universe[i]
                env.witness[var] = item
                env.seen.append((item.address, item, var))
                return item if kind != "exists" else True
            env.seen.append((_range_addr(seq), None, miss_note))
            return False if kind == "exists" else None

        def warm(env: Env, seq_pure: bool, text: str) -> bool:
            got = _warm_universe(seq_fn, env, seq_pure) if text == label else None
            if got is not None:
                _state(plan, env, got[0], 0, "filter", closed)
            return got is not None
        return _warmable(plan.key, run, warm)
    return _join_closure(plan, join, reference, miss_note)


def _join_closure(plan: QuantPlan, join: tuple[Fn, Fn], reference: Fn, miss_note: str) -> Fn:
    """The equality-join form of :func:`columnar_quant` (``latest``/``first``/``exists``).

    The reference scan visits the candidates (closed matches in range) newest first for ``latest``,
    charging one per visit; on each it evaluates the open conjuncts, the first being ``KEY == VALUE``.
    With ``VALUE`` a string, or an int of magnitude below :data:`_INT_LIMIT`, ``equal(key, VALUE)``
    holds exactly for the keys a dict lookup of ``VALUE`` finds among the string, int and bool keys,
    and never for null, lists, objects or views; so a candidate whose key is one of those, did not
    raise and is not found fails that conjunct without raising, and what it recorded is dropped: such
    candidates are skipped here and only charged. The candidates that remain — key found, key a
    float or of another class, key raised, or filter raised — are visited exactly as the reference
    does (the reference scan itself, on those positions, body included), so the witness, evidence,
    errors and charges are the reference's. Any other ``VALUE`` (or one that raises) takes the
    reference path."""
    kind = plan.kind
    key_fn, value_fn = join
    seq_fn, closed, test = _seq_value(plan), plan.closed, plan.open
    scan = plan._scan
    latest = kind == "latest"

    def run(env: Env) -> Any:
        seq = seq_fn(env)
        if seq.__class__ is not StepRange and seq.__class__ is not CallRange:
            return reference(env)
        mark = len(env.seen)
        try:
            value = value_fn(env)
        except EvalError:
            value = None
        finally:
            del env.seen[mark:]
        if not _joinable(value):
            return reference(env)
        universe, lo, hi = _ranged(env, seq)
        matches, err_pos, errors = _state(plan, env, universe, hi, "filter", closed)
        a = bisect_left(matches, lo) if lo else 0
        b = bisect_left(matches, hi)
        if b - a <= JOIN_MIN:  # few candidates: the reference scan (filing keys would cost more)
            return scan(env, range(a, b), matches, errors, universe, None, test, seq_addr=seq)
        pf = _key_index(plan, env, universe, matches, errors, hi, key_fn)
        # positions the reference must really visit, in scan order: key equal to VALUE, key raised, filter
        # raised; walked lazily (a hit usually comes first), from one sorted list when the other two
        # have nothing in the range (the common case), else from their merge
        must = _must_visit(pf.keys.get(value, ()), pf.key_bad, err_pos, matches[a], hi, latest)
        got = _visit_candidates(env, must, matches, a, b, latest, scan, errors, universe, test)
        if got is not _MISS:
            return got
        env.seen.append((_range_addr(seq), None, miss_note))
        return False if kind == "exists" else None

    def warm(env: Env, seq_pure: bool, text: str) -> bool:
        got = _warm_universe(seq_fn, env, seq_pure) if text == plan.label else None
        if got is None:
            return False
        matches, _, errors = _state(plan, env, got[0], 0, "filter", closed)
        _key_index(plan, env, got[0], matches, errors, 0, key_fn)
        return True

    return _warmable(plan.key, run, warm)


def _member_closure(plan: QuantPlan, pairs: list[tuple[Fn, Fn]], outputs: tuple[str | None] | None,
                    reference: Fn, miss_note: str) -> Fn:
    """The membership-join form of :func:`columnar_quant` (``latest``/``first``/``exists``), the
    counterpart of :func:`_join_closure` for a first open conjunct ``NEEDLE in COLL(v)`` (or a
    disjunction of such): with every ``NEEDLE`` a string, the candidates where the conjunct can hold
    or raise are those a :class:`MemberIndex` files under a needle, or in ``key_bad``, or whose closed
    filter raised; the others fail it without raising (what they recorded is dropped), so they are
    only charged, and the rest are visited by the reference scan itself (witness, evidence, errors
    and charges are the reference's). The sequence is a step or call range (with a closed filter:
    its prefix state), or ``outputs(earlier[, "NAME"])`` without a closed filter (a list: the run's
    aligned tool views, no filter charge, no "no match" note — as the reference's list scan).
    Anything else, or a needle that is not a string or raises, takes the reference path."""
    kind, closed, test, scan = plan.kind, plan.closed, plan.open, plan._scan
    seq_fn = _seq_value(plan)
    latest = kind == "latest"
    listed = outputs is not None and closed is None and plan.seq_loc is None
    name = outputs[0] if outputs is not None else None

    def run(env: Env) -> Any:
        seq = seq_fn(env)
        c = seq.__class__
        if c is StepRange or c is CallRange:
            if closed is None:
                return reference(env)
            universe, lo, hi = _ranged(env, seq)
            matches, err_pos, errors = _state(plan, env, universe, hi, "filter", closed)
            seq_addr: Any = seq
        elif listed and c is list:
            tc = env.tc
            universe = tool_views(tc, name, tc.tool_positions(name))
            hi = len(seq)
            if hi > len(universe) or (hi and seq[hi - 1] is not universe[hi - 1]):
                return reference(env)
            lo, err_pos, errors, seq_addr = 0, [], {}, None
            matches = _identity(tc, len(universe))
        else:
            return reference(env)
        mark = len(env.seen)
        try:
            needles = [needle(env) for _, needle in pairs]
        except EvalError:
            needles = []
        finally:
            del env.seen[mark:]
        if not needles or any(n.__class__ is not str for n in needles):
            return reference(env)
        a = bisect_left(matches, lo) if lo else 0
        b = bisect_left(matches, hi)
        if b - a <= JOIN_MIN:  # few candidates: the reference scan
            return scan(env, range(a, b), matches, errors, universe, None, test, seq_addr=seq_addr)
        lists: list[Any] = [err_pos]
        for d, (coll, _) in enumerate(pairs):
            ix = _key_index(plan, env, universe, matches, errors, hi, coll, ("member-keys", d), MemberIndex)
            lists += [ix.keys.get(needles[d], ()), ix.key_bad]
        start = matches[a]
        if len(pairs) == 1:
            must = _must_visit(lists[1], lists[2], err_pos, start, hi, latest)
        else:
            merged = _merge(*lists, start, hi)
            must = reversed(merged) if latest else iter(merged)
        got = _visit_candidates(env, must, matches, a, b, latest, scan, errors, universe, test)
        if got is not _MISS:
            return got
        if seq_addr is not None:
            env.seen.append((_range_addr(seq_addr), None, miss_note))
        return False if kind == "exists" else None

    def warm(env: Env, seq_pure: bool, text: str) -> bool:
        got = _warm_universe(seq_fn, env, seq_pure) if text == plan.label and closed is not None else None
        if got is None:  # (an outputs() list is filed by its first query)
            return False
        universe = got[0]
        matches, _, errors = _state(plan, env, universe, 0, "filter", closed)
        for d, (coll, _) in enumerate(pairs):
            _key_index(plan, env, universe, matches, errors, 0, coll, ("member-keys", d), MemberIndex)
        return True

    return _warmable(plan.key, run, warm)


def _identity(tc: Any, n: int) -> list[int]:
    """``[0, 1, .., n-1]``, kept per run and grown (the candidates of a filter-less list join)."""
    ids = tc.cache.get("identity-positions")
    if ids is None:
        ids = tc.cache["identity-positions"] = []
    if len(ids) < n:
        ids.extend(range(len(ids), n))
    return ids


_MISS = object()


def _visit_candidates(env: Env, must: Any, matches: list[int], a: int, b: int, latest: bool, scan: Any,
                      errors: dict[int, str], universe: list[Any], test: Fn | None) -> Any:
    """Visit the join's must-visit positions ``must`` (in scan order) the reference way, charging the
    candidates ``matches[a:b]`` the reference scan would visit between them; the first answer, or
    ``_MISS`` (every candidate charged) when none holds."""
    charge = env.tc.charge
    if latest:
        nxt = b - 1  # the reference's next candidate place
        for p in must:
            j = bisect_left(matches, p, a, b)
            if nxt > j:
                charge(nxt - j)
            got = scan(env, range(j, j + 1), matches, errors, universe, None, test, seq_addr=None)
            if got is not None:
                return got
            nxt = j - 1
        if nxt >= a:
            charge(nxt - a + 1)
        return _MISS
    nxt = a
    for p in must:
        j = bisect_left(matches, p, a, b)
        if j > nxt:
            charge(j - nxt)
        got = scan(env, range(j, j + 1), matches, errors, universe, None, test, seq_addr=None)
        if got is not None and got is not False:
            return got
        nxt = j + 1
    if b > nxt:
        charge(b - nxt)
    return _MISS


_RAISED = object()

_FINDS = frozenset({"latest", "first", "exists"})


class _Occurrences:
    """Where one needle occurs in a run's step texts: ``pos`` (sorted) for steps ``< upto``."""

    __slots__ = ("pos", "upto")

    def __init__(self) -> None:
        self.pos: list[int] = []
        self.upto = 0

    def first_in(self, lo: int, hi: int, holds: Callable[[int], bool]) -> int | None:
        """The first occurrence in ``[lo, hi)``, filing steps only until it is found."""
        pos = self.pos
        j = bisect_left(pos, lo)
        if j < len(pos) and pos[j] < hi:
            return pos[j]
        while self.upto < hi:
            i = self.upto
            self.upto = i + 1
            if holds(i):
                pos.append(i)
                if i >= lo:
                    return i
        return None

    def last_in(self, lo: int, hi: int, holds: Callable[[int], bool]) -> int | None:
        """The last occurrence in ``[lo, hi)`` (every step below ``hi`` filed)."""
        pos = self.pos
        while self.upto < hi:
            i = self.upto
            self.upto = i + 1
            if holds(i):
                pos.append(i)
        j = bisect_left(pos, hi)
        return pos[j - 1] if j and pos[j - 1] >= lo else None


def _substring_closure(plan: QuantPlan, reference: Fn) -> Fn:
    """The reference's substring plan (``exists/first/latest s in STEPS where X in [lower(]s.content[)]``,
    ``QuantPlan._substring``) with the scan for the witness replaced by a per-run index of where each
    needle occurs, filed step by step and only as far as asked: the same witness, the same charges
    (the steps the reference's scan would visit before it), and the reference scan on the witness for
    the evidence. A needle repeated at many steps (the same id in every later call) no longer re-scans
    the prefix. Anything else (not a step range, an empty range, a needle that raises or is not text
    or a number) is the reference path."""
    needle_fn, lowered = plan.substring  # type: ignore[misc]
    loc, seq_fn, test = plan.seq_loc, plan.seq, plan.open
    latest = plan.kind == "latest"
    scan = plan._scan

    def run(env: Env) -> Any:
        if loc is not None:
            seq, addr = loc(env)
        else:
            seq, addr = seq_fn(env), None
        if seq.__class__ is not StepRange:
            return reference(env)
        universe, lo, hi = _ranged(env, seq)
        if hi <= lo:
            return reference(env)
        mark = len(env.seen)
        try:
            needle = needle_fn(env)
        except EvalError:
            needle = _RAISED
        finally:
            del env.seen[mark:]
        if needle is _RAISED or not (needle.__class__ is str or is_num(needle)):
            return reference(env)
        cache = env.tc.cache
        key = ("substring", id(universe), lowered, needle.__class__, needle)
        occ = cache.get(key)
        if occ is None:
            occ = cache[key] = _Occurrences()

        def holds(i: int) -> bool:
            text = universe[i].step.content
            return member(needle, lower_text(text) if lowered and isinstance(text, str) else text)

        i = occ.last_in(lo, hi, holds) if latest else occ.first_in(lo, hi, holds)
        where = addr or seq
        if i is not None:
            visited = (hi - 1 - i) if latest else (i - lo)
            if visited:
                env.tc.charge(visited)
            return scan(env, range(i, i + 1), None, {}, universe, None, test, seq_addr=where)
        env.tc.charge(hi - lo)
        return scan(env, range(0), None, {}, universe, None, test, seq_addr=where)

    return run


def _seq_value(plan: QuantPlan) -> Fn:
    """The closure giving the quantified sequence as the reference reads it (through ``seq_loc`` when
    there is one: that read records no evidence)."""
    loc = plan.seq_loc
    if loc is None:
        return plan.seq
    return lambda env: loc(env)[0]


def _bare_closure(plan: QuantPlan, reference: Fn, miss_note: str) -> Fn:
    """``exists/first/latest/count v in RANGE`` without a condition (the reference's ``_bare``)."""
    kind, var, label = plan.kind, plan.var, plan.label
    loc = plan.seq_loc
    seq_fn = plan.seq

    def run(env: Env) -> Any:
        if loc is not None:
            seq, addr = loc(env)
        else:
            seq, addr = seq_fn(env), None
        if seq.__class__ is not StepRange and seq.__class__ is not CallRange:
            return reference(env)
        universe, lo, hi = _ranged(env, seq)
        n = hi - lo if hi > lo else 0
        if kind == "count":
            if n:
                env.tc.charge(n)
            env.seen.append((addr if addr is not None else _range_addr(seq), n, label))
            return n
        if not n:
            env.seen.append((addr if addr is not None else _range_addr(seq), None, miss_note))
            return False if kind == "exists" else None
        env.tc.charge()
        item = universe[hi - 1] if kind == "latest" else universe[lo]
        env.witness[var] = item
        env.seen.append((item.address, item, var))
        return True if kind == "exists" else item

    return run


def _must_visit(keyed: Any, bad: list[int], err: list[int], lo: int, hi: int, backward: bool) -> Any:
    """The positions ``lo <= p < hi`` of the three sorted lists, in ascending order (descending when
    ``backward``): an iterator over ``keyed`` alone when ``bad`` and ``err`` have none in the range."""
    if not _any_in(bad, lo, hi) and not _any_in(err, lo, hi):
        i, j = bisect_left(keyed, lo), bisect_left(keyed, hi)
        return (keyed[t] for t in range(j - 1, i - 1, -1)) if backward else (keyed[t] for t in range(i, j))
    merged = _merge(keyed, bad, err, lo, hi)
    return reversed(merged) if backward else iter(merged)


def _any_in(xs: list[int], lo: int, hi: int) -> bool:
    if not xs:
        return False
    j = bisect_left(xs, lo)
    return j < len(xs) and xs[j] < hi


def _merge(*lists_and_bounds: Any) -> list[int]:
    """Sorted distinct positions ``lo <= p < hi`` from the three sorted position lists."""
    *lists, lo, hi = lists_and_bounds
    out: set[int] = set()
    for xs in lists:
        if not xs:
            continue
        j = bisect_left(xs, lo)
        while j < len(xs) and xs[j] < hi:
            out.add(xs[j])
            j += 1
    return sorted(out)


# ---- comprehensions over the prefix -----------------------------------------------------------

def prefix_comprehension(node: A.Comprehension, where: Fn | None, elt: Fn,
                         free: Callable[..., set[str]]) -> Fn | None:
    """A prefix-state closure for ``[ELT for v in SEQ where COND]`` with ``SEQ`` one of ``earlier``,
    ``calls(earlier)``, ``outputs(earlier)``, ``outputs(earlier, "tool")`` and ``ELT``/``COND`` closed
    (reading only ``v``, parameters and ``traj``; no quantifier inside; a nested comprehension's
    charges are recorded per element): the per-element outcomes are computed once per run, element
    by element as the prefix grows (:mod:`~trajaudit.engine.dsl.incremental`), and each query returns
    the kept values of its prefix — the reference's list, as a
    :class:`~trajaudit.engine.dsl.runtime.PrefixSlice` (a new list; the values are shared, as
    :func:`~trajaudit.engine.rule_queries.shared_comprehension` shares them), the same budget charge
    (the prefix's length plus what the elements charged) and, when an element raised, the same
    exception (the first in order). A comprehension records no evidence (the reference discards what it reads). ``None``
    for other shapes (the caller keeps the reference closure). The caller checks that ``earlier`` is
    not shadowed by a let or variable."""
    if not ENABLED:
        return None
    seq, var = node.seq, node.var
    name: str | None = None
    if isinstance(seq, A.Name) and seq.id == "earlier":
        shape = "steps"
    elif isinstance(seq, A.Call) and seq.func in ("calls", "outputs") and seq.args \
            and isinstance(seq.args[0], A.Name) and seq.args[0].id == "earlier":
        if seq.func == "calls" and len(seq.args) == 1:
            shape = "calls"
        elif seq.func == "outputs" and len(seq.args) == 1:
            shape = "outputs"
        elif seq.func == "outputs" and len(seq.args) == 2 and isinstance(seq.args[1], A.Literal) \
                and isinstance(seq.args[1].value, str):
            shape, name = "outputs", seq.args[1].value
        else:
            return None
    else:
        return None
    if not closed_elementwise([node.elt, node.where], var, free):
        return None
    key = ("prefix-list", id(node))

    def positions(env: Env) -> tuple[list[Any], Any, int]:
        """``(universe, index of element j in it or None for identity, count before the current step)``."""
        tc = env.tc
        if shape == "steps":
            n = len(tc.views)
            return tc.views, None, env.k if env.k <= n else n
        if shape == "calls":
            return tc.all_calls, None, bisect_left(tc.call_steps, env.k)
        pos = tc.tool_positions(name)  # what outputs(earlier[, name]) keeps
        return tc.views, pos, bisect_left(pos, env.k)

    def positions_all(tc: Any) -> tuple[Any, int]:
        """``(element j, how many)`` of the whole universe so far (a monitor's prefill)."""
        universe, pos, _ = positions(Env(tc, len(tc.views) - 1))
        n = len(universe) if pos is None else len(pos)
        return (universe.__getitem__ if pos is None else (lambda j: universe[pos[j]])), n

    def run(env: Env) -> Any:
        universe, pos, hi = positions(env)
        tc = env.tc
        tc.charge(hi)  # the reference charges the materialized sequence's length
        st = tc.cache.get(key)
        if st is None:
            st = tc.cache[key] = Series()
            if tc.lazy:
                register_prefill(tc, lambda t: prefill_series(st, t, *positions_all(t), var, where, elt))
        extend_elements(st, env, universe.__getitem__ if pos is None else (lambda j: universe[pos[j]]),
                        hi, var, where, elt)
        extra = st.charge_for(hi)  # what nested comprehensions in the element charged
        if extra:
            tc.charge(extra)
        if st.err_at is not None and st.err_at < hi:
            raise st.err  # type: ignore[misc]
        return st.slice(hi)

    label = A.unparse(node)

    def warm(env: Env, seq_pure: bool, text: str) -> bool:
        tc = env.tc
        if text != label or key in tc.cache:
            return False
        st = tc.cache[key] = Series()
        register_prefill(tc, lambda t: prefill_series(st, t, *positions_all(t), var, where, elt))
        return True

    return _warmable(id(node), run, warm)
