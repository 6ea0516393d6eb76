"""Multi-agent formats: Who&When files (both subsets) and AgentRx Magentic-One lists.

Who&When: ``{question, history: [{content, role, name?}], system_prompt, ...labels}``. In the
algorithm-generated subset the agent is ``name`` and ``role`` is user/assistant (an AutoGen
convention, not who spoke); in the hand-crafted (Magentic-One) subset the agent is encoded in
``role``: ``"Orchestrator (-> WebSurfer)"``, ``"Orchestrator (thought)"``, ``"WebSurfer"``.
The labels (``mistake_agent``, ``mistake_step``, ``mistake_reason``, ``ground_truth``,
``is_correct``) are gold and are not part of the IR.

AgentRx Magentic-One: a bare list ``[{content, role}]`` with the same speaker labels.

Step numbering: 0-based position in ``history`` (Who&When ``mistake_step`` is already 0-based).
Agents whose name says they run code or tools (``Computer_terminal``, ``ComputerTerminal``) produce
``tool`` steps; every other agent message is a decision step.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from trajaudit.engine.trace.adapters.base import (
    OPENAI_ROLES,
    Classified,
    LoadOptions,
    Sniff,
    assemble,
    build_steps,
)
from trajaudit.engine.trace.adapters.speakers import is_human_name
from trajaudit.engine.trace.ir import Source, Trajectory
from trajaudit.errors import TraceFormatError

_ROLE_RE = re.compile(r"^\s*([^()]+?)\s*\((.*)\)\s*$")


def classify_speaker(label: str, options: LoadOptions) -> Classified:
    """Classify a speaker label such as ``"Orchestrator (-> WebSurfer)"`` or ``"Computer_terminal"``."""
    meta: dict[str, Any] = {}
    agent = label.strip()
    m = _ROLE_RE.match(agent)
    if m:
        agent, inner = m.group(1).strip(), m.group(2).strip()
        if inner.startswith("->"):
            meta["target"] = inner[2:].strip()
        else:
            meta["phase"] = inner
    low = agent.lower()
    if is_human_name(agent):
        return Classified("user", "user", None, metadata=meta)
    if low == "system":
        return Classified("system", "system", None, metadata=meta)
    if options.tool_agent_pattern.match(agent):
        return Classified("tool", "tool", agent, metadata=meta)
    return Classified("agent", "assistant", agent, metadata={"raw_role": label, **meta} if m else meta)


def _classifier(options: LoadOptions):
    def classify(msg: dict[str, Any], i: int) -> Classified:
        name = msg.get("name")
        if isinstance(name, str) and name.strip():
            c = classify_speaker(name, options)
            if c.kind == "user" and msg.get("role") == "assistant":
                return Classified("agent", "assistant", name.strip())
            return c
        role = msg.get("role")
        if not isinstance(role, str) or not role.strip():
            raise TraceFormatError("message has neither 'name' nor a 'role' string", json_path=f"$.history[{i}]")
        return classify_speaker(role, options)

    return classify


def _is_speaker_list(doc: Any) -> str:
    if not isinstance(doc, list) or not doc:
        return "not a non-empty list"
    for i, m in enumerate(doc):
        if not isinstance(m, dict) or "content" not in m or not isinstance(m.get("role"), str):
            return f"element {i} is not a {{content, role}} object"
    if all(m["role"] in OPENAI_ROLES for m in doc):
        return "all roles are plain OpenAI roles (use the openai format)"
    return ""


class WhoAndWhenAdapter:
    """Who&When files (agent in ``name`` or encoded in ``role``)."""

    name = "who_and_when"
    description = "Who&When files ({question, history, system_prompt, ...}); labels are not read"

    def sniff(self, doc: Any) -> Sniff:
        """Match an object with a ``history`` message list."""
        if isinstance(doc, dict) and isinstance(doc.get("history"), list):
            return Sniff(True)
        return Sniff(False, "not an object with a 'history' list")

    def records(self, doc: Any) -> list[Any]:
        """A Who&When file holds one run."""
        return [doc]

    def convert(self, run: Any, *, source: Source, options: LoadOptions) -> Trajectory:
        """Convert one file's run; labels stay out of the IR."""
        if not isinstance(run, dict) or not isinstance(run.get("history"), list):
            raise TraceFormatError("no 'history' list", json_path="$.history", adapter=self.name)
        steps = build_steps(run["history"], _classifier(options), options=options, path="$.history")
        prompts = run.get("system_prompt")
        prompts = {str(k): str(v) for k, v in prompts.items()} if isinstance(prompts, dict) else {}
        if isinstance(run.get("system_prompt"), str):
            prompts = {"*": run["system_prompt"]}
        question = run.get("question")
        meta = {k: run[k] for k in ("question_ID", "level") if isinstance(run.get(k), (str, int))}
        tid = Path(source.file).stem if source.file else str(run.get("question_ID") or "who_and_when")
        if source.record is not None and source.file and source.file.endswith(".jsonl"):
            tid = f"{tid}#{source.record}"
        src = Source(source.format, source.file, source.record, "Who&When: 0-based index into 'history'")
        return assemble(steps, id=tid, source=src, task=question if isinstance(question, str) else "",
                        system_prompts=prompts, metadata=meta)


class MagenticAdapter:
    """AgentRx Magentic-One lists: ``[{content, role}]`` with speaker labels as roles."""

    name = "magentic"
    description = "AgentRx Magentic-One lists [{content, role}] with roles like 'Orchestrator (-> WebSurfer)'"

    def sniff(self, doc: Any) -> Sniff:
        """Match a list of ``{content, role}`` whose roles are not all OpenAI roles."""
        why = _is_speaker_list(doc)
        return Sniff(not why, why)

    def records(self, doc: Any) -> list[Any]:
        """One run per file."""
        return [doc]

    def convert(self, run: Any, *, source: Source, options: LoadOptions) -> Trajectory:
        """Convert one list."""
        if not isinstance(run, list):
            raise TraceFormatError("expected a list of {content, role}", json_path="$", adapter=self.name)
        steps = build_steps(run, _classifier(options), options=options, path="$")
        task = next((s.content for s in steps if s.kind == "user"), "")
        tid = Path(source.file).stem if source.file else "magentic"
        if source.record is not None and source.file and source.file.endswith(".jsonl"):
            tid = f"{tid}#{source.record}"
        src = Source(source.format, source.file, source.record, "AgentRx Magentic-One: 1-based step_number - 1")
        return assemble(steps, id=tid, source=src, task=task)
