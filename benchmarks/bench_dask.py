"""Throughput of `trajaudit audit --scheduler` (Dask) against the local paths, on the dev sets.

The batch: the Who&When folder (126 files, one run each) and the tau-retail file (29 runs in one JSON
file), copied ``--repeat`` times (default 20) into a temporary folder: 3,100 runs in 2,540 files. Four
ways to audit it, side by side in one process, each timed from its first run to its last result:

- ``serial``: ``audit_paths`` in this process (``audit`` without options);
- ``jobs 2``: ``audit_paths(jobs=2)`` (``audit --jobs 2``: forked worker processes);
- ``dask 1`` / ``dask 2``: ``audit_on_cluster`` on a LocalCluster of 1 / 2 worker processes of one
  thread each (``audit --scheduler local:1/2``); the cluster's start-up is timed apart.

Printed: runs/s of each, the CPU time of all the processes involved (client, scheduler, workers:
``getrusage`` and psutil), the 2-worker/1-worker ratio of Dask (and of --jobs against serial, for
comparison), and the overhead per run of Dask against the local path with the same number of
processes, in wall time ``(t_dask N - t_local N) / runs`` and in CPU time. Every mode's diagnoses are checked identical to
the serial ones. The host is shared (2 cores, other jobs running): wall-clock figures are noisy, the
ratios measured side by side are what to read.

Run: ``python benchmarks/bench_dask.py [--repeat 20] [--out benchmarks/bench_dask.txt]``.
Needs ``pip install 'trajaudit[dask]'`` and the dev data beside the repository (../shared/data).
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = Path(os.environ.get("TRAJAUDIT_TEST_DATA") or ROOT.parent / "shared" / "data")
WW = DATA / "who_and_when" / "algorithm_generated"
TAU = DATA / "tau_retail" / "trajectories.json"

from trajaudit.distributed import connect  # noqa: E402
from trajaudit.engine.run.batch import audit_paths  # noqa: E402
from trajaudit.engine.run.cluster import LoadSpec, audit_on_cluster  # noqa: E402
from trajaudit.engine.run.pipeline import AuditSpec  # noqa: E402


def make_batch(folder: Path, repeat: int) -> Path:
    """``repeat`` copies of the Who&When folder and the tau file under ``folder`` (copies, not links:
    the loader reads a file reached twice once)."""
    for k in range(repeat):
        shutil.copytree(WW, folder / f"copy{k:02d}" / "who_and_when")
        shutil.copy(TAU, folder / f"copy{k:02d}" / "tau.json")
    return folder


def _collect() -> tuple[dict[int, str], object]:
    lines: dict[int, str] = {}
    return lines, lambda i, r: lines.__setitem__(i, r.diagnosis.to_json())


def _cpu(children: list | None = None) -> float:
    """CPU seconds (user + system) of this process, its reaped children, and the live ``children``."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    live = sum(sum(p.cpu_times()[:2]) for p in children or [])
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime + live


def run_local(batch: Path, jobs: int) -> tuple[float, float, list[str]]:
    lines, add = _collect()
    c0, t0 = _cpu(), time.perf_counter()
    res = audit_paths([str(batch)], AuditSpec(), jobs=jobs, on_result=add)
    dt, cpu = time.perf_counter() - t0, _cpu() - c0
    assert not res.problems, res.problems[:3]
    return dt, cpu, [lines[i] for i in sorted(lines)]


def run_dask(batch: Path, workers: int) -> tuple[float, float, float, list[str]]:
    import psutil

    t0 = time.perf_counter()
    with connect(f"local:{workers}") as client:  # the cluster `audit --scheduler local:N` starts
        startup = time.perf_counter() - t0
        procs = psutil.Process().children(recursive=True)  # the nannies and worker processes
        lines, add = _collect()
        c0, t0 = _cpu(procs), time.perf_counter()
        res = audit_on_cluster(client, [str(batch)], AuditSpec(), LoadSpec(), on_result=add)
        dt, cpu = time.perf_counter() - t0, _cpu(procs) - c0
        assert not res.problems, res.problems[:3]
    return dt, cpu, startup, [lines[i] for i in sorted(lines)]


def main() -> None:
    """Build the batch, audit it four ways, print (and with ``--out`` write) the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=20, help="copies of the dev sets (default 20)")
    ap.add_argument("--out", help="also write the table to this file")
    args = ap.parse_args()
    if not WW.exists() or not TAU.exists():
        sys.exit(f"dev data not found at {DATA} (expected ../shared/data beside the repository)")
    logging.getLogger("distributed").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        batch = make_batch(Path(tmp), args.repeat)
        t_serial, c_serial, want = run_local(batch, 1)
        t_jobs2, c_jobs2, got = run_local(batch, 2)
        assert got == want, "--jobs 2 differs from serial"
        t_dask1, c_dask1, up1, got = run_dask(batch, 1)
        assert got == want, "dask 1 worker differs from serial"
        t_dask2, c_dask2, up2, got = run_dask(batch, 2)
        assert got == want, "dask 2 workers differ from serial"
    n = len(want)
    rows = [("serial", t_serial, c_serial), ("jobs 2", t_jobs2, c_jobs2), ("dask 1 worker", t_dask1, c_dask1),
            ("dask 2 workers", t_dask2, c_dask2)]
    out = [f"bench_dask: {n} runs (Who&When folder + tau file, x{args.repeat}), {os.cpu_count()} cores; "
           "the host is SHARED with other jobs: wall-clock figures are noisy, read the side-by-side ratios "
           "and the CPU time (all processes: client, scheduler, workers)",
           "", f"{'mode':<16}{'seconds':>9}{'runs/s':>9}{'CPU s':>9}{'CPU ms/run':>12}"]
    out += [f"{name:<16}{t:>9.2f}{n / t:>9.1f}{c:>9.1f}{1000 * c / n:>12.2f}" for name, t, c in rows]
    out += ["",
            f"dask 2 workers / 1 worker throughput: {t_dask1 / t_dask2:.2f}x   "
            f"(--jobs 2 / serial: {t_serial / t_jobs2:.2f}x)",
            f"dask overhead per run, wall: 1 process {1000 * (t_dask1 - t_serial) / n:+.2f} ms vs serial; "
            f"2 processes {1000 * (t_dask2 - t_jobs2) / n:+.2f} ms vs --jobs 2",
            f"dask overhead per run, CPU:  1 process {1000 * (c_dask1 - c_serial) / n:+.2f} ms vs serial; "
            f"2 processes {1000 * (c_dask2 - c_jobs2) / n:+.2f} ms vs --jobs 2",
            f"LocalCluster start-up (not in the times above): {up1:.1f} s (1 worker), {up2:.1f} s (2 workers)",
            "diagnoses: identical in all four modes"]
    text = "\n".join(out)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
