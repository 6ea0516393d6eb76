"""The checker types: what a programmatic checker receives, returns and is registered as.

Programmatic checkers: plain Python functions registered by name with a declared argument schema.

A rule calls one with ``check: {checker: NAME, args: {...}}``. The compiler looks the name up (an
unknown name is a :class:`~trajaudit.errors.RulePackError` with close-match suggestions), validates
``args`` against the checker's JSON Schema and its optional ``validate`` hook (e.g. a regex that does
not compile) once, at load time. At run time the checker gets a :class:`CheckContext` and returns a
:class:`CheckResult`. AgentRx §3.2: "programmatic checks … executed on structured fields".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from trajaudit.engine.trace.ir import Step, ToolCall, Trajectory
from trajaudit.engine.validation_log import Evidence
from trajaudit.registry import Registry

CheckVerdict = Literal["pass", "fail", "unknown", "skip"]


@dataclass(frozen=True)
class CheckContext:
    """What a checker sees at one step.

    Attributes:
        trajectory: the run.
        step: the current step.
        call: the current tool call for per-call checkers (``None`` otherwise); ``call_position`` its
            position in ``step.tool_calls``.
        bindings: the rule's ``let`` values (JSON values; steps/calls rendered as their address).
        tools: OpenAI function schemas given to the evaluation (``evaluate(..., tools=)``), or ``None``.
        latest_output: ``latest_output(tool_name) -> Step | None``: the latest output of a tool before
            the current step (indexed, O(log n)).
    """

    trajectory: Trajectory
    step: Step
    call: ToolCall | None = None
    call_position: int | None = None
    bindings: dict[str, Any] = field(default_factory=dict)
    tools: list[dict[str, Any]] | None = None
    latest_output: Callable[[str], Step | None] = lambda name: None

    @property
    def call_address(self) -> str:
        """``steps.N.tool_calls.J`` of the current call (``steps.N`` without a call)."""
        base = self.step.address
        return f"{base}.tool_calls.{self.call_position}" if self.call_position is not None else base


@dataclass(frozen=True)
class CheckResult:
    """A checker's answer: verdict, evidence, a detail message (appended to the rule's), bindings."""

    verdict: CheckVerdict
    evidence: tuple[Evidence, ...] = ()
    message: str = ""
    bindings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Checker:
    """A registered checker.

    Attributes:
        name: the name rules use.
        fn: ``fn(ctx: CheckContext, **args) -> CheckResult``.
        args_schema: JSON Schema of ``args`` (an object schema).
        description: one line for ``rules explain`` and docs.
        per_call: evaluated once per tool call of a step (``ctx.call`` set) instead of once per step.
        validate: optional ``validate(args) -> None`` raising ``ValueError`` for bad constant args.
    """

    name: str
    fn: Callable[..., CheckResult]
    args_schema: dict[str, Any]
    description: str = ""
    per_call: bool = False
    validate: Callable[[dict[str, Any]], None] | None = None


def register_checker(registry: Registry[Checker], name: str, fn: Callable[..., CheckResult], *,
                     args_schema: dict[str, Any] | None = None, description: str = "", per_call: bool = False,
                     validate: Callable[[dict[str, Any]], None] | None = None) -> Checker:
    """Register ``fn`` as checker ``name`` in ``registry`` (``ValueError`` if the name is taken).

    Example::

        reg = default_checkers()
        register_checker(reg, "always-pass", lambda ctx: CheckResult("pass"),
                         args_schema={"type": "object", "additionalProperties": False})
        rules = compile_rules(pack, checkers=reg)
    """
    schema = args_schema if args_schema is not None else {"type": "object"}
    return registry.register(name, Checker(name, fn, schema, description or (fn.__doc__ or "").strip().split("\n")[0],
                                           per_call, validate))
