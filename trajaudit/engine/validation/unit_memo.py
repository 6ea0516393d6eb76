"""Equal ``let``s and guards of different rules evaluated once per unit (issue 22, the rule stage).

Many rules of a run evaluate the same expression at the same unit (step, or step and tool call):
the seven ``--tools`` rules each compute ``args``, ``recovered`` (a quantifier over the later calls)
and their guard at every call, two of them the same four comprehensions; four tau rules look up
the same latest order details. A *definition key* (:func:`unit_plan`) identifies what a ``let`` or
guard computes: its AST (equality ignores positions), the pack parameters it was compiled with (by
content) and the definition keys of the ``let``s it reads — so two ``let``s with equal keys have
equal values at every unit. Expressions worth it (:func:`_worth`) that enough rules of the run
share (:func:`shared_plans`) are evaluated once: the first rule that evaluates one at a unit records,
in the run's ``TrajContext.shared``, what the evaluation produced; the other rules replay it:

- the value (a list is copied, as :func:`~trajaudit.engine.dsl.queries.shared_comprehension`
  does) and, for a ``let`` with an address, the address;
- the evidence entries the evaluation appended to ``env.seen``;
- the witnesses its quantifiers bound (each key's last value, in first-binding order: what the
  assignments do to the rule's ``env.witness``, which the evaluation never reads);
- the budget operations it charged.

Exactness (the reference is evaluating the expression in each rule, :func:`rule_eval._run_one`,
which ``validation.rule_eval.evaluate`` still does; ``tests/engine/dsl/test_unit_memo.py`` and the
columnar tests compare logs, budgets of 1 to 200k included): an evaluation is deterministic given
the unit and the values of the ``let``s it reads, except for one per-rule charge — a quantifier's
per-run index of its closed filter is charged to each rule the first time that rule's own node
needs it (``QuantPlan._matches``, which counts that charge in ``TrajContext.filing``). So an entry
records the charge less what the evaluation filed, and the indexes it used; a rule replays it only
when its own quantifier nodes have those indexes filed (else it evaluates the expression itself,
paying for its index where the reference does), and only when the charge fits in its budget (else
it evaluates, and the budget runs out where the reference's does). An evaluation that raises
records nothing. Runs that grow step by step (``tc.lazy``, the monitor) do not use it: their prefix
state is charged as it is extended.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from trajaudit.engine.dsl import ast as A
from trajaudit.engine.dsl.compiler import conjuncts, free_names
from trajaudit.engine.dsl.queries import RUN_NAMES
from trajaudit.engine.dsl.runtime import Env, copy_list

__all__ = ["Memo", "UnitPlan", "shared_plans", "shared_value", "unit_plan"]

#: canonical definitions -> small ints (grows only with the distinct expressions compiled)
_KEYS: dict[Any, int] = {}
#: pack parameters by content (canonical JSON) -> small ints
_PARAMS: dict[str, int] = {}
#: this process's numbering of :data:`_KEYS` (a plan kept on a rule is used only with it)
_TOKEN = object()

#: ``(definition key, ids of the quantifier nodes that can file an index, whether it has a quantifier,
#: whether it has a comprehension)`` of a memoized expression
Memo = tuple[int, tuple[int, ...], bool, bool]


@dataclass(frozen=True)
class UnitPlan:
    """Which of a rule's expressions are shared: ``guard`` and one entry per ``let`` (in order),
    each a :data:`Memo` or ``None`` (evaluated by the rule itself)."""

    guard: Memo | None
    lets: tuple[Memo | None, ...]


_NONE = UnitPlan(None, ())


def _params_key(params: Any) -> int | None:
    try:
        text = json.dumps(params, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        return None
    return _PARAMS.setdefault(text, len(_PARAMS))


#: built-ins that cost about as little as a look-up of their result (no scan of a text or a range)
_CHEAP = frozenset({"len", "lower", "upper", "trim", "num", "round", "abs", "default", "keys", "values", "calls",
                    "since", "outputs_of", "latest_output", "approx", "startswith", "endswith", "str"})


def _worth(e: A.Expr) -> bool:
    """An expression worth sharing: it nests a comprehension or a quantifier with a condition, matches
    a regex or calls a built-in that scans (a bare ``exists s in earlier``, a path, ``outputs_of()``
    or a comparison costs about what its look-up and replay would)."""
    for n in e.walk():
        if isinstance(n, A.Comprehension) or (isinstance(n, A.Quant) and (n.where is not None or n.body is not None)):
            return True
        if (isinstance(n, A.Binary) and n.op in ("~", "!~")) or (isinstance(n, A.Call) and n.func not in _CHEAP):
            return True
    return False


def _can_file(q: A.Quant) -> bool:
    """Whether quantifier ``q`` can file a per-run index (``QuantPlan._matches``): a conjunct of its
    condition, or a ``forall`` body, reads only its variable, ``params`` and ``traj`` (a superset of
    the compiler's test)."""
    bound = frozenset({q.var})
    parts = list(conjuncts(q.where)) if q.where is not None else []
    if q.kind == "forall" and q.body is not None:
        parts.append(q.body)
    return any(not (free_names(p, bound) - {"params", "traj"}) for p in parts)


def _memo(key: int, e: A.Expr) -> Memo:
    quants = [n for n in e.walk() if isinstance(n, A.Quant)]
    lists = any(isinstance(n, A.Comprehension) for n in e.walk())
    return key, tuple(id(n) for n in quants if _can_file(n)), bool(quants), lists


def unit_plan(rule: Any) -> UnitPlan:
    """The :class:`UnitPlan` of a compiled rule (computed once, kept on the rule).

    A ``let`` has a definition key when it reads only run names (``step``, ``call``, ``earlier`` …,
    see ``queries.RUN_NAMES``), ``params`` and earlier ``let``s that have one; a guard when it reads
    only run names and ``params``. Parameters that are not plain JSON give no key."""
    hit = rule.__dict__.get("_unit_plan")
    if hit is not None and hit[0] is _TOKEN:
        return hit[1]
    plan = _build(rule)
    rule.__dict__["_unit_plan"] = (_TOKEN, plan)  # keys are this process's: a rule copied elsewhere recomputes
    return plan


def _build(rule: Any) -> UnitPlan:
    if not rule.lets and rule.guard is None:
        return _NONE
    pk = _params_key(rule.spec.params)
    allowed = RUN_NAMES | {"params"}

    def key_of(kind: str, e: A.Expr, deps: tuple[tuple[str, int], ...], names: set[str]) -> int | None:
        p = pk if "params" in names else -1  # an expression that reads no parameter: any pack's
        if p is None:
            return None
        return _KEYS.setdefault((kind, e, p, deps), len(_KEYS))

    guard: Memo | None = None
    g = rule.asts.get("guard")
    if g is not None and rule.guard is not None:
        names = free_names(g)
        gk = key_of("guard", g, (), names) if not (names - allowed) and _worth(g) else None
        guard = _memo(gk, g) if gk is not None else None
    defs: dict[str, int] = {}
    lets: list[Memo | None] = []
    for name, _, _ in rule.lets:
        e = rule.asts.get(f"let.{name}")
        key = None
        if e is not None:
            names = free_names(e)
            outer = names - allowed
            if all(n in defs for n in outer):
                key = key_of("let", e, tuple(sorted((n, defs[n]) for n in outer)), names)
        if key is None:
            lets.append(None)
            continue
        defs[name] = key
        lets.append(_memo(key, e) if _worth(e) else None)
    return UnitPlan(guard, tuple(lets))


#: :func:`shared_plans` of recent rule lists (by the rules' identities; the rules are kept alive with it)
_PLANS: dict[tuple[int, ...], tuple[list[Any], list[UnitPlan | None]]] = {}


def shared_plans(rules: list[Any]) -> list[UnitPlan | None]:
    """Per rule of ``rules``, its :class:`UnitPlan` restricted to the expressions that another rule of
    the list also has (an expression only one rule computes gains nothing from being recorded), or
    ``None`` when nothing of it is shared."""
    ident = tuple(id(r) for r in rules)
    hit = _PLANS.get(ident)
    if hit is not None:
        return hit[1]
    plans = [unit_plan(r) for r in rules]
    count: dict[int, int] = {}
    for p in plans:
        for m in (p.guard, *p.lets):
            if m is not None:
                count[m[0]] = count.get(m[0], 0) + 1
    out: list[UnitPlan | None] = []
    for p in plans:
        guard = p.guard if p.guard is not None and _pays(p.guard, count) else None
        lets = tuple(m if m is not None and _pays(m, count) else None for m in p.lets)
        out.append(UnitPlan(guard, lets) if guard is not None or any(lets) else None)
    if len(_PLANS) >= 64:
        _PLANS.clear()
    _PLANS[ident] = (list(rules), out)
    return out


def _pays(m: Memo, count: dict[int, int]) -> bool:
    """Whether recording ``m`` pays: three rules or more evaluate it, or two and it builds lists (a
    comprehension: the replay saves its whole loop; for a pair of quantifiers or regex tests, whose
    answers the run's indexes and memos already make cheap, the record costs about what it saves)."""
    n = count[m[0]]
    return n >= 3 or (n == 2 and m[3])


#: the per-run indexes a quantifier node can file (``QuantPlan._matches``): ``(tag, universe)``
_TAGS = ("filter", "forall")


def _filed(cache: dict[Any, Any], qids: tuple[int, ...], tc: Any) -> tuple[tuple[int, str, int], ...]:
    """``(node position, tag, universe id)`` of the indexes ``qids``'s nodes have filed."""
    out = []
    for j, q in enumerate(qids):
        for tag in _TAGS:
            for uid in (id(tc.views), id(tc.all_calls)):
                if (q, tag, uid) in cache:
                    out.append((j, tag, uid))
    return tuple(out)


_UNIT = "unit"


def shared_value(env: Env, memo: Memo, fn: Callable[[Env], Any], pair: bool = False) -> Any:
    """``fn(env)`` — a guard's value, a ``let``'s value or its ``(value, address)`` — replayed from
    an equal expression another rule evaluated at this unit when that is exact (module docstring),
    else evaluated (and recorded for the next rules). ``pair``: ``fn`` gives
    ``(value, address)`` (a ``let``'s ``loc``)."""
    tc = env.tc
    key = (memo[0], env.k, env.call, _UNIT)  # (4 items: no clash with shared_comprehension's keys)
    shared = tc.shared
    hit = shared.get(key)
    qids = memo[1]
    if hit is not None:
        value, seen, ops, witness, filed = hit
        if tc.ops + ops <= tc.budget and (not filed or _all_filed(tc.cache, qids, filed)):
            tc.ops += ops
            if seen:
                env.seen.extend(seen)
            if witness:
                env.witness.update(witness)
            return _copy(value, pair)
    mark, ops0 = len(env.seen), tc.ops
    if not memo[2]:  # no quantifier: no witness, no index
        value = fn(env)
        if key not in shared:  # (the value itself: no rule changes a value; replays copy lists)
            shared[key] = (value, env.seen[mark:] if len(env.seen) > mark else None, tc.ops - ops0, None, ())
        return value
    filing0 = tc.filing
    outer, env.witness = env.witness, {}
    try:
        value = fn(env)
    finally:
        bound, env.witness = env.witness, outer
        outer.update(bound)
    if key not in shared:  # what it charged, less the indexes it filed (each rule pays for its own)
        ops = tc.ops - ops0 - (tc.filing - filing0)
        shared[key] = (value, env.seen[mark:] if len(env.seen) > mark else None, ops, bound or None,
                       _filed(tc.cache, qids, tc))
    return value


def _all_filed(cache: dict[Any, Any], qids: tuple[int, ...], filed: tuple[tuple[int, str, int], ...]) -> bool:
    for j, tag, uid in filed:
        if (qids[j], tag, uid) not in cache:
            return False
    return True


def _copy(value: Any, pair: bool) -> Any:
    if pair:  # a let's (value, address)
        return (copy_list(value[0]), value[1]) if isinstance(value[0], list) else value
    return copy_list(value) if isinstance(value, list) else value
