"""Batches of runs: serially, streamed file by file, or in worker processes (``jobs``).

One broken run is reported as a :class:`~trajaudit.errors.Problem` and skipped, never the whole
batch. Each run goes through :func:`trajaudit.engine.run.pipeline.audit_one`.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trajaudit.engine.run  # its submodule parallel is loaded on first use (--jobs)
from trajaudit.api_args import check_paths
from trajaudit.engine.run.pipeline import (
    AuditResult,
    AuditSpec,
    Done,
    RunError,
    audit_with,
    build_frozen_context,
    close_context,
    freeze_long_lived,
    problem_of,
)
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.engine.trace.loader import expand_paths, iter_load, load_many
from trajaudit.errors import Problem
from trajaudit.regular_files import file_kind

if TYPE_CHECKING:
    import trajaudit.engine.run.parallel  # noqa: F401 - the attribute's type for mypy (loaded on first use)

__all__ = ["BatchResult", "audit_paths", "audit_trajectories"]


@dataclass
class BatchResult:
    """A batch audit: results in input order, the runs that were reported and skipped (``problems``),
    and how many runs ``skip`` left out (``skipped``: already diagnosed, ``audit --resume``)."""

    results: list[AuditResult] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    skipped: int = 0


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
    problems: dict[int, Problem] = {}  # reported in input order (workers finish in any order)
    done = [0]

    def finished(i: int, result: AuditResult | None, error: RunError | str | None) -> None:
        if result is not None and on_result is not None:
            on_result(i, result)
        elif result is not None:
            results[i] = result
            if frozen:
                gc.freeze()  # the result lives to the end of the batch: out of the collector's way
        else:
            problems[i] = problem_of(trajectories[i], error or "not audited")
        done[0] += 1
        if progress:
            progress(done[0])

    frozen = freeze_long_lived()  # streamed results are not frozen after each run: they are not long-lived
    try:
        if jobs <= 1 or len(trajectories) < 2:
            _audit_serial(trajectories, range(len(trajectories)), spec, finished, frozen)
        else:
            trajaudit.engine.run.parallel.audit_parallel(trajectories, spec, jobs, finished)
    finally:
        if frozen:
            gc.unfreeze()
    out.results = [results[i] for i in sorted(results)]
    out.problems = [problems[i] for i in sorted(problems)]
    return out


def _audit_serial(trajectories: Sequence[Trajectory], indices: Iterable[int], spec: AuditSpec, finished: Done,
                  frozen: bool = False) -> None:
    """Audit ``trajectories[i]`` for each ``i`` in this process; ``finished(i, result, error)`` after each.
    ``frozen``: the batch froze the heap (the context is frozen with it: :func:`build_frozen_context`)."""
    ctx = build_frozen_context(spec, frozen)
    try:
        audit_with(ctx, trajectories, indices, spec.strategy, finished)
    finally:
        close_context(ctx)


def audit_paths(
    paths: Iterable[str | os.PathLike[str]],
    spec: AuditSpec,
    *,
    jobs: int = 1,
    format: str | None = None,
    mapping: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    on_result: Callable[[int, AuditResult], None] | None = None,
    skip: Callable[[Trajectory], bool] | None = None,
) -> BatchResult:
    """Load every run under ``paths`` (files, folders, globs) and audit them.

    Args:
        skip: a run for which ``skip(run)`` is true is not audited (``audit --resume``: already
            diagnosed); counted in ``BatchResult.skipped``.
        progress: called with ``(finished, total)`` after each run.
        on_result: as for :func:`audit_trajectories` (results streamed, not kept). Serially
            (``jobs == 1``) the input streams too: files are read one at a time and a file's runs are
            audited before the next file is read (:func:`_audit_stream`), so a batch's memory does
            not grow with the number of files; ``total`` is then an estimate (runs read so far, scaled
            by the files left) until the last file is read. With worker processes the whole batch is
            read first (the workers inherit it).
    """
    if on_result is not None and jobs <= 1:
        return _audit_stream(paths, spec, format, mapping, progress, on_result, skip)
    loaded = load_many(paths, format=format, mapping=mapping)
    runs = loaded.trajectories
    if skip is not None:
        runs = [t for t in runs if not skip(t)]
    total = len(runs)
    res = audit_trajectories(runs, spec, jobs=jobs,
                             progress=(lambda n: progress(n, total)) if progress else None, on_result=on_result)
    res.problems = loaded.problems + res.problems
    res.skipped = len(loaded.trajectories) - len(runs)
    return res


def _audit_stream(paths: Iterable[str | os.PathLike[str]], spec: AuditSpec, format: str | None, mapping: Any,
                  progress: Callable[[int, int], None] | None, on_result: Callable[[int, AuditResult], None],
                  skip: Callable[[Trajectory], bool] | None = None) -> BatchResult:
    """:func:`audit_paths` serially, one file at a time (results to ``on_result`` with their index in
    the whole batch, in input order); problems: the load problems, then the audit problems, as
    :func:`audit_paths` orders them."""
    files = list(expand_paths(check_paths("audit_paths", "paths", paths)))
    expected = {str(f): _expected_runs(f) for f in files} if progress else {}  # only a progress bar needs it
    seen: dict[str, int] = {}
    load_problems: list[Problem] = []
    audit_problems: list[Problem] = []
    runs: list[Trajectory] = []  # the part being audited, its first run's index in the batch, the total
    base = done = total = skipped = 0

    def finished(i: int, result: AuditResult | None, error: RunError | str | None) -> None:
        nonlocal done
        if result is not None:
            on_result(base + i, result)
        else:
            audit_problems.append(problem_of(runs[i], error or "not audited"))
        done += 1
        if progress:
            progress(done, max(total, done))

    # the compiled rules and caches live for the whole batch: frozen with the heap before any collection
    frozen = gc.isenabled()
    ctx = build_frozen_context(spec)
    try:
        for path, got in iter_load(files, format=format, mapping=mapping):
            load_problems.extend(got.problems)
            runs = got.trajectories
            if skip is not None:
                kept = [t for t in runs if not skip(t)]
                skipped += len(runs) - len(kept)
                runs = kept
            seen[str(path)] = seen.get(str(path), 0) + len(runs) + len(got.problems)
            total = sum(max(n, seen.get(f, 0)) for f, n in expected.items()) - len(load_problems) - skipped
            audit_with(ctx, runs, range(len(runs)), spec.strategy, finished)
            base += len(runs)
        if progress and done and max(total, done) != done:
            progress(done, done)  # the estimate made exact
    finally:
        if frozen:
            gc.unfreeze()
        close_context(ctx)
    out = BatchResult(skipped=skipped)
    out.problems = load_problems + audit_problems
    return out


def _expected_runs(path: Any) -> int:
    """A progress estimate of a file's runs before it is read: its non-empty lines for JSONL, else 1
    (a ``.json`` file of several runs corrects it when read)."""
    if not str(path).endswith((".jsonl", ".ndjson")) or file_kind(path) is not None:  # never open a FIFO
        return 1
    try:
        with open(path, "rb") as f:
            return max(1, sum(1 for line in f if line.strip()))
    except OSError:
        return 1
