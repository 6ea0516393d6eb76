"""trajaudit: audit LLM-agent trajectories.

Given a failed run, trajaudit says where it broke (the critical step), why (a root-cause category),
who (the responsible agent), with an auditable validation log of evidence.

``audit`` (the pipeline: evidence, claims, strategies, repair) is loaded on first use (PEP 562
``__getattr__``), so ``import trajaudit`` — and every ``trajaudit.*`` import, which runs this file
first — does not load the whole audit stack; ``from trajaudit import audit`` works as usual.
"""

import os as _os
import sys as _sys


def _started_as_command() -> bool:
    """Whether this process is the ``trajaudit`` command starting (``python -m trajaudit``, while
    runpy imports this package, or the console script): Ctrl-C while it imports this package then
    says ``interrupted`` and exits 130, as later (:func:`trajaudit.__main__.run`), instead of a
    ``KeyboardInterrupt`` traceback. ``import trajaudit`` anywhere else is left alone."""
    argv = _sys.orig_argv
    if _sys.argv[:1] == ["-m"]:  # python -m NAME: sys.argv[0] is "-m" until NAME's packages are imported
        return "-mtrajaudit" in argv or ("-m" in argv and argv[argv.index("-m") + 1:][:1] == ["trajaudit"])
    script = _os.path.basename(_sys.argv[0]) if _sys.argv else ""
    return _os.path.splitext(script)[0] in ("trajaudit", "trajaudit-script")


try:  # most of the command's start-up is these imports: the window a Ctrl-C most often hits
    from trajaudit.checkers.registry import default_checkers, register_checker
    from trajaudit.engine.diagnosis import Diagnosis
    from trajaudit.engine.packs.compile import CompiledRule, compile_rules
    from trajaudit.engine.packs.pack import RulePack, load_pack
    from trajaudit.engine.trace.adapters.base import LoadOptions
    from trajaudit.engine.trace.ir import Source, Step, ToolCall, ToolOutput, Trajectory
    from trajaudit.engine.trace.loader import LoadResult, iter_load, load, load_many, load_path
    from trajaudit.engine.validation.rule_eval import evaluate
    from trajaudit.errors import TraceFormatError, TrajauditError
    from trajaudit.lazy_names import lazy_names
except KeyboardInterrupt:
    if not _started_as_command():
        raise
    _sys.stderr.write("interrupted\n")
    raise SystemExit(130) from None  # trajaudit.cli.common.EXIT_INTERRUPTED (not imported yet)

__version__ = "0.1.0"

__all__ = [
    "Diagnosis",
    "audit",
    "CompiledRule",
    "LoadOptions",
    "Monitor",
    "MonitorError",
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


#: Public names loaded on first use: name -> defining module.
_LAZY = {"audit": "trajaudit.engine.run.pipeline", "Monitor": "trajaudit.engine.run.monitor",
         "MonitorError": "trajaudit.engine.run.monitor"}
#: Submodules reachable as attributes before they are imported: ``trajaudit.distributed`` (the Dask
#: batch, which ``audit --scheduler`` refers to; a local audit does not import it nor ``run.cluster``),
#: ``trajaudit.safe_yaml`` (its errors subclass PyYAML's: the modules a local audit imports refer to it
#: as ``trajaudit.safe_yaml`` where they parse YAML, so an audit from cached packs imports no PyYAML).
_SUBMODULES = frozenset({"distributed", "safe_yaml"})
#: The public subpackages and modules, listed by ``dir(trajaudit)`` (the others — ``disk_cache``,
#: ``regular_files``, ``safe_json``, ``safe_yaml`` … — are the library's plumbing).
_PUBLIC_MODULES = frozenset({"checkers", "citation", "cli", "distributed", "engine", "errors", "eval", "llm",
                             "online", "report"})


__getattr__, __dir__ = lazy_names(__name__, globals(), _LAZY, _SUBMODULES, _PUBLIC_MODULES)
