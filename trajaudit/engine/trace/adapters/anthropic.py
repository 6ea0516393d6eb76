"""Anthropic Messages API conversations: ``{"system": ..., "messages": [...]}`` or a bare message list.

Accepted documents: a list of messages; ``{"messages": [...], "system"?: str | [text blocks], ...}``
(a request body); a list of such objects (one run per element); JSONL of either (one run per line).
A message's ``content`` is a string or a list of blocks: ``text``, ``tool_use`` (``id``, ``name``,
``input``), ``tool_result`` (``tool_use_id``, ``content``: a string or text blocks, ``is_error``),
``thinking`` (``thinking``), ``redacted_thinking``; ``server_tool_use`` / ``mcp_tool_use`` (calls that
Anthropic's servers or an MCP server run) and their results, the ``*_tool_result`` blocks of the same
assistant message (``web_search_tool_result``, ``code_execution_tool_result``, ``mcp_tool_result`` …;
failed when ``is_error``, an ``…_error`` content object or a non-zero ``return_code``); any other block
(an image, a document) is kept rendered as JSON and the step flagged ``non_text_content``.

Every message is normalized to OpenAI chat messages and read by
:func:`~trajaudit.engine.trace.adapters.openai_chat.convert_chat` (the OpenAI adapter's reading):
``tool_use`` blocks become the step's tool calls, each ``tool_result`` block a tool step answering
its call (``is_error: true`` → ``ToolOutput.is_error``). The top-level ``system`` is no step: it is
``Trajectory.system_prompts["*"]``.

Step numbering: ``Step.index`` is the 0-based position in ``messages``, except where one message
holds several ``tool_result`` blocks (parallel tool use), results and text, or a server tool's call
and result: that message becomes
one tool step per result, then one step per run of other blocks (its text), in block order — the
way the OpenAI format writes it. The later steps of such a message are flagged ``split_message``,
and then every step of the run has ``source_number`` = the 0-based position of its message in
``messages`` (so a message position n is the step whose ``source_number`` is n).

Thinking: an assistant message's text blocks are its content; its thinking text is kept in
``metadata.thinking``. A message with no text at all (thinking before a tool call) has its thinking
text as content (``metadata.content_from = "thinking"``), as the Responses adapter reads a
``reasoning`` item, so a decision step keeps the reasons it gave. Redacted thinking blocks are
counted in ``metadata.redacted_thinking``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trajaudit.engine.trace.adapters.base import (
    LoadOptions,
    Sniff,
    is_run_list,
    role_messages_check,
    run_messages,
    split_runs,
    text_of,
)
from trajaudit.engine.trace.adapters.openai_chat import MessageNote, convert_chat
from trajaudit.engine.trace.ir import (
    FLAG_MALFORMED_CALL,
    FLAG_ORPHAN_TOOL_OUTPUT,
    FLAG_SPLIT_MESSAGE,
    Source,
    Trajectory,
)
from trajaudit.errors import TraceFormatError

# Block types that only Anthropic-style content has: positive evidence for detection (and every
# ``*_tool_result`` block, see :func:`is_result_block`).
EVIDENCE_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use",
                             "mcp_tool_use"})
# Calls Anthropic's servers run (web search, web fetch, code execution) or an MCP server answers: their
# results come back in the same assistant message as ``*_tool_result`` blocks.
SERVER_CALL_BLOCKS = frozenset({"server_tool_use", "mcp_tool_use"})
_NUMBERING = "Anthropic: 0-based position in 'messages' (see source_number where a message was split)"


def block_type(block: Any) -> str | None:
    """The ``type`` of a content block or item when it is a string, else ``None`` (safe to look up in a set)."""
    kind = block.get("type") if isinstance(block, dict) else None
    return kind if isinstance(kind, str) else None


def is_result_block(block: Any) -> bool:
    """A tool result: ``tool_result`` (in a user message), or a server/MCP tool's result
    (``web_search_tool_result``, ``code_execution_tool_result``, ``mcp_tool_result`` …, in the
    assistant message that made the call)."""
    kind = block_type(block)
    return kind is not None and (kind == "tool_result" or kind.endswith("_tool_result"))


@dataclass
class Blocks:
    """The content blocks of one stretch of a message that is not a tool result.

    Attributes:
        parts: text strings and non-text blocks, in order.
        calls: flat tool calls ``{id, name, input}`` from ``tool_use`` blocks.
        thinking: the text of ``thinking`` blocks.
        redacted: how many ``redacted_thinking`` blocks there were.
        flags: degradations met (a tool call without a name or an id).
        first: index of the first block of the stretch in the message's content list.
        server_calls: read ``server_tool_use``/``mcp_tool_use`` blocks as calls too (the Anthropic
            adapter, which also splits their results off; other readers keep them as JSON parts).
    """

    parts: list[Any] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    redacted: int = 0
    flags: list[str] = field(default_factory=list)
    first: int = 0
    server_calls: bool = False

    def add(self, block: Any) -> None:
        """Take one block that is not a ``tool_result``."""
        kind = block_type(block)
        if isinstance(block, str):
            self.parts.append(block)
        elif kind == "text" and isinstance(block.get("text"), str):
            self.parts.append(block["text"])
        elif kind == "tool_use" or (self.server_calls and kind in SERVER_CALL_BLOCKS):
            name, cid = block.get("name"), block.get("id")
            if not (isinstance(name, str) and name) or not (isinstance(cid, str) and cid):
                self._flag(FLAG_MALFORMED_CALL)
            self.calls.append({"id": cid if isinstance(cid, (str, int)) else None, "name": name,
                               "input": block.get("input", {})})
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            self.thinking.append(block["thinking"])
        elif kind == "reasoning" and (reasoning := _reasoning_text(block)) is not None:  # LangChain's
            self.thinking.append(reasoning)  # standard block
        elif kind == "redacted_thinking":
            self.redacted += 1
        else:  # an image, a document, a block that is not an object: kept, rendered as JSON (and the
            self.parts.append(block)  # step flagged non_text_content) by build_steps

    def _flag(self, flag: str) -> None:
        if flag not in self.flags:
            self.flags.append(flag)

    def content(self) -> tuple[Any, dict[str, Any]]:
        """``(content, metadata)``: the text joined (a list when a part is not text, for
        :func:`~trajaudit.engine.trace.adapters.base.text_of` to render), the thinking text when there is no
        other text (``content_from: thinking``), else the thinking in ``metadata.thinking``."""
        meta: dict[str, Any] = {}
        thinking = "\n".join(self.thinking)
        if self.redacted:
            meta["redacted_thinking"] = self.redacted
        if all(isinstance(p, str) for p in self.parts):
            text = "\n".join(self.parts)
            if not text.strip() and thinking:
                meta["content_from"] = "thinking"
                return thinking, meta
            if thinking:
                meta["thinking"] = thinking
            return text, meta
        if thinking:
            meta["thinking"] = thinking
        return [{"type": "text", "text": p} if isinstance(p, str) else p for p in self.parts], meta


def _reasoning_text(block: dict[str, Any]) -> str | None:
    """The text of a LangChain ``reasoning`` block: its ``reasoning`` string, else its summary texts."""
    if isinstance(block.get("reasoning"), str):
        return block["reasoning"]
    summary = block.get("summary")
    if isinstance(summary, list):
        texts = [b["text"] for b in summary if isinstance(b, dict) and isinstance(b.get("text"), str)]
        return "\n".join(texts) if texts else None
    return None


def result_content(content: Any) -> Any:
    """A tool result's content for an OpenAI tool message: a string as is, a list of only text
    blocks joined, anything else as is (rendered and flagged by ``build_steps``)."""
    if isinstance(content, list) and all(isinstance(b, dict) and b.get("type") == "text"
                                         and isinstance(b.get("text"), str) for b in content):
        return "\n".join(b["text"] for b in content)
    return "" if content is None else content


def normalize(messages: list[Any], path: str) -> tuple[list[dict[str, Any]], list[MessageNote]]:
    """Anthropic messages → OpenAI chat messages and their notes (see the module docstring).

    Raises:
        TraceFormatError: a message is not an object (with the JSON path).
    """
    out: list[dict[str, Any]] = []
    notes: list[MessageNote] = []
    for i, msg in enumerate(messages):
        mpath = f"{path}[{i}]"
        if not isinstance(msg, dict):
            raise TraceFormatError(f"message must be an object, got {type(msg).__name__}", json_path=mpath)
        content = msg.get("content")
        if not isinstance(content, list):
            out.append(msg)
            notes.append(MessageNote(source_number=i))
            continue
        pieces: list[tuple[dict[str, Any], MessageNote]] = []
        stretch: Blocks | None = None
        for j, block in enumerate(content):
            if is_result_block(block):
                if stretch is not None:
                    pieces.append(_message(msg, stretch, i))
                    stretch = None
                pieces.append(_result(block, i, j))
                continue
            if stretch is None:
                stretch = Blocks(first=j, server_calls=True)
            stretch.add(block)
        if stretch is not None or not pieces:
            pieces.append(_message(msg, stretch or Blocks(), i))
        if len(pieces) > 1:
            pieces = [(m, MessageNote(n.flags + ((FLAG_SPLIT_MESSAGE,) if k else ()), n.metadata, i))
                      for k, (m, n) in enumerate(pieces)]
        else:  # one step for the message: no block position to report
            m, n = pieces[0]
            pieces = [(m, MessageNote(n.flags, {k: v for k, v in n.metadata.items() if k != "block"}, i))]
        for m, n in pieces:
            out.append(m)
            notes.append(n)
    return out, notes


def _message(msg: dict[str, Any], b: Blocks, i: int) -> tuple[dict[str, Any], MessageNote]:
    content, meta = b.content()
    m = {k: v for k, v in msg.items() if k not in ("content", "tool_calls")}
    m["content"] = content
    calls = msg.get("tool_calls", [])
    if not isinstance(calls, list):  # kept as found: build_steps reports it
        m["tool_calls"] = calls
    elif calls or b.calls:
        m["tool_calls"] = [*calls, *b.calls]
    return m, MessageNote(tuple(b.flags), {**meta, "block": b.first}, i)


def result_failed(block: dict[str, Any]) -> bool:
    """Whether a tool result block says it failed: ``is_error: true``, a server tool's error object
    (``{"type": "web_search_tool_result_error", "error_code": ...}``), or code execution's non-zero
    ``return_code``."""
    content = block.get("content")
    if block.get("is_error") is True:
        return True
    if isinstance(content, dict):
        kind, code = block_type(content), content.get("return_code")
        return (kind is not None and kind.endswith("_error")) or (
            isinstance(code, int) and not isinstance(code, bool) and code != 0)
    return False


def _result(block: dict[str, Any], i: int, j: int) -> tuple[dict[str, Any], MessageNote]:
    cid = block.get("tool_use_id")
    m: dict[str, Any] = {"role": "tool", "content": result_content(block.get("content")),
                         "is_error": result_failed(block)}
    flags: tuple[str, ...] = ()
    if isinstance(cid, (str, int)) and not isinstance(cid, bool) and str(cid):
        m["tool_call_id"] = cid
    else:  # no id to link it to its call
        flags = (FLAG_ORPHAN_TOOL_OUTPUT,)
    return m, MessageNote(flags, {"block": j}, i)


def _has_evidence(messages: Any) -> bool:
    return isinstance(messages, list) and any(
        isinstance(m, dict) and isinstance(m.get("content"), list)
        and any(block_type(b) in EVIDENCE_BLOCKS or is_result_block(b) for b in m["content"])
        for m in messages)


def _is_run(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("messages"), list)


def _run_sniff(run: Any) -> bool:
    if _is_run(run):
        return "system" in run or _has_evidence(run["messages"])
    return isinstance(run, list) and bool(run) and all(isinstance(m, dict) and isinstance(m.get("role"), str)
                                                       for m in run) and _has_evidence(run)


class AnthropicAdapter:
    """Anthropic Messages API conversations (content blocks ``tool_use``/``tool_result``/``thinking``)."""

    name = "anthropic"
    description = ("Anthropic Messages API: {'system', 'messages'} or a message list whose content blocks "
                   "are text/tool_use/tool_result/thinking, or a list of such objects")

    def sniff(self, doc: Any) -> Sniff:
        """Match only on positive evidence: a ``tool_use``/``tool_result``/``thinking``/
        ``redacted_thinking`` content block, or a top-level ``system`` beside ``messages`` (plain
        OpenAI messages have the same roles)."""
        if is_run_list(doc, _is_run):
            ok = any(_run_sniff(r) for r in doc)
        else:
            ok = _run_sniff(doc)
        return Sniff(ok, "" if ok else "no tool_use/tool_result/thinking content block and no top-level 'system'")

    def accepts(self, doc: Any) -> Sniff:
        """The check when ``--input-format anthropic`` is forced: messages that are objects with a
        ``role`` string."""
        return role_messages_check(self.records(doc))

    def records(self, doc: Any) -> list[Any]:
        """One record per run (a list of ``{"messages"}`` objects holds several)."""
        return split_runs(doc, _is_run)

    def convert(self, run: Any, *, source: Source, options: LoadOptions) -> Trajectory:
        """Convert one run.

        Raises:
            TraceFormatError: no message list, a message that is not an object, no messages.
        """
        messages, path = run_messages(run, self.name)
        normalized, notes = normalize(messages, path)
        if len(normalized) == len(messages):  # 1:1: the index is the position, no source_number needed
            notes = [MessageNote(n.flags, n.metadata) for n in notes]
        system = run.get("system") if isinstance(run, dict) else None
        prompt = text_of(system)[0] if system is not None else ""
        return convert_chat(normalized, source=source, options=options, path=path,
                            run=run if isinstance(run, dict) else None, exclude=("messages", "system"),
                            system_prompts={"*": prompt} if prompt.strip() else None, notes=notes,
                            id_basis=run, step_numbering=_NUMBERING)
