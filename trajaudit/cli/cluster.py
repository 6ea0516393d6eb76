"""``audit --scheduler``: the cluster options of ``trajaudit audit`` and the outputs they allow
(``-o diagnoses.parquet``, fsspec URLs). Dask is imported only when a cluster is used, and the
cluster batch's code (:mod:`trajaudit.distributed`, ``engine.run.cluster``) only when a cluster, a
Parquet output or a URL is asked for: it is referred to as ``trajaudit.distributed`` (a submodule the
package loads on first use), so a local ``audit`` does not import (nor, run from source, compile) it."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO

import click

import trajaudit
from trajaudit.cli.common import write_text
from trajaudit.cli.outputs import OutputSet
from trajaudit.engine.run.batch import BatchResult
from trajaudit.engine.run.pipeline import AuditResult, AuditSpec
from trajaudit.engine.trace.forced_format import mapping_for
from trajaudit.engine.trace.inputs import DEFAULT_SHARD_RUNS, PARQUET_SUFFIXES, is_url
from trajaudit.errors import ConfigError

if TYPE_CHECKING:
    import trajaudit.distributed  # noqa: F401 - the attribute's type for mypy (loaded on first use)


@dataclasses.dataclass(frozen=True)
class ClusterOptions:
    """The cluster options of ``audit`` (``scheduler=None``: run here, serially or with ``--jobs``)."""

    scheduler: str | None = None
    shard_runs: int = DEFAULT_SHARD_RUNS
    trace_column: str = "trace"
    run_column: str = "run_id"


def cluster_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--scheduler``, ``--shard-runs``, ``--trace-column`` and ``--run-column`` to a command; it
    receives them as one ``cluster: ClusterOptions``."""
    names = ("scheduler", "shard_runs", "trace_column", "run_column")

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["cluster"] = ClusterOptions(*(kwargs.pop(n) for n in names))
        return f(*args, **kwargs)

    wrapper = click.option("--run-column", default="run_id", show_default=True, metavar="NAME",
                           help="Parquet input with one row per message: the column naming each row's run "
                                "(used when the trace column is absent; docs/parquet.md).")(wrapper)
    wrapper = click.option("--trace-column", default="trace", show_default=True, metavar="NAME",
                           help="Parquet input: the column holding one run's JSON per row.")(wrapper)
    wrapper = click.option("--shard-runs", type=click.IntRange(1), default=DEFAULT_SHARD_RUNS, show_default=True,
                           metavar="N", help="With --scheduler: runs per task for large JSONL/Parquet files.")(wrapper)
    wrapper = click.option("--scheduler", metavar="ADDRESS",
                           help="Audit on a Dask cluster: a scheduler address (tcp://host:8786), or local:N "
                                "for a local cluster of N worker processes. Needs pip install "
                                "'trajaudit[dask]'; inputs may then be fsspec URLs and Parquet files.")(wrapper)
    return wrapper


def check_cluster_use(cluster: ClusterOptions, paths: Sequence[str], output: str, jobs: int) -> None:
    """Refuse, before any run, what needs a cluster without one (URL or Parquet inputs), a Parquet
    output without the extra, and ``--jobs`` beside ``--scheduler``.

    Raises:
        ConfigError: naming the option or path and what to do.
    """
    if cluster.scheduler:
        trajaudit.distributed.require_dask()
        if jobs > 1:
            raise ConfigError("give either --jobs (processes here) or --scheduler (a Dask cluster), not both")
        return
    for p in paths:
        if is_url(p) or str(p).lower().endswith(PARQUET_SUFFIXES):
            raise ConfigError(f"{p!r}: URL and Parquet inputs are read on a Dask cluster: add --scheduler "
                              "local:N (N worker processes here) or --scheduler tcp://HOST:8786")
    if output.lower().endswith(".parquet") or is_url(output):
        trajaudit.distributed.require_dask(f"-o {output}")


def run_on_cluster(cluster: ClusterOptions, paths: Sequence[str], spec: AuditSpec, *, fmt: str | None,
                   mapping: str | None, progress: Callable[[int, int], None] | None,
                   on_result: Callable[[int, AuditResult], None], with_logs: bool) -> BatchResult:
    """Audit ``paths`` on the cluster at ``cluster.scheduler`` (:func:`trajaudit.distributed.connect`;
    a ``local:N`` cluster is started and closed here); see :func:`~trajaudit.engine.run.cluster.audit_on_cluster`."""
    dist = trajaudit.distributed
    load = dist.LoadSpec(format=fmt, mapping=mapping_for(fmt, mapping), shard_runs=cluster.shard_runs,
                         parquet=dist.ParquetMapping(trace_column=cluster.trace_column, run_column=cluster.run_column))
    with dist.connect(cluster.scheduler or "local:1") as client:
        return dist.audit_on_cluster(client, paths, spec, load, progress=progress, on_result=on_result,
                                     with_logs=with_logs)


def write_diagnoses(output: str, lines: list[str], outs: OutputSet | None = None) -> None:
    """Write the diagnoses' JSON lines to ``output``: ``.parquet`` as a Parquet table (docs/parquet.md),
    a URL through fsspec (written at once, not atomically), else a local JSONL file
    (:func:`~trajaudit.cli.common.write_text`). A local file is staged in ``outs`` when given (replaced
    when it commits, with the command's other outputs), else replaced atomically now.

    Raises:
        OSError: the file cannot be written. ConfigError: ``.parquet`` without the Dask extra.
    """
    if is_url(output):
        import fsspec

        if output.lower().endswith(".parquet"):
            trajaudit.distributed.write_diagnoses_parquet(output, lines)
            return
        with fsspec.open(output, "wb") as f:
            f.write("".join(line + "\n" for line in lines).encode("utf-8", "backslashreplace"))
        return
    if output.lower().endswith(".parquet"):
        def fill(f: BinaryIO) -> None:
            trajaudit.distributed.write_diagnoses_parquet(f, lines)

        if outs is None:
            with OutputSet() as once:
                once.write_with(output, fill)
                once.commit()
        else:
            outs.write_with(output, fill)
        return
    write_text(output, "".join(line + "\n" for line in lines), outs)
