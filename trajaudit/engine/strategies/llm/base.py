"""Shared parts of the LLM strategies: the client check, categories, step snapping, fitted prompts,
and the frame every strategy but ``agentrx`` runs in (:class:`LLMStrategy`, :class:`StrategyRun`).

Nothing here imports ``openai``; the client does, when it is constructed.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from trajaudit.engine.diagnosis import Candidate, Diagnosis
from trajaudit.engine.strategies.base import INCONCLUSIVE
from trajaudit.engine.strategies.context import AuditContext, EvidenceBundle
from trajaudit.engine.taxonomy import load_taxonomy
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.engine.validation_log import Evidence
from trajaudit.errors import ConfigError
from trajaudit.llm.client import LLMClient
from trajaudit.llm.config import NO_ENDPOINT_HELP
from trajaudit.llm.prompt_run import TASK_SHARE, PromptRun, task_text  # noqa: F401 - re-exported
from trajaudit.llm.prompting import load_prompt
from trajaudit.llm.usage import Usage, tracking

log = logging.getLogger(__name__)

S = TypeVar("S")



def require_llm(context: AuditContext, strategy: str) -> LLMClient:
    """The context's LLM client.

    Raises:
        ConfigError: no client configured (names the flags and suggests ``--strategy offline``).
    """
    if context.llm is None:
        raise ConfigError(f"strategy {strategy!r} needs an LLM; {NO_ENDPOINT_HELP}")
    return context.llm


def categories(taxonomy: str) -> list[tuple[str, str]]:
    """``[(category id, one-line definition)]`` for ``taxonomy``.

    Uses the shipped taxonomy files (``trajaudit.engine.taxonomy``).

    Raises:
        TrajauditError: an unknown taxonomy.
    """
    tax = load_taxonomy(taxonomy)
    return [(c.id, " ".join(c.definition.split())) for c in tax.categories]


def categories_text(cats: list[tuple[str, str]]) -> str:
    """The category menu shown in prompts: one ``- id: definition`` line each."""
    return "\n".join(f"- {cid}: {definition}" for cid, definition in cats)


def normalize_category(label: Any, cats: list[tuple[str, str]]) -> tuple[str, str | None]:
    """Map a model's category label onto an id of ``cats``.

    Exact ids pass; otherwise the label is compared case- and separator-insensitively to the ids.

    Returns:
        ``(id, None)``, or ``("inconclusive", note)`` when the label matches no category.
    """
    ids = [c for c, _ in cats]
    text = str(label or "").strip()
    if text in ids:
        return text, None
    key = "".join(ch for ch in text.lower() if ch.isalnum())
    for cid in ids:
        if "".join(ch for ch in cid.lower() if ch.isalnum()) == key:
            return cid, None
    return INCONCLUSIVE, f"model category {text[:80]!r} is not a category id; recorded as {INCONCLUSIVE}"


def snap_to_decision(trajectory: Trajectory, step: Any) -> tuple[int | None, str | None]:
    """Map a step number named by a model onto a decision step.

    Policy: a decision step is kept; any other number (a tool output, a user turn, out of range,
    not an integer) becomes the nearest decision step by index distance, ties going to the earlier
    one (a tool output's cause is the call before it).

    Returns:
        ``(decision step index or None when the run has none, note or None when unchanged)``.
    """
    decisions = [s.index for s in trajectory.decision_steps]
    if not decisions:
        return None, "the run has no decision step"
    if isinstance(step, bool) or not isinstance(step, int):
        return decisions[-1], f"model gave no step number ({step!r}); used the last decision step"
    if step in decisions:
        return step, None
    best = min(decisions, key=lambda d: (abs(d - step), d))
    why = "out of range" if not 0 <= step < len(trajectory.steps) else f"a {trajectory.steps[step].kind} step"
    return best, f"model named step {step} ({why}); mapped to the nearest decision step {best}"


def make_diagnosis(trajectory: Trajectory, context: AuditContext, *, strategy: str, step: int | None,
                   category: str, confidence: float, rationale: str, usage: dict[str, Any],
                   metadata: dict[str, Any], note: str = "") -> Diagnosis:
    """A :class:`Diagnosis` whose agent is the producer of ``step`` and whose evidence cites it."""
    s = trajectory.steps[step] if step is not None else None
    agent = s.agent if s is not None else None
    confidence = min(1.0, max(0.0, float(confidence)))
    evidence = (Evidence(address=s.address, value=s.preview(160), note=note or f"critical step chosen by {strategy}"),) \
        if s is not None else ()
    cands = (Candidate(step=step, category=category, score=confidence, agent=agent, reason=rationale[:300],
                       evidence=(s.address,)),) if s is not None and step is not None else ()
    return Diagnosis(trajectory_id=trajectory.id, file=trajectory.source.file, record=trajectory.source.record,
                     critical_step=step, agent=agent, category=category, taxonomy=context.config.taxonomy,
                     confidence=confidence, rationale=rationale, evidence=evidence, candidates=cands,
                     strategy=strategy, usage=usage, metadata=metadata)


class Setup(NamedTuple):
    """What every LLM strategy starts a run with (see :func:`setup`)."""

    client: LLMClient
    cats: list[tuple[str, str]]
    run: PromptRun


def setup(context: AuditContext, strategy: str) -> Setup:
    """The context's client, the categories of its taxonomy (:func:`categories`) and a fresh
    :class:`PromptRun`.

    Raises:
        ConfigError: no LLM client in ``context`` (see :func:`require_llm`), or an unknown taxonomy.
    """
    return Setup(require_llm(context, strategy), categories(context.config.taxonomy), PromptRun())


def no_decision_diagnosis(trajectory: Trajectory, context: AuditContext, strategy: str, usage: Any,
                          run: PromptRun, **meta: Any) -> Diagnosis:
    """The answer of every LLM strategy for a run with no decision step (nothing to ask the model):
    no critical step, category ``inconclusive``, confidence 0, the usage and prompt metadata so far."""
    return make_diagnosis(trajectory, context, strategy=strategy, step=None, category=INCONCLUSIVE,
                          confidence=0.0, rationale="the run has no decision step",
                          usage=usage.to_dict(), metadata=run.metadata(**meta))


def category_schema(prompt: str, ids: Iterable[str]) -> dict[str, Any]:
    """A copy of ``prompt``'s answer schema whose ``category`` property may only be one of ``ids``.

    Raises:
        ConfigError: no such prompt (:func:`~trajaudit.llm.prompting.load_prompt`).
    """
    schema = copy.deepcopy(load_prompt(prompt).schema)
    schema["properties"]["category"]["enum"] = list(ids)
    return schema


@dataclass
class StrategyRun:
    """One diagnosis by an :class:`LLMStrategy`, as its ``diagnose`` hands it to the strategy's own steps.

    Attributes:
        trajectory, evidence, context: the run being diagnosed, its evidence (gathered once by the
            pipeline) and the audit context.
        strategy: the strategy's name (``Diagnosis.strategy``).
        client: the context's LLM client.
        cats: ``[(category id, one-line definition)]`` of the context's taxonomy (:func:`categories`).
        run: the prompt bookkeeping (:class:`PromptRun`).
        settings: the strategy's options with ``context.strategy_options[strategy]`` applied, or ``None`` for a
            strategy without options.
        usage: the counters of the requests made for this diagnosis (:func:`~trajaudit.llm.usage.tracking`).
    """

    trajectory: Trajectory
    evidence: EvidenceBundle
    context: AuditContext
    strategy: str
    client: LLMClient
    cats: list[tuple[str, str]]
    run: PromptRun
    settings: Any
    usage: Usage

    def schema(self, prompt: str) -> dict[str, Any]:
        """``prompt``'s answer schema with ``category`` restricted to the taxonomy's ids (:func:`category_schema`)."""
        return category_schema(prompt, [c for c, _ in self.cats])

    def diagnosis(self, *, step: int | None, category: str, confidence: float, rationale: str, note: str = "",
                  **meta: Any) -> Diagnosis:
        """:func:`make_diagnosis` with this run's strategy, usage so far and prompt metadata plus ``meta``."""
        return make_diagnosis(self.trajectory, self.context, strategy=self.strategy, step=step, category=category,
                              confidence=confidence, rationale=rationale, usage=self.usage.to_dict(),
                              metadata=self.run.metadata(**meta), note=note)


class LLMStrategy:
    """The frame of an LLM strategy (implements the ``Strategy`` protocol of :mod:`trajaudit.engine.strategies.base`).

    :meth:`diagnose` takes the client, the taxonomy's categories and a fresh :class:`PromptRun`
    (:func:`setup`) and the options (:attr:`settings` with the overrides of ``context.strategy_options[name]``,
    :func:`strategy_settings`); then, counting the requests
    (:func:`~trajaudit.llm.usage.tracking`), it answers a run without decision steps with
    :meth:`_no_decision` (nothing to ask a model) and hands any other run to :meth:`_diagnose`.

    Subclasses set ``name`` and ``description``, ``settings`` (a frozen options dataclass) when they
    take options, and implement :meth:`_diagnose`.
    """

    name: str = ""
    description: str = ""
    needs_llm: bool = True
    settings: Any = None

    def diagnose(self, trajectory: Trajectory, evidence: EvidenceBundle, context: AuditContext) -> Diagnosis:
        """Diagnose ``trajectory`` as the strategy's class docstring says (a run without decision steps:
        :meth:`_no_decision`, no call).

        Raises:
            ConfigError: no LLM client in ``context``, an unknown taxonomy, or bad options in ``context.strategy_options``.
            LLMError: a call failed or its answer was invalid twice (unless the strategy's docstring
                says how it degrades).
        """
        client, cats, run = setup(context, self.name)
        settings = None
        if self.settings is not None:
            settings = strategy_settings(self.settings, context, self.name)
        with tracking() as usage:
            r = StrategyRun(trajectory, evidence, context, self.name, client, cats, run, settings, usage)
            return self._diagnose(r) if trajectory.decision_steps else self._no_decision(r)

    def _diagnose(self, r: StrategyRun) -> Diagnosis:
        """The strategy's calls and its diagnosis of a run with decision steps."""
        raise NotImplementedError

    def _no_decision(self, r: StrategyRun) -> Diagnosis:
        """The diagnosis of a run without decision steps: :func:`no_decision_diagnosis`."""
        return no_decision_diagnosis(r.trajectory, r.context, self.name, r.usage, r.run)


def strategy_settings(default: S, context: AuditContext, name: str) -> S:
    """``default`` (a frozen settings dataclass) with the overrides in ``context.strategy_options[name]``.

    Example: ``AuditContext(strategy_options={"searchauditor": {"repair": True}})``.

    Raises:
        ConfigError: the overrides are not a mapping, name an unknown setting (the known ones are
            listed), or give a value of the wrong type.
    """
    given = context.strategy_options.get(name)
    if not given:
        return default
    if not isinstance(given, dict):
        raise ConfigError(f"options for strategy {name!r} must be a mapping, got {type(given).__name__}")
    fields = {f.name: f for f in dataclasses.fields(default)}  # type: ignore[arg-type]
    unknown = sorted(set(given) - set(fields))
    if unknown:
        raise ConfigError(f"strategy {name!r} has no option(s) {unknown}; known: {sorted(fields)}")
    for key, value in given.items():
        want = type(getattr(default, key))
        ok = isinstance(value, want) or (want is float and isinstance(value, int))
        if not ok or (want is not bool and isinstance(value, bool)):
            raise ConfigError(f"strategy {name!r} option {key!r} must be {want.__name__}, got {value!r}")
    return dataclasses.replace(default, **given)  # type: ignore[type-var]
