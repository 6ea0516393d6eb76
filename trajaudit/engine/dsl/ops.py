"""Operators of the rule language, compiled (a mixin of :class:`rule_compiler.ExprCompiler`).

Boolean connectives, comparisons (with the step-kind literal check), membership, regex match (the
right side must be a regex known when the pack loads; a match records its span as evidence, e.g.
``steps.6.content[21:33]``) and arithmetic, with compile-time type checks on literals and constant
folding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trajaudit.engine.dsl import ast as A
from trajaudit.engine.dsl import compile_base as _c
from trajaudit.engine.dsl.builtins import _str
from trajaudit.engine.dsl.incremental import member_fast
from trajaudit.engine.dsl.regex.prefilter import span as _span
from trajaudit.engine.dsl.runtime import Env, EvalError, equal, is_num, order, type_name
from trajaudit.engine.trace.ir import STEP_KINDS

if TYPE_CHECKING:
    from trajaudit.engine.dsl.compile_base import C, Fn


class OperatorsMixin:
    """``_unary``, ``_binary`` and ``_match`` for :class:`ExprCompiler` (uses its ``compile``/``error``)."""

    def _unary(self, node: A.Unary, scope: dict[str, str]) -> C:
        x = self.compile(node.operand, scope)
        if node.op == "not":
            if x.const is not _c.NO:
                return _c.const_(not x.const)
            f = x.fn
            return _c.C(lambda env: not f(env), "bool")
        if x.const is not _c.NO:
            if not is_num(x.const):
                raise self.error(node, f"cannot negate a {type_name(x.const)}")
            return _c.const_(-x.const)
        if x.type in ("str", "bool", "list", "step", "call", "steps", "calls"):
            raise self.error(node, f"cannot negate a {x.type}")
        f = x.fn

        def neg(env: Env) -> Any:
            v = f(env)
            if not is_num(v):
                raise EvalError(f"cannot negate a {type_name(v)}")
            return -v
        return _c.C(neg, "num")

    def _binary(self, node: A.Binary, scope: dict[str, str]) -> C:
        op = node.op
        if op in ("~", "!~"):
            return self._match(node, scope)
        lc, rc = self.compile(node.left, scope), self.compile(node.right, scope)
        self._check_kind_literal(node, lc, rc)
        lf, rf = lc.fn, rc.fn
        if op == "and":
            fn: Fn = lambda env: True if lf(env) and rf(env) else False  # noqa: E731 - each side truth-tested once
            typ = "bool"
        elif op == "or":
            fn = lambda env: True if lf(env) or rf(env) else False  # noqa: E731
            typ = "bool"
        elif op == "implies":
            fn = lambda env: (not lf(env)) or bool(rf(env))  # noqa: E731
            typ = "bool"
        elif op in ("==", "!=") and (_plain_const(rc) or _plain_const(lc)):
            # against a string, null or boolean constant, equal() is Python's == (no number tolerance,
            # and a view equals no constant): the commonest comparison (o.kind == "tool") without it
            if _plain_const(rc):
                c = rc.const
                fn = (lambda env: lf(env) == c) if op == "==" else (lambda env: lf(env) != c)
            else:
                c = lc.const
                fn = (lambda env: c == rf(env)) if op == "==" else (lambda env: c != rf(env))
            typ = "bool"
        elif op == "==":
            fn, typ = (lambda env: equal(lf(env), rf(env))), "bool"
        elif op == "!=":
            fn, typ = (lambda env: not equal(lf(env), rf(env))), "bool"
        elif op in A.COMPARE_OPS:
            self._check_types(node, lc, rc, ordering=True)
            fn, typ = (lambda env: order(op, lf(env), rf(env))), "bool"
        elif op == "in":
            fn, typ = (lambda env: member_fast(lf(env), rf(env))), "bool"
        elif op == "not in":
            fn, typ = (lambda env: not member_fast(lf(env), rf(env))), "bool"
        else:
            self._check_types(node, lc, rc, ordering=False)
            fn, typ = (lambda env: arith(op, lf(env), rf(env))), "num" if op != "+" else lc.type
        if lc.const is not _c.NO and rc.const is not _c.NO:
            try:
                return _c.const_(fn(None))  # type: ignore[arg-type]
            except EvalError as e:
                raise self.error(node, str(e)) from None
        return _c.C(fn, typ)

    def _check_kind_literal(self, node: A.Binary, lc: C, rc: C) -> None:
        if node.op not in ("==", "!=", "in", "not in"):
            return
        side, other = node.left, rc
        if isinstance(side, A.Attr) and side.name == "kind" and other.const is not _c.NO:
            vals = other.const if isinstance(other.const, list) else [other.const]
            for v in vals:
                if v not in STEP_KINDS:
                    raise self.error(node.right, f"a step kind is one of {', '.join(STEP_KINDS)}, not {v!r}")

    def _check_types(self, node: A.Binary, lc: C, rc: C, ordering: bool) -> None:
        bad = ("bool", "list", "step", "call", "steps", "calls", "null") if ordering else \
            ("bool", "step", "call", "steps", "calls", "null")
        for c in (lc, rc):
            if c.type in bad:
                raise self.error(node, f"operator {node.op} cannot take a {c.type}")
        if {lc.type, rc.type} == {"num", "str"}:
            raise self.error(node, f"operator {node.op} between a number and a string")

    def _match(self, node: A.Binary, scope: dict[str, str]) -> C:
        rx = self._regex_arg(node.right, scope)
        lc = self.compile(node.left, scope)
        negate = node.op == "!~"
        loc = lc.loc or (lambda env: (lc.fn(env), None))

        def fn(env: Env) -> bool:
            v, addr = loc(env)
            if v is None:
                return negate
            text = v if isinstance(v, str) else _str(v)
            m = env.tc.search(rx, text) if env is not None else _span(rx.search(text))
            if m is not None and addr is not None:
                env.seen.append((f"{addr}[{m[0]}:{m[1]}]", m[2], "match"))
            elif addr is not None and negate is False:
                env.seen.append((addr, v, "no match"))
            return (m is None) if negate else (m is not None)
        if lc.const is not _c.NO:
            return _c.const_(fn(None))  # type: ignore[arg-type]
        return _c.C(fn, "bool")


def _plain_const(c: C) -> bool:
    """``c`` is a constant string, null or boolean (not a number: numbers compare with a tolerance)."""
    return c.const is not _c.NO and (c.const is None or type(c.const) in (str, bool))


def arith(op: str, a: Any, b: Any) -> Any:
    """``+ - * / %`` on numbers (``+`` also joins two strings or two lists); errors raise :class:`EvalError`."""
    if op == "+" and isinstance(a, str) and isinstance(b, str):
        return a + b
    if op == "+" and isinstance(a, list) and isinstance(b, list):
        return a + b
    if not (is_num(a) and is_num(b)):
        raise EvalError(f"cannot compute {type_name(a)} {op} {type_name(b)}")
    try:
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
    except OverflowError as e:
        raise EvalError(f"{a} {op} {b}: {e}") from None
    if b == 0:
        raise EvalError(f"division by zero ({a} {op} 0)")
    if op == "/":
        return a / b
    return a % b
