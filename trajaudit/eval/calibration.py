"""Is the confidence a probability? Reliability table, expected calibration error, selective accuracy.

A diagnosis's ``confidence`` should read as the probability that its critical step is right. Given
``(confidence, correct)`` pairs (one per run), :func:`reliability` bins the confidences into equal-
width bins and compares each bin's mean confidence with its accuracy (a reliability diagram as a
table), and summarizes:

- **ECE** (expected calibration error; Naeini et al. 2015, Guo et al. 2017):
  ``Σ_bins (n_b / N) · |accuracy_b − mean confidence_b|`` — 0 for a perfectly calibrated judge.
- **Accuracy at 50% coverage**: keep the half of the runs with the highest confidence (ties broken
  by run order) and report their accuracy — what a team gets by reviewing only the diagnoses the
  judge is surest of. A confidence that ranks runs well makes it higher than the overall accuracy.
- **Brier score**: mean squared difference between confidence and outcome.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["reliability"]


def reliability(pairs: Sequence[tuple[float, bool]], bins: int = 10) -> dict[str, Any]:
    """Reliability figures of ``(confidence, correct)`` pairs.

    Args:
        pairs: one per scored run; confidences are clipped to [0, 1].
        bins: number of equal-width bins over [0, 1] (the last bin includes 1.0).

    Returns:
        ``{"n", "accuracy", "mean_confidence", "ece", "brier", "accuracy_at_50", "table"}`` where
        ``table`` is ``[{"lo", "hi", "n", "confidence", "accuracy"}]`` for the non-empty bins; the
        rates are ``None`` when ``pairs`` is empty.

    Raises:
        ValueError: ``bins`` < 1, or a confidence that is not a finite number.
    """
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    clean: list[tuple[float, bool]] = []
    for c, ok in pairs:
        c = float(c)
        if not math.isfinite(c):
            raise ValueError(f"confidence must be a finite number, got {c!r}")
        clean.append((min(1.0, max(0.0, c)), bool(ok)))
    n = len(clean)
    if n == 0:
        return {"n": 0, "accuracy": None, "mean_confidence": None, "ece": None, "brier": None,
                "accuracy_at_50": None, "table": []}
    groups: list[list[tuple[float, bool]]] = [[] for _ in range(bins)]
    for c, ok in clean:
        groups[min(bins - 1, int(c * bins))].append((c, ok))
    table = []
    ece = 0.0
    for b, g in enumerate(groups):
        if not g:
            continue
        conf = sum(c for c, _ in g) / len(g)
        acc = sum(ok for _, ok in g) / len(g)
        ece += len(g) / n * abs(acc - conf)
        table.append({"lo": b / bins, "hi": (b + 1) / bins, "n": len(g), "confidence": conf, "accuracy": acc})
    order = sorted(range(n), key=lambda i: (-clean[i][0], i))
    half = order[: max(1, math.ceil(n / 2))]
    return {"n": n, "accuracy": sum(ok for _, ok in clean) / n, "mean_confidence": sum(c for c, _ in clean) / n,
            "ece": ece, "brier": sum((c - ok) ** 2 for c, ok in clean) / n,
            "accuracy_at_50": sum(clean[i][1] for i in half) / len(half), "table": table}
