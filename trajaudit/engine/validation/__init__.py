"""Evaluating compiled rules on a run, step by step, into a ValidationLog (``rule_eval``); running a
pack's pass/fail examples through the evaluator (``rule_tests``, for ``trajaudit rules test``)."""

from trajaudit.engine.validation.rule_eval import evaluate

__all__ = ["evaluate"]
