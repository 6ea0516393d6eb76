"""Diagnosis-conditioned repair synthesis (SearchAuditor, seed 000, §4 stage 3 and §5.4).

The synthesizer sees only the task, the fixed diagnosis (step, agent, category and its definition,
rationale) and two evidence windows — around the critical step and at the end of the run — never the
whole trajectory and never any gold (trajaudit does not read tau ``info`` or Who&When labels while
auditing), so it cannot leak the reference answer; the prompt also forbids stating a target answer.
It writes one to five case-specific, process-level directives executable from the critical step on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trajaudit.llm as llm_layer
from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.taxonomy import load_taxonomy
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.errors import TrajauditError

if TYPE_CHECKING:
    from trajaudit.llm.client import LLMClient

PROMPT = "repair_directive"


@dataclass
class RepairResult:
    """A synthesized repair.

    Attributes:
        text: the directive as one user message (numbered directives, then the summary).
        directives: ``[{"directive", "addresses"}]`` as the model wrote them (addresses filtered to
            steps it was shown).
        summary: one sentence.
        usage: LLM counters of the synthesis.
        metadata: prompt version, windows shown, context cuts.
    """

    text: str
    directives: list[dict[str, Any]]
    summary: str
    usage: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


def windows(trajectory: Trajectory, step: int, before: int = 2) -> tuple[list[int], list[int]]:
    """The evidence windows: ``before`` decision steps before ``step`` through ``step``'s own tool
    outputs; and the last two decision steps to the end, without the steps of the first window."""
    decisions = [s.index for s in trajectory.decision_steps]
    prior = [d for d in decisions if d < step][-before:]
    lo = prior[0] if prior else max(0, step - 1)
    hi = step
    while hi + 1 < len(trajectory.steps) and trajectory.steps[hi + 1].kind == "tool":
        hi += 1
    first = list(range(lo, hi + 1))
    tail_from = decisions[-2] if len(decisions) >= 2 else (decisions[-1] if decisions else len(trajectory.steps) - 1)
    last = [i for i in range(tail_from, len(trajectory.steps)) if i > hi]
    return first, last


def synthesize_repair(client: LLMClient, trajectory: Trajectory, diagnosis: Diagnosis) -> RepairResult:
    """Write a repair directive for ``diagnosis`` of ``trajectory`` (one ``chat_json`` call).

    Raises:
        TrajauditError: the diagnosis has no critical step inside the run.
        LLMError: the call failed or its answer was invalid twice.
    """
    k = diagnosis.critical_step
    if k is None or not 0 <= k < len(trajectory.steps):
        raise TrajauditError(f"{trajectory.id}: the diagnosis has no critical step inside the run; nothing to repair")
    prompt = llm_layer.prompting.load_prompt(PROMPT)
    definition = ""
    try:
        definition = " ".join(load_taxonomy(diagnosis.taxonomy).get(diagnosis.category).definition.split())
    except (TrajauditError, LookupError):
        definition = "(no definition: category outside the taxonomy)"
    budget = client.config.context_chars
    data: dict[str, Any] = {
        "task": llm_layer.fitting.cut_text(trajectory.task or "(the task is not stated separately)", max(200, budget // 4)),
        "step": str(k), "agent": diagnosis.agent or "unnamed", "category": diagnosis.category,
        "definition": definition, "rationale": llm_layer.fitting.cut_text(diagnosis.rationale, 2000),
        "final_answer": llm_layer.fitting.cut_text(trajectory.final_answer or "(not stated)", 1000),
    }
    first, last = windows(trajectory, k)
    overhead = llm_layer.client.messages_chars(prompt.render(**data, critical_window=[], final_window=[]))
    room = max(2000, budget - overhead)
    crit = llm_layer.fitting.fit_steps(trajectory, first, room * 2 // 3 if last else room, focus=(k,), anchor=k)
    tail = llm_layer.fitting.fit_steps(trajectory, last, max(1000, room - crit.shown_chars), anchor=last[-1]) if last else None
    messages = prompt.render(**data, critical_window=crit.records,
                             final_window=tail.records if tail else [{"note": "the run ends inside the window above"}])
    with llm_layer.usage.tracking() as usage:
        answer = client.chat_json(messages, prompt.schema or {}, name="repair")
    shown = {r["step"] for r in crit.records + (tail.records if tail else []) if "step" in r}
    directives = []
    for d in answer["directives"]:
        addrs = [a for a in (str(x).strip() for x in d["addresses"]) if _shown(a, shown)]
        directives.append({"directive": " ".join(d["directive"].split()), "addresses": addrs})
    lines = [f"{i}. {d['directive']}" for i, d in enumerate(directives, 1)]
    summary = " ".join(answer["summary"].split())
    text = "\n".join(lines + ([summary] if summary else []))
    reports = [crit.report()] + ([tail.report()] if tail else [])
    return RepairResult(text=text, directives=directives, summary=summary, usage=usage.to_dict(),
                        metadata={"prompt": {PROMPT: prompt.version}, "windows": [first, last],
                                  "context": llm_layer.fitting.merge_reports(reports)})


def _shown(address: str, shown: set[int]) -> bool:
    if not address.startswith("steps."):
        return False
    head = address[6:].split(".", 1)[0].split("[", 1)[0]
    return head.isdigit() and int(head) in shown
