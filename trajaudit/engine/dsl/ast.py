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
        stack: list[Expr] = [self]  # an explicit stack: nested generators cost O(depth) per node
        pop, push = stack.pop, stack.extend
        while stack:
            node = pop()
            yield node
            kids = node.children()
            if kids:
                push(reversed(kids))


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


def quant_vars(e: Expr) -> set[str]:
    """The variables of every quantifier in ``e`` (``{n.var for n in e.walk() if isinstance(n, Quant)}``,
    without a generator step per node: every rule compile asks it of each let and assertion)."""
    out: set[str] = set()
    stack: list[Expr] = [e]
    pop, push = stack.pop, stack.extend
    while stack:
        node = pop()
        if isinstance(node, Quant):
            out.add(node.var)
        push(node.children())
    return out


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


# ---- plain-data form (JSON-ready lists), used by the parse memo and the on-disk pack cache ----------

def _field_kinds(cls: type) -> tuple[tuple[str, str], ...]:
    """``((field, kind), …)`` without ``pos``; kind is ``e`` (node), ``oe`` (node or None), ``es``
    (tuple of nodes) or ``raw`` (plain value), read from the dataclass annotations."""
    from dataclasses import fields

    out = []
    for f in fields(cls):
        if f.name == "pos":
            continue
        t = str(f.type).replace(" ", "")
        out.append((f.name, {"Expr": "e", "Expr|None": "oe", "tuple[Expr,...]": "es"}.get(t, "raw")))
    return tuple(out)


NODE_TYPES: dict[str, type] = {c.__name__: c for c in (Literal, Regex, Name, Attr, Index, Call, ListExpr,
                                                        Comprehension, Quant, Unary, Binary)}
_KINDS = {name: _field_kinds(cls) for name, cls in NODE_TYPES.items()}


def to_data(e: Expr) -> list[Any]:
    """``e`` as nested lists ``[type, line, column, field…]`` (plain values kept as they are).
    :func:`from_data` inverts it exactly, positions included."""
    name = type(e).__name__
    out: list[Any] = [name, e.pos.line, e.pos.column]  # type: ignore[attr-defined]
    for f, kind in _KINDS[name]:
        v = getattr(e, f)
        if kind == "es":
            out.append([to_data(x) for x in v])
        elif kind == "e" or (kind == "oe" and v is not None):
            out.append(to_data(v))
        else:
            out.append(v)
    return out


def from_data(d: list[Any]) -> Expr:
    """A new AST from :func:`to_data`'s form.

    Raises:
        KeyError, ValueError, TypeError, IndexError: ``d`` is not such a form.
    """
    return _DECODERS[d[0]](d)


def _decoder(cls: type, kinds: tuple[tuple[str, str], ...]) -> Any:
    """The decoder of one node type. It fills the new instance's ``__dict__`` in field order, as the
    frozen dataclass ``__init__`` does field by field through ``object.__setattr__`` (no
    ``__post_init__``, no slots): equal objects, ~35% cheaper for the ~3000 nodes of the shipped packs."""
    names = tuple(f for f, _k in kinds)
    ks = tuple(k for _f, k in kinds)
    new = object.__new__

    def decode(d: list[Any]) -> Expr:
        node = new(cls)
        fields_ = node.__dict__
        for f, k, v in zip(names, ks, d[3:], strict=True):
            if k == "raw":
                fields_[f] = v
            elif k == "e":
                fields_[f] = _DECODERS[v[0]](v)
            elif k == "es":
                fields_[f] = tuple(_DECODERS[x[0]](x) for x in v)
            else:
                fields_[f] = None if v is None else _DECODERS[v[0]](v)
        pos = new(Pos)
        pos.__dict__.update(line=d[1], column=d[2])
        fields_["pos"] = pos
        return node
    return decode


_DECODERS = {name: _decoder(cls, _KINDS[name]) for name, cls in NODE_TYPES.items()}


def same_data(a: Any, b: Any) -> bool:
    """Equality of plain data that also requires equal types (``1``, ``1.0`` and ``True`` differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_data(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_data(v, b[k]) for k, v in a.items())
    return a == b
