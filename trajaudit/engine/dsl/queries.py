"""Trajectory queries: ``exists / forall / count / latest / first`` and comprehensions at run time.

Cost model (issue 3: "no cross-product blow-up"). A quantifier over a step or call range
(``earlier``, ``later``, ``steps``, ``since(x)``, ``calls(earlier)`` …) splits its filter into the
conjuncts that mention only the bound variable and constants ("closed") and the rest ("open"). The
closed part is evaluated once per trajectory over every step/call and kept as a sorted index list;
each step then answers by bisection and only checks the open part on the candidates. So
``exists u in earlier where u.kind == "user" and u.content ~ /yes/i`` costs O(n) per trajectory, not
O(n²). Filters that depend on the current step (``u.json.order_id == call.args.order_id``) scan the
candidates of their closed part, newest first for ``latest``; every visited element is charged to
the rule's budget.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any, Callable

from trajaudit.engine.dsl import ast as A
from trajaudit.engine.dsl.builtins import CallRange, StepRange, as_items
from trajaudit.engine.dsl.regex.prefilter import lower_text
from trajaudit.engine.dsl.runtime import Env, EvalError, copy_list, is_num, member

Fn = Callable[[Env], Any]


@dataclass
class QuantPlan:
    """A compiled quantifier.

    Attributes:
        kind: exists / forall / count / latest / first.
        var: the bound variable name.
        seq: closure giving the sequence (a range, a list, an object).
        seq_loc: closure giving ``(sequence, address)`` when the sequence is a path, else ``None``.
        closed: conjunction of the filter's closed conjuncts (pre-computable), or ``None``.
        open: conjunction of the other filter conjuncts, or ``None``.
        body: the ``: condition`` of forall (or of exists/count/latest/first), or ``None``.
        body_closed: the body mentions only the variable and constants.
        key: a cache key unique to this quantifier node.
        label: source text, used in evidence notes.
        share: a key equal for quantifiers whose pre-computable parts are equal expressions over the
            same element type (so they give equal results on a run), or ``None`` (never shared).
    """

    kind: str
    var: str
    seq: Fn
    seq_loc: Callable[[Env], tuple[Any, str | None]] | None
    closed: Fn | None
    open: Fn | None
    body: Fn | None
    body_closed: bool
    key: int
    label: str
    share: int | None = None
    substring: tuple[Fn, bool] | None = None

    def __post_init__(self) -> None:
        # which path a range takes, decided once (run() is called ~300 times per run)
        self._ranged = ("indexed" if self.closed is not None or (self.kind == "forall" and self.body_closed)
                        else "bare" if self.open is None and self.body is None and self.kind != "forall"
                        else None)

    def run(self, env: Env) -> Any:
        """Evaluate the quantifier in ``env``; binds the witness/counterexample in ``env.witness``."""
        if self.seq_loc is not None:
            seq, addr = self.seq_loc(env)
        else:
            seq, addr = self.seq(env), None
        ranged = self._ranged
        if ranged is not None and seq.__class__ in _RANGES:
            return self._indexed(env, seq) if ranged == "indexed" else self._bare(env, seq, addr)
        if self.substring is not None and isinstance(seq, StepRange):
            got = self._substring(env, seq, addr)
            if got is not _MISSING:
                return got
        items = as_items(env, seq)
        if addr is not None and isinstance(seq, dict):
            addrs = [f"{addr}.{k}" for k in seq]
        elif addr is not None and isinstance(seq, (list, tuple)):
            addrs = [f"{addr}.{i}" for i in range(len(items))]
        else:
            addrs = None
        test = _conj(self.closed, self.open)
        if addr is None and isinstance(seq, (StepRange, CallRange)):
            addr = seq  # its address is written only if the evidence needs it
        return self._scan(env, range(len(items)), None, {}, items, addrs, test, seq_addr=addr)

    def _bare(self, env: Env, seq: Any, addr: str | None) -> Any:
        """``exists/first/latest/count x in RANGE`` with no condition: the range's first (last) element
        or its length, without materializing it — the same result, witness, evidence and budget
        charges as :meth:`_scan` (one element visited; every element for ``count``)."""
        universe, lo, hi = self._universe(env, seq)
        n = max(0, hi - lo)
        seq_addr = addr if addr is not None else _range_addr(seq)
        if self.kind == "count":
            if n:
                env.tc.charge(n)
            env.seen.append((seq_addr, n, self.label))
            return n
        if not n:
            env.seen.append((seq_addr, None, f"no match: {self.label}"))
            return False if self.kind == "exists" else None
        env.tc.charge()
        item = universe[hi - 1] if self.kind == "latest" else universe[lo]
        env.witness[self.var] = item
        env.seen.append((item.address, item, self.var))
        return True if self.kind == "exists" else item

    def _substring(self, env: Env, seq: StepRange, addr: str | None) -> Any:
        """:attr:`substring` plans: the needle ``X`` does not depend on the element, so the witness is
        the first (last) step whose content holds it, found with ``member`` on the (lowered) texts;
        then :meth:`_scan` visits just that step, so its evidence and witness are the reference ones,
        and the elements skipped are charged as the scan would charge them. ``_MISSING`` (take the
        reference path) when ``X`` raises or is not text or a number — errors surface as the scan raises them."""
        needle_fn, lowered = self.substring  # type: ignore[misc]
        universe, lo, hi = self._universe(env, seq)
        if hi <= lo:
            return _MISSING
        mark = len(env.seen)
        try:
            needle = needle_fn(env)
        except EvalError:
            return _MISSING
        finally:
            del env.seen[mark:]
        if not (isinstance(needle, str) or is_num(needle)):
            return _MISSING
        order = range(hi - 1, lo - 1, -1) if self.kind == "latest" else range(lo, hi)
        for visited, i in enumerate(order):
            text = universe[i].step.content
            if member(needle, lower_text(text) if lowered and isinstance(text, str) else text):
                if visited:
                    env.tc.charge(visited)
                return self._scan(env, range(i, i + 1), None, {}, universe, None, self.open, seq_addr=addr or seq)
        env.tc.charge(hi - lo)
        return self._scan(env, range(0), None, {}, universe, None, self.open, seq_addr=addr or seq)

    # -- indexed path --------------------------------------------------------------------------

    def _universe(self, env: Env, seq: Any) -> tuple[list[Any], int, int]:
        tc = env.tc
        if isinstance(seq, StepRange):
            n = len(tc.views)
            return tc.views, max(0, min(seq.lo, n)), max(0, min(seq.hi, n))
        cs = tc.call_steps
        return tc.all_calls, bisect_left(cs, seq.lo), bisect_left(cs, seq.hi)

    def _matches(self, env: Env, universe: list[Any], tag: str, pred: Fn) -> tuple[list[int], list[int], dict]:
        """Positions in ``universe`` where ``pred`` holds (or raised), computed once per trajectory."""
        cache = env.tc.cache
        key = (self.key, tag, id(universe))
        hit = cache.get(key)
        if hit is not None:
            if env.tc.lazy:
                self._grow(env, universe, hit, pred)
            return hit
        tc = env.tc
        filing0, ops0 = tc.filing, tc.ops
        try:
            return self._file(env, universe, tag, pred, key)
        finally:  # nesting-safe: an outer filing counts what inner ones charged once
            tc.filing = filing0 + tc.ops - ops0

    def _file(self, env: Env, universe: list[Any], tag: str, pred: Fn, key: Any) -> tuple[list[int], list[int], dict]:
        """The miss path of :meth:`_matches`: charge the universe, take an equal filter's index or compute it."""
        cache = env.tc.cache
        env.tc.charge(len(universe))  # what computing it costs this rule, whoever computed it first
        if self.share is not None:  # an equal filter of another rule already ran on this run
            skey = ("shared", self.share, tag, id(universe))
            hit = cache.get(skey)
            if hit is not None:
                cache[key] = hit
                if env.tc.lazy:
                    self._grow(env, universe, hit, pred)
                return hit
        scratch = Env(env.tc, env.k)
        matches: list[int] = []
        errors: dict[int, str] = {}
        for i, item in enumerate(universe):
            scratch.vars[self.var] = item
            try:
                if pred(scratch):
                    matches.append(i)
            except EvalError as e:
                matches.append(i)
                errors[i] = str(e)
        out = (matches, sorted(errors), errors)
        cache[key] = out
        if env.tc.lazy:  # the run may grow (a monitor's LiveContext): remember how far it is filed
            cache[("upto", id(matches))] = len(universe)
        if self.share is not None:
            cache[("shared", self.share, tag, id(universe))] = out
        return out

    def _grow(self, env: Env, universe: list[Any], hit: tuple[list[int], list[int], dict], pred: Fn) -> None:
        """A run that grows one step at a time (``tc.lazy``; a monitor's
        :class:`~trajaudit.engine.dsl.live.LiveContext` appends to the universe in place): file into
        ``hit`` the elements added since it was computed, charged to the current rule."""
        cache = env.tc.cache
        ukey = ("upto", id(hit[0]))
        done = cache.get(ukey, len(universe))
        n = len(universe)
        if done >= n:
            return
        env.tc.charge(n - done)
        matches, err_pos, errors = hit
        scratch = Env(env.tc, env.k)
        for i in range(done, n):
            scratch.vars[self.var] = universe[i]
            try:
                if pred(scratch):
                    matches.append(i)
            except EvalError as e:
                matches.append(i)
                err_pos.append(i)
                errors[i] = str(e)
        cache[ukey] = n

    @staticmethod
    def _raise_if_error_in(err_pos: list[int], errors: dict[int, str], lo: int, hi: int) -> None:
        j = bisect_left(err_pos, lo)
        if j < len(err_pos) and err_pos[j] < hi:
            raise EvalError(errors[err_pos[j]])

    def _indexed(self, env: Env, seq: Any) -> Any:
        universe, lo, hi = self._universe(env, seq)
        if self.kind == "forall" and self.body_closed and self.open is None:
            # violators = filter ∧ ¬body, pre-computed once; any violator in range is a counterexample
            body = self.body
            closed = self.closed
            pred = (lambda e: not body(e)) if closed is None else (lambda e: closed(e) and not body(e))
            matches, err_pos, errors = self._matches(env, universe, "forall", pred)
            self._raise_if_error_in(err_pos, errors, lo, hi)
            a = bisect_left(matches, lo)
            if a < len(matches) and matches[a] < hi:
                env.witness[self.var] = universe[matches[a]]
                item = universe[matches[a]]
                env.seen.append((item.address, item, self.var))
                return False
            return True
        if self.closed is not None:
            matches, err_pos, errors = self._matches(env, universe, "filter", self.closed)
            a, b = bisect_left(matches, lo), bisect_left(matches, hi)
        else:
            matches, err_pos, errors = None, [], {}
            a, b = lo, hi
        if self.kind == "count" and self.open is None and self.body is None:
            self._raise_if_error_in(err_pos, errors, lo, hi)
            return b - a
        return self._scan(env, range(a, b), matches, errors, universe, None, self.open, seq_addr=seq)

    # -- generic scan --------------------------------------------------------------------------

    def _scan(self, env: Env, positions: range, lookup: list[int] | None, errors: dict[int, str],
              items: list[Any], addrs: list[str] | None, test: Fn | None, seq_addr: Any) -> Any:
        """Visit ``items[lookup[j]]`` (or ``items[j]``) for ``j`` in ``positions`` (newest first for latest).
        ``seq_addr``: the sequence's evidence address, a step/call range (addressed on use), or ``None``.

        Three named steps: bind the variable and run the kind's loop (:func:`_visit_find`,
        :func:`_visit_count`, :func:`_visit_forall`), restore the caller's binding, then write the
        evidence and the answer (:meth:`_conclude`)."""
        var = self.var
        vars_, addrs_env = env.vars, env.addrs
        saved = vars_.get(var, _MISSING)
        saved_addr = addrs_env.get(var)
        kind = self.kind
        order = reversed(positions) if kind == "latest" else positions
        try:
            hit, count = _VISIT[kind](env, var, order, lookup, errors, items, addrs, test, self.body)
        finally:
            _restore(vars_, var, saved, _MISSING)
            _restore(addrs_env, var, saved_addr, None)
        return self._conclude(env, hit, count, items, addrs, seq_addr)

    def _conclude(self, env: Env, hit: int | None, count: int, items: list[Any], addrs: list[str] | None,
                  seq_addr: Any) -> Any:
        """The answer of :meth:`_scan` and its evidence: the witness (or counterexample) bound and
        recorded, a "no match" note on the range, or the count."""
        kind = self.kind
        if seq_addr is not None and not isinstance(seq_addr, str):
            seq_addr = _range_addr(seq_addr) if kind == "count" or hit is None else None
        if kind == "count":
            if seq_addr is not None:
                env.seen.append((seq_addr, count, self.label))
            return count
        if hit is None:
            if kind != "forall" and seq_addr is not None:
                env.seen.append((seq_addr, None, f"no match: {self.label}"))
            return True if kind == "forall" else (False if kind == "exists" else None)
        item = items[hit]
        env.witness[self.var] = item
        address = getattr(item, "address", None) or (addrs[hit] if addrs is not None else None)
        if address:
            env.seen.append((address, item, self.var))
        if kind == "forall":
            return False
        return True if kind == "exists" else item  # latest / first: the element


def _restore(d: dict, var: str, saved: Any, absent: Any) -> None:
    """Put back the caller's binding of ``var`` in ``d`` (``absent``: there was none)."""
    if saved is absent:
        d.pop(var, None)
    else:
        d[var] = saved


def _visit_find(env: Env, var: str, order: Any, lookup: list[int] | None, errors: dict[int, str],
                items: list[Any], addrs: list[str] | None, test: Fn | None, body: Fn | None) -> tuple[int | None, int]:
    """exists / first / latest: the first position (in ``order``) passing ``test`` and ``body``;
    each visit charged, the evidence of a failed visit dropped."""
    charge = env.tc.charge
    vars_, addrs_env, seen = env.vars, env.addrs, env.seen
    mark = len(seen)
    for j in order:
        charge()
        i = lookup[j] if lookup is not None else j
        if i in errors:
            raise EvalError(errors[i])
        vars_[var] = items[i]
        if addrs is not None:
            addrs_env[var] = addrs[i]
        if (test is None or test(env)) and (body is None or body(env)):
            return i, 0
        del seen[mark:]
    return None, 0


def _visit_count(env: Env, var: str, order: Any, lookup: list[int] | None, errors: dict[int, str],
                 items: list[Any], addrs: list[str] | None, test: Fn | None, body: Fn | None) -> tuple[int | None, int]:
    """count: how many positions pass ``test`` and ``body``; every visit charged, no evidence kept."""
    charge = env.tc.charge
    vars_, addrs_env, seen = env.vars, env.addrs, env.seen
    mark = len(seen)
    count = 0
    for j in order:
        charge()
        i = lookup[j] if lookup is not None else j
        if i in errors:
            raise EvalError(errors[i])
        vars_[var] = items[i]
        if addrs is not None:
            addrs_env[var] = addrs[i]
        if (test is None or test(env)) and (body is None or body(env)):
            count += 1
        del seen[mark:]
    return None, count


def _visit_forall(env: Env, var: str, order: Any, lookup: list[int] | None, errors: dict[int, str],
                  items: list[Any], addrs: list[str] | None, test: Fn | None, body: Fn | None) -> tuple[int | None, int]:
    """forall: the first position passing ``test`` whose ``body`` fails (the counterexample), or ``None``."""
    charge = env.tc.charge
    vars_, addrs_env, seen = env.vars, env.addrs, env.seen
    mark = len(seen)
    for j in order:
        charge()
        i = lookup[j] if lookup is not None else j
        if i in errors:
            raise EvalError(errors[i])
        vars_[var] = items[i]
        if addrs is not None:
            addrs_env[var] = addrs[i]
        if (test is None or test(env)) and not body(env):
            return i, 0
        del seen[mark:]
    return None, 0


_VISIT = {"exists": _visit_find, "first": _visit_find, "latest": _visit_find,
          "count": _visit_count, "forall": _visit_forall}


_MISSING = object()
_RANGES = (StepRange, CallRange)  # final classes (frozen dataclasses nobody subclasses)


def _range_addr(seq: Any) -> str:
    if isinstance(seq, StepRange):
        return f"steps[{seq.lo}:{seq.hi}]"
    return f"steps[{seq.lo}:{seq.hi}].tool_calls"


def _conj(a: Fn | None, b: Fn | None) -> Fn | None:
    if a is None:
        return b
    if b is None:
        return a
    return lambda env: bool(a(env)) and bool(b(env))


def comprehension(env: Env, var: str, seq: Any, where: Fn | None, elt: Fn) -> list[Any]:
    """``[elt for var in seq where cond]``; every element visited is charged to the budget."""
    items = as_items(env, seq)
    env.tc.charge(len(items))
    saved = env.vars.get(var, _MISSING)
    mark = len(env.seen)
    out = []
    try:
        for item in items:
            env.vars[var] = item
            if where is None or where(env):
                out.append(elt(env))
    finally:
        del env.seen[mark:]
        if saved is _MISSING:
            env.vars.pop(var, None)
        else:
            env.vars[var] = saved
    return out


#: Names whose value depends only on the trajectory and the current step/call (not on a rule).
RUN_NAMES = frozenset({"step", "call", "output", "content", "earlier", "later", "steps", "traj"})


def shareable(node: Any, scope: dict[str, str], lets: dict[str, str]) -> bool:
    """Whether comprehension ``node`` gives the same value in every rule at a given step (and call):
    it uses only :data:`RUN_NAMES`, literals, built-ins and its own variable (no ``params``, lets or
    outer variables), and nests no quantifier or comprehension (whose witnesses would leak)."""
    if node.var in scope or node.var in lets:
        return False
    for sub in node.walk():
        if sub is not node and isinstance(sub, (A.Quant, A.Comprehension)):
            return False
        if isinstance(sub, A.Name) and sub.id != node.var and sub.id not in RUN_NAMES:
            return False
    return True


#: Canonical small keys of shared comprehension ASTs (AST equality ignores positions), so the per-step
#: lookup does not hash a whole expression tree; grows only with the distinct expressions compiled.
_SHARED_KEYS: dict[Any, int] = {}


def closed_share_key(elem_type: str, var: str, closed: list[Any], body: Any, names: set[str]) -> int | None:
    """:attr:`QuantPlan.share` for a quantifier whose pre-computable filter is the conjunction ``closed``
    (and, for ``forall``, ``body``) of ASTs over ``var`` of ``elem_type``; ``None`` when they read pack
    parameters (equal text, maybe different values) or nest a quantifier/comprehension (witnesses)."""
    if "params" in names:
        return None
    for part in [*closed, body]:
        if part is not None and any(isinstance(n, (A.Quant, A.Comprehension)) for n in part.walk()):
            return None
    return _SHARED_KEYS.setdefault(("closed", elem_type, var, tuple(closed), body), len(_SHARED_KEYS))


def shared_comprehension(node: Any, fn: Fn) -> Fn:
    """``fn`` (a :func:`shareable` comprehension) evaluated once per run, step and call for all the
    rules that contain an equal expression (AST equality ignores positions): later evaluations get a
    copy of the list, and replay the evidence it recorded and the budget it charged, so every rule
    sees exactly what its own evaluation would have produced."""

    node_key = _SHARED_KEYS.setdefault(node, len(_SHARED_KEYS))  # equal ASTs, one small key (hashed once)

    def run(env: Env) -> Any:
        tc = env.tc
        key = (node_key, env.k, env.call)
        hit = tc.shared.get(key)
        if hit is not None:
            out, seen, ops = hit
            if ops:
                tc.charge(ops)
            env.seen.extend(seen)
            return copy_list(out)
        mark, ops0 = len(env.seen), tc.ops
        out = fn(env)
        tc.shared[key] = (copy_list(out), env.seen[mark:], tc.ops - ops0)
        return out

    return run
