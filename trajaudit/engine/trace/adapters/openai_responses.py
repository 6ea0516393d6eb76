"""OpenAI Responses API item lists.

Accepted documents: a list of items; an object with an ``input`` (a list of items, or a string: one
user message), ``output`` and/or ``items`` list — a request body, a ``Response`` object, or both in
one object (read in that order: ``input``, then ``output``, then ``items``); a list of such objects
(one run per element); JSONL of either. ``instructions`` (a string) is the system prompt
(``Trajectory.system_prompts["*"]``), not a step.

Items, one step each (``Step.index`` = 0-based position in the item list, ``input`` then ``output``):

- ``message`` (or an item with a ``role`` and no ``type``): a system/developer/user/assistant turn;
  ``input_text``/``output_text``/``text`` parts are its text, a ``refusal`` part its ``refusal``,
  other parts (images, files) are rendered as JSON and flagged ``non_text_content``;
- ``function_call`` (``call_id``, ``name``, ``arguments``: a JSON string): an agent step with that
  tool call (id = ``call_id``; arguments that are not JSON are kept and flagged
  ``malformed_arguments``; no name or no ``call_id`` → ``malformed_call``); ``custom_tool_call``
  the same, its free-text ``input`` as arguments ``{"input": text}``;
- ``function_call_output`` / ``custom_tool_call_output`` and every other ``*_call_output``
  (``call_id``, ``output``): a tool step answering the call;
- ``reasoning``: an agent step whose content is the summary text (``summary_text`` parts), else the
  reasoning text (``reasoning_text`` parts); ``metadata.item_type = "reasoning"`` (and
  ``metadata.encrypted`` when it holds only ``encrypted_content``);
- any other ``*_call`` item (``web_search_call``, ``computer_call``, ``code_interpreter_call``, …):
  an agent step calling the tool named by the type (``web_search``) — or by the item's ``name`` when
  it has one (``mcp_call``: the MCP server's tool, e.g. ``delete_repo``) — with the item's other
  fields as arguments; its id is the ``call_id`` when the item has one (a ``*_call_output`` answers it);
- any other type (``mcp_list_tools``, ``item_reference``, …): kept as a step whose role and agent are
  the type and whose content is the item as JSON, flagged ``unknown_role`` (as the OpenAI adapter
  keeps a message of an unknown role).
"""

from __future__ import annotations

import json
from typing import Any

from trajaudit.engine.trace.adapters.anthropic import block_type
from trajaudit.engine.trace.adapters.base import OPENAI_ROLES, LoadOptions, Sniff, sniff_runs, split_runs
from trajaudit.engine.trace.adapters.openai_chat import MessageNote, convert_chat
from trajaudit.engine.trace.ir import FLAG_MALFORMED_CALL, FLAG_ORPHAN_TOOL_OUTPUT, Source, Trajectory
from trajaudit.errors import TraceFormatError

# Item types only the Responses API writes: positive evidence for detection.
ITEM_TYPES = frozenset({"message", "function_call", "function_call_output", "reasoning", "custom_tool_call",
                        "custom_tool_call_output"})
_CONTAINERS = ("input", "output", "items")
_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "summary_text", "reasoning_text"})
_NUMBERING = "OpenAI Responses: 0-based position in the item list (input items, then output items)"


def _is_item(x: Any) -> bool:
    return isinstance(x, dict) and (isinstance(x.get("type"), str) or isinstance(x.get("role"), str))


def _items_of(run: Any) -> list[tuple[str, list[Any]]]:
    """``[(json path, items)]`` of a run: the list itself, or its ``input``/``output``/``items``."""
    if isinstance(run, list):
        return [("$", run)]
    if not isinstance(run, dict):
        return []
    out = []
    for key in _CONTAINERS:
        v = run.get(key)
        if isinstance(v, list):
            out.append((f"$.{key}", v))
        elif key == "input" and isinstance(v, str):
            out.append(("$.input", [{"role": "user", "content": v}]))
    return out


def _is_run_object(x: Any) -> bool:
    return isinstance(x, dict) and "type" not in x and "role" not in x and any(
        isinstance(x.get(k), list) for k in _CONTAINERS)


def _bad_item(found: list[tuple[str, list[Any]]]) -> str:
    """Why the items are not Responses items at all (the JSON path of the first that is no item), or ""."""
    if not any(lst for _, lst in found):
        return "no list of Responses items (a list, or 'input'/'output'/'items')"
    for path, lst in found:
        for j, it in enumerate(lst):
            if not _is_item(it):
                return f"{path}[{j}] is not an item (an object with a 'type' or 'role')"
    return ""


def _items_sniff(run: Any) -> str:
    found = _items_of(run)
    why = _bad_item(found)
    if why:
        return why
    if not any(block_type(it) in ITEM_TYPES for _, lst in found for it in lst):
        return f"no item of a Responses type ({', '.join(sorted(ITEM_TYPES))})"
    return ""


def _parts_text(parts: Any) -> Any:
    """Message/summary parts → a string when every part is text, else the list for ``text_of``."""
    if not isinstance(parts, list):
        return parts
    texts = []
    for p in parts:
        if block_type(p) in _TEXT_PARTS and isinstance(p.get("text"), str):
            texts.append(p["text"])
        elif isinstance(p, dict) and p.get("type") == "refusal" and isinstance(p.get("refusal"), str):
            texts.append(p["refusal"])
        else:
            return [{"type": "text", "text": t} for t in texts] + [q for q in parts[len(texts):]]
    return "\n".join(texts)


def _id(value: Any) -> str | int | None:
    """``value`` when it can be a call id (a string or an integer, not a bool), else ``None``."""
    return value if isinstance(value, (str, int)) and not isinstance(value, bool) else None


def _call_id(item: dict[str, Any]) -> Any:
    return _id(item.get("call_id", item.get("id")))


def normalize_item(item: dict[str, Any]) -> tuple[dict[str, Any], MessageNote]:
    """One Responses item → one OpenAI chat message and its note (see the module docstring)."""
    kind = item.get("type")
    if kind is None or kind == "message":
        m = {k: v for k, v in item.items() if k not in ("type", "id", "status", "content")}
        m["content"] = _parts_text(item.get("content"))
        return m, MessageNote()
    if kind in ("function_call", "custom_tool_call"):
        args = item.get("arguments", "") if kind == "function_call" else {"input": item.get("input")}
        cid, name = item.get("call_id"), item.get("name")
        ok = isinstance(cid, str) and cid and isinstance(name, str) and name
        call = {"id": _call_id(item), "name": name, "arguments": args}
        return ({"role": "assistant", "content": "", "tool_calls": [call]},
                MessageNote(() if ok else (FLAG_MALFORMED_CALL,)))
    if isinstance(kind, str) and kind.endswith("_call_output"):
        cid = _id(item.get("call_id"))
        m = {"role": "tool", "content": _parts_text(item.get("output", ""))}
        if cid is not None:
            m["tool_call_id"] = cid
            return m, MessageNote(metadata={"item_type": kind})
        return m, MessageNote((FLAG_ORPHAN_TOOL_OUTPUT,), {"item_type": kind})
    if kind == "reasoning":
        summary = _parts_text(item.get("summary"))
        text = summary if isinstance(summary, str) and summary.strip() else _parts_text(item.get("content"))
        meta: dict[str, Any] = {"item_type": "reasoning"}
        if not text and item.get("encrypted_content"):
            meta["encrypted"] = True  # the reasoning is there, but only OpenAI can read it
        return {"role": "assistant", "content": text if text is not None else ""}, MessageNote(metadata=meta)
    if isinstance(kind, str) and kind.endswith("_call") and kind != "_call":
        args = {k: v for k, v in item.items() if k not in ("type", "id", "call_id", "status")}
        named = item.get("name")  # mcp_call: the MCP server's tool; the type names only the transport
        call = {"id": _id(item.get("call_id")),
                "name": named if isinstance(named, str) and named else kind[: -len("_call")], "arguments": args}
        return {"role": "assistant", "content": "", "tool_calls": [call]}, MessageNote(metadata={"item_type": kind})
    text = json.dumps(item, ensure_ascii=False, default=str)
    role = kind if isinstance(kind, str) and kind not in OPENAI_ROLES else f"item:{kind}"
    return {"role": role, "content": text}, MessageNote(metadata={"item_type": kind})


class OpenAIResponsesAdapter:
    """OpenAI Responses API items (``message``/``function_call``/``function_call_output``/``reasoning``)."""

    name = "openai_responses"
    description = ("OpenAI Responses API items: a list, {'input'|'output'|'items': [...]} (a request or a "
                   "Response), or a list of such objects")

    def sniff(self, doc: Any) -> Sniff:
        """Match a list of items (or an object holding one) with at least one Responses item type. In
        a list of runs (``[{"input"/"output"/"items": [...]}, ...]``) one such run is enough: the others
        (an empty run, an element that is not an item) are reported alone when converted — else one
        bad run lost the whole batch."""
        return sniff_runs(self.records(doc), _items_sniff)

    def accepts(self, doc: Any) -> Sniff:
        """The check when ``--input-format openai_responses`` is forced: items with a ``type`` or ``role``."""
        for r in self.records(doc):
            why = _bad_item(_items_of(r))
            if why:
                return Sniff(False, why)
        return Sniff(True)

    def records(self, doc: Any) -> list[Any]:
        """One record per run (a list of ``{input/output/items}`` objects holds several)."""
        return split_runs(doc, _is_run_object)

    def convert(self, run: Any, *, source: Source, options: LoadOptions) -> Trajectory:
        """Convert one run.

        Raises:
            TraceFormatError: no item list, an item that is not an object, no items.
        """
        found = _items_of(run)
        if not found:
            raise TraceFormatError("no item list (a list, or 'input'/'output'/'items')", json_path="$",
                                   adapter=self.name)
        messages: list[dict[str, Any]] = []
        notes: list[MessageNote] = []
        for path, items in found:
            for j, item in enumerate(items):
                if not isinstance(item, dict):
                    raise TraceFormatError(f"item must be an object, got {type(item).__name__}",
                                           json_path=f"{path}[{j}]", adapter=self.name)
                m, n = normalize_item(item)
                messages.append(m)
                notes.append(n)
        rd = run if isinstance(run, dict) else None
        instructions = rd.get("instructions") if rd is not None else None
        prompts = {"*": instructions} if isinstance(instructions, str) and instructions.strip() else None
        path = found[0][0] if len(found) == 1 else "$"
        return convert_chat(messages, source=source, options=options, path=path, run=rd,
                            exclude=(*_CONTAINERS, "instructions"), system_prompts=prompts, notes=notes,
                            id_basis=run, step_numbering=_NUMBERING)
