"""``rules lint``: static checks of a rule pack, using z3 on the expressions' logical skeleton.

Reports, each with the rule id and file:line:col:

- ``yaml`` / ``schema``: the pack does not parse or violates ``rule_pack.schema.json`` (every schema
  problem is listed, not only the first, in plain words: :mod:`trajaudit.engine.packs.messages`);
- ``compile``: an expression does not parse, names an unknown name/field/function/parameter, has a
  type error, a regex or jmespath that does not compile, or an unknown checker / bad checker args;
- ``unsatisfiable-guard``: the guard can never hold (the rule never applies);
- ``contradiction``: whenever the guard holds the assertion is false (the rule always fails);
- ``tautology``: whenever the guard holds the assertion is true (the rule can never fail);
- ``conflicting-rules``: two rules whose guards can hold on the same step but whose assertions cannot
  both hold there (one of them must fail);
- ``empty-pack`` / ``unknown-target`` (warnings): no enabled rule, or a target that is not a category
  of the pack's taxonomy (default agentrx);
- ``no-examples`` (warning): an enabled rule without ``examples`` (``rules test`` cannot show it fires);
- ``unknown-superseded`` (warning): a ``metadata.supersedes`` entry that names no rule of the pack or
  of a shipped pack (a typo would silently keep both rules).

The skeleton: field paths become z3 variables (strings, reals, booleans by how they are compared),
``step.kind`` ranges over the IR's kinds, ``len(…)`` and ``count`` are non-negative integers, ``let``
names are replaced by their definitions, and anything else (regex matches, quantifiers, function
calls) becomes an opaque atom keyed by its normalized text — so the same atom in two places is the
same variable. Sound for what it reports (an opaque atom can take any value); it can miss findings
whose reason hides inside an opaque atom.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import z3

from trajaudit import regular_files
from trajaudit.engine.dsl import ast as A
from trajaudit.engine.dsl.compiler import _NO, ExprCompiler
from trajaudit.engine.dsl.parser import Where
from trajaudit.engine.packs.compile import CompiledRule, compile_rule
from trajaudit.engine.packs.messages import relocate_param_error, schema_problems
from trajaudit.engine.packs.pack import (
    RulePack,
    RuleSpec,
    _rule_id_at,
    collecting_duplicates,
    is_pack_text,
    load_pack,
    resolve_pack,
    shipped_rule_specs,
    skipping_bad_rules,
)
from trajaudit.engine.packs.positions import YamlDoc
from trajaudit.engine.schema import validator
from trajaudit.engine.taxonomy import load_taxonomy
from trajaudit.engine.trace.ir import STEP_KINDS
from trajaudit.errors import RulePackError, TrajauditError
from trajaudit.registry import close_hint

TIMEOUT_MS = 1000
MAX_PAIR_RULES = 400


@dataclass(frozen=True)
class LintFinding:
    """One lint finding: ``level`` error|warning, a ``code`` (see the module doc), where and what."""

    level: str
    code: str
    message: str
    rule_id: str | None = None
    location: str = ""

    def __str__(self) -> str:
        rid = f" [{self.rule_id}]" if self.rule_id else ""
        return f"{self.location}: {self.level}: {self.code}{rid}: {self.message}"


class Skeleton:
    """Translates rule ASTs into z3 formulas over shared variables (one instance per pack)."""

    def __init__(self) -> None:
        self.vars: dict[tuple[str, str], Any] = {}
        self.side: list[Any] = []

    def var(self, key: str, sort: str) -> Any:
        """The z3 variable for ``key`` of ``sort`` (bool/real/int/str), created once."""
        k = (key, sort)
        if k not in self.vars:
            name = f"{sort}:{key}"
            v = {"bool": z3.Bool, "real": z3.Real, "int": z3.Int, "str": z3.String}[sort](name)
            self.vars[k] = v
            if sort == "int":
                self.side.append(v >= 0)
            if sort == "str" and key.endswith(".kind") and key.split(".")[0] in ("step", "output"):
                self.side.append(z3.Or([v == z3.StringVal(x) for x in STEP_KINDS]))
        return self.vars[k]

    def formula(self, e: A.Expr, env: dict[str, A.Expr], params: dict[str, Any]) -> Any:
        """A z3 Bool for expression ``e`` (let names in ``env`` are substituted)."""
        if isinstance(e, A.Literal):
            return z3.BoolVal(bool(e.value))
        if isinstance(e, A.Unary) and e.op == "not":
            return z3.Not(self.formula(e.operand, env, params))
        if isinstance(e, A.Binary):
            if e.op in ("and", "or", "implies"):
                a, b = self.formula(e.left, env, params), self.formula(e.right, env, params)
                return z3.And(a, b) if e.op == "and" else z3.Or(a, b) if e.op == "or" else z3.Implies(a, b)
            f = self._relation(e, env, params)
            if f is not None:
                return f
        if isinstance(e, A.Name) and e.id in env:
            return self.formula(env[e.id], env, params)
        if _is_path(e):
            return self.var(_key(e, env), "bool")
        return self.var(_key(e, env), "bool")

    def _relation(self, e: A.Binary, env: dict[str, A.Expr], params: dict[str, Any]) -> Any:
        op = e.op
        if op in ("in", "not in"):
            rc = _const(e.right, params)
            want = _sort_of(rc[0]) if isinstance(rc, list) and rc else None
            lhs = self.term(e.left, env, params, want=want or "real")
            if lhs is not None and isinstance(rc, list) and rc and all(_same_sort(lhs, v) for v in rc):
                f = z3.Or([lhs == _val(v) for v in rc])
                return z3.Not(f) if op == "not in" else f
            lc = _const(e.left, params)
            rhs = self.term(e.right, env, params, want="str")
            if isinstance(lc, str) and rhs is not None and z3.is_string(rhs):
                f = z3.Contains(rhs, z3.StringVal(lc))
                return z3.Not(f) if op == "not in" else f
            return None
        if op not in A.COMPARE_OPS:
            return None
        lc, rc = _const(e.left, params), _const(e.right, params)
        if lc is None or rc is None:  # comparisons with null stay opaque
            return None
        want = _sort_of(rc) or _sort_of(lc)
        lhs = self.term(e.left, env, params, want=want)
        rhs = self.term(e.right, env, params, want=want)
        if lhs is None or rhs is None:
            return None
        if z3.is_string(lhs) != z3.is_string(rhs) or z3.is_bool(lhs) != z3.is_bool(rhs):
            return None
        if z3.is_string(lhs) or z3.is_bool(lhs):
            if op == "==":
                return lhs == rhs
            if op == "!=":
                return lhs != rhs
            return None
        return {"==": lambda: lhs == rhs, "!=": lambda: lhs != rhs, "<": lambda: lhs < rhs,
                "<=": lambda: lhs <= rhs, ">": lambda: lhs > rhs, ">=": lambda: lhs >= rhs}[op]()

    def term(self, e: A.Expr, env: dict[str, A.Expr], params: dict[str, Any], want: str | None = "real") -> Any:
        """A z3 term (Real/Int, String or Bool) for ``e``, or ``None`` when it has no numeric/string skeleton."""
        c = _const(e, params)
        if c is not _NO:
            return _val(c) if c is not None and not isinstance(c, (list, dict)) else None
        if isinstance(e, A.Name) and e.id in env:
            return self.term(env[e.id], env, params, want)
        if isinstance(e, A.Unary) and e.op == "neg":
            t = self.term(e.operand, env, params, "real")
            return -t if t is not None and z3.is_arith(t) else None
        if isinstance(e, A.Binary) and e.op in ("+", "-", "*", "/"):
            a, b = self.term(e.left, env, params, "real"), self.term(e.right, env, params, "real")
            if a is None or b is None or not (z3.is_arith(a) and z3.is_arith(b)):
                return None
            return {"+": a + b, "-": a - b, "*": a * b, "/": a / b}[e.op]
        if isinstance(e, A.Call) and e.func == "len":
            return self.var(_key(e, env), "int")
        if isinstance(e, A.Quant) and e.kind == "count":
            return self.var(_key(e, env), "int")
        if _is_path(e) or isinstance(e, A.Call):
            sort = {"str": "str", "bool": "bool"}.get(want or "real", "real")
            return self.var(_key(e, env), sort)
        return None

    def check(self, *fs: Any) -> Any:
        """``z3.sat`` / ``z3.unsat`` / ``z3.unknown`` for the conjunction of ``fs`` and the side constraints."""
        s = z3.Solver()
        s.set("timeout", TIMEOUT_MS)
        s.add(*self.side, *fs)
        return s.check()


def _is_path(e: A.Expr) -> bool:
    while isinstance(e, (A.Attr, A.Index)):
        e = e.obj
    return isinstance(e, A.Name)


def _key(e: A.Expr, env: dict[str, A.Expr]) -> str:
    def sub(x: A.Expr) -> A.Expr:
        return env.get(x.id, x) if isinstance(x, A.Name) else x
    if isinstance(e, A.Name) and e.id in env:
        return A.unparse(env[e.id])
    return A.unparse(e)


def _const(e: A.Expr, params: dict[str, Any]) -> Any:
    try:
        c = ExprCompiler("", Where(), params).compile(e)
    except RulePackError:
        return _NO
    return c.const


def _sort_of(v: Any) -> str | None:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, str):
        return "str"
    if isinstance(v, (int, float)):
        return "real"
    return None


def _same_sort(t: Any, v: Any) -> bool:
    s = _sort_of(v)
    return (s == "str" and z3.is_string(t)) or (s == "real" and z3.is_arith(t)) or (s == "bool" and z3.is_bool(t))


def _val(v: Any) -> Any:
    if isinstance(v, bool):
        return z3.BoolVal(v)
    if isinstance(v, str):
        return z3.StringVal(v)
    return z3.RealVal(str(v))


def _schema_findings(source: Any) -> list[LintFinding]:
    try:
        if is_pack_text(source):
            doc = YamlDoc(source, None)
        elif isinstance(source, (str, Path)):
            path = resolve_pack(str(source))
            doc = YamlDoc(regular_files.read_text(path), str(path))
        else:
            return []
    except (RulePackError, OSError, UnicodeDecodeError):
        return []
    out = []
    for p in schema_problems(validator("rule_pack").iter_errors(doc.data), doc.data):
        err = doc.error(p.message, p.path, _rule_id_at(doc.data, p.path))
        out.append(LintFinding("error", "schema", _with_caret(err), err.rule_id, _where(err)))
    return out


def _where(e: RulePackError) -> str:
    return f"{e.file or '<rules>'}:{e.line or 1}:{e.column or 1}"


def _with_caret(e: RulePackError) -> str:
    return e.message + ("\n" + e.context if e.context else "")


def _position(f: LintFinding) -> tuple[str, int, int]:
    """Sort key: file, then line and column as numbers (``a.yaml:9`` before ``a.yaml:10``)."""
    file, _, rest = f.location.rpartition(":")
    file2, _, line = file.rpartition(":")
    try:
        return (file2, int(line), int(rest))
    except ValueError:
        return (f.location, 0, 0)


def _target_findings(pack: RulePack) -> list[LintFinding]:
    """``empty-pack`` (no enabled rule) and ``unknown-target`` (a target that is not a category of the
    pack's taxonomy, default agentrx: the judge could never use it as a root cause)."""
    where = f"{pack.file or '<rules>'}:1:1"
    if not pack.enabled_rules:
        return [LintFinding("warning", "empty-pack", "the pack has no enabled rule: checking with it finds nothing",
                            None, where)]
    name = pack.taxonomy or "agentrx"
    try:
        ids = set(load_taxonomy(name).ids)
    except (TrajauditError, LookupError, OSError) as e:
        return [LintFinding("warning", "unknown-taxonomy", f"taxonomy {name!r} cannot be loaded ({e}); targets "
                            "are not checked", None, where)]
    out = []
    for spec in pack.enabled_rules:
        bad = [t for t in spec.targets if t not in ids]
        if bad:
            out.append(LintFinding("warning", "unknown-target", f"target(s) {', '.join(bad)} are not categories of "
                                   f"the {name} taxonomy", spec.id, str(spec.field_locs.get("targets", spec.loc))))
    return out


def _supersedes_findings(pack: RulePack) -> list[LintFinding]:
    """``unknown-superseded``: ``metadata.supersedes`` must be a list of full rule ids of this pack or
    of a shipped pack (:func:`trajaudit.engine.packs.selection.superseded_ids` drops the rules it names)."""
    wanted = [(spec, spec.metadata.get("supersedes")) for spec in pack.enabled_rules
              if spec.metadata and spec.metadata.get("supersedes") is not None]
    if not wanted:
        return []
    known = {r.id for r in pack.rules} | {r.id for r in shipped_rule_specs()}
    out = []
    for spec, names in wanted:
        where = str(spec.field_locs.get("metadata", spec.loc))
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            out.append(LintFinding("warning", "unknown-superseded", "metadata.supersedes should be a list of full "
                                   "rule ids (pack.rule-id); other values are read as one id each", spec.id, where))
            continue
        for n in names:
            if n not in known:
                hint = close_hint(n, sorted(known))
                out.append(LintFinding("warning", "unknown-superseded", f"metadata.supersedes names {n!r}, which "
                                       f"is no rule of this pack or of a shipped pack, so it supersedes nothing{hint}",
                                       spec.id, where))
    return out


def _example_findings(pack: RulePack) -> list[LintFinding]:
    """A ``no-examples`` warning per enabled rule without ``examples``: ``rules test`` cannot show it
    ever fires, and a guard that never holds on real data goes unnoticed."""
    return [LintFinding("warning", "no-examples", "the rule has no examples: `trajaudit rules test` cannot show that "
                        "it fires (add a failing and a passing example)", spec.id, str(spec.loc))
            for spec in pack.enabled_rules if not spec.examples]


def _compile_findings(specs: Any, compiled: list[CompiledRule]) -> list[LintFinding]:
    """A ``compile`` error per rule of ``specs`` that does not compile; the others are appended to
    ``compiled``."""
    out: list[LintFinding] = []
    for spec in specs:
        try:
            compiled.append(compile_rule(spec))
        except RulePackError as e:
            e = relocate_param_error(spec, e)  # an including pack's override caused it: report it there
            loc = f"{e.file or '<rules>'}:{e.line or '?'}:{e.column or '?'}"
            out.append(LintFinding("error", "compile", _with_caret(e), spec.id, loc))
    return out


def _duplicate_findings(duplicates: list[tuple[RulePackError, RuleSpec]]) -> list[LintFinding]:
    """A ``pack`` error per duplicate rule id (at the second definition, naming the first), and the
    second definition's compile errors (it is not in the pack, so it is compiled here)."""
    out: list[LintFinding] = []
    for e, spec in duplicates:
        out.append(LintFinding("error", "pack", _with_caret(e), e.rule_id, _where(e)))
        out.extend(_compile_findings([spec], []))
    return out


def lint_pack(source: Any) -> list[LintFinding]:
    """Lint a pack (path, shipped name, YAML text, dict or :class:`RulePack`); never raises for bad packs.

    Returns:
        The findings, sorted by file, line and column; one per problem (schema problems in the words
        of :mod:`trajaudit.engine.packs.messages`, each at its own line with a caret).
    """
    return sorted(_lint(source), key=_position)


def _lint(source: Any) -> list[LintFinding]:
    # rules with schema problems are left out, the others linted: their duplicate ids and compile
    # errors are reported in the same pass (they showed only once the schema problems were fixed)
    with collecting_duplicates() as duplicates, skipping_bad_rules() as bad:
        try:
            pack = source if isinstance(source, RulePack) else load_pack(source)
        except RulePackError as e:
            error: RulePackError | None = e
        else:
            error = None
    if error is not None:
        # another problem, maybe of leaving those rules out (an override of one): lint the pack whole
        return _lint_whole(source) if bad else _load_findings(source, error, duplicates)
    if not bad:
        return _lint_loaded(pack, duplicates)
    # a pack whose every rule broke the schema is not "empty"
    return _schema_findings(source) + [f for f in _lint_loaded(pack, duplicates) if f.code != "empty-pack"]


def _lint_whole(source: Any) -> list[LintFinding]:
    """The findings of a pack whose load stops at its first problem (no rule left out)."""
    with collecting_duplicates() as duplicates:
        try:
            pack = load_pack(source)
        except RulePackError as e:
            return _load_findings(source, e, duplicates)
    return _lint_loaded(pack, duplicates)  # not reached: a pack with schema problems stops in load_pack


def _load_findings(source: Any, e: RulePackError, duplicates: list[tuple[RulePackError, RuleSpec]]) -> list[LintFinding]:
    """The findings of a pack that could not be loaded: ``e`` (or every schema problem) and the duplicates."""
    found = _schema_findings(source) if e.message.startswith("schema:") else []
    code = "yaml" if "YAML" in e.message else "schema" if e.message.startswith("schema:") else "pack"
    return _duplicate_findings(duplicates) + (found or [LintFinding("error", code, _with_caret(e), e.rule_id,
                                                                    _where(e))])


def _lint_loaded(pack: RulePack, duplicates: list[tuple[RulePackError, RuleSpec]]) -> list[LintFinding]:
    """The findings of a loaded pack: duplicates, targets, supersedes, examples, compile errors, z3 checks."""
    findings: list[LintFinding] = (_duplicate_findings(duplicates) + _target_findings(pack)
                                   + _supersedes_findings(pack) + _example_findings(pack))
    compiled: list[CompiledRule] = []
    findings.extend(_compile_findings(pack.enabled_rules, compiled))
    sk = Skeleton()
    forms: list[tuple[CompiledRule, Any, Any]] = []
    for r in compiled:
        env = {k[4:]: v for k, v in r.asts.items() if k.startswith("let.")}
        params = r.spec.params
        g = sk.formula(r.asts["guard"], env, params) if "guard" in r.asts else z3.BoolVal(True)
        a = sk.formula(r.asts["assert"], env, params) if "assert" in r.asts else None
        loc = str(r.spec.field_locs.get("guard", r.spec.loc))
        if sk.check(g) == z3.unsat:
            findings.append(LintFinding("error", "unsatisfiable-guard", "the guard can never hold, so the rule "
                                        "never applies", r.id, loc))
            continue
        if a is not None:
            aloc = str(r.spec.field_locs.get("assert", r.spec.loc))
            if sk.check(g, a) == z3.unsat:
                findings.append(LintFinding("error", "contradiction", "the assertion can never hold when the guard "
                                            "holds, so the rule fails wherever it applies", r.id, aloc))
                continue
            if sk.check(g, z3.Not(a)) == z3.unsat:
                findings.append(LintFinding("warning", "tautology", "the assertion always holds when the guard "
                                            "holds, so the rule can never fail", r.id, aloc))
                continue
            forms.append((r, g, a))
    for (r1, g1, a1), (r2, g2, a2) in itertools.combinations(forms[:MAX_PAIR_RULES], 2):
        if r1.per_call != r2.per_call:
            continue
        if sk.check(g1, g2) != z3.sat:
            continue
        if sk.check(g1, g2, a1, a2) == z3.unsat:
            findings.append(LintFinding(
                "error", "conflicting-rules", f"{r1.id} and {r2.id} contradict: on a step where both guards hold, "
                f"the two assertions cannot both pass", r2.id, str(r2.spec.field_locs.get("assert", r2.spec.loc))))
    return findings
