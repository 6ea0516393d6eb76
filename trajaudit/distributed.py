"""Audits on a Dask cluster, as a Python API (the CLI's ``audit --scheduler``; docs/dask.md).

Needs the optional extra: ``pip install 'trajaudit[dask]'`` (dask, distributed, pyarrow, fsspec).
Importing this module without it works; calling a function raises a :class:`ConfigError` that says
what to install. ``import trajaudit`` never imports dask.

- :func:`connect`: a ``distributed.Client`` for ``tcp://host:8786`` or ``local:N`` (a LocalCluster of
  N worker processes, closed with the client);
- :func:`audit_bag`: a dask bag (or dataframe) of diagnosis records, to join with your own tables;
- :func:`write_diagnoses_parquet` / :data:`DIAGNOSIS_COLUMNS`: the Parquet output of ``audit -o
  diagnoses.parquet`` (docs/parquet.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, BinaryIO

from trajaudit.api_args import check_tools
from trajaudit.engine.config import AuditConfig
from trajaudit.engine.packs.pack import check_packs
from trajaudit.engine.run.cluster import (
    LoadSpec,
    audit_on_cluster,
    document_records,
    group_shards,
    plan,
    require_dask,
    shard_records,
)
from trajaudit.engine.run.pipeline import AuditSpec
from trajaudit.engine.strategies.registry import default_strategies
from trajaudit.engine.trace.forced_format import mapping_for
from trajaudit.engine.trace.shards import DEFAULT_SHARD_RUNS, ParquetMapping
from trajaudit.errors import ConfigError, UnknownStrategyError
from trajaudit.llm.config import check_llm

#: The columns of a diagnoses table (``audit -o X.parquet``, ``audit_bag(..., frame=True)``), in order:
#: ``(name, pyarrow type name, meaning)``. ``diagnosis`` is the whole diagnosis as the JSONL line.
DIAGNOSIS_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("trajectory_id", "string", "the run's id"),
    ("file", "string", "the file the run came from (the path as given, or the URL)"),
    ("record", "int64", "0-based record in a multi-run file (JSONL line, Parquet row or run), else null"),
    ("critical_step", "int64", "0-based index of the critical step, null when the run has none"),
    ("agent", "string", "the agent of the critical step"),
    ("category", "string", "root-cause category id"),
    ("taxonomy", "string", "the taxonomy of the category"),
    ("strategy", "string", "the strategy that produced the diagnosis"),
    ("confidence", "double", "0..1"),
    ("rationale", "string", "why, citing evidence addresses"),
    ("error", "string", "why the run could not be read or audited (audit_bag only; null for a diagnosis)"),
    ("diagnosis", "string", "the whole diagnosis as JSON (the line `audit -o X.jsonl` writes)"),
)


def _arrow_schema() -> Any:
    import pyarrow as pa

    types = {"string": pa.string(), "int64": pa.int64(), "double": pa.float64()}
    return pa.schema([(n, types[t]) for n, t, _ in DIAGNOSIS_COLUMNS])


def diagnosis_row(record: dict[str, Any], line: str | None = None) -> dict[str, Any]:
    """One table row (:data:`DIAGNOSIS_COLUMNS`) of a diagnosis dict (``Diagnosis.to_dict()``, or an
    error record of :func:`audit_bag`). ``line``: the diagnosis's JSON text if already made."""
    error = record.get("error")
    if line is None and not error:
        line = json.dumps({k: v for k, v in record.items() if k != "error"}, ensure_ascii=False)
    row = {n: record.get(n) for n, _, _ in DIAGNOSIS_COLUMNS}
    row["diagnosis"] = None if error else line
    row["error"] = error
    return row


def write_diagnoses_parquet(path: str | os.PathLike[str] | BinaryIO, lines: Iterable[str]) -> None:
    """Write diagnoses (their JSONL lines, in output order) as a Parquet file of
    :data:`DIAGNOSIS_COLUMNS` to a path or fsspec URL, or to an open binary file (the temporary file of
    a staged output, ``cli.outputs.OutputSet``).

    Raises:
        ConfigError: the Dask extra (pyarrow, fsspec) is not installed.
        OSError: the file cannot be written.
    """
    require_dask("a .parquet output")
    import fsspec
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [diagnosis_row(json.loads(line), line) for line in lines]
    table = pa.Table.from_pylist(rows, schema=_arrow_schema())
    if not isinstance(path, (str, os.PathLike)):
        pq.write_table(table, path)
        return
    with fsspec.open(str(path), "wb") as f:
        pq.write_table(table, f)


def read_diagnoses_parquet(path: str | os.PathLike[str]) -> list[str]:
    """The diagnosis JSON lines of a Parquet file written by :func:`write_diagnoses_parquet`, in order.

    Raises:
        ConfigError: the Dask extra is not installed. OSError: the file cannot be read.
    """
    require_dask("reading a .parquet output")
    import fsspec
    import pyarrow.parquet as pq

    with fsspec.open(str(path), "rb") as f:
        column = pq.read_table(f, columns=["diagnosis"]).column(0).to_pylist()
    return [c for c in column if c is not None]


@contextmanager
def connect(address: str, *, timeout: float = 30) -> Iterator[Any]:
    """A ``distributed.Client`` for ``address``, closed on exit.

    Args:
        address: a scheduler address (``tcp://host:8786``, ``tls://…``, ``host:port``), or
            ``local:N`` — a LocalCluster of N worker processes of one thread each on this machine
            (started here, closed on exit).
        timeout: seconds to wait for the scheduler.

    Raises:
        ConfigError: the extra is missing, ``local:N`` is malformed, or the scheduler cannot be reached.
    """
    require_dask()
    import logging

    import dask
    from distributed import Client, LocalCluster

    cluster = None
    if address.startswith("local:"):
        n = address.split(":", 1)[1]
        if not n.isdigit() or not 1 <= int(n) <= 256:
            raise ConfigError(f"--scheduler {address!r}: local:N needs a number of workers N from 1 to 256")
        logging.getLogger("distributed").setLevel(logging.WARNING)  # the in-process scheduler's start-up chatter
        # no statistical profiler sampling the workers' stacks every 10 ms: nobody reads it here (CPU)
        with dask.config.set({"distributed.worker.profile.enabled": False}):
            cluster = LocalCluster(n_workers=int(n), threads_per_worker=1, processes=True, dashboard_address=None,
                                   scheduler_kwargs={"dashboard": False}, silence_logs=logging.ERROR)
        client = Client(cluster)
    else:
        try:
            client = Client(address, timeout=timeout)
        except (OSError, TimeoutError, ValueError) as e:
            raise ConfigError(f"--scheduler {address!r}: cannot connect to the Dask scheduler: {e}") from None
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def audit_spec(*, strategy: str = "offline", rules: Any = (), tools: Any = None, taxonomy: str = "agentrx",
               seed: int = 0, llm: Any = None, repair: bool = False, default_packs: bool = True) -> AuditSpec:
    """The :class:`AuditSpec` for :func:`audit_bag`'s audit options (checked as :func:`trajaudit.audit`
    checks them). Rule pack and tools paths must be readable at the same path on every worker."""
    return AuditSpec(strategy=strategy, rules=check_packs("audit_bag", rules), tools=check_tools("audit_bag", tools),
                     config=AuditConfig(taxonomy=taxonomy, seed=seed), llm=check_llm("audit_bag", llm),
                     default_packs=default_packs, repair=repair)


def audit_bag(bag_or_paths: Any, client: Any = None, *, format: str | None = None, mapping: Any = None,
              parquet: ParquetMapping | None = None, shard_runs: int = DEFAULT_SHARD_RUNS, frame: bool = False,
              **audit_options: Any) -> Any:
    """Audit runs on a Dask cluster; a lazy dask collection of diagnosis records.

    Args:
        bag_or_paths: trace files, folders, globs or fsspec URLs (a ``str``/``PathLike`` or a list of
            them: JSON, JSONL, Parquet — docs/parquet.md), or a ``dask.bag.Bag`` of parsed trace
            documents (``dict``/``list``) or :class:`~trajaudit.engine.trace.ir.Trajectory` objects.
        client: a ``distributed.Client``; files are planned into shards on its workers (else here).
            The collection is computed wherever you compute it (the default client, usually).
        format, mapping: force an input format, or a mapping YAML (path or adapter) for a custom one.
        parquet: how Parquet rows become runs (:class:`ParquetMapping`).
        shard_runs: runs per task (a range of a large JSONL/Parquet file, or consecutive small files).
        frame: return a dask DataFrame of :data:`DIAGNOSIS_COLUMNS` instead of a bag.
        audit_options: ``strategy``, ``rules``, ``tools``, ``taxonomy``, ``seed``, ``llm``, ``repair``,
            ``default_packs`` — as for :func:`trajaudit.audit` (see :func:`audit_spec`).

    Returns:
        A ``dask.bag.Bag`` of dicts, one per run, in input order within each partition (one partition
        per task: consecutive small files, or a range of a large one): an audited run's ``Diagnosis.to_dict()`` plus ``"error": None``; a run that could
        not be read or audited: ``{"trajectory_id": None, "file", "record", "error": message}`` (after
        the shard's diagnoses). With ``frame=True``, a dask DataFrame of those rows.

    Raises:
        ConfigError: the extra is missing; an unusable option (also UnknownStrategyError, ArgumentTypeError).
    """
    require_dask("audit_bag")
    import dask
    import dask.bag as db

    strategy = audit_options.get("strategy", "offline")
    try:
        default_strategies().get(strategy)
    except LookupError as e:
        raise UnknownStrategyError(str(e.args[0]) if e.args else str(e)) from None
    unknown = set(audit_options) - {"strategy", "rules", "tools", "taxonomy", "seed", "llm", "repair", "default_packs"}
    if unknown:
        raise ConfigError(f"audit_bag(): unknown audit option(s) {', '.join(sorted(unknown))}")
    spec = audit_spec(**audit_options)
    load = LoadSpec(format=format, mapping=mapping_for(format, mapping), parquet=parquet or ParquetMapping(),
                    shard_runs=shard_runs)
    if isinstance(bag_or_paths, db.Bag):
        bag = bag_or_paths.map_partitions(document_records, spec, load)
    else:
        paths: Sequence[Any] = [bag_or_paths] if isinstance(bag_or_paths, (str, os.PathLike)) else list(bag_or_paths)
        groups = group_shards(plan(client, [str(p) for p in paths], load), shard_runs)
        task = dask.delayed(shard_records, pure=True)
        bag = db.from_delayed([task(g, spec, load) for g in groups]) if groups else db.from_sequence([])
    if not frame:
        return bag
    import pandas as pd

    meta = pd.DataFrame({n: pd.Series(dtype={"string": "object", "int64": "Int64", "double": "float64"}[t])
                         for n, t, _ in DIAGNOSIS_COLUMNS})
    return bag.map(diagnosis_row).to_dataframe(meta=meta)


__all__ = ["DIAGNOSIS_COLUMNS", "LoadSpec", "ParquetMapping", "audit_bag", "audit_on_cluster", "audit_spec",
           "connect", "diagnosis_row", "read_diagnoses_parquet", "require_dask", "write_diagnoses_parquet"]
