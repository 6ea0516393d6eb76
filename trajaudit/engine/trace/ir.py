"""The trajectory intermediate representation (IR): :class:`Trajectory`, :class:`Step` and parts.

Every adapter turns its input into these frozen dataclasses; everything downstream (rules, claims,
judges, reports) reads only the IR. ``to_dict``/``from_dict`` give a JSON form that is validated by
``trajaudit/schemas/trajectory.schema.json``; ``Trajectory.from_dict(t.to_dict()) == t``.

Step numbering: ``Step.index`` is the 0-based position of the message in the source message list
(the adapter keeps every message, so this is also the position in ``Trajectory.steps``).
``Step.source_number`` keeps the dataset's own number when it has one (tau-bench's 1-based ``index``).
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

SCHEMA_VERSION = 1

# A Markdown code fence opening a line: code sent to a code runner (an inline ``` in prose is not).
FENCE_RE = re.compile(r"^[ \t]{0,3}```", re.M)

# A JSON escape of json.dumps: an escaped backslash (kept) or a control character's \u00XX (turned back
# into the character by raw_controls)
_JSON_CONTROL_ESCAPE = re.compile(r"\\(\\|u00[01][0-9a-f])")


def raw_controls(dumped: str) -> str:
    """``json.dumps(..., ensure_ascii=False)`` text with each ``\\u00XX`` of a control character
    turned back into the character, so a tool call's preview holds ESC where its content would: the
    terminal console shows it as ``\\x1b`` in every column, not ``\\u001b`` in this one. (``\\n``,
    ``\\t`` and the other short escapes stay: the preview is one line.)"""
    if "\\u00" not in dumped:
        return dumped
    return _JSON_CONTROL_ESCAPE.sub(lambda x: x.group() if x.group(1) == "\\" else chr(int(x.group(1)[1:], 16)),
                                    dumped)


StepKind = Literal["system", "user", "agent", "tool"]
STEP_KINDS: tuple[str, ...] = ("system", "user", "agent", "tool")

# Flags a step can carry: documented degradations, never silent.
FLAG_TRUNCATED = "truncated"  # content longer than the loader's cap; metadata.original_length says how long
FLAG_MALFORMED_ARGUMENTS = "malformed_arguments"  # a tool call's arguments string is not valid JSON
FLAG_ORPHAN_TOOL_OUTPUT = "orphan_tool_output"  # a tool output whose call id matches no earlier call
FLAG_UNANSWERED_CALL = "unanswered_call"  # a tool call that no later tool output answers
FLAG_UNKNOWN_ROLE = "unknown_role"  # a role the adapter did not recognise (kept, treated as an agent)
FLAG_NON_TEXT_CONTENT = "non_text_content"  # content was not a string; it was rendered to text
FLAG_SPLIT_MESSAGE = "split_message"  # a later step of one source message split in several (source_number says which)
FLAG_MALFORMED_CALL = "malformed_call"  # a tool call without a name or an id (kept: "<unnamed>", no linkage)
# Run-level (Trajectory.flags): a source message that produced no step (an AgentRx step without
# substeps), so later step indexes are not message positions (source_number says which)
FLAG_DROPPED_MESSAGE = "dropped_message"


@dataclass(frozen=True)
class ToolCall:
    """One tool (function) call issued by a decision step.

    Attributes:
        id: the call id linking it to its tool output, or ``None`` when the format has none.
        name: the tool name.
        arguments: the parsed JSON arguments (usually a dict). ``None`` when ``arguments_error`` is set.
        raw_arguments: the arguments string exactly as found, when the source gave a string.
        arguments_error: why the arguments string could not be parsed (the call is kept, flagged).
    """

    name: str
    arguments: Any = None
    id: str | None = None
    raw_arguments: str | None = None
    arguments_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (see the schema's ``$defs.tool_call``)."""
        return {
            "id": self.id,
            "name": self.name,
            "arguments": self.arguments,
            "raw_arguments": self.raw_arguments,
            "arguments_error": self.arguments_error,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ToolCall:
        """Inverse of :meth:`to_dict`."""
        return cls(
            name=d["name"],
            arguments=d.get("arguments"),
            id=d.get("id"),
            raw_arguments=d.get("raw_arguments"),
            arguments_error=d.get("arguments_error"),
        )


@dataclass(frozen=True)
class ToolOutput:
    """The result of a tool call, as a step of kind ``tool``.

    Attributes:
        call_id: the id of the call it answers, or ``None``.
        name: the tool name when the format says it.
        is_error: the output reports a failure (an ``Error:`` prefix, a traceback, a failed exit code).
    """

    call_id: str | None = None
    name: str | None = None
    is_error: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"call_id": self.call_id, "name": self.name, "is_error": self.is_error}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ToolOutput:
        """Inverse of :meth:`to_dict`."""
        return cls(call_id=d.get("call_id"), name=d.get("name"), is_error=bool(d.get("is_error", False)))


@dataclass(frozen=True)
class Step:
    """One message or event of a run.

    Attributes:
        index: 0-based position in the source message list (the canonical step index).
        kind: ``system`` (prompt/policy), ``user`` (a human or simulated user), ``agent`` (produced by an
            agent: a *decision step*), ``tool`` (a tool or code-runner output).
        role: the role string normalized to system/user/assistant/tool, or the raw role if unknown.
        agent: the producer's name (``"assistant"`` for single-agent chats, the expert's name in
            multi-agent runs), or ``None`` for system/user steps.
        content: the text content ("" when the message had none).
        tool_calls: the tool calls this step issued.
        tool_output: set when ``kind == "tool"``.
        source_number: the dataset's own number for this message, if any (tau: 1-based ``index``).
        flags: documented degradations (see the ``FLAG_*`` constants).
        metadata: anything else the adapter kept (e.g. ``target`` for "Orchestrator (-> WebSurfer)").
    """

    index: int
    kind: StepKind
    role: str
    content: str = ""
    agent: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_output: ToolOutput | None = None
    source_number: int | str | None = None
    flags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def is_decision(self) -> bool:
        """True for steps produced by an agent (the only steps that can be critical)."""
        return self.kind == "agent"

    @property
    def address(self) -> str:
        """Evidence address of this step, e.g. ``steps.7``."""
        return f"steps.{self.index}"

    @property
    def tool_names(self) -> tuple[str, ...]:
        """Names of the tools called by this step (empty for non-calling steps)."""
        return tuple(c.name for c in self.tool_calls)

    def preview(self, width: int = 80) -> str:
        """A one-line preview of the step: content, else its tool calls."""
        text = " ".join(self.content.split())
        if not text and self.tool_calls:
            text = "; ".join(
                f"{c.name}({c.raw_arguments if c.arguments_error else raw_controls(json.dumps(c.arguments, ensure_ascii=False))})"
                for c in self.tool_calls
            )
        return text if len(text) <= width else text[: max(0, width - 1)] + "…"

    def to_dict(self) -> dict[str, Any]:
        """JSON form (see the schema's ``$defs.step``)."""
        return {
            "index": self.index,
            "kind": self.kind,
            "role": self.role,
            "agent": self.agent,
            "content": self.content,
            "is_decision": self.is_decision,
            "tool_calls": [c.to_dict() for c in self.tool_calls],
            "tool_output": self.tool_output.to_dict() if self.tool_output else None,
            "source_number": self.source_number,
            "flags": list(self.flags),
            "metadata": self.metadata,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Step:
        """Inverse of :meth:`to_dict` (``is_decision`` is derived, so it is ignored)."""
        return cls(
            index=d["index"],
            kind=d["kind"],
            role=d["role"],
            content=d.get("content", ""),
            agent=d.get("agent"),
            tool_calls=tuple(ToolCall.from_dict(c) for c in d.get("tool_calls", [])),
            tool_output=ToolOutput.from_dict(d["tool_output"]) if d.get("tool_output") else None,
            source_number=d.get("source_number"),
            flags=tuple(d.get("flags", [])),
            metadata=dict(d.get("metadata", {})),
        )


@dataclass(frozen=True)
class Source:
    """Where a trajectory came from, so results map back to the input.

    Attributes:
        format: the adapter name (``openai``, ``tau``, ``who_and_when``, ``magentic``, ``anthropic``,
            ``openai_responses``, ``langchain``, ``ir``, or a mapping's name).
        file: the input path as given, or ``None`` for in-memory input.
        record: 0-based record number within a multi-run file (list element or JSONL line), or ``None``.
        step_numbering: how the dataset numbers its own steps, in words (e.g. "1-based index field").
    """

    format: str
    file: str | None = None
    record: int | None = None
    step_numbering: str = "0-based position in the message list"

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "format": self.format,
            "file": self.file,
            "record": self.record,
            "step_numbering": self.step_numbering,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Source:
        """Inverse of :meth:`to_dict`."""
        return cls(
            format=d["format"],
            file=d.get("file"),
            record=d.get("record"),
            step_numbering=d.get("step_numbering", "0-based position in the message list"),
        )


@dataclass(frozen=True)
class Trajectory:
    """One run of an agent system.

    Attributes:
        id: a stable id (tau ``task_id``, the Who&When file stem, or ``<file>#<record>``).
        task: the user's task or question, when known ("" otherwise).
        steps: the steps in order; ``steps[i].index == i``.
        final_answer: the run's final answer (the last agent message with text), or ``None``.
        agents: the distinct agent names, in order of first appearance.
        system_prompts: per-agent system prompts (multi-agent formats), ``{agent: text}``.
        source: where it came from (:class:`Source`).
        flags: run-level degradations (e.g. ``non_utf8``).
        metadata: other non-gold fields the adapter kept. Gold labels are never kept.
    """

    id: str
    steps: tuple[Step, ...]
    source: Source
    task: str = ""
    final_answer: str | None = None
    agents: tuple[str, ...] = ()
    system_prompts: dict[str, str] = field(default_factory=dict)
    flags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def decision_steps(self) -> tuple[Step, ...]:
        """The steps produced by agents, in order."""
        return tuple(s for s in self.steps if s.is_decision)

    @cached_property
    def call_index(self) -> dict[str, tuple[int, int]]:
        """``{call_id: (step index, call position)}`` for every tool call with an id."""
        out: dict[str, tuple[int, int]] = {}
        for s in self.steps:
            for j, c in enumerate(s.tool_calls):
                if c.id is not None:
                    out.setdefault(c.id, (s.index, j))
        return out

    @cached_property
    def outputs_by_call_id(self) -> dict[str, tuple[int, ...]]:
        """``{call id: indexes of the tool-output steps answering it, in order}`` (computed once)."""
        out: dict[str, list[int]] = {}
        for s in self.steps:
            if s.tool_output is not None and s.tool_output.call_id is not None:
                out.setdefault(s.tool_output.call_id, []).append(s.index)
        return {k: tuple(v) for k, v in out.items()}

    def output_after(self, call_id: str | None, step: int) -> Step | None:
        """The first tool-output step after ``step`` that answers ``call_id``, or ``None``."""
        if call_id is None:
            return None
        found = self.outputs_by_call_id.get(call_id, ())
        k = bisect_right(found, step)
        return self.steps[found[k]] if k < len(found) else None

    @cached_property
    def code_authors(self) -> dict[int, int]:
        """``{tool-output index: index of the decision step whose code it ran}`` for code-runner outputs.

        A code runner's output answers no call id. Its code is the latest decision step carrying a
        fenced code block (a line opening with ```) since the previous tool output — in Magentic-One
        the Assistant writes the code and the Orchestrator then tells ComputerTerminal to run it, so
        the step right before the output is an instruction, not the code. Outputs with a call id, or
        with no such step, are absent (callers fall back to the step before the output).
        """
        out: dict[int, int] = {}
        author: int | None = None
        for s in self.steps:
            if s.kind == "tool":
                if author is not None and (s.tool_output is None or s.tool_output.call_id is None):
                    out[s.index] = author
                author = None
            elif s.is_decision and FENCE_RE.search(s.content):
                author = s.index
        return out

    def call_for(self, step: Step) -> tuple[Step, ToolCall] | None:
        """For a tool-output step, the (decision step, call) that issued it, or ``None``."""
        if step.tool_output is None or step.tool_output.call_id is None:
            return None
        hit = self.call_index.get(step.tool_output.call_id)
        if hit is None:
            return None
        return self.steps[hit[0]], self.steps[hit[0]].tool_calls[hit[1]]

    def output_tool_name(self, step: Step) -> str | None:
        """The name of the tool a tool-output step answers: the output's own ``name``, else the name of
        the call it answers (:meth:`call_for`), else ``None``."""
        if step.tool_output is None:
            return None
        if step.tool_output.name:
            return step.tool_output.name
        hit = self.call_for(step)
        return hit[1].name if hit is not None else None

    def outline(self, width: int = 80) -> list[dict[str, Any]]:
        """The outline a person or judge reads: one row per step.

        Returns:
            ``[{"index", "kind", "agent", "tool", "preview"}]``; ``tool`` is the called tool names for
            decision steps, the answering tool for tool outputs (:meth:`output_tool_name`: named by the
            output, else by the call it answers — Anthropic and Responses outputs carry only a call id).
        """
        rows = []
        for s in self.steps:
            tool = ", ".join(s.tool_names) if s.tool_calls else self.output_tool_name(s)
            rows.append(
                {"index": s.index, "kind": s.kind, "agent": s.agent, "tool": tool or "", "preview": s.preview(width)}
            )
        return rows

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Trajectory):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash((self.id, self.source.file, self.source.record, len(self.steps)))

    def to_dict(self) -> dict[str, Any]:
        """JSON form, valid against ``trajectory.schema.json``."""
        return {
            "schema_version": SCHEMA_VERSION,
            "id": self.id,
            "task": self.task,
            "final_answer": self.final_answer,
            "agents": list(self.agents),
            "system_prompts": dict(self.system_prompts),
            "source": self.source.to_dict(),
            "flags": list(self.flags),
            "metadata": self.metadata,
            "steps": [s.to_dict() for s in self.steps],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trajectory:
        """Inverse of :meth:`to_dict`. Does not validate; use :func:`trajaudit.engine.schema.validate_trajectory`."""
        return cls(
            id=d["id"],
            steps=tuple(Step.from_dict(s) for s in d["steps"]),
            source=Source.from_dict(d["source"]),
            task=d.get("task", ""),
            final_answer=d.get("final_answer"),
            agents=tuple(d.get("agents", [])),
            system_prompts=dict(d.get("system_prompts", {})),
            flags=tuple(d.get("flags", [])),
            metadata=dict(d.get("metadata", {})),
        )


def renumbered(t: Trajectory) -> bool:
    """Whether ``t``'s step indexes are not the positions of its source messages: one message became
    several steps (a step flagged ``split_message``: an Anthropic message holding several tool results,
    an AgentRx step of several substeps) or produced none (the run flagged ``dropped_message``). Then
    ``Step.source_number`` is the 0-based source message position of every step, which is what a
    diagnosis reports as ``metadata.source_message`` and what the eval harness compares with gold."""
    return FLAG_DROPPED_MESSAGE in t.flags or any(FLAG_SPLIT_MESSAGE in s.flags for s in t.steps)
