"""trajaudit: audit LLM-agent trajectories.

Given a failed run, trajaudit says where it broke (the critical step), why (a root-cause category),
who (the responsible agent), with an auditable validation log of evidence.
"""

from trajaudit.checkers.registry import default_checkers, register_checker
from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.packs.compile import CompiledRule, compile_rules
from trajaudit.engine.packs.pack import RulePack, load_pack
from trajaudit.engine.run.pipeline import audit
from trajaudit.engine.trace.adapters.base import LoadOptions
from trajaudit.engine.trace.ir import Source, Step, ToolCall, ToolOutput, Trajectory
from trajaudit.engine.trace.loader import LoadResult, iter_load, load, load_many, load_path
from trajaudit.engine.validation.rule_eval import evaluate
from trajaudit.errors import TraceFormatError, TrajauditError

__version__ = "0.1.0"

__all__ = [
    "Diagnosis",
    "audit",
    "CompiledRule",
    "LoadOptions",
    "LoadResult",
    "RulePack",
    "Source",
    "Step",
    "ToolCall",
    "ToolOutput",
    "TraceFormatError",
    "Trajectory",
    "TrajauditError",
    "compile_rules",
    "default_checkers",
    "evaluate",
    "iter_load",
    "load",
    "load_many",
    "load_pack",
    "load_path",
    "register_checker",
]
