"""Programmatic checkers: plain Python functions registered by name with a declared argument schema.

A rule calls one with ``check: {checker: NAME, args: {...}}``. The compiler looks the name up (an
unknown name is a :class:`~trajaudit.errors.RulePackError` with close-match suggestions), validates
``args`` against the checker's JSON Schema and its optional ``validate`` hook (e.g. a regex that does
not compile) once, at load time. At run time the checker gets a :class:`CheckContext` and returns a
:class:`CheckResult`. AgentRx §3.2: "programmatic checks … executed on structured fields".
"""

from __future__ import annotations

from trajaudit.checkers.base import CheckContext, Checker, CheckResult, CheckVerdict, register_checker
from trajaudit.checkers.builtin import register_builtin_checkers
from trajaudit.registry import Registry

__all__ = ["CheckContext", "CheckResult", "CheckVerdict", "Checker", "default_checkers", "register_checker"]


def default_checkers() -> Registry[Checker]:
    """A new registry holding the shipped checkers (see ``trajaudit.checkers.builtin``)."""
    reg: Registry[Checker] = Registry("checker")
    register_builtin_checkers(reg)
    return reg
