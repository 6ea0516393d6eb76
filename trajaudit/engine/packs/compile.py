"""Compiling a rule spec (guard, let, assert/check, message) into a :class:`CompiledRule`.

AgentRx §3.2: a constraint is a guard G_C (when it applies) and an assertion Φ_C (what must hold),
checked programmatically or semantically. The compiled rule also carries its *index plan* — the
step kinds, called tools and output tools its guard's top-level conjuncts allow — so the evaluator
(``rule_eval``) visits only steps the guard can match.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import trajaudit.engine.packs  # its submodule messages is loaded on first use (error paths)
from trajaudit.checkers.registry import default_checkers
from trajaudit.engine.dsl import ast as A
from trajaudit.engine.dsl.compile_base import _NO, TOP_NAMES
from trajaudit.engine.dsl.compiler import ExprCompiler, conjuncts
from trajaudit.engine.dsl.parser import Where, parse_expression
from trajaudit.engine.dsl.runtime import Env
from trajaudit.engine.dsl.template import compile_template
from trajaudit.engine.packs.pack import RulePack, RuleSpec, load_pack
from trajaudit.engine.trace.ir import STEP_KINDS
from trajaudit.engine.validation_log import LazyRecord
from trajaudit.errors import ArgumentTypeError, RulePackError

if TYPE_CHECKING:
    import trajaudit.engine.packs.messages  # noqa: F401 - the attribute's type for mypy (loaded on first use)

Fn = Callable[[Env], Any]


@dataclass(frozen=True)
class IndexPlan:
    """Which steps a rule can match, read off its guard (``None`` = no restriction)."""

    kinds: frozenset[str] | None = None
    call_names: frozenset[str] | None = None
    output_names: frozenset[str] | None = None


@dataclass
class CompiledRule:
    """A rule ready to evaluate.

    Attributes:
        spec: the :class:`RuleSpec` it came from (id, type, severity, targets, source location …).
        guard, assertion: closures (``None`` when absent).
        lets: ``[(name, loc, fn)]`` in order: a let that knows its address has its ``loc``
            (``env -> (value, address)``, ``fn`` is ``None``), the others their value closure ``fn``
            (``loc`` is ``None``).
        check: for ``check:`` rules, ``("checker", Checker, args)`` or ``("semantic", predicate)``.
        message: closure rendering the message template.
        per_call: the rule is evaluated once per tool call (it mentions ``call`` or uses a per-call checker).
        tool_only: the rule mentions ``output`` (only tool-output steps are visited).
        plan: the guard's :class:`IndexPlan`.
        asts: parsed expressions by field (``guard``, ``assert``, ``let.NAME``) for lint/explain.
        pass_fields: the instance fields its pass records share (:meth:`LazyRecord.pass_fields`).
    """

    spec: RuleSpec
    guard: Fn | None
    lets: list[tuple[str, Any, Any]]
    assertion: Fn | None
    check: tuple[Any, ...] | None
    message: Fn
    per_call: bool
    tool_only: bool
    plan: IndexPlan
    asts: dict[str, A.Expr] = field(default_factory=dict)
    pass_fields: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        s = self.spec  # the fields every pass record of the rule shares (LazyRecord.passed)
        self.pass_fields = LazyRecord.pass_fields(s.id, s.severity, s.type, s.targets, s.title)

    id = property(lambda self: self.spec.id)
    type = property(lambda self: self.spec.type)
    severity = property(lambda self: self.spec.severity)
    targets = property(lambda self: self.spec.targets)
    source = property(lambda self: self.spec.loc)

    def explain(self) -> str:
        """The rule, its compiled form (normalized expressions, scope, index plan) and where it came from."""
        s = self.spec
        lines = [f"rule {s.id}  [{s.type}, {s.severity}]  targets: {', '.join(s.targets) or '-'}",
                 f"  from: {s.loc} (pack {s.pack})"]
        if s.title:
            lines.append(f"  title: {s.title}")
        for k, e in self.asts.items():
            lines.append(f"  {k}: {A.unparse(e)}")
        if self.check is not None:
            lines.append(f"  check: {self.check[0]} {self.check[1] if self.check[0] == 'semantic' else self.check[1].name}"
                         + (f" args={self.check[2]}" if self.check[0] == "checker" else ""))
        scope = "each tool call" if self.per_call else "tool-output steps" if self.tool_only else "each step"
        lines.append(f"  evaluated on: {scope}")
        p = self.plan
        idx = [f"kinds={sorted(p.kinds)}" if p.kinds is not None else "",
               f"called tools={sorted(p.call_names)}" if p.call_names is not None else "",
               f"output tools={sorted(p.output_names)}" if p.output_names is not None else ""]
        lines.append(f"  index: {', '.join(x for x in idx if x) or 'all steps'}")
        if s.message:
            lines.append(f"  message: {s.message}")
        used = _params_used(self)
        if used:
            lines.append(f"  params: {', '.join(used)}")
            for name in used:  # the values the rule reads (a long regex or list shortened)
                v = s.params.get(name)
                text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)
                text = " ".join(text.split()) if "\n" in text else text  # a verbose (?x) regex on one line
                lines.append(f"    {name} = {text if len(text) <= 160 else text[:157] + '...'}")
        return "\n".join(lines)


def _params_used(rule: CompiledRule) -> list[str]:
    """The pack parameters the rule reads (``params.x``, ``params["x"]`` in its expressions or message);
    all of them when it reads ``params`` as a whole."""
    names: set[str] = set()
    for e in rule.asts.values():
        parents = {id(n.obj) for n in e.walk() if isinstance(n, (A.Attr, A.Index))}
        for n in e.walk():
            if isinstance(n, A.Attr) and isinstance(n.obj, A.Name) and n.obj.id == "params":
                names.add(n.name)
            elif isinstance(n, A.Index) and isinstance(n.obj, A.Name) and n.obj.id == "params" \
                    and isinstance(n.key, A.Literal) and isinstance(n.key.value, str):
                names.add(n.key.value)
            elif isinstance(n, A.Name) and n.id == "params" and id(n) not in parents:
                return sorted(rule.spec.params)
    names |= set(re.findall(r"\bparams\s*\.\s*([A-Za-z_]\w*)", rule.spec.message))
    return sorted(n for n in names if n in rule.spec.params)


def _plan(guard: A.Expr | None, params: dict[str, Any]) -> IndexPlan:
    """The steps a rule can apply to, read from its guard's conjuncts: ``step.is_decision``,
    ``step.kind == / in``, ``call.name == / in`` and ``output.name``/``step.tool == / in`` constants
    narrow the kinds, called tools and output tools (``None``: no restriction)."""
    kinds: set[str] | None = None
    calls: set[str] | None = None
    outs: set[str] | None = None
    for c in conjuncts(guard) if guard is not None else []:
        if isinstance(c, A.Attr) and c.name == "is_decision" and isinstance(c.obj, A.Name) and c.obj.id == "step":
            kinds = (kinds or set(STEP_KINDS)) & {"agent"}
            continue
        got = _constant_test(c, params)
        if got is None:
            continue
        (root, f), vals = got
        if root == "step" and f == "kind":
            kinds = (kinds if kinds is not None else set(STEP_KINDS)) & set(vals)
        elif root == "call" and f == "name":
            calls = (calls if calls is not None else set(vals)) & set(vals)
        elif (root == "output" and f in ("name", "tool")) or (root == "step" and f == "tool"):
            outs = (outs if outs is not None else set(vals)) & set(vals)
    return IndexPlan(frozenset(kinds) if kinds is not None else None, frozenset(calls) if calls is not None else None,
                     frozenset(outs) if outs is not None else None)


def _constant_test(c: A.Expr, params: dict[str, Any]) -> tuple[tuple[str, str], list[str]] | None:
    """``((root name, field), string constants)`` of a conjunct ``root.field == "x"`` or
    ``root.field in ["x", ...]`` whose right side compiles to constant strings; else ``None``."""
    if not (isinstance(c, A.Binary) and c.op in ("==", "in") and isinstance(c.left, A.Attr)
            and isinstance(c.left.obj, A.Name)):
        return None
    try:
        rhs = ExprCompiler("", Where(), params).compile(c.right)
    except RulePackError:
        return None
    if rhs.const is _NO:
        return None
    vals = rhs.const if c.op == "in" and isinstance(rhs.const, list) else [rhs.const] if c.op == "==" else None
    if vals is None or not all(isinstance(v, str) for v in vals):
        return None
    return (c.left.obj.id, c.left.name), vals


def compile_rule(spec: RuleSpec, checkers: Any = None) -> CompiledRule:
    """Parse and compile one rule.

    Raises:
        RulePackError: syntax/name/type errors in any expression, unknown checker, bad checker args.
    """
    params = spec.params
    asts: dict[str, A.Expr] = {}
    uses: set[str] = set()
    guard = None
    if spec.guard is not None:
        asts["guard"] = parse_expression(spec.guard, spec.where("guard"))
        comp = ExprCompiler(spec.guard, spec.where("guard"), params)
        guard = comp.compile(asts["guard"]).fn
        uses |= comp.uses
    lets: list[tuple[str, Any, Any]] = []
    let_types: dict[str, str] = {}
    witnesses: set[str] = set()
    for name, text in spec.let:
        w = spec.where(f"let.{name}")
        if name in TOP_NAMES:
            raise w.error(f"let name {name!r} shadows a built-in name")
        e = parse_expression(text, w)
        asts[f"let.{name}"] = e
        comp = ExprCompiler(text, w, params, dict(let_types))
        c = comp.compile(e)
        uses |= comp.uses
        lets.append((name, c.loc, None) if c.loc is not None else (name, None, c.fn))
        let_types[name] = c.type
        witnesses |= A.quant_vars(e)
    assertion = None
    check = None
    if spec.assertion is not None:
        asts["assert"] = parse_expression(spec.assertion, spec.where("assert"))
        comp = ExprCompiler(spec.assertion, spec.where("assert"), params, dict(let_types))
        assertion = comp.compile(asts["assert"]).fn
        uses |= comp.uses
        witnesses |= A.quant_vars(asts["assert"])
    elif spec.check is not None:
        check = _compile_check(spec, checkers if checkers is not None else default_checkers())
    mw = spec.where("message")
    message, muses = compile_template(spec.message, mw, params, dict(let_types), witnesses - set(let_types))
    uses |= muses
    per_call = "call" in uses or (check is not None and check[0] == "checker" and check[1].per_call)
    tool_only = "output" in uses
    return CompiledRule(spec, guard, lets, assertion, check, message, per_call, tool_only,
                        _plan(asts.get("guard"), params), asts)


def _compile_check(spec: RuleSpec, checkers: Any) -> tuple[Any, ...]:
    import jsonschema

    chk = spec.check or {}

    def err(msg: str) -> RulePackError:
        return RulePackError(msg, file=spec.loc.file, line=spec.loc.line, column=spec.loc.column, rule_id=spec.id)
    if "semantic" in chk:
        return ("semantic", chk["semantic"])
    try:
        checker = checkers.get(chk["checker"])
    except LookupError as e:
        raise err(str(e.args[0])) from None
    args = chk.get("args") or {}
    errs = list(jsonschema.validators.validator_for(checker.args_schema)(checker.args_schema).iter_errors(args))
    if errs:
        raise err(f"checker {checker.name} args: " + "; ".join(f"{e.json_path}: {e.message}" for e in errs[:3]))
    if checker.validate is not None:
        try:
            checker.validate(args)
        except ValueError as e:
            raise err(f"checker {checker.name}: {e}") from None
    return ("checker", checker, args)


def compile_rules(pack: RulePack | list[RuleSpec] | Any, *, checkers: Any = None) -> list[CompiledRule]:
    """Compile every enabled rule of a pack (or a list of specs, or a path/name/YAML given to ``load_pack``).

    Raises:
        RulePackError: the first rule that does not compile (``rules lint`` reports them all); located
            at an including pack's parameter override when that override caused it.
        ArgumentTypeError: ``pack`` is none of those, or a list holds something else than RuleSpecs.
    """
    if not isinstance(pack, (RulePack, list, tuple)):
        if not isinstance(pack, (str, dict)) and not hasattr(pack, "__fspath__"):
            raise ArgumentTypeError("compile_rules", "pack", pack, "a RulePack, a list of RuleSpecs, or a pack "
                                    "path/name/YAML text/dict (for load_pack)")
        pack = load_pack(pack)
    elif not isinstance(pack, RulePack):
        for i, s in enumerate(pack):
            if not isinstance(s, RuleSpec):
                raise ArgumentTypeError("compile_rules", f"pack[{i}]", s, "a RuleSpec (a list item must be a rule "
                                        "spec; load a pack by name with load_pack(name))")
    specs = pack.enabled_rules if isinstance(pack, RulePack) else [s for s in pack if not s.disabled]
    out = []
    for s in specs:
        try:
            out.append(compile_rule(s, checkers))
        except RulePackError as e:  # caused by an including pack's params override? report it there
            raise trajaudit.engine.packs.messages.relocate_param_error(s, e) from None
    return out
