"""Every registered strategy, checker and semantic oracle satisfies its Protocol.

Modelled on python-jsonschema's ``tests/typing``: the assignments below are checked by mypy (``.ci/run``
runs ``mypy`` over this folder), so a strategy whose ``diagnose`` drifts from the ``Strategy``
protocol fails type checking; the tests check the same at run time for every entry of the registries
(including the LLM strategies, built lazily), so a newly registered one is covered without editing
this file.
"""

from __future__ import annotations

import inspect

from trajaudit.checkers.base import CheckContext, Checker, CheckResult
from trajaudit.checkers.registry import default_checkers
from trajaudit.checkers.semantic import NoLLMOracle, SemanticOracle
from trajaudit.checkers.semantic_llm import LLMSemanticOracle
from trajaudit.engine.strategies import (
    FirstDecisionStep,
    FirstViolation,
    LastDecisionStep,
    OfflineJudge,
    RandomDecisionStep,
    Strategy,
    default_strategies,
)
from trajaudit.engine.strategies.llm import (
    AgentRx,
    AllAtOnce,
    BinarySearch,
    Drift,
    Hybrid,
    SearchAuditor,
    StepByStep,
)

# -- static: mypy checks these assignments against the protocols --------------------------------------
STRATEGIES: tuple[Strategy, ...] = (
    OfflineJudge(), FirstViolation(), FirstDecisionStep(), LastDecisionStep(), RandomDecisionStep(),
    AgentRx(), AllAtOnce(), BinarySearch(), Drift(), Hybrid(), SearchAuditor(), StepByStep(),
)
ORACLES: tuple[type[SemanticOracle], ...] = (NoLLMOracle, LLMSemanticOracle)

DIAGNOSE_PARAMETERS = ["trajectory", "evidence", "context"]


def test_every_registered_strategy_satisfies_the_protocol():
    reg = default_strategies()
    names = list(reg)
    assert len(names) == 12
    for name, strategy in reg.items():
        assert isinstance(strategy, Strategy), name
        assert strategy.name == name and isinstance(strategy.description, str) and strategy.description
        assert isinstance(strategy.needs_llm, bool)
        params = list(inspect.signature(strategy.diagnose).parameters)
        assert params == DIAGNOSE_PARAMETERS, (name, params)
    assert {type(s).__name__ for s in STRATEGIES} == {type(s).__name__ for _, s in reg.items()}


def test_every_registered_checker_is_callable_with_a_context_and_its_declared_arguments():
    reg = default_checkers()
    assert len(reg) >= 3
    for name, checker in reg.items():
        assert isinstance(checker, Checker) and checker.name == name
        sig = inspect.signature(checker.fn)
        first = next(iter(sig.parameters.values()))
        assert first.name == "ctx", (name, first.name)
        declared = set(checker.args_schema.get("properties", {}))
        accepts_any = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
        accepted = {p.name for p in list(sig.parameters.values())[1:]}
        assert accepts_any or declared <= accepted, (name, declared - accepted)
        required = {p.name for p in list(sig.parameters.values())[1:]
                    if p.default is p.empty and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
        assert required <= set(checker.args_schema.get("required", declared)), (name, required)
        assert checker.fn.__annotations__.get("return") in ("CheckResult", CheckResult), name
        assert CheckContext.__name__ in str(first.annotation), name


def test_semantic_oracles_satisfy_the_protocol():
    for cls in ORACLES:
        params = list(inspect.signature(cls.judge).parameters)
        assert params == ["self", "predicate", "trajectory", "step", "bindings"], (cls, params)
    assert isinstance(NoLLMOracle(), SemanticOracle)
