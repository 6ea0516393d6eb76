"""Peak memory of `trajaudit audit` on a large batch (evaluation teams audit thousands of runs).

Builds a JSONL of the 29 tau-retail runs copied ``--copies`` times (new ids; the hidden ``info`` field
dropped), then runs the CLI in a fresh process, with and without an HTML report, and reports the
peak resident set size (``getrusage(RUSAGE_CHILDREN).ru_maxrss``, Linux: KiB) and the wall time.
Two batch sizes give the memory per added run (the slope), which is what decides whether ten
thousand runs fit in memory.

Run: ``python benchmarks/bench_memory.py [--copies 10 40]``. Figures in docs/perf.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TAU = ROOT.parent / "shared" / "data" / "tau_retail"


def make_batch(copies: int, folder: Path) -> Path:
    """A JSONL file of ``29 × copies`` runs."""
    runs = json.loads((TAU / "trajectories.json").read_text(encoding="utf-8"))
    path = folder / f"tau_x{copies}.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for k in range(copies):
            for r in runs:
                f.write(json.dumps({**{x: v for x, v in r.items() if x != "info"}, "task_id": f"{r['task_id']}-{k}"}) + "\n")
    return path


def make_folder(copies: int, folder: Path) -> Path:
    """A folder of ``29 × copies`` files, one run each (the shape of Who&When's data)."""
    out = folder / f"tau_files_x{copies}"
    out.mkdir()
    for i, line in enumerate(make_batch(copies, folder).read_text(encoding="utf-8").splitlines()):
        (out / f"run{i:05d}.json").write_text(line, encoding="utf-8")
    return out


def peak_kib(args: list[str]) -> tuple[int, float]:
    """Run ``python -m trajaudit ARGS`` in a fresh process: ``(peak RSS in KiB, wall seconds)``."""
    code = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
            "p = subprocess.run([sys.executable, '-m', 'trajaudit', *sys.argv[1:]], capture_output=True); "
            "assert p.returncode == 0, p.stderr[-2000:]; "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, time.perf_counter() - t)")
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, check=True)
    kib, secs = out.stdout.split()
    return int(kib), float(secs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--copies", type=int, nargs=2, default=[10, 40], help="two batch sizes, in copies of the 29 runs")
    args = ap.parse_args(argv)
    tools = str(TAU / "tools.json")
    with tempfile.TemporaryDirectory(prefix="trajaudit-mem-") as tmp:
        folder = Path(tmp)
        res: dict[tuple[str, int], tuple[int, float]] = {}
        labels = ("one JSONL file", "one JSONL + HTML report", "a folder of files")
        for copies in args.copies:
            batch = make_batch(copies, folder)
            files = make_folder(copies, folder)
            for label, src, extra in ((labels[0], batch, []), (labels[1], batch, ["--report", str(folder / "r.html")]),
                                      (labels[2], files, [])):
                res[(label, copies)] = peak_kib(["audit", str(src), "--tools", tools, "-o", str(folder / "d.jsonl"),
                                                 "-q", *extra])
        lo, hi = args.copies
        print(f"python {sys.version.split()[0]}; peak RSS of `trajaudit audit` (fresh process), tau runs × copies")
        for label in labels:
            (k1, t1), (k2, t2) = res[(label, lo)], res[(label, hi)]
            slope = (k2 - k1) / (29 * (hi - lo))
            print(f"  {label:23s}: {29 * lo} runs {k1 / 1024:6.0f} MiB ({t1:4.1f} s); {29 * hi} runs {k2 / 1024:6.0f} MiB "
                  f"({t2:4.1f} s); {slope:5.0f} KiB per added run")
    return 0


if __name__ == "__main__":
    started = time.perf_counter()
    code = main()
    print(f"(benchmark wall time {time.perf_counter() - started:.0f} s)")
    raise SystemExit(code)
