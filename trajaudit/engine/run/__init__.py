"""Running an audit: evidence gathered once per run → strategy → diagnosis → repair (``pipeline``),
batches serially, streamed or in worker processes (``batch``, ``parallel``), repair prefixes and
directives (``repair_prefix``, ``repair_writer``).

``parallel`` (``--jobs``) and ``repair_prefix`` (``--repair``; it loads ``repair_writer``) are loaded on
first use (PEP 562 ``__getattr__``): ``batch`` and ``pipeline`` refer to them as
``trajaudit.engine.run.parallel`` and ``trajaudit.engine.run.repair_prefix``, so a serial audit without
``--repair`` does not import them.
"""

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
from trajaudit.lazy_names import lazy_names

#: Submodules reachable as attributes before they are imported (see the module docstring).
_SUBMODULES = frozenset({"parallel", "repair_prefix"})


__getattr__, __dir__ = lazy_names(__name__, globals(), {}, _SUBMODULES)


__all__ = ["AuditResult", "AuditSpec", "BatchResult", "audit", "audit_one", "audit_paths", "audit_trajectories",
           "build_context", "clear_caches", "close_context", "gather"]
