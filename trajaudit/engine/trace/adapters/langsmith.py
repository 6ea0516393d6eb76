"""LangSmith runs (``langsmith``): a run tree or a list of runs, one trajectory per trace.

Accepted documents: one run object (``{"id", "name", "run_type", "inputs", "outputs", "error",
"parent_run_id", "trace_id", "dotted_order", "start_time", "child_runs": [...]}`` — a run tree as
``RunTree``/the API returns it); a list of runs (flat, as ``Client.list_runs`` gives them, or trees);
``{"runs": [...]}``; JSON lines of runs (joined by the loader). Runs are grouped by ``trace_id`` (else
their root's id) and ordered by ``dotted_order`` (start time and id of every ancestor: sorted, it is
depth first with siblings by start time), else ``start_time``.

Reading (:func:`~trajaudit.engine.trace.adapters.spans.build_trace`, its docstring gives the numbering):
``llm`` runs are model calls — ``inputs.messages`` as OpenAI messages (``wrap_openai``) or LangChain
messages (a list, or a list of lists); ``outputs`` as an OpenAI completion (``choices``), LangChain
``generations`` or a ``message``/``messages``/``output`` field; ``tool`` runs are tool runs (name,
``inputs`` as arguments, ``outputs.output``, ``error``; the call id from
``extra.metadata.tool_call_id``/``inputs.tool_call_id``, else the earliest unanswered call of that
tool); ``chain``/``agent`` runs name the agent of the runs under them unless their name is a
generic composition (``Runnable…``, ``LangGraph``, ``…Parser``, ``…PromptTemplate``); other run types
(retriever, embedding, prompt, parser) are ignored and counted.
"""

from __future__ import annotations

import re
from typing import Any

from trajaudit.engine.trace.adapters.base import LoadOptions, Sniff
from trajaudit.engine.trace.adapters.langchain import message_fields, normalize_message
from trajaudit.engine.trace.adapters.otel import SpanTrace
from trajaudit.engine.trace.adapters.span_shapes import RUN_TYPES, is_langsmith_run  # noqa: F401 - RUN_TYPES re-exported
from trajaudit.engine.trace.adapters.spans import (
    Op,
    SpanRecord,
    as_text,
    build_trace,
    iso_ns,
    parse_json_text,
)
from trajaudit.engine.trace.ir import Source, Trajectory
from trajaudit.errors import TraceFormatError

NUMBERING = ("LangSmith: 0-based position in the conversation rebuilt from the trace's runs "
             "(dotted_order; each llm run adds its new input messages, then its output; tool runs add their output)")
_GENERIC = re.compile(r"^(Runnable\w*|LangGraph|__start__|__end__|\w*Parser|\w*PromptTemplate|RunnableSequence)$")
is_run = is_langsmith_run  # the shape test, kept with the loader's others (span_shapes)


def _runs_of(doc: Any) -> list[Any] | None:
    if is_run(doc):
        return [doc]
    if isinstance(doc, dict) and isinstance(doc.get("runs"), list):
        doc = doc["runs"]
    if isinstance(doc, list) and doc and any(is_run(r) for r in doc) and all(is_run(r) or not isinstance(r, dict)
                                                                             or "role" not in r for r in doc):
        return doc
    return None


def flatten(runs: list[Any]) -> tuple[list[dict[str, Any]], int]:
    """Every run of ``runs`` and of their ``child_runs``, parents before children; and the count of
    elements that are not run objects."""
    out: list[dict[str, Any]] = []
    bad = 0
    stack: list[tuple[Any, Any]] = [(r, None) for r in reversed(runs)]
    while stack:
        r, parent = stack.pop()
        if not is_run(r):
            bad += 1
            continue
        if parent is not None and not r.get("parent_run_id"):
            r = {**r, "parent_run_id": parent.get("id")}
        if parent is not None and not r.get("trace_id"):
            r = {**r, "trace_id": parent.get("trace_id") or parent.get("id")}
        out.append(r)
        kids = r.get("child_runs")
        if isinstance(kids, list):
            stack.extend((c, r) for c in reversed(kids))
    return out, bad


def _records(runs: list[dict[str, Any]]) -> list[SpanRecord]:
    """Runs as span records; ``start`` is the rank in ``dotted_order`` when every run has one."""
    dotted = all(isinstance(r.get("dotted_order"), str) for r in runs)
    ranks = {id(r): k for k, r in enumerate(sorted(runs, key=lambda r: r["dotted_order"]))} if dotted else {}
    out = []
    for k, r in enumerate(runs):
        rid = str(r.get("id") if r.get("id") is not None else f"run-{k}")
        parent = r.get("parent_run_id")
        trace = r.get("trace_id") or (rid if not parent else None)
        start = ranks[id(r)] if dotted else iso_ns(r.get("start_time"))
        err = r.get("error")
        out.append(SpanRecord(str(trace) if trace else "", rid, str(parent) if parent else None, str(r.get("name") or ""),
                              start, iso_ns(r.get("end_time")), r, [], str(err) if err else None, k))
    by_id = {s.span_id: s for s in out}
    for s in out:  # a run without trace_id belongs to its root's trace
        if not s.trace_id:
            top, seen = s, set()
            while not top.trace_id and top.parent_id in by_id and top.span_id not in seen:
                seen.add(top.span_id)
                top = by_id[top.parent_id]  # type: ignore[index]
            s.trace_id = top.trace_id or top.span_id
    return out


def lc_or_openai_messages(value: Any) -> list[dict[str, Any]] | None:
    """Messages given as OpenAI dicts or serialized LangChain messages (a list, or a batch: a list
    of lists, whose first conversation is read) → OpenAI messages; ``None`` when not a message list."""
    value = parse_json_text(value)
    if isinstance(value, list) and value and all(isinstance(x, list) for x in value):
        value = value[0]
    if not isinstance(value, list):
        return None
    out: list[dict[str, Any]] = []
    for i, m in enumerate(value):
        if isinstance(m, dict) and isinstance(m.get("role"), str):
            out.append(m)
            continue
        kind, fields = message_fields(m)
        if fields is None:
            return None
        msg, _ = normalize_message(kind, fields, f"$[{i}]")
        out.append(msg)
    return out


def completion_messages(outputs: Any) -> list[dict[str, Any]] | None:
    """A model call's output → OpenAI messages: ``choices[].message``, LangChain ``generations``,
    ``message``/``messages``, or a text ``output``; ``None`` when there is none."""
    if not isinstance(outputs, dict):
        return [{"role": "assistant", "content": outputs}] if isinstance(outputs, str) else None
    if isinstance(outputs.get("choices"), list):
        msgs = [c["message"] for c in outputs["choices"] if isinstance(c, dict) and isinstance(c.get("message"), dict)]
        return [{k: v for k, v in m.items() if v is not None} for m in msgs[:1]] or None
    gens = outputs.get("generations")
    if isinstance(gens, list) and gens:
        g = gens[0][0] if isinstance(gens[0], list) and gens[0] else gens[0]
        if isinstance(g, dict):
            if g.get("message") is not None:
                got = lc_or_openai_messages([g["message"]])
                if got:
                    return got
            if isinstance(g.get("text"), str):
                return [{"role": "assistant", "content": g["text"]}]
    for key in ("message", "messages", "output"):
        v = outputs.get(key)
        if isinstance(v, dict):
            got = lc_or_openai_messages([v])
            if got:
                return got
        if isinstance(v, list):
            got = lc_or_openai_messages(v)
            if got:
                return got[-1:]
        if isinstance(v, str) and key == "output":
            return [{"role": "assistant", "content": v}]
    return None


def langsmith_op(s: SpanRecord) -> Op | None:
    """The reading of one run (its fields are ``s.attributes``)."""
    r = s.attributes
    kind = r.get("run_type")
    inputs = r.get("inputs") if isinstance(r.get("inputs"), dict) else {}
    outputs = r.get("outputs")
    if kind == "llm":
        msgs = lc_or_openai_messages(inputs.get("messages"))
        if msgs is None and isinstance(inputs.get("prompts"), list):
            msgs = [{"role": "user", "content": as_text(p)} for p in inputs["prompts"]]
        outs = completion_messages(outputs) if outputs is not None else None
        if outs is None and s.error:
            outs = [{"role": "assistant", "content": f"Error: {s.error}"}]
        return Op("llm", inputs=msgs, outputs=outs)
    if kind == "tool":
        meta = (r.get("extra") or {}).get("metadata") if isinstance(r.get("extra"), dict) else None
        call_id = (meta or {}).get("tool_call_id") if isinstance(meta, dict) else None
        call_id = call_id or inputs.get("tool_call_id")
        args = {k: v for k, v in inputs.items() if k != "tool_call_id"}
        if set(args) == {"input"}:
            args = parse_json_text(args["input"])
        if isinstance(outputs, dict) and "output" in outputs:
            result: Any = outputs["output"]
        else:
            result = outputs
        if isinstance(result, dict) and result.get("type") == "tool" and "content" in result:  # a ToolMessage
            call_id = call_id or result.get("tool_call_id")
            result = result["content"]
        if result is None and s.error:
            result = f"Error: {s.error}"
        return Op("tool", tool_name=s.name, call_id=str(call_id) if call_id else None, arguments=args,
                  result=as_text(result) if result is not None else None, is_error=bool(s.error))
    if kind in ("chain", "agent") and not _GENERIC.match(s.name):
        return Op("agent", agent=s.name)
    return None


class LangSmithAdapter:
    """LangSmith runs (a run tree, a list of runs, JSON lines of runs): one run per trace."""

    name = "langsmith"
    description = "LangSmith runs: a run tree, a list of runs or {'runs': [...]} (run_type, inputs, outputs, parent_run_id)"

    def sniff(self, doc: Any) -> Sniff:
        """Match a run object, a list of runs, or ``{"runs": [...]}``."""
        if _runs_of(doc) is not None:
            return Sniff(True)
        return Sniff(False, "no LangSmith run (an object with 'run_type' and 'inputs')")

    def accepts(self, run: Any) -> Sniff:
        """A forced ``--input-format``: a trace of runs (what ``records`` yields)."""
        return Sniff(True) if isinstance(run, SpanTrace) else self.sniff(run)

    def records(self, doc: Any) -> list[Any]:
        """One record per trace, in order of first appearance."""
        runs = _runs_of(doc)
        if runs is None:
            return [doc]
        flat, bad = flatten(runs)
        groups: dict[str, list[SpanRecord]] = {}
        for s in _records(flat):
            groups.setdefault(s.trace_id, []).append(s)
        traces = [SpanTrace(t, g) for t, g in groups.items()]
        if bad and traces:
            traces[0].metadata["malformed_runs"] = bad
        return traces or [doc]

    def convert(self, run: Any, *, source: Source, options: LoadOptions) -> Trajectory:
        """Rebuild one trace's conversation.

        Raises:
            TraceFormatError: no run in the document, or no llm/tool run in the trace.
        """
        if not isinstance(run, SpanTrace):
            raise TraceFormatError("the document holds no LangSmith run", adapter=self.name)
        return build_trace(run.spans, langsmith_op, source=source, options=options, numbering=NUMBERING,
                           metadata={"trace_id": run.trace_id, **run.metadata})
