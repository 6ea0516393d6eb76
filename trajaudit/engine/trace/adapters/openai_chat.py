"""Plain OpenAI chat-completions message lists, with or without tool calls.

Accepted documents: a list of messages; ``{"messages": [...]}``; a list of ``{"messages": [...]}``
(one run per element). Step numbering: 0-based position in the message list. In a group chat
logged from one agent's side (other agents as named ``user`` messages, AutoGen style) those
messages are the other agents' turns (``LoadOptions.named_users``, ``speakers.group_chat_agents``); in
a log written from the human proxy's side (AutoGen's ``chat_history`` of ``user_proxy``) the proxy's
named ``assistant`` messages are the user's turns (``speakers.human_speakers``).

:func:`convert_chat` is that reading as a function: the dialect adapters (``anthropic``,
``openai_responses``, ``langchain``) normalize their input to OpenAI messages and call it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from trajaudit.engine.trace.adapters.base import (
    OPENAI_ROLES,
    Classified,
    LoadOptions,
    Sniff,
    assemble,
    build_steps,
    classify_openai,
    first_user_text,
    is_run_list,
    role_messages_check,
    run_messages,
    split_runs,
)
from trajaudit.engine.trace.adapters.speakers import speaker_sets
from trajaudit.engine.trace.ir import Source, Trajectory


def _has_messages(x: Any) -> bool:
    return isinstance(x, dict) and "messages" in x


def _is_message_list(doc: Any) -> str:
    if not isinstance(doc, list):
        return f"not a list of messages (got {type(doc).__name__})"
    if not doc:
        return "empty list"
    bad = [i for i, m in enumerate(doc) if not isinstance(m, dict) or not isinstance(m.get("role"), str)
           or m["role"] not in OPENAI_ROLES]
    if bad:
        return f"element {bad[0]} is not a message with an OpenAI role ({', '.join(sorted(OPENAI_ROLES))})"
    return ""


class OpenAIChatAdapter:
    """OpenAI chat messages (``role``/``content``/``tool_calls``/``tool_call_id``)."""

    name = "openai"
    description = "OpenAI chat messages: a list, {'messages': [...]}, or a list of such objects"

    def sniff(self, doc: Any) -> Sniff:
        """Match a message list, a ``{"messages"}`` object or a list of them."""
        if isinstance(doc, dict):
            if isinstance(doc.get("messages"), list):
                why = _is_message_list(doc["messages"]) if doc["messages"] else ""
                return Sniff(not why, f"messages: {why}" if why else "")
            return Sniff(False, "object without a 'messages' list")
        if is_run_list(doc, _has_messages):  # its broken runs are reported alone when converted
            return Sniff(True)
        why = _is_message_list(doc)
        return Sniff(not why, why)

    def accepts(self, doc: Any) -> Sniff:
        """The looser check used when ``--format openai`` is forced: message objects with a ``role``
        string, whatever the role (unknown roles are kept and flagged)."""
        return role_messages_check(self.records(doc))

    def records(self, doc: Any) -> list[Any]:
        """One record per run."""
        return split_runs(doc, _has_messages)

    def convert(self, run: Any, *, source: Source, options: LoadOptions) -> Trajectory:
        """Convert one run; raises :class:`TraceFormatError` when it has no messages."""
        messages, path = run_messages(run, self.name)
        return convert_chat(messages, source=source, options=options, path=path,
                            run=run if isinstance(run, dict) else None)


@dataclass(frozen=True)
class MessageNote:
    """What a dialect adapter knows about one of the OpenAI messages it normalized its input to.

    Attributes:
        flags: step flags to add (``FLAG_*`` of :mod:`trajaudit.engine.trace.ir`).
        metadata: step metadata to add.
        source_number: the position of the original message in the input (0-based), when the
            normalization did not keep messages 1:1; or the source's own id of what the message
            came from (the span id, for the span formats).
    """

    flags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    source_number: int | str | None = None


def with_notes(classify: Callable[[dict[str, Any], int], Classified], notes: list[MessageNote]
               ) -> Callable[[dict[str, Any], int], Classified]:
    """``classify`` (a ``build_steps`` classifier) with message ``i``'s note added to its answer:
    ``notes[i].flags`` after the classifier's flags, ``notes[i].metadata`` over its metadata."""
    def noted(msg: dict[str, Any], i: int) -> Classified:
        c, n = classify(msg, i), notes[i]
        return Classified(c.kind, c.role, c.agent, [*c.flags, *n.flags], {**c.metadata, **n.metadata})

    return noted


def convert_chat(messages: list[Any], *, source: Source, options: LoadOptions, path: str = "$",
                 run: dict[str, Any] | None = None, exclude: tuple[str, ...] = ("messages",),
                 system_prompts: dict[str, str] | None = None, notes: list[MessageNote] | None = None,
                 id_basis: Any = None, step_numbering: str | None = None) -> Trajectory:
    """Build a trajectory from OpenAI chat messages: the OpenAI adapter's reading, shared by every
    dialect adapter that normalizes its input to OpenAI messages (Anthropic, Responses, LangChain).

    Speakers are decided by :func:`~trajaudit.engine.trace.adapters.speakers.speaker_sets`, messages are
    classified by :func:`~trajaudit.engine.trace.adapters.base.classify_openai` and turned into steps by
    :func:`~trajaudit.engine.trace.adapters.base.build_steps` (``Step.index`` = position in ``messages``).

    Args:
        messages: OpenAI chat messages (``role``, ``content``, ``tool_calls``, ``tool_call_id``,
            ``name``; a tool message's ``is_error: true`` marks a failed call).
        path: JSON path of ``messages`` in the run, for errors.
        run: the run object around the messages, if any: its ``id`` is the trajectory id, a string
            ``task`` the task, and its scalar fields not in ``exclude`` become metadata.
        system_prompts: prompts given outside the message list (``{"*": text}``), not steps.
        notes: per message (same length as ``messages``), flags/metadata/source numbers to add.
        id_basis: what a run without ``id`` read from no file is hashed for its id (default: ``messages``;
            see :func:`_default_id`).
        step_numbering: ``Source.step_numbering`` to record (default: ``source``'s).

    Returns:
        The trajectory; the task is ``run["task"]``, else the first user turn (as classified), else the
        first message with the role ``human``.

    Raises:
        TraceFormatError: a message is not an object, a tool call is not an object, no messages.
    """
    agent_users, user_speakers = speaker_sets(messages, options)
    classify: Callable[[dict[str, Any], int], Classified] = partial(
        classify_openai, tool_agents=options.tool_agent_pattern, agent_users=agent_users,
        user_speakers=user_speakers)
    number = None
    if notes is not None:
        given = notes  # not Optional inside the closure
        classify = with_notes(classify, given)
        if any(n.source_number is not None for n in given):
            def number(msg: dict[str, Any], i: int) -> Any:
                return given[i].source_number
    steps = build_steps(messages, classify, options=options, path=path, source_number=number)
    rid = run.get("id") if run is not None else None
    tid = str(rid) if rid is not None else _default_id(source, messages if id_basis is None else id_basis)
    task = run.get("task") if run is not None and isinstance(run.get("task"), str) else None
    if task is None:  # the first user turn (as classified: a proxy's log has it as an assistant message)
        task = next((s.content for s in steps if s.kind == "user"), None)
    if task is None:  # no user turn: a "human" message (an unknown role, kept as an agent step), else
        # none — a named ``user`` message read as another agent's turn or a runner's output is not
        # the task (it would be evidence for that agent's own claims); as the mapping adapter reads it
        task = first_user_text([m for m in messages if isinstance(m, dict) and m.get("role") == "human"])
    meta = {k: v for k, v in (run or {}).items() if k not in exclude and isinstance(v, (str, int, float, bool))}
    if step_numbering is not None:
        source = Source(source.format, source.file, source.record, step_numbering)
    return assemble(steps, id=tid, source=source, task=task, system_prompts=system_prompts, metadata=meta)


def _default_id(source: Source, messages: list[Any]) -> str:
    """A run without an ``id``: the file's stem (``stem#record`` in a multi-run file); an in-memory
    run (no file): ``trajectory-`` and 10 hex digits of a SHA-256 of its messages, so that distinct
    runs audited together get distinct, reproducible ids."""
    import hashlib
    import json
    from pathlib import Path

    if source.file:
        stem = Path(source.file).stem
        return f"{stem}#{source.record}" if source.record is not None else stem
    text = json.dumps(messages, sort_keys=True, ensure_ascii=False, default=str)
    return "trajectory-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]
