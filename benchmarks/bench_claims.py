"""Claim benchmark: CPU time to extract claims and build the claim graph (+ propagation) for all 155
real runs, and the time on adversarial input (MBs of HTML, binary-looking text, non-Latin scripts).

Run: python benchmarks/bench_claims.py [--repeat N]
Target (issue 5): extraction + graph building for the 29 tau-retail + 126 Who&When runs in < 2 s CPU.
Loading is not timed (see bench_loader.py).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's trajaudit wins

from trajaudit import load_many  # noqa: E402
from trajaudit.engine.claims import build_claim_graph  # noqa: E402
from trajaudit.engine.trace.ir import Source, Step, ToolCall, ToolOutput, Trajectory  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
PATHS = [DATA / "tau_retail" / "trajectories.json", DATA / "who_and_when" / "algorithm_generated"]


def adversarial(mb: float = 5.0) -> Trajectory:
    """A run whose tool output is ``mb`` MB of HTML full of numbers, then binary-looking and non-Latin text."""
    rng = random.Random(0)
    row = "<tr><td class='p'>#W{0}</td><td>${1:,}.{2:02d}</td><td>{3}-{4:02d}-{5:02d}</td><td>1.234,5 €</td></tr>\n"
    html = "".join(row.format(rng.randrange(10**6, 10**7), rng.randrange(10**6), rng.randrange(100),
                              rng.randrange(1990, 2030), rng.randrange(1, 13), rng.randrange(1, 29))
                   for _ in range(int(mb * 1e6 / 90)))
    binary = "".join(chr(rng.randrange(33, 0x2FFF)) for _ in range(300_000))
    cjk = "订单号 #W1234567 已取消，金额 ¥1,234.50。" * 5000 + "العدد ١٢٣٤٥ متاح " * 5000
    agent = ("I found order #W9999999 worth $12,345.67 and 11 available options; saved to out.csv. " * 300
             + binary[:50_000])
    steps = (
        Step(index=0, kind="user", role="user", content="list my orders " + cjk),
        Step(index=1, kind="agent", role="assistant", agent="a",
             tool_calls=(ToolCall(name="get_orders", arguments={"q": "x"}, id="1"),)),
        Step(index=2, kind="tool", role="tool", content=html + binary, tool_output=ToolOutput(call_id="1")),
        Step(index=3, kind="agent", role="assistant", agent="a", content=agent + cjk),
    )
    return Trajectory(id="adversarial", steps=steps, source=Source(format="openai"), final_answer=agent)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    runs = load_many(PATHS).trajectories
    times, n_claims, n_err = [], 0, 0
    for _ in range(args.repeat):
        t0 = time.process_time()
        graphs = [build_claim_graph(t) for t in runs]
        props = [g.propagate() for g in graphs]
        times.append(time.process_time() - t0)
        n_claims = sum(len(g.claims) for g in graphs)
        n_err = sum(1 for p in props if p.error_steps)
    chars = sum(len(s.content) for t in runs for s in t.steps)
    print(f"runs={len(runs)}  chars={chars:,}  claims={n_claims:,}  runs with error steps={n_err}")
    print(f"extraction + support + graph + propagation: best CPU {min(times):.3f} s  "
          f"median {sorted(times)[len(times) // 2]:.3f} s  (target < 2 s)")
    adv = adversarial()
    size = sum(len(s.content) for s in adv.steps)
    t0 = time.process_time()
    g = build_claim_graph(adv)
    g.propagate()
    print(f"adversarial run ({size / 1e6:.1f} M chars: HTML, binary-looking, CJK/Arabic): "
          f"CPU {time.process_time() - t0:.3f} s, {len(g.claims)} claims, incomplete={len(g.incomplete)}")


if __name__ == "__main__":
    main()
