"""The audit pipeline: trajectories in, one :class:`AuditResult` (diagnosis + evidence) per run out.

Stages (see docs/architecture.md): load → evidence (rule packs and tool-schema rules → validation
log; claim extraction → claim graph, whose findings join the log) → strategy (judge) → diagnosis.
Batches run serially or in worker processes (``jobs``); one broken run is reported as a
:class:`~trajaudit.errors.Problem` and skipped, never the whole batch.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from trajaudit.api_args import check_paths
from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.ir import Trajectory, renumbered
from trajaudit.engine.loader import expand_paths, iter_load, load_checked, load_many, problem_details
from trajaudit.engine.rule_pack import RulePack
from trajaudit.engine.strategy import AuditConfig, AuditContext, default_strategies
from trajaudit.engine.validation_log import ValidationLog
from trajaudit.errors import ConfigError, LLMUnreachableError, Problem, TrajauditError, UnknownStrategyError

log = logging.getLogger(__name__)


@dataclass
class AuditResult:
    """One run's audit: the diagnosis and the evidence behind it.

    Attributes:
        trajectory: the audited run.
        diagnosis: the strategy's :class:`Diagnosis`.
        log: the validation log (rules + claim findings), or ``None`` if the strategy gathered none.
        claims: a JSON-ready summary of the claim ledger (``[{claim, kind, step, status, ...}]``).
    """

    trajectory: Trajectory
    diagnosis: Diagnosis
    log: ValidationLog | None = None
    claims: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class BatchResult:
    """A batch audit: results in input order and the runs that were reported and skipped."""

    results: list[AuditResult] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


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
            the run calls (see :func:`trajaudit.engine.evidence.default_packs`).
        repair: fill ``Diagnosis.repair`` (an LLM directive when ``llm`` is set, else the template;
            :func:`trajaudit.engine.repair.attach_repair`).
    """

    strategy: str = "offline"
    rules: tuple[Any, ...] = ()
    tools: str | tuple[dict[str, Any], ...] | None = None
    config: AuditConfig = field(default_factory=AuditConfig)
    llm: Any = None
    default_packs: bool = True
    repair: bool = False


def build_context(spec: AuditSpec) -> AuditContext:
    """Compile rules, read tool schemas and create the LLM client described by ``spec``.

    Raises:
        TrajauditError: a rule pack or tools file is invalid; ConfigError for an unusable LLM setup.
    """
    from trajaudit.engine.evidence import default_packs, included_files, load_rules, load_tools, tool_schemas

    llm = None
    if spec.llm is not None:
        from trajaudit.llm import LLMClient

        llm = LLMClient(spec.llm)
    from trajaudit.engine.taxonomy import load_taxonomy

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
    return AuditContext(config=spec.config, rules=rules,
                        tools=tools, llm=llm, extra={"domain_packs": domains, "repair": spec.repair})


def close_context(context: AuditContext) -> None:
    """Release what :func:`build_context` opened (the LLM client's HTTP pool and cache)."""
    if context.llm is not None and hasattr(context.llm, "close"):
        context.llm.close()


def audit_one(trajectory: Trajectory, strategy_name: str, context: AuditContext) -> AuditResult:
    """Audit one trajectory with the named strategy.

    Raises:
        TrajauditError: the run has no decision step.
        LookupError: unknown strategy (with suggestions).
        ConfigError: the strategy needs an LLM and none is configured.
    """
    from trajaudit.engine.evidence import gather

    strategy = default_strategies().get(strategy_name)
    if not trajectory.decision_steps:
        raise TrajauditError("run has no decision steps (no agent message): nothing to diagnose")
    if strategy.needs_llm and context.llm is None:
        raise ConfigError(
            f"strategy {strategy_name!r} needs an LLM endpoint: pass --base-url and --model (or set "
            "TRAJAUDIT_BASE_URL and TRAJAUDIT_MODEL), or use --strategy offline"
        )
    diagnosis = with_source_message(strategy.diagnose(trajectory, context), trajectory)
    if context.extra.get("repair"):
        from trajaudit.engine.repair import attach_repair

        diagnosis = attach_repair(diagnosis, trajectory, context.llm)
    bundle = gather(trajectory, context)
    return AuditResult(trajectory, diagnosis, bundle.log, bundle.claim_rows)


def with_source_message(diagnosis: Diagnosis, trajectory: Trajectory) -> Diagnosis:
    """``diagnosis`` with ``metadata["source_message"]``: the 0-based position, in the file's message
    list, of the message the critical step came from — only for a run whose step indexes are not
    message positions (:func:`~trajaudit.engine.ir.renumbered`: an Anthropic message holding several
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


def _problem(t: Trajectory, message: str) -> Problem:
    """The :class:`Problem` for a run that was loaded but could not be audited. The message names
    where the run came from (``FILE, record N (run ID): …``; only ``ID: …`` for in-memory runs), so
    two runs with the same id in different files are told apart."""
    where = t.source.file or ""
    if where and t.source.record is not None:
        where += f", record {t.source.record}"
    text = f"{where} (run {t.id}): {message}" if where else f"{t.id}: {message}"
    return Problem(t.source.file or t.id, t.source.record, text, problem_details(t.flags))


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


def audit_trajectories(
    trajectories: Sequence[Trajectory],
    spec: AuditSpec,
    *,
    jobs: int = 1,
    progress: Callable[[int], None] | None = None,
    on_result: Callable[[int, AuditResult], None] | None = None,
) -> BatchResult:
    """Audit loaded trajectories, serially (``jobs == 1``) or in ``jobs`` worker processes.

    Args:
        progress: called with the number of runs finished so far, after each run.
        on_result: called as ``on_result(index, result)`` for each run audited, in completion order
            (input order when serial); the result is then *not* kept in ``BatchResult.results``, so a
            caller that streams results (writes each diagnosis, keeps a summary) holds memory for one
            run at a time instead of the whole batch's logs.

    Raises:
        TrajauditError: the context (rules, tools, LLM) cannot be built — nothing can run.
        LLMUnreachableError: no connection to the LLM endpoint could be made (the batch stops at the
            first such run; in worker processes, only the parent's first run is checked so).
    """
    out = BatchResult()
    results: dict[int, AuditResult] = {}
    done = [0]

    def finished(i: int, result: AuditResult | None, error: str | None) -> None:
        if result is not None and on_result is not None:
            on_result(i, result)
        elif result is not None:
            results[i] = result
            if frozen:
                gc.freeze()  # the result lives to the end of the batch: out of the collector's way
        else:
            out.problems.append(_problem(trajectories[i], error or "not audited"))
        done[0] += 1
        if progress:
            progress(done[0])

    frozen = freeze_long_lived()  # streamed results are not frozen after each run: they are not long-lived
    try:
        if jobs <= 1 or len(trajectories) < 2:
            _audit_serial(trajectories, range(len(trajectories)), spec, finished)
        else:
            from trajaudit.engine.parallel import audit_parallel

            audit_parallel(trajectories, spec, jobs, finished)
    finally:
        if frozen:
            gc.unfreeze()
    out.results = [results[i] for i in sorted(results)]
    return out


#: ``finished(index, result, error)``: called once per run of a batch, in completion order.
Done = Callable[[int, "AuditResult | None", "str | None"], None]


def _audit_serial(trajectories: Sequence[Trajectory], indices: Iterable[int], spec: AuditSpec, finished: Done) -> None:
    """Audit ``trajectories[i]`` for each ``i`` in this process; ``finished(i, result, error)`` after each."""
    ctx = build_context(spec)
    try:
        audit_with(ctx, trajectories, indices, spec.strategy, finished)
    finally:
        close_context(ctx)


def audit_with(ctx: AuditContext, trajectories: Sequence[Trajectory], indices: Iterable[int], strategy: str,
               finished: Done) -> None:
    """Audit ``trajectories[i]`` for each ``i`` with ``ctx``; a run that cannot be audited is reported
    through ``finished(i, None, message)`` and the batch goes on.

    Raises:
        ConfigError: the strategy cannot run at all (no LLM configured); nothing else does.
    """
    for i in indices:
        t = trajectories[i]
        try:
            result = audit_one(t, strategy, ctx)
        except (ConfigError, LLMUnreachableError):  # every further run would fail the same way
            raise
        except (TrajauditError, LookupError) as e:
            finished(i, None, str(e))
            continue
        except Exception as e:  # noqa: BLE001 - reported per run, batch goes on
            log.exception("audit of %s failed", t.id)
            finished(i, None, f"internal error: {type(e).__name__}: {e}")
            continue
        finished(i, result, None)


def audit_paths(
    paths: Iterable[str | os.PathLike[str]],
    spec: AuditSpec,
    *,
    jobs: int = 1,
    format: str | None = None,
    mapping: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    on_result: Callable[[int, AuditResult], None] | None = None,
) -> BatchResult:
    """Load every run under ``paths`` (files, folders, globs) and audit them.

    Args:
        progress: called with ``(finished, total)`` after each run.
        on_result: as for :func:`audit_trajectories` (results streamed, not kept). Serially
            (``jobs == 1``) the input streams too: files are read one at a time and a file's runs are
            audited before the next file is read (:func:`_audit_stream`), so a batch's memory does
            not grow with the number of files; ``total`` is then an estimate (runs read so far, scaled
            by the files left) until the last file is read. With worker processes the whole batch is
            read first (the workers inherit it).
    """
    if on_result is not None and jobs <= 1:
        return _audit_stream(paths, spec, format, mapping, progress, on_result)
    loaded = load_many(paths, format=format, mapping=mapping)
    total = len(loaded.trajectories)
    res = audit_trajectories(loaded.trajectories, spec, jobs=jobs,
                             progress=(lambda n: progress(n, total)) if progress else None, on_result=on_result)
    res.problems = loaded.problems + res.problems
    return res


def _audit_stream(paths: Iterable[str | os.PathLike[str]], spec: AuditSpec, format: str | None, mapping: str | None,
                  progress: Callable[[int, int], None] | None, on_result: Callable[[int, AuditResult], None]
                  ) -> BatchResult:
    """:func:`audit_paths` serially, one file at a time (results to ``on_result`` with their index in
    the whole batch, in input order); problems: the load problems, then the audit problems, as
    :func:`audit_paths` orders them."""
    files = list(expand_paths(check_paths("audit_paths", "paths", paths)))
    expected = {str(f): _expected_runs(f) for f in files} if progress else {}  # only a progress bar needs it
    seen: dict[str, int] = {}
    load_problems: list[Problem] = []
    audit_problems: list[Problem] = []
    runs: list[Trajectory] = []  # the part being audited, its first run's index in the batch, the total
    base = done = total = 0

    def finished(i: int, result: AuditResult | None, error: str | None) -> None:
        nonlocal done
        if result is not None:
            on_result(base + i, result)
        else:
            audit_problems.append(_problem(runs[i], error or "not audited"))
        done += 1
        if progress:
            progress(done, max(total, done))

    ctx = build_context(spec)
    frozen = freeze_long_lived()  # the compiled rules and caches live for the whole batch
    try:
        for path, got in iter_load(files, format=format, mapping=mapping):
            load_problems.extend(got.problems)
            runs = got.trajectories
            seen[str(path)] = seen.get(str(path), 0) + len(runs) + len(got.problems)
            total = sum(max(n, seen.get(f, 0)) for f, n in expected.items()) - len(load_problems)
            audit_with(ctx, runs, range(len(runs)), spec.strategy, finished)
            base += len(runs)
        if progress and done and max(total, done) != done:
            progress(done, done)  # the estimate made exact
    finally:
        if frozen:
            gc.unfreeze()
        close_context(ctx)
    out = BatchResult()
    out.problems = load_problems + audit_problems
    return out


def _expected_runs(path: Any) -> int:
    """A progress estimate of a file's runs before it is read: its non-empty lines for JSONL, else 1
    (a ``.json`` file of several runs corrects it when read)."""
    if not str(path).endswith((".jsonl", ".ndjson")):
        return 1
    try:
        with open(path, "rb") as f:
            return max(1, sum(1 for line in f if line.strip()))
    except OSError:
        return 1


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
    from trajaudit.api_args import check_llm, check_name, check_packs, check_tools

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
