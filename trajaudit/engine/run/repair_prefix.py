"""Repair-guided resumption without an LLM: the resumed message prefix and the template directive.

SearchAuditor (seed 000, §5.4): a failed run is resumed by keeping its message prefix up to the
predicted critical step (that step excluded), appending the repair directive as a user message, and
letting the agent continue under its original scaffold. :func:`resume_document` writes that prefix in
the run's ORIGINAL message format, read again from the source file (the IR is not used for the
messages, so nothing is lost or reformatted):

- ``openai``: the same container as the input run (a message list, or the ``{"messages": [...]}``
  object with its other fields), messages verbatim, plus ``{"role": "user", "content": directive}``;
- ``tau``: a plain OpenAI message list — the ``traj`` prefix without tau's per-message ``index``
  field, plus the user message. The record's ``info`` (hidden gold), ``reward`` and ``records`` are
  not copied;
- ``who_and_when``: ``{question, question_ID, level, system_prompt, history}`` with the ``history``
  prefix verbatim plus ``{"role": "user", "name": "human", "content": directive}`` (a human turn for
  the group chat to resume from). The labels (``mistake_*``, ``ground_truth``, ``is_correct``) are
  never copied: they would leak the answer;
- ``magentic``: the ``[{content, role}]`` prefix plus ``{"role": "human", "content": directive}``;
- anything else (a custom mapping, the Anthropic / Responses / LangChain dialects, or a run without
  a readable source file): OpenAI messages rebuilt from the IR steps (role, content, tool calls, tool
  results), plus the user message — hidden reasoning (Anthropic ``thinking``, a Responses
  ``reasoning`` item) is left out: a message of thinking and tool calls keeps its calls with
  ``content: null``, a reasoning item alone is dropped; a system prompt given outside the messages for the whole run
  (``Trajectory.system_prompts["*"]``: Anthropic's top-level ``system``, Responses ``instructions``)
  comes first as a ``system`` message — the agent resumes under the policy it was given.

:func:`template_directive` is the deterministic fallback directive built from a diagnosis alone (the
category's definition and checklist, the rationale), clearly labelled as a template.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from trajaudit import safe_json
from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.run.repair_writer import synthesize_repair
from trajaudit.engine.taxonomy import load_taxonomy
from trajaudit.engine.trace.adapters import default_adapters
from trajaudit.engine.trace.ir import Step, Trajectory
from trajaudit.engine.trace.text import jsonl_lines
from trajaudit.errors import LLMError, LLMUnreachableError, TrajauditError

TEMPLATE_LABEL = "[template repair directive: built without an LLM from the diagnosis; not case-specific]"
_WW_KEEP = ("question", "question_ID", "level", "system_prompt")


def template_directive(diagnosis: Diagnosis, trajectory: Trajectory | None = None) -> str:
    """A deterministic repair directive from the diagnosis: where to resume, the diagnosed category
    (its definition, and its checklist questions turned into checks to make), and the rationale.

    Labelled with :data:`TEMPLATE_LABEL` on its first line.

    Raises:
        TrajauditError: the diagnosis has no critical step.
    """
    if diagnosis.critical_step is None:
        raise TrajauditError(f"{diagnosis.trajectory_id}: the diagnosis has no critical step; nothing to repair")
    lines = [TEMPLATE_LABEL]
    who = f" ({diagnosis.agent})" if diagnosis.agent else ""
    lines.append(f"An audit of this run found that the decisive mistake happened at the next step{who} "
                 f"(step {diagnosis.critical_step} of the original run). Redo that step carefully.")
    try:
        cat = load_taxonomy(diagnosis.taxonomy).get(diagnosis.category)
    except (TrajauditError, LookupError):
        cat = None
    if cat is not None and diagnosis.category != "inconclusive":
        lines.append(f"Diagnosed failure: {cat.name} — {' '.join(cat.definition.split())}")
        if cat.checklist:
            lines.append("Before you act, check:")
            lines += [f"- {q}" for q in cat.checklist]
    if diagnosis.rationale.strip():
        lines.append(f"Audit rationale: {' '.join(diagnosis.rationale.split())[:800]}")
    lines.append("Continue the task from here, fixing the way you work rather than assuming any particular answer.")
    return "\n".join(lines)


def resume_document(trajectory: Trajectory, step: int, directive: str) -> tuple[Any, str]:
    """The run's messages before ``step`` in its original format, plus ``directive`` as a user turn.

    Args:
        trajectory: the run (its ``source`` names the file, record and format to re-read).
        step: the critical step (0-based); messages ``0 .. step-1`` are kept — before the step that
            issued a tool call instead when the prefix would keep the call but not its output.
        directive: the repair directive text.

    Returns:
        ``(document, description)``: a JSON-ready document and one line saying what was written.

    Raises:
        TrajauditError: ``step`` is outside the run, or the directive is empty.
    """
    if not directive.strip():
        raise TrajauditError("the repair directive is empty")
    if not 0 <= step < len(trajectory.steps):
        raise TrajauditError(f"{trajectory.id}: critical step {step} is outside the run's {len(trajectory.steps)} steps")
    asked, step = step, _whole_exchanges(trajectory, step)
    raw = _raw_run(trajectory)
    fmt = trajectory.source.format
    span = f"0..{step - 1}" if step > 0 else "none (the critical step is the first message)"
    if step != asked:
        span += f" (not ..{asked - 1}: the tool call at step {step} would be left without its output)"
    if raw is not None:
        if fmt == "openai":
            if isinstance(raw, dict):
                doc = {k: copy.deepcopy(v) for k, v in raw.items() if k != "messages"}
                doc["messages"] = copy.deepcopy(raw["messages"][:step]) + [_user(directive)]
            else:
                doc = copy.deepcopy(raw[:step]) + [_user(directive)]
            return doc, f"OpenAI messages {span} verbatim + the directive as a user message"
        if fmt == "tau":
            msgs = [{k: copy.deepcopy(v) for k, v in m.items() if k != "index"} for m in raw["traj"][:step]]
            return msgs + [_user(directive)], (f"OpenAI messages (tau traj {span}, 'index' dropped; info, "
                                               "reward and records not copied) + the directive as a user message")
        if fmt == "who_and_when":
            doc = {k: copy.deepcopy(raw[k]) for k in _WW_KEEP if k in raw}
            doc["history"] = copy.deepcopy(raw["history"][:step]) + [
                {"role": "user", "name": "human", "content": directive}]
            return doc, (f"Who&When document: history {span} verbatim + the directive as a human turn "
                         "(labels and ground_truth not copied)")
        if fmt == "magentic":
            return copy.deepcopy(raw[:step]) + [{"role": "human", "content": directive}], \
                f"Magentic-One list {span} verbatim + the directive as a human turn"
    prompt = trajectory.system_prompts.get("*", "")
    system = [{"role": "system", "content": prompt}] if isinstance(prompt, str) and prompt.strip() else []
    note = "the run's system prompt, then " if system else ""
    return system + _from_ir(trajectory, step) + [_user(directive)], \
        (f"OpenAI messages rebuilt from the IR ({note}steps {span}; source format {fmt!r}) + the directive "
         "as a user message")


def _whole_exchanges(t: Trajectory, step: int) -> int:
    """``step``, moved back to the step that issued a tool call whose output the prefix ``0..step-1``
    would cut off (a critical step that is a tool output, or one of several outputs of a parallel
    call): chat APIs refuse a tool call without its result, and the call is the decision to redo."""
    cut = step
    for s in reversed(t.steps[:cut]):
        if s.index < cut and any((o := t.output_after(c.id, s.index)) is not None and o.index >= cut
                                 for c in s.tool_calls):
            cut = s.index
    return cut


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _raw_run(trajectory: Trajectory) -> Any:
    """The run as it is in its source file, or ``None`` when it cannot be read back consistently."""
    src = trajectory.source
    if not src.file or src.format not in ("openai", "tau", "who_and_when", "magentic"):
        return None
    path = Path(src.file)
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix.lower() in (".jsonl", ".ndjson"):
            line = [ln for n, ln in enumerate(jsonl_lines(text)) if n == src.record]
            doc = safe_json.loads(line[0]) if line else None
            record = None
        else:
            doc = safe_json.loads(text)
            record = src.record
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    try:
        runs = default_adapters().get(src.format).records(doc)
    except (LookupError, TrajauditError):
        return None
    run = runs[record] if record is not None and 0 <= record < len(runs) else runs[0] if len(runs) == 1 else None
    messages = _messages_of(run, src.format)
    if messages is None or len(messages) != len(trajectory.steps):
        return None  # not the same run any more (edited file): fall back to the IR
    return run


def _messages_of(run: Any, fmt: str) -> list[Any] | None:
    if fmt == "openai":
        return run.get("messages") if isinstance(run, dict) else run if isinstance(run, list) else None
    if fmt == "tau":
        return run.get("traj") if isinstance(run, dict) else None
    if fmt == "who_and_when":
        return run.get("history") if isinstance(run, dict) else None
    return run if isinstance(run, list) else None


def _hidden_reasoning(s: Step) -> bool:
    """Whether a step's content is the model's hidden reasoning rather than text it sent: an
    Anthropic/Inspect message with only thinking (``metadata.content_from == "thinking"``) or a
    Responses ``reasoning`` item. The audit reads it (a decision step keeps its reasons); a resumed
    conversation must not turn it into visible assistant text."""
    return s.metadata.get("content_from") == "thinking" or s.metadata.get("item_type") == "reasoning"


def _from_ir(trajectory: Trajectory, step: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for s in trajectory.steps[:step]:
        if s.kind == "tool":
            m: dict[str, Any] = {"role": "tool", "content": s.content}
            if s.tool_output is not None:
                if s.tool_output.call_id:
                    m["tool_call_id"] = s.tool_output.call_id
                if s.tool_output.name:
                    m["name"] = s.tool_output.name
        else:
            hidden = _hidden_reasoning(s)
            if hidden and not s.tool_calls:
                continue  # a reasoning item alone: the model's private reasoning, not a message it sent
            role = {"agent": "assistant"}.get(s.kind, s.kind)
            m = {"role": role, "content": None if hidden else s.content}
            if s.agent and s.kind == "agent" and s.agent != "assistant":
                m["name"] = s.agent
            if s.tool_calls:
                m["tool_calls"] = [{"id": c.id, "type": "function", "function": {
                    "name": c.name, "arguments": c.raw_arguments if c.raw_arguments is not None
                    else json.dumps(c.arguments, ensure_ascii=False)}} for c in s.tool_calls]
        out.append(m)
    return out


def attach_repair(diagnosis: Diagnosis, trajectory: Trajectory, llm: Any = None) -> Diagnosis:
    """``diagnosis`` with ``repair`` filled (``trajaudit audit --repair``).

    With an LLM client, the directive is synthesized (:func:`trajaudit.engine.run.repair_writer.synthesize_repair`;
    its usage counters are added to the diagnosis' ``usage``); without one — or when that call fails — the
    :func:`template_directive` is used. ``metadata["repair"]`` says which (``source``: ``llm`` or
    ``template``, or ``strategy`` when the strategy already wrote one, which is kept), and why when
    the LLM failed. A diagnosis without a critical step is returned unchanged (noted).
    """
    import dataclasses

    if diagnosis.critical_step is None:
        return dataclasses.replace(diagnosis, metadata={**diagnosis.metadata,
                                                        "repair": {"source": None, "note": "no critical step"}})
    if diagnosis.repair:  # the strategy wrote its own (searchauditor's repair stage): kept
        return dataclasses.replace(diagnosis, metadata={**diagnosis.metadata,
                                                        "repair": {**(diagnosis.metadata.get("repair") or {}),
                                                                   "source": "strategy"}})
    note = None
    if llm is not None:
        try:
            r = synthesize_repair(llm, trajectory, diagnosis)
        except LLMUnreachableError:  # the endpoint is down: stop, do not degrade
            raise
        except LLMError as e:
            note = f"LLM repair failed ({e}); the template directive is used"
        else:
            usage = dict(diagnosis.usage)
            for key, value in r.usage.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    usage[key] = round(usage.get(key, 0) + value, 6)
            meta = {"source": "llm", "directives": r.directives, "summary": r.summary, "requests": r.usage.get("requests"),
                    **r.metadata}
            return dataclasses.replace(diagnosis, repair=r.text, usage=usage,
                                       metadata={**diagnosis.metadata, "repair": meta})
    meta = {"source": "template"} | ({"note": note} if note else {})
    return dataclasses.replace(diagnosis, repair=template_directive(diagnosis, trajectory),
                               metadata={**diagnosis.metadata, "repair": meta})
