"""trajaudit: audit LLM-agent trajectories.

Given a failed run, trajaudit says where it broke (the critical step), why (a root-cause category),
who (the responsible agent), with an auditable validation log of evidence.
"""

from trajaudit.engine.ir import Source, Step, ToolCall, ToolOutput, Trajectory
from trajaudit.engine.loader import LoadResult, load, load_many, load_path
from trajaudit.errors import TraceFormatError, TrajauditError

__version__ = "0.1.0"

__all__ = [
    "LoadResult",
    "Source",
    "Step",
    "ToolCall",
    "ToolOutput",
    "TraceFormatError",
    "Trajectory",
    "TrajauditError",
    "load",
    "load_many",
    "load_path",
]
