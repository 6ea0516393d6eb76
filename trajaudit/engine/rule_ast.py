"""The typed AST of the rule expression language (frozen dataclasses built by ``rule_parser``).

Positions (``pos``) are 1-based line/column inside the expression text; they are excluded from
equality so that two occurrences of the same sub-expression compare equal (the linter relies on it).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Pos:
    """1-based line and column of a node in its expression text."""

    line: int = 1
    column: int = 1


@dataclass(frozen=True)
class Expr:
    """Base of every node."""

    def children(self) -> tuple[Expr, ...]:
        """Direct sub-expressions, in source order."""
        return ()

    def walk(self) -> Iterator[Expr]:
        """This node and every descendant (pre-order)."""
        yield self
        for c in self.children():
            yield from c.walk()


@dataclass(frozen=True)
class Literal(Expr):
    """A number, string, boolean or null."""

    value: Any
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True)
class Regex(Expr):
    """An explicit regex literal ``/pattern/flags`` (flags from ``imsx``)."""

    pattern: str
    flags: str = ""
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True)
class Name(Expr):
    """A bare name: ``step``, ``call``, ``output``, ``content``, ``params``, a let or quantifier variable."""

    id: str
    pos: Pos = field(default=Pos(), compare=False)


@dataclass(frozen=True)
class Attr(Expr):
    """Field access ``obj.name`` (on an IR view, or a key of a JSON object)."""

    obj: Expr
    name: str
    pos: Pos = field(default=Pos(), compare=False)

    def children(self) -> tuple[Expr, ...]:
        return (self.obj,)


@dataclass(frozen=True)
class Index(Expr):
    """Subscript ``obj[key]``: a list position (negative from the end) or an object key."""

    obj: Expr
    key: Expr
    pos: Pos = field(default=Pos(), compare=False)

    def children(self) -> tuple[Expr, ...]:
        return (self.obj, self.key)


@dataclass(frozen=True)
class Call(Expr):
    """A built-in function call ``name(args…)`` (only built-ins exist; see ``rule_runtime.BUILTINS``)."""

    func: str
    args: tuple[Expr, ...]
    pos: Pos = field(default=Pos(), compare=False)

    def children(self) -> tuple[Expr, ...]:
        return self.args


@dataclass(frozen=True)
class ListExpr(Expr):
    """A list display ``[a, b, c]``."""

    items: tuple[Expr, ...]
    pos: Pos = field(default=Pos(), compare=False)

    def children(self) -> tuple[Expr, ...]:
        return self.items


@dataclass(frozen=True)
class Comprehension(Expr):
    """``[elt for var in seq where cond]``."""

    elt: Expr
    var: str
    seq: Expr
    where: Expr | None
    pos: Pos = field(default=Pos(), compare=False)

    def children(self) -> tuple[Expr, ...]:
        return tuple(x for x in (self.seq, self.where, self.elt) if x is not None)


QUANTIFIERS = ("exists", "forall", "count", "latest", "first")


@dataclass(frozen=True)
class Quant(Expr):
    """``exists|forall|count|latest|first var in seq [where filter] [: condition]``."""

    kind: str
    var: str
    seq: Expr
    where: Expr | None
    body: Expr | None
    pos: Pos = field(default=Pos(), compare=False)

    def children(self) -> tuple[Expr, ...]:
        return tuple(x for x in (self.seq, self.where, self.body) if x is not None)


@dataclass(frozen=True)
class Unary(Expr):
    """``not x`` (op ``not``) or ``-x`` (op ``neg``)."""

    op: str
    operand: Expr
    pos: Pos = field(default=Pos(), compare=False)

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)


BOOL_OPS = ("and", "or", "implies")
COMPARE_OPS = ("==", "!=", "<", "<=", ">", ">=")
MEMBER_OPS = ("in", "not in")
MATCH_OPS = ("~", "!~")
ARITH_OPS = ("+", "-", "*", "/", "%")


@dataclass(frozen=True)
class Binary(Expr):
    """A binary operation: boolean, comparison, membership, regex match or arithmetic."""

    op: str
    left: Expr
    right: Expr
    pos: Pos = field(default=Pos(), compare=False)

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)


def unparse(e: Expr) -> str:
    """Render an AST back to (normalized, fully parenthesized where needed) source text."""
    if isinstance(e, Literal):
        if e.value is None:
            return "null"
        if isinstance(e.value, bool):
            return "true" if e.value else "false"
        if isinstance(e.value, str):
            import json

            return json.dumps(e.value, ensure_ascii=False)
        return repr(e.value)
    if isinstance(e, Regex):
        return "/" + e.pattern.replace("/", "\\/") + "/" + e.flags
    if isinstance(e, Name):
        return e.id
    if isinstance(e, Attr):
        return f"{unparse(e.obj)}.{e.name}"
    if isinstance(e, Index):
        return f"{unparse(e.obj)}[{unparse(e.key)}]"
    if isinstance(e, Call):
        return f"{e.func}({', '.join(unparse(a) for a in e.args)})"
    if isinstance(e, ListExpr):
        return "[" + ", ".join(unparse(a) for a in e.items) + "]"
    if isinstance(e, Comprehension):
        w = f" where {unparse(e.where)}" if e.where is not None else ""
        return f"[{unparse(e.elt)} for {e.var} in {unparse(e.seq)}{w}]"
    if isinstance(e, Quant):
        w = f" where {unparse(e.where)}" if e.where is not None else ""
        b = f": {unparse(e.body)}" if e.body is not None else ""
        return f"({e.kind} {e.var} in {unparse(e.seq)}{w}{b})"
    if isinstance(e, Unary):
        return f"not {unparse(e.operand)}" if e.op == "not" else f"-{unparse(e.operand)}"
    if isinstance(e, Binary):
        return f"({unparse(e.left)} {e.op} {unparse(e.right)})"
    raise TypeError(f"not an expression node: {e!r}")
