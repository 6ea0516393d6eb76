"""Parsing rule expressions: the lark grammar (``rules.lark``) → typed AST (``rule_ast``).

The grammar ships as package data and is loaded with ``Lark.open_from_package`` (LALR, positions
on). Every failure is a :class:`~trajaudit.errors.RulePackError` with line, column, a caret under
the offending character and, when the mistake is a common one, a hint from a ``match_examples``
table (lark's documented error-reporting recipe). Nothing in an expression is ever evaluated by
Python: strings are unescaped with ``json.loads``, never ``eval``.
"""

from __future__ import annotations

import json
import linecache
import re
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from trajaudit.engine.dsl import ast as A
from trajaudit.engine.dsl import grammar_cache
from trajaudit.engine.dsl.recording_memo import RecordingMemo
from trajaudit.errors import RulePackError
from trajaudit.safe_json import MAX_INT_DIGITS

if TYPE_CHECKING:
    from lark import Lark, Token, UnexpectedInput

# lark (and the ``regex`` module it loads) is imported where an expression is actually parsed: an
# audit whose packs come from the on-disk cache gets every AST from the memo and never needs it
# (~35 ms of a fresh process's start-up; issue 22)

MAX_EXPRESSION_CHARS = 20_000
MEMO_SIZE = 4096  # parsed expressions kept per process (see parse_expression)

# Common mistakes → a hint. Token-level mistakes go through lark's ``match_examples`` (the parser
# state of the failure is compared with these known-bad inputs); a stray character is looked up in
# CHARACTER_HINTS. Every entry is tested in tests/test_rule_parser.py.
COMMON_MISTAKES: dict[str, list[str]] = {
    "an operator is missing its right-hand operand": ["a ==", "a and", "a +", "a in", "not", "a ~"],
    "unbalanced parentheses or brackets": ["(a == b", "f(a", "[1, 2", "a)", "x[0", "(a))"],
    "a quantifier reads 'exists x in SEQ where COND'": ["exists earlier", "exists x earlier", "count where a"],
    "two operands without an operator between them": ["a b", "1 2", "step.kind 'user'"],
    "a reserved word (and or not in where for implies true false null exists forall count latest first) "
    "cannot be a name or field": ["x.count", "x.first == 1", "a == in"],
}
CHARACTER_HINTS: dict[str, str] = {
    "=": "'=' is not a comparison; use '=='",
    "&": "use 'and' instead of '&&'",
    "|": "use 'or' instead of '||' (jmespath pipes go inside select(x, \"…\"))",
    "!": "use 'not x' instead of '!x' ('!=' and '!~' are operators)",
    '"': "unterminated string: strings are quoted with \" or ' on one line",
    "'": "unterminated string: strings are quoted with \" or ' on one line",
    "/": "unterminated regex literal: write /pattern/flags on one line",
    "$": "'$' is not part of the language; for jmespath use select(value, \"expression\")",
    "`": "backticks are not part of the language; quote strings with \" or '",
}


@dataclass(frozen=True)
class Where:
    """Where an expression sits in its file, to translate expression positions to file positions."""

    file: str | None = None
    line: int | None = None  # 1-based file line of the expression's first character
    column: int | None = None  # 1-based file column of the expression's first character
    rule_id: str | None = None
    field: str | None = None  # "guard", "assert", "let.claimed", "message", …
    indent: int | None = None  # 0-based file column where lines after the first start (block scalars)

    def error(self, message: str, text: str | None = None, line: int | None = None,
              column: int | None = None, caret: str | None = None) -> RulePackError:
        """A :class:`RulePackError` located in the file (falls back to expression coordinates)."""
        fl, fc = self.line, self.column
        if line is not None and fl is not None:
            if line == 1:
                fc = (fc or 1) + (column or 1) - 1
            else:
                fc = (self.indent or 0) + (column or 1)
            fl = fl + line - 1
        elif line is not None:
            fl, fc = line, column
        where = f"in {self.field}: " if self.field else ""
        return RulePackError(where + message + comment_hint(self.file, self.line, self.column), file=self.file,
                             line=fl, column=fc, rule_id=self.rule_id, context=caret)


def comment_hint(file: str | None, line: int | None, column: int | None) -> str:
    """``" — … quote this expression"`` when the expression starting at ``line``/``column`` of ``file``
    is an unquoted YAML scalar with `` #`` after it on that line: YAML read the rest of the line as a
    comment, so the expression was cut there. ``""`` otherwise (block scalars keep ``#``)."""
    if not file or not line or not column:
        return ""
    linecache.checkcache(file)
    src = linecache.getline(file, line)
    start = column - 1
    if not src or start > len(src) or not src[:start].rstrip().endswith(":") or src[start:start + 1] in ("'", '"'):
        return ""
    if re.search(r"\s#", src[start:]):
        return (" — YAML read everything after ' #' on this line as a comment, cutting the expression: "
                "quote this expression (assert: 'x == \"#tag\"') or write it as a block (assert: |)")
    return ""


def caret(text: str, line: int | None, column: int | None) -> str:
    """The expression line at ``line`` with a caret under ``column`` (both 1-based)."""
    lines = text.splitlines() or [""]
    ln = min(max(line or 1, 1), len(lines))
    src = lines[ln - 1]
    col = max(column or 1, 1)
    return f"    {src}\n    {' ' * (col - 1)}^"


_GRAMMAR_OPTIONS = {"parser": "lalr", "propagate_positions": True, "maybe_placeholders": True}


@cache
def grammar() -> Lark:
    """The compiled LALR parser for ``trajaudit/engine/dsl/rules.lark`` (once per process; its tables come
    from the on-disk grammar cache when valid, see :mod:`trajaudit.engine.dsl.grammar_cache`)."""
    from importlib import resources

    from lark import Lark

    text = resources.files("trajaudit.engine.dsl").joinpath("rules.lark").read_text(encoding="utf-8")
    parser = grammar_cache.load(text, _GRAMMAR_OPTIONS)
    if parser is None:
        parser = Lark.open_from_package("trajaudit.engine.dsl", "rules.lark", **_GRAMMAR_OPTIONS)
        grammar_cache.store(parser, text, _GRAMMAR_OPTIONS)
    return parser


def _pos(meta_or_tok: object) -> A.Pos:
    line = getattr(meta_or_tok, "line", None)
    col = getattr(meta_or_tok, "column", None)
    return A.Pos(line or 1, col or 1)


def _unescape(tok: Token) -> str:
    raw = str(tok)
    body = raw[1:-1]
    if raw[0] == "'":
        body = body.replace("\\'", "'").replace('"', '\\"')
    try:
        return json.loads('"' + body + '"')
    except json.JSONDecodeError:
        raise _TransformError(
            "invalid escape in string (JSON escapes only: \\\\ \\\" \\n \\t \\uXXXX); for a pattern use a "
            "regex literal /…/", tok) from None


class _TransformError(Exception):
    def __init__(self, message: str, tok: object) -> None:
        super().__init__(message)
        self.message = message
        self.tok = tok


@cache
def _to_ast() -> Any:
    """The lark ``Transformer`` that builds :mod:`rule_ast` nodes (its class is defined on first use,
    when lark is imported)."""
    from lark import Transformer, v_args

    @v_args(meta=True)
    class _ToAst(Transformer):
        """One method per grammar rule; builds :mod:`rule_ast` nodes with positions."""

        def number(self, meta, children):
            t = children[0]
            if not any(c in t for c in ".eE") and len(t) > MAX_INT_DIGITS:  # int() raised a bare ValueError
                raise _TransformError(f"integer literal too long ({len(t)} digits): the limit is "
                                      f"{MAX_INT_DIGITS} digits", t)
            v = float(t) if any(c in t for c in ".eE") else int(t)
            return A.Literal(v, _pos(t))

        def string(self, meta, children):
            return A.Literal(_unescape(children[0]), _pos(children[0]))

        def regex(self, meta, children):
            t = str(children[0])
            end = t.rindex("/")
            pattern = t[1:end].replace("\\/", "/")
            return A.Regex(pattern, t[end + 1:], _pos(children[0]))

        def true(self, meta, children):
            return A.Literal(True, _pos(meta))

        def false(self, meta, children):
            return A.Literal(False, _pos(meta))

        def null(self, meta, children):
            return A.Literal(None, _pos(meta))

        def name(self, meta, children):
            return A.Name(str(children[0]), _pos(children[0]))

        def attr(self, meta, children):
            return A.Attr(children[0], str(children[1]), _pos(children[1]))

        def index(self, meta, children):
            return A.Index(children[0], children[1], _pos(meta))

        def call(self, meta, children):
            args = tuple(children[1]) if children[1] is not None else ()
            return A.Call(str(children[0]), args, _pos(children[0]))

        def arglist(self, meta, children):
            return list(children)

        def list(self, meta, children):
            return A.ListExpr(tuple(children[0]) if children[0] is not None else (), _pos(meta))

        def comprehension(self, meta, children):
            elt, var, seq, where = children
            return A.Comprehension(elt, str(var), seq, where, _pos(meta))

        def where(self, meta, children):
            return children[0]

        def body(self, meta, children):
            return children[0]

        def quant(self, meta, children):
            kind, var, seq, where, body = children
            if str(kind) == "forall" and body is None:
                raise _TransformError("forall needs a condition: 'forall x in SEQ [where FILTER]: CONDITION'", kind)
            return A.Quant(str(kind), str(var), seq, where, body, _pos(kind))

        def not_(self, meta, children):
            return A.Unary("not", children[0], _pos(meta))

        def neg(self, meta, children):
            return A.Unary("neg", children[0], _pos(meta))

        def _bin(op):  # noqa: N805 - a small factory used in the class body
            def f(self, meta, children):
                return A.Binary(op, children[0], children[1], _pos(meta))
            return f

        and_ = _bin("and")
        or_ = _bin("or")
        implies = _bin("implies")
        eq = _bin("==")
        ne = _bin("!=")
        lt = _bin("<")
        le = _bin("<=")
        gt = _bin(">")
        ge = _bin(">=")
        in_ = _bin("in")
        not_in = _bin("not in")
        match = _bin("~")
        not_match = _bin("!~")
        add = _bin("+")
        sub = _bin("-")
        mul = _bin("*")
        div = _bin("/")
        mod = _bin("%")
        del _bin

    return _ToAst()




def _hint(text: str, err: UnexpectedInput) -> str | None:
    try:
        return err.match_examples(grammar().parse, COMMON_MISTAKES, use_accepts=True)
    except Exception:  # noqa: BLE001 - a hint is optional; never let it mask the real error
        return None


# Parsing is a pure function of the text (``where`` only locates errors), so successful parses are
# memoized per process (bounded; errors are never stored) in plain-data form (``rule_ast.to_data``):
# a hit builds new nodes, so every caller still gets its own AST objects (the compiler keys per-run
# caches by node identity). ``pack_cache`` seeds the memo from its on-disk entries and collects, with
# ``recording``, the expressions a compile used.
_MEMO = RecordingMemo(MEMO_SIZE)
seed = _MEMO.seed
recording = _MEMO.recording
clear_memo = _MEMO.clear


def parse_expression(text: str, where: Where | None = None) -> A.Expr:
    """Parse one expression into an AST (memoized per process: the same text gives an equal AST,
    positions included, built anew on every call).

    Args:
        text: the expression source (a guard, an assertion, a let value or a message field).
        where: file/line/rule context used to locate errors in the pack file.

    Returns:
        The root :class:`~trajaudit.engine.dsl.ast.Expr`.

    Raises:
        RulePackError: syntax error (file:line:col, caret, hint for common mistakes), bad string
            escape, ``forall`` without a condition, or an expression too long / too deeply nested.
    """
    if isinstance(text, str):
        data = _MEMO.get(text)
        if data is not None:
            return A.from_data(data)
    where = where or Where()
    if not isinstance(text, str):
        raise where.error(f"an expression must be a string, got {type(text).__name__}")
    if not text.strip():
        raise where.error("empty expression")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise where.error(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    ast = _transform(_tree(text, where), text, where)
    try:
        data = A.to_data(ast)
        if A.same_data(A.to_data(A.from_data(data)), data):  # exact round trip, or not memoized
            _MEMO.put(text, data)
    except RecursionError:
        pass
    return ast


def _tree(text: str, where: Where) -> Any:
    """lark's parse tree of ``text``; a syntax error becomes a located :class:`RulePackError` with a
    caret and, for a common mistake, a hint."""
    from lark.exceptions import UnexpectedInput

    try:
        return grammar().parse(text)
    except UnexpectedInput as e:
        raise _syntax_error(text, where, e) from None
    except RecursionError:
        raise where.error("expression nested too deeply") from None


def _syntax_error(text: str, where: Where, e: UnexpectedInput) -> RulePackError:
    """The :class:`RulePackError` for lark's ``e`` on ``text``: what was unexpected, where, and a hint."""
    from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedToken

    line, col = getattr(e, "line", None), getattr(e, "column", None)
    at_end = isinstance(e, UnexpectedToken) and e.token.type == "$END"
    if isinstance(e, UnexpectedEOF) or at_end or line in (None, -1):
        lines = text.splitlines() or [""]
        line, col = len(lines), len(lines[-1]) + 1
    if isinstance(e, UnexpectedCharacters):
        ch = text[e.pos_in_stream]
        what = f"unexpected character {ch!r}"
    elif isinstance(e, UnexpectedToken):
        what = "unexpected end of expression" if e.token.type == "$END" else f"unexpected {str(e.token)!r}"
    else:
        what = "unexpected end of expression"
    if isinstance(e, UnexpectedCharacters):
        hint = CHARACTER_HINTS.get(ch)
    elif isinstance(e, UnexpectedToken) and str(e.token) == "/" and "/" not in text[e.token.start_pos + 1:]:
        hint = CHARACTER_HINTS["/"]
    else:
        hint = _hint(text, e)
    msg = what + (f" — {hint}" if hint else "")
    return where.error(msg, text, line, col, caret(text, line, col))


def _transform(tree: Any, text: str, where: Where) -> A.Expr:
    """The AST of lark's ``tree``; a transformer error (bad string escape, ``forall`` without a
    condition) or too deep a nesting becomes a located :class:`RulePackError`."""
    from lark.exceptions import VisitError

    try:
        return _to_ast().transform(tree)
    except VisitError as ve:
        orig = ve.orig_exc
        if isinstance(orig, _TransformError):
            line, col = getattr(orig.tok, "line", None), getattr(orig.tok, "column", None)
            raise where.error(orig.message, text, line, col, caret(text, line, col)) from None
        if isinstance(orig, RecursionError):
            raise where.error("expression nested too deeply") from None
        raise
    except RecursionError:
        raise where.error("expression nested too deeply") from None
