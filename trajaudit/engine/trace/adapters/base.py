"""Adapter protocol and the shared message → step conversion every adapter uses.

An adapter recognises one family of trace documents (``sniff``), splits a document into runs
(``records``) and converts one run into a :class:`~trajaudit.engine.trace.ir.Trajectory` (``convert``).
Adapters never read gold labels (tau ``info``, Who&When ``mistake_*``/``ground_truth``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from trajaudit import safe_json
from trajaudit.engine.trace.ir import (
    FLAG_MALFORMED_ARGUMENTS,
    FLAG_NON_TEXT_CONTENT,
    FLAG_ORPHAN_TOOL_OUTPUT,
    FLAG_TRUNCATED,
    FLAG_UNANSWERED_CALL,
    FLAG_UNKNOWN_ROLE,
    Source,
    Step,
    ToolCall,
    ToolOutput,
    Trajectory,
)
from trajaudit.errors import ConfigError, TraceFormatError

OPENAI_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})

# Agent names that are really tool/code runners (their messages are tool outputs, not decisions).
TOOL_AGENT_RE = re.compile(r"^(computer_?terminal|code_?executor|executor|terminal|tool|python_?repl)$", re.I)

_ERROR_RE = re.compile(
    r"\A\s*(?:error|exception|fatal)\b"
    r"|Traceback \(most recent call last\)"
    r"|exitcode:\s*[1-9]"
    r"|execution failed",
    re.I,
)


_EXITCODE_RE = re.compile(r"exitcode:\s*[1-9]")


def looks_like_error(content: str) -> bool:
    """Whether a tool output's text reports a failure (``Error: …``, a traceback, a non-zero exit code).

    ``_ERROR_RE`` is the definition. For ASCII text (where ``re.IGNORECASE`` is ASCII case folding)
    the same test runs as substring checks on the lower-cased text, which is several times faster.
    """
    head = content[:4000]
    if not head.isascii():
        return bool(_ERROR_RE.search(head))
    low = head.lower()
    if low.lstrip()[:9].startswith(("error", "exception", "fatal")) and _ERROR_RE.match(head):
        return True
    return ("traceback (most recent call last)" in low or "execution failed" in low
            or ("exitcode:" in low and _EXITCODE_RE.search(low) is not None))


@dataclass(frozen=True)
class LoadOptions:
    """Options for loading traces.

    Attributes:
        max_content_chars: content longer than this is cut and the step flagged ``truncated`` with
            ``metadata.original_length`` (default 1,000,000 characters).
        validate: validate every trajectory against ``trajectory.schema.json``.
        tool_agent_pattern: regex of agent names whose messages are tool outputs (code runners).
        named_users: how chat formats (OpenAI, ``--mapping``) read a ``user`` message that carries a
            ``name``: ``"auto"`` (default) — as another agent's message when the run is a group chat
            (:func:`~trajaudit.engine.trace.adapters.speakers.group_chat_agents`), else as a user turn; ``"agent"`` — always another agent's
            message; ``"user"`` — always a user turn. A mapping file's ``named_users:`` key overrides
            it for the runs that mapping reads.

    Raises:
        ConfigError: ``named_users`` is not one of :data:`NAMED_USERS`.
    """

    max_content_chars: int = 1_000_000
    validate: bool = True
    tool_agent_pattern: re.Pattern[str] = TOOL_AGENT_RE
    named_users: str = "auto"

    def __post_init__(self) -> None:
        if self.named_users not in NAMED_USERS:
            raise ConfigError(f"LoadOptions.named_users must be one of {', '.join(NAMED_USERS)}, "
                              f"not {self.named_users!r}")


NAMED_USERS = ("auto", "agent", "user")


@dataclass(frozen=True)
class Sniff:
    """The outcome of an adapter's detection: ``ok`` or the reason it does not match."""

    ok: bool
    reason: str = ""


@runtime_checkable
class Adapter(Protocol):
    """A trace format.

    ``name`` is the registry key (``--format NAME``). ``sniff(doc)`` inspects a parsed JSON document;
    ``records(doc)`` yields the runs it holds (one for single-run documents); ``convert(run, ...)``
    builds the IR and raises :class:`~trajaudit.errors.TraceFormatError` on bad input.
    """

    name: str
    description: str

    def sniff(self, doc: Any) -> Sniff: ...

    def records(self, doc: Any) -> list[Any]: ...

    def convert(self, run: Any, *, source: Source, options: LoadOptions) -> Trajectory: ...


@dataclass
class Classified:
    """How one raw message maps into a step (what an adapter's classifier returns)."""

    kind: str
    role: str
    agent: str | None
    flags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


def text_of(content: Any) -> tuple[str, bool]:
    """Render message content to text.

    Returns:
        ``(text, was_text)``; ``was_text`` is False when the content was not a plain string (a list of
        OpenAI content parts, a dict, a number) and had to be rendered.
    """
    if content is None:
        return "", True
    if isinstance(content, str):
        return content, True
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, dict) and isinstance(p.get("text"), str):
                parts.append(p["text"])
            elif isinstance(p, str):
                parts.append(p)
            else:
                parts.append(json.dumps(p, ensure_ascii=False, default=str))
        return "\n".join(parts), False
    return json.dumps(content, ensure_ascii=False, default=str), False


def parse_tool_call(raw: Any, path: str) -> tuple[ToolCall, bool]:
    """Parse one tool call in OpenAI form (``{id, type, function: {name, arguments}}``) or flat form
    (``{id, name, arguments}``).

    Returns:
        ``(call, malformed)``; a malformed arguments string is kept in ``raw_arguments`` with
        ``arguments_error`` set, never dropped.

    Raises:
        TraceFormatError: the call is not an object.
    """
    if not isinstance(raw, dict):
        raise TraceFormatError(f"tool call must be an object, got {type(raw).__name__}", json_path=path)
    fn = raw.get("function") if isinstance(raw.get("function"), dict) else raw
    name = fn.get("name")
    name = name if isinstance(name, str) and name else "<unnamed>"
    args = fn.get("arguments", fn.get("args", fn.get("input")))
    call_id = raw.get("id")
    call_id = str(call_id) if call_id is not None else None
    if isinstance(args, str):
        try:
            parsed = safe_json.loads(args) if args.strip() else {}
        except ValueError as e:
            return ToolCall(name=name, id=call_id, raw_arguments=args, arguments_error=f"invalid JSON: {e}"), True
        return ToolCall(name=name, arguments=parsed, id=call_id, raw_arguments=args), False
    return ToolCall(name=name, arguments=args if args is not None else {}, id=call_id), False


def build_steps(
    messages: list[Any],
    classify: Callable[[dict[str, Any], int], Classified],
    *,
    options: LoadOptions,
    path: str = "$",
    source_number: Callable[[dict[str, Any], int], Any] | None = None,
) -> list[Step]:
    """Turn raw chat-like messages into steps, flagging degradations.

    Each message may have ``content``, ``tool_calls`` (or a legacy ``function_call``),
    ``tool_call_id`` and ``name``. ``classify(message, i)`` decides kind, role and agent. A tool
    output is an error (``ToolOutput.is_error``) when its text reports one (:func:`looks_like_error`)
    or its message carries ``is_error: true`` (the explicit marker of Anthropic's ``tool_result`` and
    LangChain's ``status: "error"``, which the dialect adapters normalize to it).

    Raises:
        TraceFormatError: a message is not an object (with its JSON path).
    """
    steps: list[Step] = []
    seen_calls: set[str] = set()
    answered: set[str] = set()
    for i, msg in enumerate(messages):
        mpath = f"{path}[{i}]"
        if not isinstance(msg, dict):
            raise TraceFormatError(f"message must be an object, got {type(msg).__name__}", json_path=mpath)
        c = classify(msg, i)
        flags = list(c.flags)
        meta = dict(c.metadata)
        content, was_text = text_of(msg.get("content"))
        if not was_text:
            flags.append(FLAG_NON_TEXT_CONTENT)
        if len(content) > options.max_content_chars:
            meta["original_length"] = len(content)
            content = content[: options.max_content_chars]
            flags.append(FLAG_TRUNCATED)
        calls: list[ToolCall] = []
        raw_calls = msg.get("tool_calls")
        if raw_calls is None and isinstance(msg.get("function_call"), dict):
            raw_calls = [msg["function_call"]]
        if raw_calls is not None:
            if not isinstance(raw_calls, list):
                raise TraceFormatError("tool_calls must be a list", json_path=f"{mpath}.tool_calls")
            for j, rc in enumerate(raw_calls):
                call, bad = parse_tool_call(rc, f"{mpath}.tool_calls[{j}]")
                calls.append(call)
                if bad and FLAG_MALFORMED_ARGUMENTS not in flags:
                    flags.append(FLAG_MALFORMED_ARGUMENTS)
                if call.id:
                    seen_calls.add(call.id)
        output = None
        if c.kind == "tool":
            call_id = msg.get("tool_call_id")
            call_id = str(call_id) if call_id is not None else None
            if call_id is not None:
                if call_id not in seen_calls:
                    flags.append(FLAG_ORPHAN_TOOL_OUTPUT)
                answered.add(call_id)
            name = msg.get("name") if c.role == "tool" else None
            output = ToolOutput(call_id=call_id, name=name if isinstance(name, str) else None,
                                is_error=msg.get("is_error") is True or looks_like_error(content))
        num = source_number(msg, i) if source_number else None
        steps.append(
            Step(
                index=i,
                kind=c.kind,  # type: ignore[arg-type]
                role=c.role,
                agent=c.agent,
                content=content,
                tool_calls=tuple(calls),
                tool_output=output,
                source_number=num,
                flags=tuple(flags),
                metadata=meta,
            )
        )
    if seen_calls - answered:
        missing = seen_calls - answered
        for k, s in enumerate(steps):
            if any(tc.id in missing for tc in s.tool_calls):
                steps[k] = Step(**{**s.__dict__, "flags": s.flags + (FLAG_UNANSWERED_CALL,)})
    return steps


def classify_openai(msg: dict[str, Any], i: int, default_agent: str = "assistant", *,
                    tool_agents: re.Pattern[str] | None = None,
                    agent_users: frozenset[str] = frozenset(),
                    user_speakers: frozenset[str] = frozenset()) -> Classified:
    """Classify a standard OpenAI chat message (system/developer/user/assistant/tool/function).

    Args:
        tool_agents: names of code/tool runners (``LoadOptions.tool_agent_pattern``): a ``user`` or
            ``assistant`` message without tool calls whose ``name`` matches is that runner's output
            (kind ``tool``, agent = the name) — multi-agent frameworks (AutoGen group chats) log a
            code executor's output as a named ``user`` message, as the Who&When adapter reads it.
        agent_users: names whose ``user`` messages are other agents' turns in a group chat
            (:func:`~trajaudit.engine.trace.adapters.speakers.group_chat_agents`): kind ``agent``, role ``assistant``, agent = the name,
            ``metadata.logged_role = "user"``.
        user_speakers: names whose ``assistant`` messages without tool calls are the user's turns, in
            a log written from the human proxy's side (:func:`~trajaudit.engine.trace.adapters.speakers.human_speakers`): kind ``user``,
            ``metadata.logged_role = "assistant"``.

    The agent of an ``assistant`` message is its ``name``, else its ``sender`` (OpenAI Swarm's
    multi-agent logs), else ``default_agent``; names are stripped of surrounding whitespace, and a
    blank one counts as absent.
    """
    role = msg.get("role")
    name = msg.get("name").strip() or None if isinstance(msg.get("name"), str) else None
    if (tool_agents is not None and name and role in ("user", "assistant") and not msg.get("tool_calls")
            and tool_agents.match(name)):
        return Classified("tool", "tool", name)
    if role in ("system", "developer"):
        return Classified("system", "system", None)
    if role == "user":
        if name and name in agent_users:
            return Classified("agent", "assistant", name, metadata={"logged_role": "user"})
        return Classified("user", "user", None, metadata={"name": name} if name else {})
    if role == "assistant":
        if name and name in user_speakers and not msg.get("tool_calls"):
            return Classified("user", "user", None, metadata={"logged_role": "assistant"})
        if not name:  # OpenAI Swarm names the speaking agent of an assistant message in ``sender``
            sender = msg.get("sender")
            name = sender.strip() if isinstance(sender, str) and sender.strip() else None
        return Classified("agent", "assistant", name or default_agent)
    if role in ("tool", "function"):
        return Classified("tool", "tool", None)
    raw = str(role) if role is not None else "<missing>"
    return Classified("agent", raw, name or raw, flags=[FLAG_UNKNOWN_ROLE])


def assemble(
    steps: list[Step],
    *,
    id: str,
    source: Source,
    task: str = "",
    system_prompts: dict[str, str] | None = None,
    flags: Iterable[str] = (),
    metadata: dict[str, Any] | None = None,
) -> Trajectory:
    """Build a :class:`Trajectory` from steps, deriving ``agents`` and ``final_answer``.

    Raises:
        TraceFormatError: the run has no messages.
    """
    if not steps:
        raise TraceFormatError("run has no messages")
    agents: list[str] = []
    for s in steps:
        if s.is_decision and s.agent and s.agent not in agents:
            agents.append(s.agent)
    final = None
    for s in reversed(steps):
        if s.is_decision and s.content.strip() and not s.tool_calls:
            final = s.content
            break
    return Trajectory(
        id=id,
        steps=tuple(steps),
        source=source,
        task=task,
        final_answer=final,
        agents=tuple(agents),
        system_prompts=dict(system_prompts or {}),
        flags=tuple(flags),
        metadata=dict(metadata or {}),
    )


def message_like(x: Any) -> bool:
    """An object with a ``role`` or ``type``: a message or item of some chat format, never a run."""
    return isinstance(x, dict) and ("role" in x or "type" in x)


def is_run_list(doc: Any, is_run: Callable[[Any], bool]) -> bool:
    """Whether ``doc`` is a list of runs: a list with at least one run (``is_run``) and no element
    that looks like a message (an object with a ``role`` or ``type``). Its other elements (``null``,
    ``{}``, a run whose ``messages`` is no list) are broken runs, read and reported one by one, so
    one of them does not turn the whole batch into a single unreadable "message list"."""
    return (isinstance(doc, list) and any(is_run(r) for r in doc)
            and all(is_run(r) or not message_like(r) for r in doc))


def split_runs(doc: Any, is_run: Callable[[Any], bool]) -> list[Any]:
    """An adapter's ``records``: a list of runs (:func:`is_run_list`) holds one record per element;
    any other document is one run."""
    return list(doc) if is_run_list(doc, is_run) else [doc]


def role_messages_check(runs: list[Any]) -> Sniff:
    """An adapter's ``accepts`` when its format is forced, for chat formats whose runs are a message
    list or ``{"messages": [...]}``: every message an object with a ``role`` string."""
    for r in runs:
        msgs = r.get("messages") if isinstance(r, dict) else r
        if not isinstance(msgs, list) or not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in msgs):
            return Sniff(False, "expected chat messages: objects with a 'role' string")
    return Sniff(True)


def sniff_runs(runs: list[Any], reason: Callable[[Any], str]) -> Sniff:
    """A format matches when one run of a batch matches (``reason(run) == ""``): the other runs (an
    empty or broken run) are reported alone when converted, so one bad run neither loses the batch
    nor sends it to another format's reading; when none matches, the first run's reason."""
    why = reason(runs[0])
    ok = not why or any(not reason(r) for r in runs[1:])
    return Sniff(ok, "" if ok else (f"run 0: {why}" if len(runs) > 1 else why))


def run_messages(run: Any, adapter: str) -> tuple[list[Any], str]:
    """``(messages, JSON path)`` of a chat run given as a message list or ``{"messages": [...]}``.

    Raises:
        TraceFormatError: ``messages`` is not a list.
    """
    messages, path = (run.get("messages"), "$.messages") if isinstance(run, dict) else (run, "$")
    if not isinstance(messages, list):
        raise TraceFormatError("'messages' must be a list", json_path=path, adapter=adapter)
    return messages, path


def first_user_text(messages: list[Any]) -> str:
    """The content of the first user message, or ""."""
    for m in messages:
        if isinstance(m, dict) and m.get("role") in ("user", "human"):
            return text_of(m.get("content"))[0]
    return ""
