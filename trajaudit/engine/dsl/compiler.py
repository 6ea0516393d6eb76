"""Compiling rule expressions (AST) to Python closures, with name resolution and type checks.

A separate pass after parsing: every name is resolved (top-level names, pack parameters, ``let``
bindings, quantifier variables), fields of steps and calls are checked against the IR's field
tables, built-in calls are checked for arity, regexes and jmespath queries are compiled once, pack
parameters are folded to constants, and obviously ill-typed literals are rejected — each error a
:class:`~trajaudit.errors.RulePackError` with file:line:col and a caret. The output is a closure
``fn(env) -> value``: no ``eval``/``exec``, no imports, no attribute access outside the views of
``rule_runtime`` (AgentRx §3.2 "programmatic checks", made declarative and safe for untrusted rules).
"""

from __future__ import annotations

import re
from typing import Any, Callable

import jmespath

from trajaudit.engine.dsl import ast as A
from trajaudit.engine.dsl.builtins import BUILTINS
from trajaudit.engine.dsl.columnar import (
    columnar_quant,
    eq_join_parts,
    member_join_parts,
    outputs_seq,
    prefix_comprehension,
)
from trajaudit.engine.dsl.compile_base import _NO, C, Fn, _const
from trajaudit.engine.dsl.compile_paths import PathsMixin
from trajaudit.engine.dsl.incremental import derived_comprehension, flatten_call
from trajaudit.engine.dsl.ops import OperatorsMixin, arith  # noqa: F401 - arith is re-exported
from trajaudit.engine.dsl.parser import Where, caret
from trajaudit.engine.dsl.queries import (
    QuantPlan,
    closed_share_key,
    comprehension,
    shareable,
    shared_comprehension,
)
from trajaudit.engine.dsl.regex.prefilter import register
from trajaudit.engine.dsl.regex.safety import refusal, regex_risk
from trajaudit.engine.dsl.regex.stored import compile_pattern
from trajaudit.engine.dsl.runtime import (
    Env,
    EvalError,
    type_name,
)
from trajaudit.errors import RulePackError
from trajaudit.registry import close_hint

_CALL_ERRORS = (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError)

REGEX_FLAGS = {"i": re.I, "m": re.M, "s": re.S, "x": re.X}


def conjuncts(e: A.Expr) -> list[A.Expr]:
    """Flatten a top-level ``and`` chain."""
    if isinstance(e, A.Binary) and e.op == "and":
        return conjuncts(e.left) + conjuncts(e.right)
    return [e]


def free_names(e: A.Expr, bound: frozenset[str] = frozenset()) -> set[str]:
    """Names an expression reads that it does not bind itself (quantifier/comprehension variables)."""
    if isinstance(e, A.Name):
        return set() if e.id in bound else {e.id}
    if isinstance(e, A.Quant):
        inner = bound | {e.var}
        out = free_names(e.seq, bound)
        for part in (e.where, e.body):
            if part is not None:
                out |= free_names(part, inner)
        return out
    if isinstance(e, A.Comprehension):
        inner = bound | {e.var}
        out = free_names(e.seq, bound) | free_names(e.elt, inner)
        return out | (free_names(e.where, inner) if e.where is not None else set())
    if isinstance(e, A.Call) and BUILTINS.get(e.func) is not None and BUILTINS[e.func].step_dependent:
        out = {"step"}
    else:
        out = set()
    for c in e.children():
        out |= free_names(c, bound)
    return out


def compile_regex(pattern: Any, flags: str, err: Callable[[str], RulePackError]) -> re.Pattern[str]:
    """Compile a regex constant (a string, or a list of strings = alternatives); bad ones raise ``err``."""
    if isinstance(pattern, (list, tuple)):
        if not pattern or not all(isinstance(p, str) for p in pattern):
            raise err("a regex list must be a non-empty list of strings")
        pattern = "|".join(f"(?:{p})" for p in pattern)
    if not isinstance(pattern, str):
        raise err(f"a regex must be a /literal/, a string or a list of strings, got {type_name(pattern)}")
    f = 0
    for ch in flags:
        f |= REGEX_FLAGS[ch]
    risk = regex_risk(pattern)
    if risk:
        raise err(refusal(f"regex {pattern!r}", risk))
    try:
        return register(compile_pattern(pattern, f))  # re.compile, or rebuilt from the pack cache's program
    except re.error as e:
        raise err(f"invalid regex {pattern!r}: {e}") from None


class ExprCompiler(PathsMixin, OperatorsMixin):
    """Compiles expressions of one rule field.

    Args:
        text: the expression source (for carets).
        where: file/line/rule context for errors.
        params: the pack parameters (folded as constants).
        lets: ``{name: static type}`` of the rule's ``let`` bindings visible here.
        witnesses: quantifier variables that messages may name (read from ``env.witness``).
    """

    def __init__(self, text: str, where: Where, params: dict[str, Any], lets: dict[str, str] | None = None,
                 witnesses: set[str] | None = None) -> None:
        self.text = text
        self.where = where
        self.params = params
        self.lets = lets or {}
        self.witnesses = witnesses or set()
        self.uses: set[str] = set()

    def error(self, node: A.Expr, message: str) -> RulePackError:
        """A located compile error for ``node``."""
        pos = getattr(node, "pos", A.Pos())
        return self.where.error(message, self.text, pos.line, pos.column, caret(self.text, pos.line, pos.column))

    # -- entry -----------------------------------------------------------------------------------

    def compile(self, node: A.Expr, scope: dict[str, str] | None = None) -> C:
        """Compile ``node`` with quantifier variables ``scope`` (``{name: type}``) in force."""
        scope = scope or {}
        if isinstance(node, A.Literal):
            return _const(node.value)
        if isinstance(node, A.Regex):
            raise self.error(node, "a regex literal can only be the right side of ~ / !~ or a regex argument")
        if isinstance(node, (A.Name, A.Attr, A.Index)):
            return self._path(node, scope)
        if isinstance(node, A.Call):
            return self._call(node, scope)
        if isinstance(node, A.ListExpr):
            items = [self.compile(i, scope) for i in node.items]
            if all(i.const is not _NO for i in items):
                return _const([i.const for i in items], "list")
            fns = [i.fn for i in items]
            return C(lambda env: [f(env) for f in fns], "list")
        if isinstance(node, A.Unary):
            return self._unary(node, scope)
        if isinstance(node, A.Binary):
            return self._binary(node, scope)
        if isinstance(node, A.Quant):
            return self._quant(node, scope)
        if isinstance(node, A.Comprehension):
            seq = self.compile(node.seq, scope)
            inner = {**scope, node.var: _elem_type(seq.type)}
            where = self.compile(node.where, inner).fn if node.where is not None else None
            elt = self.compile(node.elt, inner).fn
            var, sfn = node.var, seq.fn
            fn = lambda env: comprehension(env, var, sfn(env), where, elt)  # noqa: E731
            shadowed = "earlier" in scope or "earlier" in self.lets
            fn = (None if shadowed else prefix_comprehension(node, where, elt, free_names)) \
                or derived_comprehension(node, where, elt, sfn, lambda env, v: comprehension(env, var, v, where, elt),
                                         free_names) or fn
            return C(shared_comprehension(node, fn) if shareable(node, scope, self.lets) else fn, "list")
        raise self.error(node, f"unsupported expression {type(node).__name__}")

    # -- calls ----------------------------------------------------------------------------------

    def _call(self, node: A.Call, scope: dict[str, str]) -> C:
        b = BUILTINS.get(node.func)
        if b is None:
            hint = close_hint(node.func, list(BUILTINS))
            raise self.error(node, f"unknown function {node.func!r}{hint}")
        n = len(node.args)
        if n < b.min_args or (n > len(b.arg_kinds) and not b.variadic):
            want = f"{b.min_args}" if b.min_args == len(b.arg_kinds) else f"{b.min_args}–{len(b.arg_kinds)}"
            raise self.error(node, f"{node.func}() takes {want} argument(s), got {n}")
        if b.step_dependent:
            self.uses.add("step")
        args: list[C] = []
        for i, a in enumerate(node.args):
            kind = b.arg_kinds[i] if i < len(b.arg_kinds) else "value"
            if kind == "regex":
                args.append(_const(self._regex_arg(a, scope)))
            elif kind == "jmespath":
                c = self.compile(a, scope)
                if not isinstance(c.const, str):
                    raise self.error(a, f"{node.func}() needs a constant jmespath string")
                try:
                    args.append(_const(jmespath.compile(c.const)))
                except jmespath.exceptions.JMESPathError as e:
                    raise self.error(a, f"invalid jmespath {c.const!r}: {e}") from None
            else:
                args.append(self.compile(a, scope))
        fns = [a.fn for a in args]
        f = b.fn
        fname = node.func

        def failed(vals: list[Any], e: Exception) -> EvalError:
            return EvalError(f"{fname}() cannot take {', '.join(type_name(v) for v in vals)}: {e}")

        if len(fns) == 1 and not b.needs_env:  # the commonest shape (lower(x), len(x) …): no argument list
            g0 = fns[0]

            def call_fn(env: Env) -> Any:
                v = g0(env)
                try:
                    return f(v)
                except EvalError:
                    raise
                except _CALL_ERRORS as e:
                    raise failed([v], e) from None
        elif len(fns) == 2 and not b.needs_env and args[1].const is not _NO:
            # f(x, CONST) (captures(content, params.id_token), default(x, "") …): the constant is not
            # re-read through its closure, and no argument list is built
            g0, c1 = fns[0], args[1].const

            def call_fn(env: Env) -> Any:
                v = g0(env)
                try:
                    return f(v, c1)
                except EvalError:
                    raise
                except _CALL_ERRORS as e:
                    raise failed([v, c1], e) from None
        else:
            def call_fn(env: Env) -> Any:
                vals = [g(env) for g in fns]
                try:
                    return f(env, *vals) if b.needs_env else f(*vals)
                except EvalError:
                    raise
                except _CALL_ERRORS as e:
                    raise failed(vals, e) from None
        if fname == "flatten" and len(fns) == 1 and not b.needs_env:
            call_fn = flatten_call(lambda v: call_fn_of(v), fns[0], node)  # a prefix slice: incrementally

            def call_fn_of(v: Any) -> Any:
                try:
                    return f(v)
                except EvalError:
                    raise
                except _CALL_ERRORS as e:
                    raise failed([v], e) from None
        rtype = "calls" if node.func == "calls" else "steps" if node.func == "since" else b.returns
        if not b.needs_env and all(a.const is not _NO for a in args):
            try:
                return _const(call_fn(None), rtype)  # type: ignore[arg-type]
            except EvalError as e:
                raise self.error(node, str(e)) from None
        return C(call_fn, rtype)

    def _regex_arg(self, node: A.Expr, scope: dict[str, str]) -> re.Pattern[str]:
        if isinstance(node, A.Regex):
            return compile_regex(node.pattern, node.flags, lambda m: self.error(node, m))
        c = self.compile(node, scope)
        if c.const is _NO:
            raise self.error(node, "a regex must be a /literal/, a string or a pack parameter (known when the "
                                   "pack loads), not a value computed at run time")
        return compile_regex(c.const, "", lambda m: self.error(node, m))

    # -- quantifiers ----------------------------------------------------------------------------

    def _quant(self, node: A.Quant, scope: dict[str, str]) -> C:
        seq = self.compile(node.seq, scope)
        if seq.type in ("num", "bool", "null"):
            raise self.error(node.seq, f"cannot quantify over a {seq.type}")
        et = _elem_type(seq.type)
        inner = {**scope, node.var: et}
        closed_parts, open_parts = [], []
        for part in conjuncts(node.where) if node.where is not None else []:
            names = free_names(part, frozenset({node.var}))
            (closed_parts if not (names - {"params", "traj"}) else open_parts).append(part)
        closed = self._conj(closed_parts, inner)
        opened = self._conj(open_parts, inner)
        body = self.compile(node.body, inner).fn if node.body is not None else None
        body_closed = node.body is not None and not (free_names(node.body, frozenset({node.var})) - {"params", "traj"})
        names: set[str] = set()
        for part in closed_parts + ([node.body] if body_closed else []):
            names |= free_names(part, frozenset({node.var}))
        share = closed_share_key(et, node.var, closed_parts, node.body if body_closed else None, names) \
            if closed_parts or body_closed else None
        plan = QuantPlan(node.kind, node.var, seq.fn, seq.loc, closed, opened, body, body_closed,
                         key=id(node), label=A.unparse(node), share=share,
                         substring=self._substring_test(node, seq.type, closed_parts, open_parts, inner))
        typ = {"exists": "bool", "forall": "bool", "count": "num"}.get(node.kind, et)
        eq = eq_join_parts(open_parts, node.var, free_names)
        join = (self.compile(eq[0], inner).fn, self.compile(eq[1], inner).fn) if eq is not None else None
        mem = member_join_parts(open_parts, node.var, free_names) if eq is None else None
        members = None
        if mem is not None:
            shadowed = "earlier" in scope or "earlier" in self.lets
            members = ([(self.compile(c, inner).fn, self.compile(n, inner).fn) for c, n in mem],
                       None if shadowed else outputs_seq(node.seq))
        return C(columnar_quant(plan, join, members) or plan.run, typ)

    def _substring_test(self, node: A.Quant, seq_type: str, closed: list[A.Expr], opened: list[A.Expr],
                        inner: dict[str, str]) -> tuple[Fn, bool] | None:
        """For ``exists/first/latest v in STEPS where X in [lower(]v.content[)]`` (X not reading ``v`` and
        nesting no quantifier): ``(X's closure, lowered)``, which lets :class:`QuantPlan` find the
        witness with plain substring tests and evaluate the condition only on it; else ``None``."""
        if node.kind not in ("exists", "first", "latest") or node.body is not None or closed or len(opened) != 1 \
                or seq_type != "steps":
            return None
        e = opened[0]
        if not (isinstance(e, A.Binary) and e.op == "in"):
            return None
        right, lowered = e.right, False
        if isinstance(right, A.Call) and right.func == "lower" and len(right.args) == 1:
            right, lowered = right.args[0], True
        if not (isinstance(right, A.Attr) and right.name == "content" and isinstance(right.obj, A.Name)
                and right.obj.id == node.var):
            return None
        if node.var in free_names(e.left) or any(isinstance(n, (A.Quant, A.Comprehension)) for n in e.left.walk()):
            return None
        return self.compile(e.left, inner).fn, lowered

    def _conj(self, parts: list[A.Expr], scope: dict[str, str]) -> Fn | None:
        if not parts:
            return None
        fns = [self.compile(p, scope).fn for p in parts]
        if len(fns) == 1:
            return fns[0]
        if len(fns) == 2:  # all() of two or three, without the generator: same order, short-circuit, bool
            f0, f1 = fns
            return lambda env: True if f0(env) and f1(env) else False
        if len(fns) == 3:
            f0, f1, f2 = fns
            return lambda env: True if f0(env) and f1(env) and f2(env) else False
        return lambda env: all(f(env) for f in fns)


def _elem_type(seq_type: str) -> str:
    return {"steps": "step", "calls": "call"}.get(seq_type, "any")
