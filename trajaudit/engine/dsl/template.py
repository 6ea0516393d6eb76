"""Message templates: ``"claims {claimed} variants; {out.address} lists {actual}"``.

Each ``{…}`` holds an expression of the rule language (a let name, a quantifier variable — bound to
its witness or counterexample —, a field path, a function call); ``{{`` and ``}}`` are literal braces.
Fields are compiled once; rendering never raises (a field that cannot be evaluated renders as
``<error: …>``); a field's text longer than :data:`FIELD_CHARS` is clipped to its head and tail.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from trajaudit.engine.dsl.builtins import _str
from trajaudit.engine.dsl.compiler import ExprCompiler
from trajaudit.engine.dsl.parser import Where, parse_expression
from trajaudit.engine.dsl.runtime import Env, EvalError
from trajaudit.engine.trace.ir import raw_controls

Fn = Callable[[Env], Any]


def _split(text: str, where: Where) -> list[tuple[str, str, int]]:
    """``[(kind, text, offset)]`` with kind ``lit`` or ``expr``; raises on an unbalanced brace."""
    parts: list[tuple[str, str, int]] = []
    i, buf, start, n = 0, [], 0, len(text)
    while i < n:
        j = _BRACE.search(text, i)  # plain characters up to the next brace are copied in one piece
        if j is None:
            buf.append(text[i:])
            break
        if j.start() > i:
            buf.append(text[i:j.start()])
            i = j.start()
        ch = text[i]
        if ch == "{" and text[i + 1: i + 2] == "{":
            buf.append("{")
            i += 2
        elif ch == "}" and text[i + 1: i + 2] == "}":
            buf.append("}")
            i += 2
        elif ch == "{":
            end = text.find("}", i + 1)
            if end < 0:
                raise where.error("unclosed '{' in message template (write '{{' for a literal brace)",
                                  text, 1, i + 1, f"    {text}\n    {' ' * i}^")
            if buf:
                parts.append(("lit", "".join(buf), start))
                buf = []
            parts.append(("expr", text[i + 1: end], i + 1))
            i = end + 1
            start = i
        else:
            raise where.error("unmatched '}' in message template (write '}}' for a literal brace)",
                              text, 1, i + 1, f"    {text}\n    {' ' * i}^")
    if buf:
        parts.append(("lit", "".join(buf), start))
    return parts


_BRACE = re.compile(r"[{}]")
FIELD_CHARS = 400  # a rendered field longer than this keeps its head and tail (see clip)


def clip(text: str, limit: int = FIELD_CHARS) -> str:
    """``text``, or when longer than ``limit`` characters its first and last ``limit // 2`` with
    ``" … [N characters] … "`` between: a message quoting a whole tool output (``{last.content}``)
    made a 38 KB rationale on a Who&When run and 2 MB on a 1 MB output; the head names the failure,
    the tail keeps a traceback's last line."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]} … [{len(text)} characters] … {text[-half:]}"


def field_text(value: Any) -> str:
    """The text of a message field's value: a string as it is, a list or object as JSON with each
    control character kept as the character (``\\u001b`` of ``json.dumps`` turned back, as in
    :attr:`~trajaudit.engine.trace.ir.Step.preview`): the terminal console shows ESC as ``\\x1b``,
    the HTML report by name and SARIF as its JSON escape, whether it came in a string or a list."""
    text = _str(value)
    return text if isinstance(value, str) else raw_controls(text)


def compile_template(text: str, where: Where, params: dict[str, Any], lets: dict[str, str],
                     witnesses: set[str]) -> tuple[Fn, set[str]]:
    """Compile a message template.

    Returns:
        ``(render, uses)``: ``render(env) -> str`` and the top-level names the fields mention.

    Raises:
        RulePackError: an unbalanced brace, or a field that does not parse/compile (located).
    """
    uses: set[str] = set()
    pieces: list[Any] = []
    for kind, part, _off in _split(text or "", where):
        if kind == "lit":
            pieces.append(part)
            continue
        e = parse_expression(part, where)
        comp = ExprCompiler(part, where, params, lets, witnesses)
        pieces.append(comp.compile(e).fn)
        uses |= comp.uses

    def render(env: Env) -> str:
        out = []
        for p in pieces:
            if isinstance(p, str):
                out.append(p)
                continue
            mark = len(env.seen)
            try:
                out.append(clip(field_text(p(env))))
            except (EvalError, LookupError, TypeError, ValueError) as e:
                out.append(f"<error: {e}>")
            del env.seen[mark:]
        return "".join(out)

    return render, uses
