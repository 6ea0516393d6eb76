"""The audit pipeline for one run: trajectory in, one :class:`AuditResult` (diagnosis + evidence) out.

Stages (see docs/architecture.md): evidence, gathered once (rule packs and tool-schema rules →
validation log; claim extraction → claim graph, whose findings join the log) → strategy (judge),
given that evidence → diagnosis (→ repair). Batches (serial, streamed, or in worker processes) are
:mod:`trajaudit.engine.run.batch`; one broken run is reported as a
:class:`~trajaudit.errors.Problem` and skipped, never the whole batch.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trajaudit.engine.run  # its submodule repair_prefix is loaded on first use (--repair)
import trajaudit.llm as llm_layer
from trajaudit import boundary
from trajaudit.api_args import check_name, check_tools
from trajaudit.checkers.tool_schemas import load_tools, tool_schemas
from trajaudit.engine.config import AuditConfig
from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.packs.pack import RulePack, check_packs
from trajaudit.engine.packs.selection import default_packs, included_files, load_rules
from trajaudit.engine.run.evidence import gather, rules_for
from trajaudit.engine.strategies.context import AuditContext
from trajaudit.engine.strategies.judge_weights import WEIGHTS_KEY, JudgeWeights, load_weights
from trajaudit.engine.strategies.registry import default_strategies
from trajaudit.engine.taxonomy import load_taxonomy
from trajaudit.engine.trace.ir import Trajectory, renumbered
from trajaudit.engine.trace.loader import load_checked, problem_details
from trajaudit.engine.validation_log import RUN_BUDGET_NOTE, ValidationLog
from trajaudit.errors import ConfigError, LLMUnreachableError, Problem, TrajauditError, UnknownStrategyError
from trajaudit.gc_pause import gc_paused
from trajaudit.llm.config import check_llm

if TYPE_CHECKING:
    import trajaudit.engine.run.repair_prefix  # noqa: F401 - the attribute's type for mypy (loaded on first use)

__all__ = ["AuditResult", "AuditSpec", "audit", "audit_one", "build_context", "close_context", "problem_of",
           "with_source_message"]

log = logging.getLogger(__name__)


@dataclass
class AuditResult:
    """One run's audit: the diagnosis and the evidence behind it.

    Attributes:
        trajectory: the audited run.
        diagnosis: the strategy's :class:`Diagnosis`.
        log: the validation log (rules + claim findings), or ``None`` if the strategy gathered none.
        claims: a JSON-ready summary of the claim ledger (``[{claim, kind, step, status, ...}]``).
        rule_ids: the ids of the rules applied to the run (with a guard or not), so a batch can name
            the rules whose guard never held (``log`` holds records only where it did).
    """

    trajectory: Trajectory
    diagnosis: Diagnosis
    log: ValidationLog | None = None
    claims: list[dict[str, Any]] = field(default_factory=list)
    rule_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class AuditSpec:
    """Everything needed to rebuild an :class:`AuditContext` in a worker process (picklable).

    Attributes:
        strategy: strategy name.
        rules: rule pack paths or shipped pack names (``str``), or loaded ``RulePack`` objects.
        tools: path of an OpenAI function-schema list, the list itself (a tuple of dicts), or ``None``.
        config: the :class:`AuditConfig`.
        llm: an LLM configuration object (``trajaudit.llm``) or ``None``.
        default_packs: also apply the shipped generic pack, and the shipped domain packs whose tools
            the run calls (see :func:`trajaudit.engine.packs.selection.default_packs`).
        repair: fill ``Diagnosis.repair`` (an LLM directive when ``llm`` is set, else the template;
            :func:`trajaudit.engine.run.repair_prefix.attach_repair`).
        judge_weights: the offline judge's weights: a weights file path, a loaded
            :class:`~trajaudit.engine.strategies.judge_weights.JudgeWeights`, or ``None`` for the shipped ones.
    """

    strategy: str = "offline"
    rules: tuple[Any, ...] = ()
    tools: str | tuple[dict[str, Any], ...] | None = None
    config: AuditConfig = field(default_factory=AuditConfig)
    llm: Any = None
    default_packs: bool = True
    repair: bool = False
    judge_weights: Any = None


def build_context(spec: AuditSpec) -> AuditContext:
    """Compile rules, read tool schemas and create the LLM client described by ``spec``.

    Raises:
        TrajauditError: a rule pack or tools file is invalid; ConfigError for an unusable LLM setup;
            JudgeWeightsError (a TrajauditError) for an invalid ``judge_weights`` file (names it).

    The cyclic garbage collector is paused meanwhile (and restored after), as the pack cache pauses it
    around each load and compile: what is built here (compiled rules, schemas) lives as long as the
    context, and a collection between two packs re-traversed everything the first one built. A batch
    freezes the heap after its first run (:func:`freeze_long_lived`), before any collection sees them.
    """
    with gc_paused():
        return _build_context(spec)


def _build_context(spec: AuditSpec) -> AuditContext:
    llm = llm_layer.LLMClient(spec.llm) if spec.llm is not None else None
    load_taxonomy(spec.config.taxonomy)  # an unknown taxonomy is a usage error, before any run
    if isinstance(spec.tools, tuple):
        tools = tool_schemas(list(spec.tools), "the tools argument") if spec.tools else None
    else:
        tools = load_tools(spec.tools) if spec.tools else None
    named = [p if isinstance(p, str) else p.name for p in spec.rules]  # a RulePack counts by its name
    if spec.default_packs:  # a shipped pack a user's pack includes applies through it, not twice
        named += included_files(spec.rules)
    always, domains = default_packs(named) if spec.default_packs else ([], [])
    rules = load_rules(tuple(always) + tuple(spec.rules), tools, defaults=always, domains=domains)
    options: dict[str, dict[str, Any]] = {}
    if spec.judge_weights is not None:
        options["offline"] = {WEIGHTS_KEY: spec.judge_weights if isinstance(spec.judge_weights, JudgeWeights)
                              else load_weights(spec.judge_weights)}
    return AuditContext(config=spec.config, rules=rules, tools=tools, llm=llm, domain_packs=tuple(domains),
                        repair=spec.repair, strategy_options=options)


def close_context(context: AuditContext) -> None:
    """Release what :func:`build_context` opened (the LLM client's HTTP pool and cache)."""
    if context.llm is not None and hasattr(context.llm, "close"):
        context.llm.close()


def audit_one(trajectory: Trajectory, strategy_name: str, context: AuditContext) -> AuditResult:
    """Audit one trajectory with the named strategy: gather its evidence once, give it to the
    strategy, then (``context.repair``) attach a repair directive.

    Raises:
        TrajauditError: the run has no decision step.
        LookupError: unknown strategy (with suggestions).
        ConfigError: the strategy needs an LLM and none is configured.
    """
    was = gc.isenabled()
    gc.disable()  # as in run.evidence.gather: collections during a run re-traverse its growing results
    try:
        return _audit_one(trajectory, strategy_name, context)
    finally:
        if was:
            gc.enable()


def _audit_one(trajectory: Trajectory, strategy_name: str, context: AuditContext) -> AuditResult:
    strategy = default_strategies().get(strategy_name)
    if not trajectory.decision_steps:  # the input's problem (stage "load", as an unreadable run), not the judge's
        with boundary.stage("load"):
            raise TrajauditError("run has no decision steps (no agent message): nothing to diagnose")
    if strategy.needs_llm and context.llm is None:
        raise ConfigError(
            f"strategy {strategy_name!r} needs an LLM endpoint: pass --base-url and --model (or set "
            "TRAJAUDIT_BASE_URL and TRAJAUDIT_MODEL), or use --strategy offline"
        )
    with boundary.stage("evidence"):
        evidence = gather(trajectory, context)
    with boundary.stage("judge"):
        diagnosis = with_source_message(strategy.diagnose(trajectory, evidence, context), trajectory)
    if context.repair:
        with boundary.stage("repair"):
            diagnosis = trajaudit.engine.run.repair_prefix.attach_repair(diagnosis, trajectory, context.llm)
    rule_ids = tuple(r.id for r in rules_for(trajectory, context)[0])
    return AuditResult(trajectory, degraded(diagnosis, evidence.log), evidence.log, evidence.claim_rows, rule_ids)


def with_source_message(diagnosis: Diagnosis, trajectory: Trajectory) -> Diagnosis:
    """``diagnosis`` with ``metadata["source_message"]``: the 0-based position, in the file's message
    list, of the message the critical step came from — only for a run whose step indexes are not
    message positions (:func:`~trajaudit.engine.trace.ir.renumbered`: an Anthropic message holding several
    tool results, an AgentRx step of several substeps), where ``critical_step`` (a step index) is no
    longer that position; and ``metadata["source_span"]`` (``{trace_id, span_id, span_name}``) for a
    run read from a trace format, whose steps keep the span (run, observation) they came from.
    Other diagnoses are returned as is."""
    k = diagnosis.critical_step
    if k is None or not 0 <= k < len(trajectory.steps):
        return diagnosis
    span = trajectory.steps[k].metadata.get("span_id")
    if span is not None:  # a trace format (otel, openinference, langsmith, langfuse): the span it came from
        diagnosis = dataclasses.replace(diagnosis, metadata={**diagnosis.metadata, "source_span": {
            "trace_id": trajectory.metadata.get("trace_id"), "span_id": span,
            "span_name": trajectory.steps[k].metadata.get("span_name")}})
    if not renumbered(trajectory):
        return diagnosis
    return dataclasses.replace(diagnosis, metadata={**diagnosis.metadata,
                                                    "source_message": trajectory.steps[k].source_number})


def problem_of(t: Trajectory, message: str | RunError) -> Problem:
    """The :class:`Problem` for a run that was loaded but could not be audited. The message names
    where the run came from (``FILE, record N (run ID): …``; only ``ID: …`` for in-memory runs), so
    two runs with the same id in different files are told apart. A :class:`RunError` also gives the
    stage and the details (an unexpected exception's traceback, for ``--debug``)."""
    err = message if isinstance(message, RunError) else RunError("judge", message)
    where = t.source.file or ""
    if where and t.source.record is not None:
        where += f", record {t.source.record}"
    text = f"{where} (run {t.id}): {err.message}" if where else f"{t.id}: {err.message}"
    return Problem(t.source.file or t.id, t.source.record, text, {**problem_details(t.flags), **err.details},
                   stage=err.stage)


@dataclass(frozen=True)
class RunError:
    """Why one run of a batch was not audited (what the per-run boundary caught, picklable so worker
    processes send it back): the stage, the message and details (``traceback`` for ``--debug``)."""

    stage: str
    message: str
    details: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, e: BaseException, default_stage: str = "judge") -> RunError:
        """The record of an exception caught at the boundary (:func:`trajaudit.boundary.describe`)."""
        where, message, details = boundary.describe(e, default_stage)
        return cls(where, message, details)


def degraded(diagnosis: Diagnosis, vlog: ValidationLog | None) -> Diagnosis:
    """``diagnosis`` marked ``metadata["degraded"]`` (the notes) when the run's rule evaluation hit
    its time budget (``AuditConfig.run_timeout``): the checks left were ``unknown``."""
    notes = [n for n in (vlog.incomplete if vlog is not None else ()) if n.startswith(RUN_BUDGET_NOTE)]
    if not notes:
        return diagnosis
    return dataclasses.replace(diagnosis, metadata={**diagnosis.metadata, "degraded": notes})


def freeze_long_lived() -> bool:
    """Move every object alive now (the loaded runs, compiled rules, caches) out of the cyclic
    garbage collector's view for the batch (``gc.freeze``); the batch freezes again after each run,
    so the results it keeps (diagnosis, validation log) join them. Full collections, triggered by the
    many short-lived objects of each audit, then stop re-traversing everything alive: they were ~20%
    of a tau batch's CPU time. The price: a run's few reference cycles that are garbage when it ends
    (~130 small objects on tau) are collected only after the batch. Undone by ``gc.unfreeze()`` after
    the batch; ``False`` when the collector is disabled anyway."""
    if not gc.isenabled():
        return False
    gc.freeze()
    return True


def build_frozen_context(spec: AuditSpec, freeze: bool = True) -> AuditContext:
    """:func:`build_context` for a batch that keeps its long-lived objects frozen (``freeze``: the
    batch froze the heap with :func:`freeze_long_lived`, or is about to): the context joins them
    (``gc.freeze``) before the collector runs again.

    :func:`build_context` pauses the collector while it builds; when the pause ends, the first
    allocation collects the youngest generation, which is then the whole context (compiled rules,
    schemas: ≈ 20k objects on tau with ``--tools``, all alive) — a traversal that frees nothing, of
    objects the batch freezes right after anyway (``gc.freeze`` resets the allocation count, so that
    collection never comes). Without ``freeze``, or with the collector off, this is
    :func:`build_context`. The same context either way; only when the collector looks at it differs.

    Raises:
        as :func:`build_context`.
    """
    was = gc.isenabled()
    with gc_paused():
        ctx = build_context(spec)
        if freeze and was:
            gc.freeze()
    return ctx


#: ``finished(index, result, error)``: called once per run of a batch, in completion order (``error``:
#: a :class:`RunError`, or a message).
Done = Callable[[int, "AuditResult | None", "RunError | str | None"], None]


def audit_with(ctx: AuditContext, trajectories: Sequence[Trajectory], indices: Iterable[int], strategy: str,
               finished: Done) -> None:
    """Audit ``trajectories[i]`` for each ``i`` with ``ctx``; a run that cannot be audited is reported
    through ``finished(i, None, message)`` and the batch goes on.

    Raises:
        ConfigError: the strategy cannot run at all (no LLM configured); nothing else does.
    """
    for i in indices:
        was = gc.isenabled()
        gc.disable()  # until the caller has taken the result and it is dropped (see _audit_and_hand_over)
        try:
            _audit_and_hand_over(trajectories[i], i, ctx, strategy, finished)
        finally:
            if was:
                gc.enable()


def _audit_and_hand_over(t: Trajectory, i: int, ctx: AuditContext, strategy: str, finished: Done) -> None:
    """Audit run ``i`` and hand its result (or its error) to ``finished``; :func:`audit_with` keeps the
    cyclic collector paused until this returns. Re-enabled as soon as ``audit_one`` returned, the
    collector's first (generation-0) collection would traverse the whole result — every object the run
    allocated and still alive, ≈ 40M instructions for the 29 tau runs of a fresh CLI — while the caller
    still holds it; once the caller has taken what it keeps (a streaming batch: the JSONL line) and the
    result is dropped, that collection sees only what outlives the run (cache entries, the run's few
    garbage cycles, which it frees as before: one collection per run still)."""
    try:
        result = audit_one(t, strategy, ctx)
    except (ConfigError, LLMUnreachableError):  # every further run would fail the same way
        raise
    except Exception as e:  # noqa: BLE001 - the per-run boundary: reported, the batch goes on
        err = RunError.of(e)
        if "traceback" in err.details:
            log.debug("audit of %s failed:\n%s", t.id, err.details["traceback"])
        finished(i, None, err)
        return
    finished(i, result, None)


def audit(
    trajectory: Trajectory | str | os.PathLike[str] | dict | list,
    *,
    rules: str | os.PathLike[str] | RulePack | Iterable[str | os.PathLike[str] | RulePack] | None = (),
    tools: str | os.PathLike[str] | Sequence[dict[str, Any]] | None = None,
    strategy: str = "offline",
    taxonomy: str = "agentrx",
    llm: Any = None,
    record: int | None = None,
    repair: bool = False,
) -> Diagnosis:
    """Audit one run and return its :class:`Diagnosis` (the Python API).

    Args:
        trajectory: a :class:`Trajectory`, a trace path (``str``/``os.PathLike``), or a parsed trace
            document (``dict``/``list``).
        rules: extra rule packs: one pack (a path, a shipped pack name, or a ``RulePack`` from
            ``load_pack``) or a list of them; ``None`` for none (the default packs are always applied).
        tools: the run's tool schemas for SCHEMA rules: a path to an OpenAI function-schema JSON
            file, or that list itself (``[{"type": "function", "function": {...}}, ...]``).
        strategy: ``offline`` (default, no LLM), a baseline, or an LLM strategy (needs ``llm``).
        taxonomy: taxonomy id for the category.
        llm: a :class:`trajaudit.llm.LLMConfig` for LLM strategies (``trajaudit.llm.build_config``).
        record: which run (0-based ``int``) of a multi-run file.
        repair: also fill ``Diagnosis.repair`` (LLM directive with ``llm``, else the template).

    Raises:
        TraceFormatError: the input cannot be read; RulePackError: a pack is invalid;
        ConfigError: the strategy needs an LLM and none is configured;
        UnknownStrategyError (a ConfigError and a LookupError): unknown strategy name;
        ArgumentTypeError (a TrajauditError and a TypeError): an argument of the wrong type.
    """
    check_name("audit", "strategy", strategy)
    check_name("audit", "taxonomy", taxonomy)
    try:
        default_strategies().get(strategy)
    except LookupError as e:
        raise UnknownStrategyError(str(e.args[0]) if e.args else str(e)) from None
    packs, tool_arg, llm = check_packs("audit", rules), check_tools("audit", tools), check_llm("audit", llm)
    t = load_checked(trajectory, format=None, record=record, function="audit", argument="trajectory")
    spec = AuditSpec(strategy=strategy, rules=packs, tools=tool_arg, config=AuditConfig(taxonomy=taxonomy), llm=llm,
                     repair=repair)
    ctx = build_context(spec)
    try:
        return audit_one(t, strategy, ctx).diagnosis
    finally:
        close_context(ctx)
