"""Citation-audit benchmark: CPU time of the offline judge on synthetic deep-research runs of growing size.

Run: PYTHONPATH=. python benchmarks/bench_citation.py [--sizes 5,20,50] [--repeat 3]
Each size S builds S searchers (one 8-sentence document each, 4 output sentences), S/5 researchers
(reading 5 searchers, 10 output sentences) and one orchestrator (reading all researcher notes, 2 sentences
per researcher). Prints load + audit CPU time and sentences evaluated per second.
"""

from __future__ import annotations

import argparse
import random
import time

from trajaudit.citation import OfflineCitationJudge, audit_citations, run_from_dict
from trajaudit.citation.judge import _features

WORDS = ("market battery charging sales price growth region policy subsidy vehicle fleet grid capacity demand "
         "supply lithium nickel factory export import tariff consumer range model segment").split()


def _sentence(rng: random.Random) -> str:
    w = rng.sample(WORDS, 7)
    return f"{w[0].title()} {w[1]} {w[2]} rose {rng.randint(2, 90)}% in {rng.randint(2015, 2024)} across {w[3]} {w[4]}."


def synthetic_run(size: int, seed: int = 0) -> dict:
    """A citation-run document with ``size`` searchers (see module doc)."""
    rng = random.Random(seed)
    docs = [{"id": f"D{i}", "text": " ".join(_sentence(rng) for _ in range(8))} for i in range(size)]
    invs = []
    for i, d in enumerate(docs):
        sents = d["text"].split(". ")
        invs.append({"id": f"searcher-{i}", "agent": "searcher", "inputs": [{"document": d["id"]}],
                     "outputs": [s.rstrip(".") + f" [D{i}]." for s in rng.sample(sents, 4)]})
    researchers = []
    for r in range(max(1, size // 5)):
        group = [f"searcher-{i}" for i in range(r * 5, min(size, r * 5 + 5))]
        inputs = [{"from": g} for g in group]
        outs = []
        for _ in range(10):
            g = rng.choice(group)
            k = int(g.split("-")[1])
            outs.append(invs[k]["outputs"][rng.randrange(4)] if rng.random() < 0.8 else _sentence(rng))
        invs.append({"id": f"researcher-{r}", "agent": "researcher", "inputs": inputs, "outputs": outs})
        researchers.append(invs[-1])
    final = [o for r in researchers for o in rng.sample(r["outputs"], 2)]
    invs.append({"id": "orchestrator", "agent": "orchestrator",
                 "inputs": [{"from": r["id"]} for r in researchers], "outputs": final})
    return {"format": "trajaudit.citation-run", "id": f"synthetic-{size}", "documents": docs, "invocations": invs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="5,20,50")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    for size in (int(s) for s in args.sizes.split(",")):
        doc = synthetic_run(size)
        best = None
        for _ in range(args.repeat):
            _features.cache_clear()  # time cold runs
            t0 = time.process_time()
            run = run_from_dict(doc)
            report = audit_citations(run, OfflineCitationJudge())
            dt = time.process_time() - t0
            best = dt if best is None else min(best, dt)
        n = sum(len(rs) for rs in report.results.values())
        print(f"searchers={size:3}  invocations={len(run.invocations):3}  output sentences={n:4}  "
              f"traced errors={len(report.traced):3}  best CPU {best:.3f} s  ({n / best:.0f} sentences/s)")


if __name__ == "__main__":
    main()
