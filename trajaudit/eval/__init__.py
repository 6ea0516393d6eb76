"""The evaluation harness: gold loaders, metrics of the four papers, reports, and a strategy runner.

Public API::

    gold = load_gold("ground_truth.json")                 # dict[key, GoldItem], 0-based steps
    report = evaluate(gold, diagnoses, trajectories=runs)  # EvalReport
    report.to_dict(); report.to_markdown(); report.render(console)
"""

from trajaudit.eval.evaluate import RepairGrader, evaluate
from trajaudit.eval.gold import GoldFailure, GoldFormatError, GoldItem, GoldSet, detect_gold_format, load_gold
from trajaudit.eval.report import EvalReport, MetricValue, RunScore
from trajaudit.eval.runner import RunOutput, offline_strategies, read_diagnoses, run_on_paths, run_strategy

__all__ = [
    "EvalReport",
    "GoldFailure",
    "GoldFormatError",
    "GoldItem",
    "GoldSet",
    "MetricValue",
    "RepairGrader",
    "RunOutput",
    "RunScore",
    "detect_gold_format",
    "evaluate",
    "load_gold",
    "offline_strategies",
    "read_diagnoses",
    "run_on_paths",
    "run_strategy",
]
