"""Running an audit: evidence gathered once per run → strategy → diagnosis → repair (``pipeline``),
batches serially, streamed or in worker processes (``batch``, ``parallel``), repair prefixes and
directives (``repair_prefix``, ``repair_writer``)."""

from trajaudit.engine.run.batch import BatchResult, audit_paths, audit_trajectories
from trajaudit.engine.run.evidence import clear_caches, gather
from trajaudit.engine.run.pipeline import (
           AuditResult,
           AuditSpec,
           audit,
           audit_one,
           build_context,
           close_context,
)

__all__ = ["AuditResult", "AuditSpec", "BatchResult", "audit", "audit_one", "audit_paths", "audit_trajectories",
           "build_context", "clear_caches", "close_context", "gather"]
