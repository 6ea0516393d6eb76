"""tau-bench result records (``{task_id, reward, traj, trial, info, ...}``).

``traj`` holds OpenAI chat messages, each with ``index`` = its 1-based position. The ``info`` field is
the benchmark's hidden gold (the user simulator's script, gold actions, grader): this adapter never
reads it and it does not enter the IR.

Step numbering: ``Step.index`` is 0-based; ``Step.source_number`` keeps tau's 1-based ``index``, so an
AgentRx ``step_number`` n is ``Step.index == n - 1``.
"""

from __future__ import annotations

from typing import Any

from trajaudit.engine.trace.adapters.base import (
    LoadOptions,
    Sniff,
    assemble,
    build_steps,
    classify_openai,
    first_user_text,
    is_run_list,
)
from trajaudit.engine.trace.ir import Source, Trajectory
from trajaudit.errors import TraceFormatError

# Fields of a tau record that are safe to keep (never ``info`` or ``reward``'s grader details).
_KEEP = ("task_id", "trial", "reward")


def _is_record(x: Any) -> bool:
    return isinstance(x, dict) and "traj" in x


class TauAdapter:
    """tau-bench records: one record or a list of records with ``traj``."""

    name = "tau"
    description = "tau-bench result records ({task_id, traj, ...}; 'info' is hidden gold and never read)"

    def sniff(self, doc: Any) -> Sniff:
        """Match a record with a ``traj`` list, or a list of them."""
        if isinstance(doc, dict):
            return Sniff(isinstance(doc.get("traj"), list), "object without a 'traj' list")
        if is_run_list(doc, _is_record):  # its broken records are reported alone when converted
            return Sniff(True)
        return Sniff(False, "not a record (or list of records) with a 'traj' message list")

    def records(self, doc: Any) -> list[Any]:
        """One record per run."""
        return list(doc) if isinstance(doc, list) else [doc]

    def convert(self, run: Any, *, source: Source, options: LoadOptions) -> Trajectory:
        """Convert one record (never touching ``info``)."""
        if not isinstance(run, dict) or not isinstance(run.get("traj"), list):
            raise TraceFormatError("record has no 'traj' message list", json_path="$.traj", adapter=self.name)
        messages = run["traj"]

        def number(msg: dict[str, Any], i: int) -> Any:
            n = msg.get("index")
            return n if isinstance(n, (int, str)) and not isinstance(n, bool) else None

        steps = build_steps(messages, classify_openai, options=options, path="$.traj", source_number=number)
        meta = {k: run[k] for k in _KEEP if k in run and isinstance(run[k], (str, int, float))}
        task_id = run.get("task_id")
        tid = str(task_id) if task_id is not None else f"tau#{source.record}"
        src = Source(source.format, source.file, source.record, "tau: 1-based 'index' per message (step_number - 1)")
        return assemble(steps, id=tid, source=src, task=first_user_text(messages), metadata=meta)
