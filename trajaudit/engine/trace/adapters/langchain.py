"""LangChain / LangGraph message dumps.

Accepted documents: a list of messages; ``{"messages": [...], ...}`` (a LangGraph state); a list of
such objects (one run per element); JSONL of either. A message is any of the three serializations
LangChain writes:

- ``message.model_dump()`` / ``.dict()``: ``{"type": "human"|"ai"|"tool"|"system"|"function"|"chat",
  "content", "name"?, "tool_calls"?, "tool_call_id"?, "status"?, "additional_kwargs"?, ...}``;
- ``messages_to_dict``: ``{"type": "human", "data": {"content": ..., ...}}``;
- ``dumpd`` (LangSmith): ``{"lc": 1, "type": "constructor", "id": [..., "AIMessage"], "kwargs": {...}}``.

``…MessageChunk`` types read as their message type. One step per message (``Step.index`` = 0-based
position in the list). ``human`` is a user turn, ``ai`` an agent step (agent = its ``name``, else
``assistant``; LangGraph names the agent of a multi-agent graph there), ``tool`` a tool output
(``status: "error"`` → ``ToolOutput.is_error``), ``system`` a system step, ``function`` a legacy
function result, ``chat`` takes its ``role``; any other type is kept as an agent step flagged
``unknown_role``. An ``ai`` message's calls are its ``tool_calls`` (``{name, args, id}``), else the
OpenAI-style ``additional_kwargs.tool_calls`` (or ``function_call``) of older versions, else the
``tool_use`` blocks of its content; ``invalid_tool_calls`` are kept as calls (flagged
``malformed_arguments`` when their arguments are not JSON). Content lists are read as the Anthropic
adapter reads content blocks (text; ``thinking`` — and LangChain's standard ``reasoning`` blocks — as
content only when there is no text, else in ``metadata.thinking``).
"""

from __future__ import annotations

from typing import Any

from trajaudit.engine.trace.adapters.anthropic import Blocks
from trajaudit.engine.trace.adapters.base import LoadOptions, Sniff, run_messages, sniff_runs, split_runs
from trajaudit.engine.trace.adapters.openai_chat import MessageNote, convert_chat
from trajaudit.engine.trace.ir import FLAG_MALFORMED_CALL, Source, Trajectory
from trajaudit.errors import TraceFormatError

# LangChain message type → OpenAI role ("chat" messages carry their own role).
ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system", "function": "function",
         "developer": "developer", "chat": None}
# Class names (``dumpd`` ids, chunk types) → message type.
_CLASSES = {"HumanMessage": "human", "AIMessage": "ai", "ToolMessage": "tool", "SystemMessage": "system",
            "FunctionMessage": "function", "ChatMessage": "chat"}
_NUMBERING = "LangChain: 0-based position in the message list"


def message_fields(raw: Any) -> tuple[str | None, dict[str, Any] | None]:
    """``(type, fields)`` of one serialized LangChain message, or ``(None, None)`` when it is not one."""
    if not isinstance(raw, dict):
        return None, None
    kind = raw.get("type")
    if raw.get("lc") == 1 and kind == "constructor":
        ids, kw = raw.get("id"), raw.get("kwargs")
        cls = ids[-1] if isinstance(ids, list) and ids and isinstance(ids[-1], str) else None
        return _type_of(cls), kw if isinstance(kw, dict) else None
    if not isinstance(kind, str):
        return None, None
    data = raw.get("data")
    if isinstance(data, dict) and "content" not in raw:
        return _type_of(kind), data
    return _type_of(kind), raw


def _type_of(name: str | None) -> str | None:
    if name is None:
        return None
    base = name[: -len("Chunk")] if name.endswith("Chunk") else name
    return _CLASSES.get(base, base if base in ROLES else name)


def _is_message(raw: Any) -> bool:
    """A serialized message of a known type with a ``content`` (every LangChain serialization writes
    it; an OpenAI tool schema ``{"type": "function", "function": ...}`` has none)."""
    kind, fields = message_fields(raw)
    return kind in ROLES and fields is not None and "content" in fields


def _is_run(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("messages"), list)


def _run_reason(run: Any) -> str:
    """Why ``run`` is not a run of LangChain messages, or ``""`` when it is one."""
    msgs = run.get("messages") if _is_run(run) else run
    if not isinstance(msgs, list) or not msgs:
        return "not a non-empty list of LangChain messages (or {'messages': [...]})"
    bad = next((i for i, m in enumerate(msgs) if not _is_message(m)), None)
    if bad is not None:
        return f"element {bad} is not a LangChain message (a 'content' and a type: {', '.join(sorted(ROLES))})"
    return ""


def normalize_message(kind: str | None, f: dict[str, Any], path: str) -> tuple[dict[str, Any], MessageNote]:
    """One LangChain message (its type and fields) → one OpenAI chat message and its note.

    Raises:
        TraceFormatError: ``tool_calls`` is not a list of objects (with the JSON path).
    """
    role = ROLES.get(kind or "", kind) if kind != "chat" else f.get("role")
    if not isinstance(role, str):
        role = str(kind)
    m: dict[str, Any] = {"role": role}
    flags: list[str] = []
    meta: dict[str, Any] = {}
    content = f.get("content")
    blocks = Blocks()
    if isinstance(content, list):
        for b in content:
            blocks.add(b)
        content, meta = blocks.content()
        flags += [x for x in blocks.flags if x != FLAG_MALFORMED_CALL]
    m["content"] = content
    if isinstance(f.get("name"), str):
        m["name"] = f["name"]
    if role == "tool":
        if f.get("tool_call_id") is not None:
            m["tool_call_id"] = f["tool_call_id"]
        m["is_error"] = f.get("status") == "error"
    calls = _calls(f, blocks, path)
    if any(not _named(c) for c in calls):
        flags.append(FLAG_MALFORMED_CALL)
    if calls:
        m["tool_calls"] = calls
    elif isinstance(f.get("additional_kwargs"), dict) and isinstance(f["additional_kwargs"].get("function_call"), dict):
        m["function_call"] = f["additional_kwargs"]["function_call"]
    return m, MessageNote(tuple(flags), meta)


def _named(call: dict[str, Any]) -> bool:
    """Whether a flat (``{name, args}``) or OpenAI-style (``{function: {name}}``) call has a name."""
    fn = call["function"] if isinstance(call.get("function"), dict) else call
    return isinstance(fn.get("name"), str) and bool(fn["name"])


def _calls(f: dict[str, Any], blocks: Blocks, path: str) -> list[dict[str, Any]]:
    """The message's tool calls as flat/OpenAI call objects (see the module docstring)."""
    extra = f.get("additional_kwargs") if isinstance(f.get("additional_kwargs"), dict) else {}
    for key, where, items in (("tool_calls", "tool_calls", f.get("tool_calls")),
                              ("tool_calls", "additional_kwargs.tool_calls", extra.get("tool_calls"))):
        if items is None or items == []:
            continue
        if not isinstance(items, list) or not all(isinstance(c, dict) for c in items):
            raise TraceFormatError(f"{key} must be a list of objects", json_path=f"{path}.{where}")
        out = [dict(c) for c in items]
        break
    else:
        out = [{"id": c.get("id"), "name": c.get("name"), "arguments": c.get("input", {})} for c in blocks.calls]
    bad = f.get("invalid_tool_calls")
    if isinstance(bad, list):
        out += [{"id": c.get("id"), "name": c.get("name"),
                 "arguments": c.get("args") if isinstance(c.get("args"), str) else ""}
                for c in bad if isinstance(c, dict)]
    return out


class LangChainAdapter:
    """LangChain / LangGraph messages (``type`` human/ai/tool/system, ``data``-wrapped or ``dumpd``)."""

    name = "langchain"
    description = ("LangChain/LangGraph messages ({'type': 'human'|'ai'|'tool'|..., 'content'}, "
                   "messages_to_dict or dumpd form): a list, {'messages': [...]}, or a list of such objects")

    def sniff(self, doc: Any) -> Sniff:
        """Match when every message of a run is a serialized LangChain message of a known type. In a
        list of runs (``[{"messages": [...]}, ...]``) one such run is enough: the others (an empty or
        broken run) are reported alone when converted, as the OpenAI and Anthropic adapters do — else
        one bad run made the whole batch read as OpenAI messages of unknown roles."""
        return sniff_runs(self.records(doc), _run_reason)

    def accepts(self, doc: Any) -> Sniff:
        """The check when ``--input-format langchain`` is forced: every message has a ``type`` (any)."""
        for r in self.records(doc):
            msgs = r.get("messages") if _is_run(r) else r
            if not isinstance(msgs, list) or not all(message_fields(m)[1] is not None for m in msgs):
                return Sniff(False, "expected LangChain messages: objects with a 'type' string")
        return Sniff(True)

    def records(self, doc: Any) -> list[Any]:
        """One record per run (a list of ``{"messages"}`` objects holds several)."""
        return split_runs(doc, _is_run)

    def convert(self, run: Any, *, source: Source, options: LoadOptions) -> Trajectory:
        """Convert one run.

        Raises:
            TraceFormatError: no message list, an element that is not a LangChain message, no messages.
        """
        messages, path = run_messages(run, self.name)
        out: list[dict[str, Any]] = []
        notes: list[MessageNote] = []
        for i, raw in enumerate(messages):
            kind, fields = message_fields(raw)
            if fields is None:
                raise TraceFormatError("not a LangChain message (an object with a 'type' string)",
                                       json_path=f"{path}[{i}]", adapter=self.name)
            inner = f"{path}[{i}]" if fields is raw else f"{path}[{i}].{'data' if 'data' in raw else 'kwargs'}"
            m, n = normalize_message(kind, fields, inner)
            out.append(m)
            notes.append(n)
        return convert_chat(out, source=source, options=options, path=path,
                            run=run if isinstance(run, dict) else None, notes=notes, id_basis=run,
                            step_numbering=_NUMBERING)
