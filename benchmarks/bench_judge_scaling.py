"""Is the offline judge's ranking stage linear in run length? (issue 17: "keep the judge linear")

Run: python benchmarks/bench_judge_scaling.py

Synthetic multi-agent runs of N steps (an orchestrator instructing two workers by name, code-runner
outputs without call ids, tool calls with ids, repeated calls) with a validation log of findings on
one step in ten (on tool outputs, user turns and decision steps, so every blame path runs), ranked
with the shipped weights: ``features`` + ``rank``. Prints the CPU time per size and the ratio to the
smallest size side by side in one run; a linear stage grows like N (ratio ≈ N / N0).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trajaudit.engine.strategies.judge_features import features  # noqa: E402
from trajaudit.engine.strategies.judge_weights import shipped_weights  # noqa: E402
from trajaudit.engine.trace.ir import Source, Step, ToolCall, ToolOutput, Trajectory  # noqa: E402
from trajaudit.engine.validation_log import Evidence, Record  # noqa: E402

SIZES = (500, 1000, 2000, 4000)


def run(n: int) -> tuple[Trajectory, list[Record]]:
    """A run of ``n`` steps and its findings."""
    steps: list[Step] = [Step(0, "user", "user", "find the figure and compute the total")]
    i = 1
    while i < n:
        k = i % 6
        if k == 1:
            steps.append(Step(i, "agent", "assistant", f"Coder, please write the script for part {i}", "Planner"))
        elif k == 2:
            steps.append(Step(i, "agent", "assistant", f"```python\nprint({i % 7})\n```", "Coder"))
        elif k == 3:
            steps.append(Step(i, "tool", "tool", "exitcode: 1\nTraceback", tool_output=ToolOutput(None, None, True)))
        elif k == 4:
            steps.append(Step(i, "agent", "assistant", "", "Searcher",
                              (ToolCall("search", {"q": f"term {i % 5}"}, f"c{i}"),)))
        elif k == 5:
            steps.append(Step(i, "tool", "tool", '{"hits": 3}', tool_output=ToolOutput(f"c{i - 1}", "search", False)))
        else:
            steps.append(Step(i, "user", "user", "any news?"))
        i += 1
    t = Trajectory(id=f"n{n}", steps=tuple(steps), source=Source("openai"))
    recs = [Record(step=k, rule_id=f"r.{k % 4}", verdict="fail", severity=("warning", "error")[k % 2],
                   targets=("system_failure",), evidence=(Evidence(f"steps.{k}"),)) for k in range(1, n, 10)]
    return t, recs


def main() -> None:
    w = shipped_weights()
    base = None
    print(f"{'steps':>6} {'CPU s':>8} {'ratio':>6} {'size ratio':>10}")
    for n in SIZES:
        t, recs = run(n)
        t0 = time.process_time()
        for _ in range(3):
            table = features(t, recs, None)
            w.rank(table)
        dt = (time.process_time() - t0) / 3
        base = base or dt
        print(f"{n:>6} {dt:>8.4f} {dt / base:>6.2f} {n / SIZES[0]:>10.1f}")


if __name__ == "__main__":
    import argparse

    # no options: --help describes the script instead of running it (and rewriting its output)
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    main()
