"""The offline judge's weights file: a linear ranker over candidate-step features, and its calibration.

The weights are data (JSON, validated by ``trajaudit/schemas/judge_weights.schema.json``), never a
pickle: a file a person can read, diff and review. Applying them needs nothing beyond the standard
library; fitting them (:mod:`trajaudit.eval.fit`) needs scikit-learn (``trajaudit[fit]``).

Scoring: ``score = intercept + Σ weights[f] · features[f]`` over :data:`~trajaudit.engine.strategies.judge_features.FEATURES`
(raw feature values; any standardization used while fitting is folded into the weights). The judge
picks the candidate with the highest score. Confidence: Platt scaling of the winner's score and its
margin over the runner-up, fitted on held-out folds — ``p = σ(a · score + b · margin + c)`` — so it
reads as the probability that the chosen step is the gold critical step.

File layout::

    {"format": "trajaudit-judge-weights", "version": 1,
     "weights": {"feature name": float, ...}, "intercept": float,
     "calibration": {"method": "platt", "score": a, "margin": b, "intercept": c},
     "fit": {... how it was fitted and its cross-validated figures (free form) ...}}

A feature missing from ``weights`` weighs 0 (a file fitted before a feature existed still applies);
an unknown feature name is an error (a file from a newer trajaudit, or a typo).
"""

from __future__ import annotations

import json
import math
import operator
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from trajaudit import safe_json
from trajaudit.engine.schema import fast_accepts
from trajaudit.engine.strategies.judge_features import FEATURES, FeatureTable
from trajaudit.errors import TrajauditError

WEIGHTS_FORMAT = "trajaudit-judge-weights"
WEIGHTS_VERSION = 1
#: The shipped weights (package data), fitted on the two annotated development sets.
SHIPPED = "offline_judge.json"
#: Key of the weights an audit uses (``--judge-weights``) in ``AuditContext.strategy_options["offline"]``.
WEIGHTS_KEY = "judge_weights"


class JudgeWeightsError(TrajauditError):
    """A weights file cannot be read or is invalid. ``file`` names it."""

    def __init__(self, message: str, *, file: str | None = None) -> None:
        self.message, self.file = message, file
        super().__init__(f"{file}: {message}" if file else message)


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@dataclass(frozen=True)
class Calibration:
    """Platt scaling of the winner's score and margin: ``p = σ(score_coef·s + margin_coef·m + intercept)``.

    Attributes:
        score_coef, margin_coef, intercept: the fitted coefficients.
    """

    score_coef: float = 1.0
    margin_coef: float = 0.0
    intercept: float = 0.0

    def probability(self, score: float, margin: float) -> float:
        """Calibrated probability (0..1) that the winner is the critical step."""
        return _sigmoid(self.score_coef * score + self.margin_coef * margin + self.intercept)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"method": "platt", "score": self.score_coef, "margin": self.margin_coef, "intercept": self.intercept}


@dataclass(frozen=True)
class JudgeWeights:
    """A linear ranker over candidate-step features plus its calibration.

    Attributes:
        weights: ``{feature name: weight}`` (raw feature scale); absent features weigh 0.
        intercept: added to every score (does not change the ranking; the calibration reads it).
        calibration: the :class:`Calibration` of the confidence.
        fit: how the weights were fitted (data sizes, regularization, cross-validated figures).
        source: where they were read from (a path or ``shipped``), for messages.
    """

    weights: dict[str, float]
    intercept: float = 0.0
    calibration: Calibration = field(default_factory=Calibration)
    fit: dict[str, Any] = field(default_factory=dict)
    source: str = "memory"

    @property
    def vector(self) -> tuple[float, ...]:
        """The weights in :data:`FEATURES` order (found again only when :attr:`weights` no longer equals
        the copy it was found from: sorting and hashing the items per diagnosis cost more than comparing)."""
        memo = self.__dict__.get("_vector_memo")
        if memo is not None and memo[0] == self.weights:
            return memo[1]
        vec = _vector(tuple(sorted(self.weights.items())))
        object.__setattr__(self, "_vector_memo", (dict(self.weights), vec))  # not a field: eq, repr, replace ignore it
        return vec

    def score_rows(self, rows: list[list[float]]) -> list[float]:
        """The score of each feature row."""
        w = self.vector
        b = self.intercept
        n = len(w)
        mul = operator.mul
        for row in rows:
            if len(row) != n:
                raise ValueError(f"a feature row has {len(row)} values, the weights {n}")
        # sum(map(mul, w, row)) is sum(wi * xi for wi, xi in zip(w, row)): the same products added by
        # the same sum() in the same order (bit for bit), without a generator frame per row
        return [b + sum(map(mul, w, row)) for row in rows]

    def rank(self, table: FeatureTable) -> list[tuple[int, float]]:
        """``[(candidate position, score)]`` best first; ties go to the earlier step."""
        scores = self.score_rows(table.rows)
        return sorted(enumerate(scores), key=lambda kv: (-kv[1], kv[0]))

    def confidence(self, ranked: list[tuple[int, float]]) -> float:
        """Calibrated probability that the best of ``ranked`` (from :meth:`rank`) is the critical step."""
        if not ranked:
            return 0.0
        top = ranked[0][1]
        margin = top - ranked[1][1] if len(ranked) > 1 else 0.0
        return self.calibration.probability(top, margin)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (valid against ``judge_weights.schema.json``)."""
        return {"format": WEIGHTS_FORMAT, "version": WEIGHTS_VERSION,
                "weights": {f: self.weights[f] for f in FEATURES if f in self.weights},
                "intercept": self.intercept, "calibration": self.calibration.to_dict(), "fit": self.fit}

    def save(self, path: str | Path) -> None:
        """Write the JSON file (indented, features in :data:`FEATURES` order).

        Raises:
            JudgeWeightsError: the file cannot be written.
        """
        try:
            Path(path).write_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        except OSError as e:
            raise JudgeWeightsError(f"cannot write the weights: {e.strerror or e}", file=str(path)) from None

    @classmethod
    def from_dict(cls, data: Any, source: str = "memory") -> JudgeWeights:
        """Validate and build from the JSON form.

        Raises:
            JudgeWeightsError: not the weights format, a schema error (with its JSON path), or an
                unknown feature name (naming ``source``).
        """
        errors = [] if fast_accepts("judge_weights", data) else _schema_errors(data)
        if errors:
            e = errors[0]
            where = "/".join(str(p) for p in e.absolute_path) or "(top level)"
            said = e.message if len(e.message) <= 240 else e.message[:200] + " …"  # jsonschema quotes the whole value
            raise JudgeWeightsError(f"not a valid judge weights file at {where}: {said}", file=source)
        unknown = sorted(set(data["weights"]) - set(FEATURES))
        if unknown:
            raise JudgeWeightsError(f"unknown feature(s) {', '.join(unknown)} (known: see docs/judge.md); "
                                    "a file from a newer trajaudit?", file=source)
        cal = data.get("calibration") or {}
        return cls(weights={k: float(v) for k, v in data["weights"].items()}, intercept=float(data.get("intercept", 0.0)),
                   calibration=Calibration(float(cal.get("score", 1.0)), float(cal.get("margin", 0.0)),
                                           float(cal.get("intercept", 0.0))),
                   fit=dict(data.get("fit") or {}), source=source)


@lru_cache(maxsize=None)
def _vector(items: tuple[tuple[str, float], ...]) -> tuple[float, ...]:
    d = dict(items)
    return tuple(d.get(f, 0.0) for f in FEATURES)


def _schema_errors(data: Any) -> list[Any]:
    """jsonschema's errors for ``data`` against the weights schema, by path (imported here: the
    compiled fast path accepts valid files, so an audit with the shipped weights never loads it)."""
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(_schema())
    return sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))


@lru_cache(maxsize=1)
def _schema() -> dict[str, Any]:
    text = resources.files("trajaudit").joinpath("schemas", "judge_weights.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


def load_weights(path: str | Path) -> JudgeWeights:
    """Read and validate a weights file.

    Raises:
        JudgeWeightsError: the file is missing, unreadable, not JSON, or invalid (names the file).
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise JudgeWeightsError(f"cannot read the weights: {e.strerror or e}", file=str(path)) from None
    except UnicodeDecodeError as e:
        raise JudgeWeightsError(f"not UTF-8 text: {e.reason}", file=str(path)) from None
    try:
        data = safe_json.loads(text, allow_nan=False)
    except ValueError as e:
        raise JudgeWeightsError(f"not JSON: {e}", file=str(path)) from None
    return JudgeWeights.from_dict(data, source=str(path))


@lru_cache(maxsize=1)
def shipped_weights() -> JudgeWeights:
    """The weights shipped with trajaudit (``trajaudit/weights/offline_judge.json``), read once.

    Raises:
        JudgeWeightsError: the shipped file is invalid (a packaging bug, reported clearly).
    """
    ref = resources.files("trajaudit").joinpath("weights", SHIPPED)
    try:
        data = safe_json.loads(ref.read_text(encoding="utf-8"), allow_nan=False)
    except (OSError, ValueError) as e:
        raise JudgeWeightsError(f"cannot read the shipped weights: {e}", file=f"trajaudit/weights/{SHIPPED}") from None
    return JudgeWeights.from_dict(data, source=f"shipped ({SHIPPED})")
