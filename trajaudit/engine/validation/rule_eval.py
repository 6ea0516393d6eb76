"""Evaluating compiled rules over a trajectory → :class:`~trajaudit.engine.validation_log.ValidationLog`.

AgentRx §3.2–3.3: for each constraint C and step k, ``Eval_C(k) = skip`` when the guard G_C is
false, else the assertion's verdict with evidence e; the validation log keeps every non-skipped
(k, C, verdict, e). Here:

- a rule visits only the steps (or tool calls) its index plan allows; the others count as skips;
- each rule has an operation budget per trajectory (``AuditConfig.rule_budget``): when it runs out
  the current step gets an ``unknown`` record with the reason, the rule stops, and the log's
  ``incomplete`` list says how many candidate steps were not evaluated — never a silent skip;
- the run's rule evaluation has a wall-clock budget (``AuditConfig.run_timeout``, z3 time included):
  when it runs out, the current check and the first candidate of every later rule are ``unknown``
  ("run time budget … exceeded") and ``incomplete`` counts what was not evaluated;
- a rule that raises on a step (a type error on odd data, a checker crash) yields an ``unknown``
  record naming the error and the step; the other rules and steps still run.
"""

from __future__ import annotations

import logging
import time
from functools import partial
from typing import Any

from trajaudit import run_budget
from trajaudit.api_args import check_tool_list
from trajaudit.checkers.base import CheckContext
from trajaudit.checkers.semantic import NoLLMOracle, SemanticOracle
from trajaudit.engine.config import AuditConfig
from trajaudit.engine.dsl.runtime import (
    BudgetExceeded,
    CallView,
    Env,
    EvalError,
    StepView,
    TrajContext,
    json_safe,
)
from trajaudit.engine.packs.compile import CompiledRule, compile_rules
from trajaudit.engine.packs.pack import RulePack, RuleSpec
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.engine.validation.unit_memo import UnitPlan, shared_value
from trajaudit.engine.validation_log import RUN_BUDGET_NOTE, Evidence, LazyRecord, Record, ValidationLog
from trajaudit.errors import ArgumentTypeError, LLMUnreachableError

log = logging.getLogger(__name__)
MAX_EVIDENCE = 12


def candidates(rule: CompiledRule, tc: TrajContext) -> list[tuple[int, CallView | None]]:
    """The (step index, call) units a rule visits, in step order (see :class:`IndexPlan`)."""
    p = rule.plan
    if rule.per_call:
        if p.call_names is not None:
            units = sorted((s, j) for name in p.call_names for (s, j) in tc.by_call_name.get(name, ()))
            out = [(s, tc.call_views[s][j]) for s, j in units]
        else:
            out = [(c.step.index, c) for c in tc.all_calls]
        if p.kinds is not None:
            out = [u for u in out if tc.traj.steps[u[0]].kind in p.kinds]
        return out
    if p.output_names is not None:
        idx = sorted({i for name in p.output_names for i in tc.by_output_name.get(name, ())})
    elif rule.tool_only:
        idx = list(tc.by_kind.get("tool", ()))
    elif p.kinds is not None:
        idx = sorted(i for k in p.kinds for i in tc.by_kind.get(k, ()))
    else:
        idx = list(range(len(tc.views)))
    if p.kinds is not None and (p.output_names is not None or rule.tool_only):
        idx = [i for i in idx if tc.traj.steps[i].kind in p.kinds]
    return [(i, None) for i in idx]


def _evidence(seen: list[tuple[str, Any, str | None]], call: CallView | None) -> tuple[Evidence, ...]:
    if call is None and len(seen) == 1:
        addr, value, note = seen[0]
        if not addr:
            return ()
        if value is None or type(value) in _SCALARS or (type(value) is str and len(value) <= 300):
            return (Evidence(addr, value, note),)
        return (Evidence(addr, json_safe(value), note),)
    out: list[Evidence] = []
    addrs: set[str] = set()
    if call is not None:
        out.append(Evidence(call.address, call.preview(), "call"))
        addrs.add(call.address)
    extra = 0
    for addr, value, note in seen:
        if not addr or addr in addrs:
            continue
        if len(out) >= MAX_EVIDENCE:
            extra += 1
            continue
        addrs.add(addr)
        out.append(Evidence(addr, json_safe(value), note))
    if extra:
        last = out[-1]
        out[-1] = Evidence(last.address, last.value, f"{last.note or ''} (+{extra} more not shown)".strip())
    return tuple(out)


_SCALARS = (bool, int, float)
_VIEWS = frozenset({StepView, CallView})


def _bindings(rule: CompiledRule, env: Env) -> dict[str, Any]:
    return _bindings_of(rule, env.vars, env.witness)


def _bindings_of(rule: CompiledRule, values: dict[str, Any], witness: dict[str, Any]) -> dict[str, Any]:
    if not rule.lets and not witness:
        return {}
    b = {name: json_safe(values.get(name), 200) for name, _, _ in rule.lets}
    for name, v in witness.items():
        b.setdefault(name, json_safe(v, 200))
    return b


def _record(rule: CompiledRule, k: int, verdict: str, message: str = "", evidence: tuple[Evidence, ...] = (),
            bindings: dict[str, Any] | None = None, reason: str | None = None, origin: str = "rules") -> Record:
    s = rule.spec
    return Record(step=k, rule_id=s.id, verdict=verdict, severity=s.severity, rule_type=s.type,  # type: ignore[arg-type]
                  targets=s.targets, message=message, evidence=evidence, bindings=bindings or {},
                  origin=origin, reason=reason)


def _run_one(rule: CompiledRule, env: Env) -> Record | None:
    """Evaluate one unit; ``None`` when the guard is false (a skip)."""
    if rule.guard is not None and not rule.guard(env):
        return None
    seen = env.seen
    seen.clear()
    values = env.vars
    for name, loc, fn in rule.lets:
        if loc is None:  # a let without an address of its own (as if ``loc`` gave ``(value, None)``)
            v = values[name] = fn(env)
            if v.__class__ in _VIEWS and v.address:  # only views carry an address
                seen.append((v.address, v, name))
            continue
        v, addr = loc(env)
        values[name] = v
        if addr is not None:
            env.addrs[name] = addr
        address = (v.address if v.__class__ in _VIEWS else None) or addr
        if address:
            seen.append((address, v, name))
    if rule.assertion is None:
        return _run_check(rule, env)
    result = rule.assertion(env)
    if result:  # a pass (most units; made here, not by _decide: a call less per unit)
        return _passed(rule.pass_fields, env.k, partial(_pass_evidence, rule, seen, env.call, values, env.witness))
    return _decide(rule, env, result)


def run_one_shared(rule: CompiledRule, env: Env, plan: UnitPlan) -> Record | None:
    """:func:`_run_one` with the guard and the ``let``s that ``plan`` marks evaluated once per unit
    for every rule that has an equal one (:mod:`~trajaudit.engine.validation.unit_memo`): the same
    record, evidence, bindings and budget charges. For a complete run (``env.tc.lazy`` false)."""
    g = plan.guard
    if rule.guard is not None and not (rule.guard(env) if g is None else shared_value(env, g, rule.guard)):
        return None
    seen = env.seen
    seen.clear()
    values = env.vars
    for (name, loc, fn), m in zip(rule.lets, plan.lets, strict=True):
        if loc is None:
            v = values[name] = fn(env) if m is None else shared_value(env, m, fn)
            if v.__class__ in _VIEWS and v.address:
                seen.append((v.address, v, name))
            continue
        v, addr = loc(env) if m is None else shared_value(env, m, loc, True)
        values[name] = v
        if addr is not None:
            env.addrs[name] = addr
        address = (v.address if v.__class__ in _VIEWS else None) or addr
        if address:
            seen.append((address, v, name))
    if rule.assertion is None:
        return _run_check(rule, env)
    result = rule.assertion(env)
    if result:  # a pass (most units; made here, not by _decide: a call less per unit)
        return _passed(rule.pass_fields, env.k, partial(_pass_evidence, rule, seen, env.call, values, env.witness))
    return _decide(rule, env, result)


def _pass_evidence(rule: CompiledRule, seen: list[tuple[str, Any, str | None]], call: CallView | None,
                   values: dict[str, Any], witness: dict[str, Any]) -> tuple[tuple[Evidence, ...], dict[str, Any]]:
    """A pass record's evidence and bindings (``LazyRecord``'s thunk), from the containers of the ``Env``
    it was decided in, which the record keeps (not the ``Env``: ``Stepper.run_units`` reuses that)."""
    return _evidence(seen, call), _bindings_of(rule, values, witness)


#: (bound once: a pass record is made at most units a batch evaluates)
_passed = LazyRecord.passed


def _decide(rule: CompiledRule, env: Env, result: Any) -> Record:
    """The record of a unit whose guard held, whose ``let``s are bound and whose assertion gave the
    falsy ``result`` (a pass, the truthy case, is made by the caller: a ``LazyRecord`` whose evidence
    is rendered only if someone reads it)."""
    k = env.k
    if result is None:
        return _record(rule, k, "unknown", evidence=_evidence(env.seen, env.call), bindings=_bindings(rule, env),
                       reason="the assertion evaluated to null (missing data)")
    msg = rule.message(env) if rule.spec.message else f"assertion failed: {rule.spec.assertion}"
    return _record(rule, k, "fail", msg, _evidence(env.seen, env.call), _bindings(rule, env))


def _run_check(rule: CompiledRule, env: Env) -> Record | None:
    kind = rule.check[0]  # type: ignore[index]
    tc, k = env.tc, env.k
    bindings = _bindings(rule, env)
    if kind == "semantic":
        oracle: SemanticOracle = tc.oracle or NoLLMOracle()
        ans = oracle.judge(rule.check[1], tc.traj, tc.traj.steps[k], bindings)  # type: ignore[index]
        ev = _evidence(env.seen, env.call) + tuple(Evidence(a, None, "cited by the oracle") for a in ans.evidence)
        if ans.verdict == "unknown":
            return _record(rule, k, "unknown", ans.reason, ev, bindings, reason=ans.reason, origin="semantic")
        msg = rule.message(env) if (ans.verdict == "fail" and rule.spec.message) else ans.reason
        return _record(rule, k, ans.verdict, msg, ev, bindings, origin="semantic")
    checker, args = rule.check[1], rule.check[2]  # type: ignore[index]
    call = env.call
    ctx = CheckContext(tc.traj, tc.traj.steps[k], call.call if call else None, call.position if call else None,
                       bindings, tc.tools, lambda name: (v.step if (v := tc.latest_output(name, k)) else None))
    res = checker.fn(ctx, **args)
    if res.verdict == "skip":
        return None
    ev = _evidence(env.seen, env.call) + tuple(e for e in res.evidence)
    bindings.update({kk: json_safe(vv, 200) for kk, vv in res.bindings.items()})
    if res.verdict == "fail":
        base = rule.message(env) if rule.spec.message else f"{checker.name} failed"
        msg = f"{base}: {res.message}" if res.message else base
    else:
        msg = res.message or rule.spec.title
    return _record(rule, k, res.verdict, msg, ev[:MAX_EVIDENCE + 4], bindings,
                   reason=res.message if res.verdict == "unknown" else None)


def evaluate(trajectory: Trajectory, rules: list[CompiledRule] | Any, *, oracle: SemanticOracle | None = None,
             config: Any = None, tools: list[dict[str, Any]] | None = None) -> ValidationLog:
    """Evaluate every rule at every step where its guard holds.

    Args:
        trajectory: the run (IR; ``trajaudit.load(path)`` reads one).
        rules: compiled rules (``compile_rules``), or anything ``compile_rules`` takes, compiled here:
            a ``RulePack``, a list of ``RuleSpec``, a pack path, shipped pack name (``"generic"``), YAML
            text or dict.
        oracle: answers ``check: {semantic: …}`` rules; default :class:`NoLLMOracle` (``unknown``,
            "no LLM configured").
        config: an :class:`~trajaudit.engine.config.AuditConfig` (its ``rule_budget`` is used).
        tools: OpenAI function schemas for checkers that need them (``tool_args_schema``).

    Returns:
        The :class:`ValidationLog`: records ordered by step (rule order within a step), ``skipped``
        = (unit, rule) pairs whose guard was false or that the index excluded, ``incomplete`` notes.
        Never raises for a rule's run-time failure: such a step gets an ``unknown`` record.

    Raises:
        ArgumentTypeError: ``trajectory`` is not a Trajectory, ``rules`` none of those, or ``tools``
            not ``None``/a list of dicts.
        RulePackError: ``rules`` names a pack that is missing or invalid, or a rule does not compile.
    """
    rules = _check_arguments(trajectory, rules, tools)
    cfg = config or AuditConfig()
    with run_budget.deadline(getattr(cfg, "run_timeout", run_budget.DEFAULT_RUN_TIMEOUT)) as deadline:
        return _evaluate(trajectory, rules, oracle, cfg, tools, deadline)


def _evaluate(trajectory: Trajectory, rules: list[CompiledRule], oracle: SemanticOracle | None, cfg: Any,
              tools: list[dict[str, Any]] | None, deadline: float | None) -> ValidationLog:
    tc = TrajContext(trajectory, budget=cfg.rule_budget, oracle=oracle, tools=tools)
    vlog = ValidationLog(trajectory.id)
    n = len(trajectory.steps)
    records = vlog.records
    budget = tc.budget
    now = time.monotonic
    out_of_time = False
    for r_pos, rule in enumerate(rules):
        tc.ops = 0
        units = candidates(rule, tc)
        visited = 0
        for pos, (k, call) in enumerate(units):
            env = Env(tc, k, call)
            if deadline is not None and now() >= deadline:
                _out_of_time(vlog, rules, r_pos, pos, units, tc, cfg.run_timeout)
                out_of_time = True
                break
            try:
                tc.ops += 1  # tc.charge(), inlined
                if tc.ops > budget:
                    raise BudgetExceeded(f"evaluation budget of {budget} operations exceeded")
                rec = _run_one(rule, env)
            except BudgetExceeded as e:
                left = len(units) - pos - 1
                vlog.add(_record(rule, k, "unknown", str(e), _evidence(env.seen, call), reason=str(e)))
                vlog.incomplete.append(f"{rule.id}: {e} at step {k}; {left} later candidate step(s) not evaluated")
                visited += 1
                break
            except EvalError as e:
                rec = _record(rule, k, "unknown", f"could not evaluate: {e}", _evidence(env.seen, call),
                              reason=f"evaluation error: {e}")
            except RecursionError:
                rec = _record(rule, k, "unknown", "evaluation nested too deeply", reason="evaluation error: recursion")
            except LLMUnreachableError:  # a semantic check's endpoint is down: the audit stops, no "unknown"s
                raise
            except Exception as e:  # noqa: BLE001 - a faulty rule/checker must not stop the others
                log.warning("rule %s raised at step %d of %s: %r", rule.id, k, trajectory.id, e)
                rec = _record(rule, k, "unknown", f"rule raised {type(e).__name__}: {e}",
                              reason=f"error: {type(e).__name__}: {e}")
            visited += 1
            if rec is None:
                vlog.skipped += 1
            elif rec.__class__ is LazyRecord:  # a pass (vlog.add, which stores every verdict but skip)
                records.append(rec)
            else:
                vlog.add(rec)
        vlog.skipped += max(0, n - len({k for k, _ in units}))
        if out_of_time:
            break
    tc.release()  # lazy pass records keep views and values, not the run's query caches
    vlog.sort()
    return vlog


def _out_of_time(vlog: ValidationLog, rules: list[CompiledRule], r_pos: int, pos: int,
                 units: list[tuple[int, CallView | None]], tc: TrajContext, seconds: float) -> None:
    """The run's time budget is used up at ``rules[r_pos]``'s unit ``pos``: that rule's unit and the
    first candidate unit of every later rule get an ``unknown`` record saying so, and one
    ``incomplete`` note (beginning with :data:`RUN_BUDGET_NOTE`) counts what was not evaluated."""
    reason = f"{RUN_BUDGET_NOTE} of {seconds:g} s exceeded (--run-timeout)"
    left = len(units) - pos
    rule = rules[r_pos]
    k = units[pos][0]
    vlog.add(_record(rule, k, "unknown", reason, (), reason=reason))
    later = 0
    for other in rules[r_pos + 1:]:
        try:
            first = candidates(other, tc)[:1]
        except Exception:  # noqa: BLE001 - the index of a rule is not worth more time now
            first = []
        if first:
            vlog.add(_record(other, first[0][0], "unknown", reason, (), reason=reason))
            later += 1
    vlog.incomplete.append(f"{reason} at rule {rule.id}, step {k}: {left} candidate step(s) of it and "
                           f"{len(rules) - r_pos - 1} later rule(s) ({later} with candidate steps) not evaluated")


def _check_arguments(trajectory: Any, rules: Any, tools: Any) -> list[CompiledRule]:
    """:func:`evaluate`'s arguments checked; returns the rules as a list (a RulePack compiled)."""
    if not isinstance(trajectory, Trajectory):
        raise ArgumentTypeError("evaluate", "trajectory", trajectory, "a Trajectory (read one with trajaudit.load(path))")
    check_tool_list("evaluate", tools)
    if isinstance(rules, (RulePack, str, dict)) or hasattr(rules, "__fspath__"):
        return compile_rules(rules)  # what compile_rules takes: a pack, its path, shipped name, YAML text or dict
    expected = ("a list of compiled rules (trajaudit.compile_rules(pack)), a RulePack, or what compile_rules "
                "takes (a list of RuleSpecs, a pack path/name/YAML text/dict)")
    if isinstance(rules, bytes) or not hasattr(rules, "__iter__"):
        raise ArgumentTypeError("evaluate", "rules", rules, expected)
    rules = rules if isinstance(rules, list) else list(rules)
    if rules and all(isinstance(r, RuleSpec) for r in rules):
        return compile_rules(rules)
    for i, r in enumerate(rules):
        if not isinstance(r, CompiledRule):
            raise ArgumentTypeError("evaluate", f"rules[{i}]", r, "a CompiledRule (trajaudit.compile_rules(pack))")
    return rules
