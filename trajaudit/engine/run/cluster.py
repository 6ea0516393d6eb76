"""Audits on a Dask cluster (``audit --scheduler``, :func:`trajaudit.distributed.audit_bag`): the
input cut into shards (:mod:`trajaudit.engine.trace.shards`), each shard read and audited by one task on a
worker, results streamed back in input order — the same diagnoses, in the same order, as a serial run.

How it maps onto Dask (docs/dask.md):

- **planning**: one task per input file finds its shards (line starts of a large JSONL file, row
  ranges of a Parquet file), so files are read where they are audited;
- **auditing**: one task per group of shards (:func:`group_shards`: consecutive small files up to
  ``shard_runs`` runs, or one range of a large file); each worker process builds the :class:`AuditContext` once per
  :class:`AuditSpec` (:func:`worker_context`) and audits one shard at a time (a lock: the context is
  not shared between threads); per-run errors come back as :class:`~trajaudit.errors.Problem` records,
  exactly as the serial path makes them;
- **failures**: a task whose worker dies is run again on another worker by the scheduler (Dask's
  ``distributed.scheduler.allowed-failures``); the client takes each shard's result once, by shard
  index, so nothing is duplicated; a shard that still fails (every try lost its worker) is reported
  as a problem naming the file and its first record; a :class:`ConfigError` or
  :class:`LLMUnreachableError` (every run would fail) stops the batch as locally;
- **LLM strategies**: every worker opens the same sqlite answer cache (the ``cache_path`` of the LLM
  configuration; sqlite's locking makes concurrent writes from several processes safe on one host's
  file system), and every request also holds one lease of a cluster-wide ``distributed.Semaphore``
  of ``concurrency`` leases per endpoint and model, so the endpoint's limit holds across workers.

Dask is an optional extra (``pip install 'trajaudit[dask]'``): it is imported inside these functions
only, and :func:`require_dask` turns its absence into a clear :class:`ConfigError`.
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import logging
import pickle
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from trajaudit.checkers.tool_schemas import read_tool_list
from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.run.batch import BatchResult
from trajaudit.engine.run.pipeline import (
    AuditResult,
    AuditSpec,
    audit_with,
    build_context,
    close_context,
    freeze_long_lived,
    problem_of,
)
from trajaudit.engine.strategies.context import AuditContext
from trajaudit.engine.trace.adapters import MappingAdapter
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.engine.trace.loader import LoadResult, load_document
from trajaudit.engine.trace.shards import (
    DEFAULT_SHARD_RUNS,
    SPLITTABLE,
    ParquetMapping,
    Shard,
    expand_inputs,
    plan_file,
    read_shard,
)
from trajaudit.engine.validation_log import ValidationLog
from trajaudit.errors import ConfigError, LLMUnreachableError, Problem, TraceFormatError

log = logging.getLogger(__name__)

#: What ``pip`` installs for the cluster features.
EXTRA_HINT = "pip install 'trajaudit[dask]'"


def require_dask(what: str = "--scheduler") -> None:
    """Check that the ``dask`` extra is installed.

    Raises:
        ConfigError: dask, distributed, fsspec or pyarrow is missing (the message says what to install).
    """
    missing = []
    for mod in ("dask", "distributed", "fsspec", "pyarrow"):
        try:
            __import__(mod)
        except ImportError:
            missing.append(mod)
    if missing:
        raise ConfigError(f"{what} needs the optional Dask extra ({', '.join(missing)} not installed): {EXTRA_HINT}")


@dataclass(frozen=True)
class LoadSpec:
    """How the workers read the input (picklable).

    Attributes:
        format: a forced input format (files are then not split), or ``None`` to detect.
        mapping: a mapping adapter for a custom format, or ``None``.
        parquet: how Parquet rows become runs.
        shard_runs: runs (JSONL lines, Parquet rows or runs) per shard.
    """

    format: str | None = None
    mapping: MappingAdapter | None = None
    parquet: ParquetMapping = field(default_factory=ParquetMapping)
    shard_runs: int = DEFAULT_SHARD_RUNS


@dataclass
class ShardOutcome:
    """What a shard's task sends back: the load problems, then one item per loaded run in input
    order, ``(payload, None)`` for an audited run (see :func:`audit_shard`), ``(None, problem)`` else."""

    problems: list[Problem]
    items: list[tuple[Any, Problem | None]]


# --- on the workers ---------------------------------------------------------------------------------

_CONTEXTS: dict[str, tuple[AuditContext, threading.Lock]] = {}  # by spec, the most recently used last
_CONTEXTS_LOCK = threading.Lock()
#: Contexts a worker process keeps (a long-lived worker serves batches of different specs).
KEEP_CONTEXTS = 4


def worker_context(spec: AuditSpec) -> tuple[AuditContext, threading.Lock]:
    """This process's context for ``spec`` (built on first use and kept for later shards and
    batches of the same spec — at most :data:`KEEP_CONTEXTS`, the least recently used closed first —
    closed at exit) and the lock that lets one shard at a time use it. With an LLM, requests also hold
    the cluster-wide limiter (:func:`cluster_limiter`)."""
    key = hashlib.sha256(pickle.dumps(spec)).hexdigest()
    with _CONTEXTS_LOCK:
        got = _CONTEXTS.pop(key, None)
        if got is None:
            ctx = build_context(spec)
            if ctx.llm is not None:
                limiter = cluster_limiter(spec.llm)
                if limiter is not None:
                    ctx.llm.share_limit(limiter)
            got = (ctx, threading.Lock())
            atexit.register(close_context, ctx)
        _CONTEXTS[key] = got
        while len(_CONTEXTS) > KEEP_CONTEXTS:
            old_ctx, old_lock = _CONTEXTS.pop(next(iter(_CONTEXTS)))
            with old_lock:  # a shard still using it finishes first
                close_context(old_ctx)
    return got


def cluster_limiter(config: Any) -> Any:
    """A ``distributed.Semaphore`` of ``config.concurrency`` leases named after the endpoint and
    model, shared by every worker of the cluster this process works for; ``None`` outside a Dask
    worker (the client's own ``concurrency`` slots then suffice)."""
    try:
        from distributed import Semaphore, get_worker

        get_worker()
    except (ImportError, ValueError):
        return None
    name = "trajaudit-llm-" + hashlib.sha256(f"{config.base_url}\0{config.model}".encode()).hexdigest()[:16]
    return Semaphore(max_leases=config.concurrency, name=name)


def audit_shard(shards: Sequence[Shard], spec: AuditSpec, load: LoadSpec, ship: str = "summary") -> ShardOutcome:
    """Read and audit a group of shards, in order (one Dask task: consecutive small files, or one range
    of a large file; :func:`group_shards`). Runs are audited as :func:`audit_with` audits them.

    Args:
        ship: what each audited run sends back: ``"diagnosis"`` (the diagnosis dict), ``"summary"``
            (``(trajectory dict, diagnosis dict, None, claims)``), ``"full"`` (also the validation
            log as :meth:`ValidationLog.to_rows`, for a report).

    Raises:
        ConfigError, LLMUnreachableError: every run would fail (no LLM configured, no connection).
    """
    ctx, lock = worker_context(spec)
    out = ShardOutcome([], [])
    runs: list[Trajectory] = []

    def finished(i: int, result: AuditResult | None, error: str | None) -> None:
        if result is None:
            out.items.append((None, problem_of(runs[i], error or "not audited")))
        elif ship == "diagnosis":
            out.items.append((result.diagnosis.to_dict(), None))
        else:
            rows = result.log.to_rows() if ship == "full" and result.log is not None else None
            out.items.append(((result.trajectory.to_dict(), result.diagnosis.to_dict(), rows, result.claims), None))

    for shard in shards:
        got = read_shard(shard, format=load.format, mapping=load.mapping, parquet=load.parquet)
        out.problems.extend(got.problems)
        runs = got.trajectories
        with lock:
            audit_with(ctx, runs, range(len(runs)), spec.strategy, finished)
    if id(ctx) not in _FROZEN:  # once per context: the compiled packs and caches its first task built
        _FROZEN.add(id(ctx))    # leave the collector's view, as in the serial path (freeze_long_lived)
        freeze_long_lived()
    return out


_FROZEN: set[int] = set()


def group_shards(shards: Sequence[Shard], runs: int) -> list[list[Shard]]:
    """Tasks of about ``runs`` runs: consecutive whole-file shards are put together while their
    expected runs stay within ``runs`` (a folder of one-run files is not a task per file); a range
    of a large file is a task of its own."""
    groups: list[list[Shard]] = []
    size = 0
    for s in shards:
        if s.whole and groups and all(g.whole for g in groups[-1]) and size + s.expected <= runs:
            groups[-1].append(s)
            size += s.expected
        else:
            groups.append([s])
            size = s.expected
    return groups


def result_of(payload: tuple[Any, ...]) -> AuditResult:
    """The :class:`AuditResult` of a ``summary``/``full`` payload of :func:`audit_shard`."""
    tdict, ddict, rows, claims = payload
    return AuditResult(Trajectory.from_dict(tdict), Diagnosis.from_dict(ddict),
                       ValidationLog.from_rows(rows) if rows is not None else None, claims)


# --- on the client ----------------------------------------------------------------------------------


def plan(client: Any, paths: Iterable[str], load: LoadSpec) -> list[Shard]:
    """The shards of every file under ``paths``, in input order: JSONL and Parquet files are read to
    plan them (one task per file on the cluster when ``client`` is given, else here); any other file
    is one shard, planned without reading it."""
    files = expand_inputs(paths)
    kw = {"shard_runs": load.shard_runs, "split": load.format is None, "parquet": load.parquet}
    read = [k for k, (_, n) in enumerate(files) if n.lower().endswith(SPLITTABLE)]  # others: one shard, no I/O
    if client is None or not read:
        planned = [plan_file(*files[k], **kw) for k in read]
    else:
        planned = client.gather(client.map(plan_file, [files[k][0] for k in read], [files[k][1] for k in read],
                                           pure=False, **kw))
    plans = [[] if n.lower().endswith(SPLITTABLE) else plan_file(u, n, **kw) for u, n in files]
    for k, p in zip(read, planned, strict=True):
        plans[k] = p
    return [s for p in plans for s in p]


def audit_on_cluster(client: Any, paths: Iterable[str], spec: AuditSpec, load: LoadSpec, *,
                     progress: Callable[[int, int], None] | None = None,
                     on_result: Callable[[int, AuditResult], None] | None = None,
                     with_logs: bool = False) -> BatchResult:
    """Audit every run under ``paths`` on the cluster of ``client`` (a ``distributed.Client``).

    Results come to ``on_result(index, result)`` in input order (the index counts audited runs, as
    :func:`~trajaudit.engine.run.batch.audit_paths` numbers them), as soon as every shard before
    theirs has finished; without ``on_result`` they are kept in ``BatchResult.results``.
    ``progress(finished, total)`` is called on each shard's completion (``total``: the runs found so
    far plus the estimate of the shards still running). Problems: every load problem, then every audit
    problem, in input order (as the serial path orders them).

    Args:
        with_logs: ship each run's validation log back (a report needs it).

    Raises:
        TrajauditError: the context cannot be built (checked here first, before any task).
        ConfigError, LLMUnreachableError: raised by a task (every run would fail); the batch stops.
    """
    from distributed import as_completed

    close_context(build_context(spec))  # a bad pack, tools file or LLM set-up fails here, once
    if isinstance(spec.tools, str):  # the workers get the schemas, not a path they may not see
        spec = dataclasses.replace(spec, tools=tuple(read_tool_list(spec.tools)))
    shards = plan(client, paths, load)
    out = BatchResult()
    if not shards:
        return out
    groups = group_shards(shards, load.shard_runs)
    token = uuid.uuid4().hex[:12]  # this batch's keys: a re-run of the same batch is new work
    keys = [f"trajaudit-shard-{token}-{i}" for i in range(len(groups))]
    index = {k: i for i, k in enumerate(keys)}
    futures = client.map(audit_shard, groups, key=keys, spec=spec, load=load, ship="full" if with_logs else "summary")
    expected = [sum(s.expected for s in g) for g in groups]
    if progress:
        progress(0, sum(expected))
    waiting: dict[int, ShardOutcome] = {}
    load_problems: list[Problem] = []
    audit_problems: list[Problem] = []
    done = emitted = next_shard = 0
    try:
        for fut, res in as_completed(futures, with_results=True, raise_errors=False):
            i = index[fut.key]
            if fut.status == "error":  # res: (type, exception, traceback)
                exc = res[1] if isinstance(res, tuple) else res
                if isinstance(exc, (ConfigError, LLMUnreachableError)):
                    raise exc
                res = _lost(groups[i], exc)
            waiting[i] = res
            expected[i] = len(res.items)
            done += len(res.items)
            if progress:
                progress(done, max(done, sum(expected)))
            while next_shard in waiting:
                got = waiting.pop(next_shard)
                load_problems.extend(got.problems)
                for payload, problem in got.items:
                    if problem is not None:
                        audit_problems.append(problem)
                        continue
                    result = result_of(payload)
                    if on_result is not None:
                        on_result(emitted, result)
                    else:
                        out.results.append(result)
                    emitted += 1
                next_shard += 1
    finally:
        client.cancel(futures)
    out.problems = load_problems + audit_problems
    return out


def _lost(group: Sequence[Shard], e: BaseException) -> ShardOutcome:
    """The outcome of a task that failed on the cluster (its worker died on every try, or an error
    outside the per-run handling): a problem per shard, naming the file and where the shard starts
    (stage ``worker``: not a problem of the input, whose runs may well load)."""
    why = f"not audited: the task failed on the cluster ({type(e).__name__}: {e})"
    return ShardOutcome([Problem(s.name, None if s.whole else s.first, f"{s.where()}: {why}", stage="worker")
                         for s in group], [])


def shard_records(shards: Sequence[Shard], spec: AuditSpec, load: LoadSpec) -> list[dict[str, Any]]:
    """A task's audit (:func:`audit_shard`) as flat records (for :func:`trajaudit.distributed.audit_bag`):
    each audited run's ``Diagnosis.to_dict()`` with ``"error": None``, in input order, then one record
    per run that could not be read or audited: ``{"file", "record", "trajectory_id", "error"}``."""
    got = audit_shard(shards, spec, load, ship="diagnosis")
    return _records(got)


def _records(got: ShardOutcome) -> list[dict[str, Any]]:
    out = [{**payload, "error": None} for payload, problem in got.items if problem is None]
    problems = got.problems + [p for _, p in got.items if p is not None]
    out += [{"trajectory_id": None, "file": p.file, "record": p.record, "error": p.message} for p in problems]
    return out


def document_records(docs: Sequence[Any], spec: AuditSpec, load: LoadSpec) -> list[dict[str, Any]]:
    """:func:`shard_records` of a bag partition of parsed trace documents (``dict``/``list``, read
    as :func:`~trajaudit.engine.trace.loader.load_document` reads them) or :class:`Trajectory` objects."""
    loaded = LoadResult()
    for doc in docs:
        if isinstance(doc, Trajectory):
            loaded.trajectories.append(doc)
            continue
        try:
            loaded.extend(load_document(doc, format=load.format, mapping=load.mapping))
        except TraceFormatError as e:
            loaded.problems.append(Problem("<input>", None, str(e)))
    ctx, lock = worker_context(spec)
    items: list[tuple[Any, Problem | None]] = []
    runs = loaded.trajectories

    def finished(i: int, result: AuditResult | None, error: str | None) -> None:
        items.append((result.diagnosis.to_dict(), None) if result is not None
                     else (None, problem_of(runs[i], error or "not audited")))

    with lock:
        audit_with(ctx, runs, range(len(runs)), spec.strategy, finished)
    return _records(ShardOutcome(loaded.problems, items))


__all__ = ["EXTRA_HINT", "LoadSpec", "ShardOutcome", "audit_on_cluster", "audit_shard", "cluster_limiter",
           "document_records", "group_shards", "plan", "require_dask", "result_of", "shard_records", "worker_context"]
