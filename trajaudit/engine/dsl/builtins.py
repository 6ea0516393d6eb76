"""Built-in functions of the rule language (the only functions a rule can call).

Each entry of :data:`BUILTINS` declares its arity, the kinds of its arguments (``regex`` and
``jmespath`` arguments must be compile-time constants: a ``/regex/`` literal, a string, or a pack
parameter; they are compiled once by the rule compiler), its result type and whether it depends on the
current step. Documented with examples in docs/rules.md ("Functions").
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from typing import Any, Callable

import jmespath

from trajaudit import safe_json
from trajaudit.checkers.relational import subset_summing_to
from trajaudit.engine.dsl.regex.prefilter import captures, lower_text
from trajaudit.engine.dsl.runtime import CallView, Env, EvalError, StepView, is_num, type_name


@dataclass(frozen=True)
class StepRange:
    """Steps with index in ``[lo, hi)`` (``earlier``, ``later``, ``steps``, ``since(x)``)."""

    lo: int
    hi: int

    def items(self, env: Env) -> list[Any]:
        """The step views in the range, in order."""
        return env.tc.views[max(self.lo, 0): max(self.hi, 0)]


@dataclass(frozen=True)
class CallRange:
    """Tool calls issued by steps with index in ``[lo, hi)`` (``calls(earlier)`` …)."""

    lo: int
    hi: int

    def items(self, env: Env) -> list[Any]:
        """The call views in the range, in order."""
        cs = env.tc.call_steps
        return env.tc.all_calls[bisect_left(cs, self.lo): bisect_left(cs, self.hi)]


def as_items(env: Env, seq: Any) -> list[Any]:
    """Materialize a sequence value (range, list, object values) for iteration; ``null`` → ``[]``."""
    if isinstance(seq, (StepRange, CallRange)):
        return seq.items(env)
    if seq is None:
        return []
    if isinstance(seq, (list, tuple)):
        return list(seq)
    if isinstance(seq, dict):
        return list(seq.values())
    if isinstance(seq, str):
        return list(seq)
    raise EvalError(f"cannot iterate over a {type_name(seq)}")


_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_NUM_RE = re.compile(r"(?<![\w.])[-+]?\$?\d[\d,]*(?:\.\d+)?(?![\w])|\b(?:" + "|".join(_WORDS) + r")\b", re.I)


def to_number(x: Any) -> int | float | None:
    """Number from a number or text: ``"1,234.50"``, ``"$12"``, ``"eleven"`` (0–20); else ``None``."""
    if is_num(x):
        return x
    if isinstance(x, bool) or not isinstance(x, str):
        return None
    t = x.strip().lower().replace(",", "").lstrip("$")
    if t in _WORDS:
        return _WORDS[t]
    try:
        v = float(t)
    except ValueError:
        return None
    return int(v) if v.is_integer() and "." not in t and "e" not in t else v


def numbers(text: Any) -> list[int | float]:
    """Every number written in ``text`` (digits with thousands separators and decimals, or 0–20 in words)."""
    if text is None:
        return []
    if not isinstance(text, str):
        raise EvalError(f"numbers() needs a string, got {type_name(text)}")
    return [n for n in (to_number(m.group(0).replace("$", "")) for m in _NUM_RE.finditer(text)) if n is not None]


def _capture(text: Any, rx: re.Pattern[str]) -> str | None:
    if text is None:
        return None
    if is_num(text):  # a number searched as the text str() writes (an id logged as 5, not "5")
        text = _str(text)
    if not isinstance(text, str):
        raise EvalError(f"capture() needs a string, got {type_name(text)}")
    m = rx.search(text)
    if not m:
        return None
    return m.group(1) if rx.groups else m.group(0)


def _captures(text: Any, rx: re.Pattern[str]) -> list[str]:
    if text is None:
        return []
    if is_num(text):
        text = _str(text)
    if not isinstance(text, str):
        raise EvalError(f"captures() needs a string, got {type_name(text)}")
    return captures(rx, text)  # exact: prefiltered and memoized (regex_prefilter)


def _len(x: Any) -> int:
    if isinstance(x, (str, list, tuple, dict)):
        return len(x)
    raise EvalError(f"len() of a {type_name(x)}")


def _str(x: Any) -> str:
    if isinstance(x, str):
        return x
    if isinstance(x, (StepView, CallView)):
        return x.preview()
    if x is None:
        return "null"
    if isinstance(x, bool):
        return "true" if x else "false"
    if is_num(x):
        return str(int(x)) if isinstance(x, float) and x.is_integer() else str(x)
    import json

    return json.dumps(x, ensure_ascii=False, default=str)


def _nums(xs: Any, fname: str) -> list[int | float]:
    if not isinstance(xs, (list, tuple)):
        raise EvalError(f"{fname}() needs a list, got {type_name(xs)}")
    out = []
    for x in xs:
        if not is_num(x):
            raise EvalError(f"{fname}() of a list holding {type_name(x)} {x!r}")
        out.append(x)
    return out


def _minmax(f: Callable, name: str) -> Callable:
    def g(*args: Any) -> Any:
        xs = args[0] if len(args) == 1 else list(args)
        xs = _nums(xs, name)
        if not xs:
            return None
        return f(xs)
    return g


def _json(env: Env, x: Any) -> Any:
    if isinstance(x, StepView):
        return env.tc.json_of(x.step.index)
    if x is None:
        return None
    if not isinstance(x, str):
        return x
    try:
        return safe_json.loads(x)
    except ValueError:
        return None


def _leaves(x: Any) -> list[Any]:
    out: list[Any] = []
    stack = [x]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(reversed(list(v.values())))
        elif isinstance(v, (list, tuple)):
            stack.extend(reversed(v))
        elif v is not None:
            out.append(v)
    return out


#: ``type(@)`` of JSON values by exact Python type: jmespath's own answer (its ``_func_type``), without
#: lexing/interpreting the expression for the commonest guard (``select(o.json, "type(@)") == "object"``).
_JSON_TYPE = {str: "string", bool: "boolean", list: "array", dict: "object", int: "number", float: "number",
              type(None): "null"}


def _select(x: Any, expr: Any) -> Any:
    if isinstance(x, (StepView, CallView)):
        raise EvalError("select() works on JSON values (e.g. output.json, call.args), not on a step or call")
    if expr.expression == "type(@)":
        t = _JSON_TYPE.get(type(x))
        if t is not None:
            return t
    try:
        return expr.search(x)
    except jmespath.exceptions.JMESPathError as e:
        raise EvalError(f"jmespath: {e}") from None


def _contains_any(text: Any, words: Any) -> bool:
    if text is None:
        return False
    if not isinstance(words, (list, tuple)):
        raise EvalError("contains_any() needs a list of strings")
    t = (text if isinstance(text, str) else _str(text)).lower()
    return any(str(w).lower() in t for w in words)


def _outputs(env: Env, seq: Any, name: Any = None) -> list[Any]:
    if seq.__class__ is StepRange and (name is None or name.__class__ is str):
        # a step range (outputs(earlier, "tool")): the run's index of tool outputs, bisected — the
        # same views in the same order as the filter below, without visiting every step of the range
        tc = env.tc
        pos = tc.tool_positions(name)
        n = len(tc.views)
        lo, hi = max(0, min(seq.lo, n)), max(0, min(seq.hi, n))
        return tool_views(tc, name, pos)[bisect_left(pos, lo): bisect_left(pos, hi)]
    return [v for v in as_items(env, seq) if isinstance(v, StepView) and v.step.kind == "tool"
            and (name is None or env.tc.output_name(v.step.index) == name)]


def tool_views(tc: Any, name: str | None, pos: list[int]) -> list[Any]:
    """The views of ``tc.tool_positions(name)``, aligned with it, kept per run and extended as the
    positions grow (a growing run appends to them): ``outputs(earlier, "tool")`` is a slice of it,
    a C-level copy instead of a view lookup per output."""
    key = ("tool-views", name)
    hit = tc.cache.get(key)
    if hit is None or hit[0] is not pos:  # (the positions list it is aligned with, the views)
        hit = tc.cache[key] = (pos, [])
    vs = hit[1]
    if len(vs) < len(pos):
        views = tc.views
        vs.extend([views[i] for i in pos[len(vs):]])
    return vs


def _calls(env: Env, seq: Any) -> Any:
    if isinstance(seq, StepRange):
        return CallRange(seq.lo, seq.hi)
    if isinstance(seq, StepView):
        return list(env.tc.call_views[seq.step.index])
    return [c for v in as_items(env, seq) if isinstance(v, StepView) for c in env.tc.call_views[v.step.index]]


def _since(env: Env, x: Any) -> StepRange:
    if x is None:
        return StepRange(0, env.k)
    if isinstance(x, CallView):
        return StepRange(x.step.index + 1, env.k)
    if isinstance(x, StepView):
        return StepRange(x.step.index + 1, env.k)
    if is_num(x):
        return StepRange(int(x) + 1, env.k)
    raise EvalError(f"since() needs a step, a call or a step index, got {type_name(x)}")


_CURRENT = object()


def _outputs_of(env: Env, x: Any = _CURRENT) -> list[Any]:
    if x is _CURRENT:
        return env.tc.outputs_of(env.k)
    if x is None:
        return []
    if not isinstance(x, StepView):
        raise EvalError(f"outputs_of() needs a step, got {type_name(x)}")
    return env.tc.outputs_of(x.step.index)


def _latest_output(env: Env, name: Any) -> StepView | None:
    if not isinstance(name, str):
        raise EvalError(f"latest_output() needs a tool name, got {type_name(name)}")
    return env.tc.latest_output(name, env.k)


def _subset_sum(values: Any, target: Any) -> Any:
    if not is_num(target):
        raise EvalError(f"subset_sum() needs a number as target, got {type_name(target)}")
    return subset_summing_to(_nums(values, "subset_sum"), target)


def _round(x: Any, n: Any = 0) -> Any:
    if not is_num(x) or not is_num(n):
        raise EvalError("round() needs numbers")
    return round(x, int(n))


@dataclass(frozen=True)
class Builtin:
    """One built-in: ``fn(*args)``, or ``fn(env, *args)`` when ``needs_env``.

    Attributes:
        arg_kinds: per positional argument ``value`` / ``regex`` / ``jmespath`` (the last two must be
            compile-time constants); ``min_args``..``len(arg_kinds)`` arguments are accepted, except
            ``variadic`` functions.
        returns: static result type (``num``, ``str``, ``bool``, ``list``, ``any``, ``step``, ``seq``).
        step_dependent: the result depends on the current step (so it cannot be pre-computed).
    """

    fn: Callable[..., Any]
    arg_kinds: tuple[str, ...]
    min_args: int
    returns: str = "any"
    needs_env: bool = False
    step_dependent: bool = False
    variadic: bool = False
    doc: str = ""


def _b(fn: Callable[..., Any], kinds: str = "value", min_args: int | None = None, **kw: Any) -> Builtin:
    ks = tuple(kinds.split()) if kinds else ()
    return Builtin(fn, ks, len(ks) if min_args is None else min_args, **kw)


BUILTINS: dict[str, Builtin] = {
    "len": _b(_len, returns="num", doc="length of a string, list or object"),
    "lower": _b(lambda s: lower_text(s) if isinstance(s, str) else s, returns="str", doc="lower-case"),
    "upper": _b(lambda s: s.upper() if isinstance(s, str) else s, returns="str", doc="upper-case"),
    "trim": _b(lambda s: s.strip() if isinstance(s, str) else s, returns="str", doc="strip whitespace"),
    "str": _b(_str, returns="str", doc="text of a value (JSON for objects)"),
    "num": _b(to_number, returns="num", doc="number from text ('1,234.5', '$12', 'eleven'), else null"),
    "numbers": _b(numbers, returns="list", doc="every number written in a text"),
    "round": _b(_round, "value value", 1, returns="num", doc="round(x, digits=0)"),
    "abs": _b(lambda x: abs(x) if is_num(x) else (_ for _ in ()).throw(EvalError("abs() of a non-number")),
              returns="num", doc="absolute value"),
    "sum": _b(lambda xs: sum(_nums(xs, "sum")), returns="num", doc="sum of a list of numbers"),
    "min": _b(_minmax(min, "min"), "value", 1, returns="num", variadic=True, doc="min(list) or min(a, b, …)"),
    "max": _b(_minmax(max, "max"), "value", 1, returns="num", variadic=True, doc="max(list) or max(a, b, …)"),
    "approx": _b(lambda a, b, tol=0.005: is_num(a) and is_num(b) and abs(a - b) <= tol, "value value value", 2,
                 returns="bool", doc="|a-b| <= tol (default 0.005)"),
    "json": _b(_json, returns="any", needs_env=True, doc="parse a string (or a step's content) as JSON, else null"),
    "select": _b(_select, "value jmespath", returns="any", doc="jmespath query over a JSON value"),
    "capture": _b(_capture, "value regex", returns="str", doc="first regex group (or match) in a text (a number as str() writes it), else null"),
    "captures": _b(_captures, "value regex", returns="list", doc="every regex group (or match) in a text (a number as str() writes it)"),
    "keys": _b(lambda d: list(d) if isinstance(d, dict) else [], returns="list", doc="keys of an object"),
    "values": _b(lambda d: list(d.values()) if isinstance(d, dict) else list(d) if isinstance(d, list) else [],
                 returns="list", doc="values of an object (a list is returned as is)"),
    "leaves": _b(_leaves, returns="list", doc="every scalar inside a JSON value"),
    "unique": _b(lambda xs: list(dict.fromkeys(_hashable(xs))), returns="list", doc="distinct items, in order"),
    "flatten": _b(lambda xs: [y for x in (xs or []) for y in (x if isinstance(x, list) else [x])], returns="list",
                  doc="flatten one level"),
    "contains_any": _b(_contains_any, "value value", returns="bool", doc="case-insensitive: any word in text"),
    "startswith": _b(lambda s, p: isinstance(s, str) and s.startswith(str(p)), "value value", returns="bool"),
    "endswith": _b(lambda s, p: isinstance(s, str) and s.endswith(str(p)), "value value", returns="bool"),
    "default": _b(lambda x, d: d if x is None else x, "value value", returns="any", doc="x, or d when x is null"),
    "any": _b(lambda xs: any(xs or []), returns="bool", doc="some item is true"),
    "all": _b(lambda xs: all(xs or []), returns="bool", doc="every item is true"),
    "calls": _b(_calls, returns="seq", needs_env=True, doc="tool calls of a sequence of steps (or of one step)"),
    "outputs": _b(_outputs, "value value", 1, returns="list", needs_env=True,
                  doc="tool-output steps of a sequence, optionally of one tool"),
    "outputs_of": _b(_outputs_of, "value", 0, returns="list", needs_env=True, step_dependent=True,
                     doc="the later tool outputs answering a step's calls (by call id), or, for an output "
                         "with no known call, the one right after the step; no argument: the current step"),
    "since": _b(_since, returns="seq", needs_env=True, step_dependent=True,
                doc="steps after x, before the current step (all earlier steps when x is null)"),
    "latest_output": _b(_latest_output, returns="step", needs_env=True, step_dependent=True,
                        doc="latest tool output of the named tool before the current step"),
    "subset_sum": _b(_subset_sum, "value value", returns="list",
                     doc="a sub-list of numbers summing exactly to a target (z3), else null"),
}


def _hashable(xs: Any) -> list[Any]:
    if not isinstance(xs, (list, tuple)):
        raise EvalError(f"unique() needs a list, got {type_name(xs)}")
    import json

    out = []
    for x in xs:
        out.append(x if isinstance(x, (str, int, float, bool, type(None))) else json.dumps(x, sort_keys=True))
    return out
