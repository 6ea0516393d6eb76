"""Inspect AI evaluation logs (``inspect``): one trajectory per sample (and epoch).

Accepted documents: the JSON log (``{"version", "eval", "samples": [...], ...}``, ``log_format="json"``)
and the ``.eval`` zip (``header.json`` + ``samples/<id>_epoch_<n>.json``; the loader reads it whole
with :func:`~trajaudit.engine.trace.adapters.files.read_eval_archive`, by Inspect's own ``read_eval_log``
when ``inspect_ai`` is installed). A log without ``samples`` (written with ``header_only``) holds
no run and is reported.

One step per message of the sample's ``messages``, ``Step.index`` = position in that list (the
system message included, as OpenAI chat): ``system``/``user``/``assistant``/``tool``; content given
as a list of content parts is joined (``text``; a ``reasoning`` part is kept in
``metadata.thinking``, and is the content when there is no text); an assistant's ``tool_calls``
(``{id, function, arguments}``, arguments already parsed) are its calls; a tool message is the output
of ``tool_call_id``, named by ``function``, failed when it carries an ``error`` (``{type, message}``)
— or when the sample's ``tool`` event for that call has one. The trajectory id is
``<task>/<sample id>`` (``…#epoch<n>`` past the first epoch); the task is the first user message;
a sample that ended in an error keeps it in ``metadata.sample_error``.
"""

from __future__ import annotations

from typing import Any

from trajaudit.engine.trace.adapters.base import LoadOptions, Sniff
from trajaudit.engine.trace.adapters.openai_chat import MessageNote, convert_chat
from trajaudit.engine.trace.adapters.spans import as_list, as_text
from trajaudit.engine.trace.ir import Source, Trajectory
from trajaudit.errors import TraceFormatError

NUMBERING = "Inspect: 0-based position in the sample's messages"


def is_log(doc: Any) -> bool:
    """An Inspect log: an ``eval`` object (with ``task``/``model``) beside ``samples``/``version``."""
    return (isinstance(doc, dict) and isinstance(doc.get("eval"), dict)
            and ("task" in doc["eval"] or "model" in doc["eval"]) and ("samples" in doc or "version" in doc))


def _content(content: Any) -> tuple[Any, dict[str, Any]]:
    if not isinstance(content, list):
        return content, {}
    texts: list[str] = []
    thinking: list[str] = []
    for p in content:
        if isinstance(p, dict) and p.get("type") == "text":
            texts.append(as_text(p.get("text")))
        elif isinstance(p, dict) and p.get("type") == "reasoning":
            thinking.append(as_text(p.get("reasoning") or p.get("summary")))
        elif isinstance(p, str):
            texts.append(p)
        else:
            texts.append(as_text(p))
    meta = {"thinking": "\n".join(thinking)} if thinking else {}
    if not texts and thinking:
        return "\n".join(thinking), {"content_from": "thinking"}
    return "\n".join(texts), meta


def _messages(sample: dict[str, Any]) -> tuple[list[dict[str, Any]], list[MessageNote]]:
    failed = {str(e.get("id")) for e in as_list(sample.get("events"))
              if isinstance(e, dict) and e.get("event") == "tool" and e.get("error")}
    msgs: list[dict[str, Any]] = []
    notes: list[MessageNote] = []
    for i, m in enumerate(sample["messages"]):
        if not isinstance(m, dict):
            raise TraceFormatError(f"message must be an object, got {type(m).__name__}", json_path=f"$.messages[{i}]")
        content, meta = _content(m.get("content"))
        out: dict[str, Any] = {"role": m.get("role"), "content": content}
        calls = m.get("tool_calls")
        if isinstance(calls, list) and calls:
            out["tool_calls"] = [{"id": c.get("id"), "type": "function",
                                  "function": {"name": c.get("function"), "arguments": c.get("arguments")}}
                                 if isinstance(c, dict) else c for c in calls]
        if m.get("role") == "tool":
            out["tool_call_id"] = m.get("tool_call_id")
            if isinstance(m.get("function"), str):
                out["name"] = m["function"]
            err = m.get("error")
            out["is_error"] = bool(err) or str(m.get("tool_call_id")) in failed
            if isinstance(err, dict) and err.get("message") and not content:
                out["content"] = f"Error: {err['message']}"
        if isinstance(m.get("id"), str):
            meta = {**meta, "message_id": m["id"]}
        msgs.append(out)
        notes.append(MessageNote((), meta))
    return msgs, notes


class InspectAdapter:
    """Inspect AI logs (``.eval`` zip read whole, or the JSON log): one run per sample."""

    name = "inspect"
    description = "Inspect AI logs: the .eval zip or the JSON log ({'eval', 'samples'}): one run per sample"

    def sniff(self, doc: Any) -> Sniff:
        """Match an Inspect log (``eval`` with ``task``/``model``, beside ``samples`` or ``version``)."""
        if is_log(doc):
            return Sniff(True)
        return Sniff(False, "no Inspect log ('eval' with 'task' beside 'samples')")

    def accepts(self, run: Any) -> Sniff:
        """A forced ``--input-format``: one sample (what ``records`` yields)."""
        if isinstance(run, tuple) and len(run) == 2 and isinstance(run[1], dict):
            return Sniff(True)
        return Sniff(False, "expected an Inspect log: {'eval': {...}, 'samples': [...]}")

    def records(self, doc: Any) -> list[Any]:
        """One record per sample: ``(eval header, sample)``."""
        if not is_log(doc):
            return [doc]
        samples = doc.get("samples")
        if not isinstance(samples, list):
            return []  # a header-only log: "the document holds no runs"
        return [(doc["eval"], s) for s in samples]

    def convert(self, run: Any, *, source: Source, options: LoadOptions) -> Trajectory:
        """Convert one sample.

        Raises:
            TraceFormatError: not a sample of an Inspect log, or a sample without a ``messages`` list.
        """
        if not (isinstance(run, tuple) and len(run) == 2):
            raise TraceFormatError("not an Inspect log", adapter=self.name)
        header, sample = run
        if not isinstance(sample, dict) or not isinstance(sample.get("messages"), list):
            raise TraceFormatError("the sample has no 'messages' list", json_path="$.samples[]", adapter=self.name)
        msgs, notes = _messages(sample)
        epoch = sample.get("epoch")
        rid = f"{header.get('task', 'task')}/{sample.get('id')}" + (f"#epoch{epoch}" if isinstance(epoch, int) and epoch > 1 else "")
        run_fields: dict[str, Any] = {"id": rid}
        for k in ("model",):
            if isinstance(header.get(k), str):
                run_fields[k] = header[k]
        if isinstance(epoch, int):
            run_fields["epoch"] = epoch
        err = sample.get("error")
        if isinstance(err, dict) and err.get("message"):
            run_fields["sample_error"] = str(err["message"])[:2000]
        return convert_chat(msgs, source=source, options=options, run=run_fields, exclude=("id",), notes=notes,
                            step_numbering=NUMBERING)
