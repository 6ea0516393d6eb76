"""The trace formats (otel, openinference, langsmith, langfuse, inspect): read from fixtures made by the
real libraries (scripts/make_trace_fixtures.py), audited end to end, shown, converted, detected
without taking another format's files, and robust to bad input."""

from __future__ import annotations

import copy
import importlib.util
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DATA, ROOT
from otel_spans import T1, T2, _kv, _otlp, chat_attrs, small_trace, span, text

from trajaudit import load, load_many, load_path
from trajaudit.cli import main
from trajaudit.engine.run.batch import audit_trajectories
from trajaudit.engine.run.pipeline import AuditSpec
from trajaudit.engine.trace.adapters import default_adapters
from trajaudit.engine.trace.adapters.spans import FLAG_CONTENT_NOT_CAPTURED, FLAG_SYNTHESIZED_CALL
from trajaudit.engine.trace.loader import detect, load_document
from trajaudit.errors import TraceFormatError

TRACES = ROOT / "tests" / "data" / "traces"
NEW = ("otel", "openinference", "langsmith", "langfuse", "inspect")
FIXTURES = {  # file -> the format it is detected as
    "otel_genai.jsonl": "otel",
    "otel_genai_events.jsonl": "otel",
    "otel_genai_nocontent.jsonl": "otel",
    "openinference.jsonl": "openinference",
    "langsmith_run_tree.json": "langsmith",
    "langfuse_trace.json": "langfuse",
    "langfuse_sdk.jsonl": "langfuse",
    "inspect_log.eval": "inspect",
    "inspect_log.json": "inspect",
}
WITH_CONTENT = [f for f in FIXTURES if f != "otel_genai_nocontent.jsonl"]


def shape(t):
    """What must agree across formats: kinds, text, tool calls (name, arguments, id), answered call ids."""
    return [(s.kind, s.content, [(c.name, c.arguments, c.id) for c in s.tool_calls],
             s.tool_output.call_id if s.tool_output else None) for s in t.steps]


# -- each format end to end from its generated fixture -------------------------------------------------

@pytest.mark.parametrize("name", list(FIXTURES))
def test_fixture_detected_read_and_audited(name):
    res = load_path(TRACES / name)
    assert not res.problems
    assert len(res.trajectories) == 1
    t = res.trajectories[0]
    assert t.source.format == FIXTURES[name]
    assert [s.tool_names for s in t.decision_steps] == [("get_order_details",), ("cancel_pending_order",), ()]
    out = audit_trajectories([t], AuditSpec())
    assert not out.problems
    d = out.results[0].diagnosis
    steps = len(t.steps)
    assert d.critical_step == steps - 3  # the cancellation issued without the user's confirmation
    assert t.steps[d.critical_step].tool_names == ("cancel_pending_order",)
    assert d.category == "instruction_adherence_failure"
    if FIXTURES[name] != "inspect":
        src = d.metadata["source_span"]
        assert src["span_id"] == t.steps[d.critical_step].metadata["span_id"] == t.steps[d.critical_step].source_number
        assert src["trace_id"] == t.metadata["trace_id"] == t.id


@pytest.mark.parametrize("name", WITH_CONTENT)
def test_format_invariance_with_openai_chat(name):
    """One scripted agent run, captured by each library and written as OpenAI chat: same steps, tool
    calls and critical step."""
    chat = load(TRACES / "chat.json")
    other = load(TRACES / name)
    assert shape(other) == shape(chat)
    assert other.task == chat.task and other.final_answer == chat.final_answer
    if FIXTURES[name] != "inspect":  # Inspect logs carry no agent names
        assert other.agents == chat.agents == ("retail_agent",)
    a, b = (audit_trajectories([x], AuditSpec()).results[0].diagnosis for x in (chat, other))
    assert (a.critical_step, a.category) == (b.critical_step, b.category)


def test_content_not_captured_steps_are_kept_and_flagged():
    t = load(TRACES / "otel_genai_nocontent.jsonl")
    assert [s.kind for s in t.steps] == ["agent", "tool", "agent", "tool", "agent"]
    assert all(FLAG_CONTENT_NOT_CAPTURED in s.flags for s in t.steps)
    assert [c.id for c in t.steps[2].tool_calls] == ["call_cancel_2"]  # the tool span's call id, attached
    assert t.agents == ("retail_agent",)


def test_event_form_fills_tool_results_from_the_next_model_call():
    t = load(TRACES / "otel_genai_events.jsonl")
    assert not any(FLAG_CONTENT_NOT_CAPTURED in s.flags for s in t.steps)
    assert '"status": "pending"' in t.steps[3].content


@pytest.mark.parametrize("name", ["otel_genai.jsonl", "langsmith_run_tree.json", "inspect_log.eval"])
def test_show_prints_agents_and_tool_calls(name):
    r = CliRunner().invoke(main, ["show", str(TRACES / name)])
    assert r.exit_code == 0, r.output
    assert "cancel_pending_order" in r.output and "get_order_details" in r.output
    assert ("retail_agent" in r.output) == (name != "inspect_log.eval")
    assert "7 steps, 3 decision steps" in r.output


@pytest.mark.parametrize("name", list(FIXTURES))
def test_convert_round_trips_to_the_ir(name, tmp_path):
    out = tmp_path / "ir.json"
    r = CliRunner().invoke(main, ["convert", str(TRACES / name), "-o", str(out)])
    assert r.exit_code == 0, r.output
    again = load_path(out).trajectories
    assert [t.to_dict() for t in again] == [t.to_dict() for t in load_path(TRACES / name).trajectories]


@pytest.mark.parametrize("name,fmt", list(FIXTURES.items()))
def test_forced_format(name, fmt):
    assert load(TRACES / name, format=fmt).source.format == fmt
    with pytest.raises(TraceFormatError, match="not in the"):
        load_path(TRACES / "chat.json", format=fmt)


def test_cli_forces_each_new_format():
    """Forcing the other span reading on a span file: every span ignored, said in words (exit 2)."""
    r = CliRunner().invoke(main, ["show", str(TRACES / "openinference.jsonl"), "--input-format", "otel"])
    assert r.exit_code == 2
    assert "no agent, model-call or tool span (6 span(s) ignored: no GenAI attributes)" in r.output
    r = CliRunner().invoke(main, ["show", str(TRACES / "otel_genai.jsonl"), "--input-format", "openinference"])
    assert r.exit_code == 2 and "(6 span(s) ignored" in r.output
    r = CliRunner().invoke(main, ["show", "--help"])
    for name in NEW:
        assert name in r.output


# -- detection never takes another format's file ---------------------------------------------------

def _documents(path: Path):
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        yield json.loads(text)
    except json.JSONDecodeError:
        for line in text.splitlines():
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    continue


def _existing_files():
    roots = [ROOT / "examples", ROOT / "tests" / "data" / "dialects", ROOT / "tests" / "data" / "magentic"]
    if DATA.exists():
        roots.append(DATA)
    for r in roots:
        yield from sorted(p for p in r.rglob("*") if p.suffix in (".json", ".jsonl"))


def test_detection_never_takes_an_existing_formats_file():
    reg = default_adapters()
    new = [reg.get(n) for n in NEW]
    files = list(_existing_files())
    assert len(files) > 20
    checked = 0
    for f in files:
        for doc in _documents(f):
            checked += 1
            taken = [a.name for a in new if a.sniff(doc).ok]
            assert not taken, f"{f} taken by {taken}"
            try:
                assert detect(doc, reg).name not in NEW
            except TraceFormatError:
                pass  # not a trace file (a mapping's custom format, gold labels, tool schemas)
    assert checked > 100 if DATA.exists() else checked > 10


@pytest.mark.parametrize("name", list(FIXTURES))
def test_no_existing_format_takes_a_new_fixture(name):
    res = load_path(TRACES / name)
    assert res.trajectories[0].source.format == FIXTURES[name]


# -- other shapes of the same formats -----------------------------------------------------------------

def test_langsmith_flat_run_list_and_jsonl_give_the_same_steps(tmp_path):
    tree = json.loads((TRACES / "langsmith_run_tree.json").read_text())
    flat = []

    def walk(r):
        flat.append({k: v for k, v in r.items() if k != "child_runs"})
        for c in r.get("child_runs") or []:
            walk(c)

    walk(tree)
    flat.reverse()  # any order: dotted_order restores it
    (tmp_path / "runs.json").write_text(json.dumps(flat))
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in flat))
    base = shape(load(TRACES / "langsmith_run_tree.json"))
    assert shape(load(tmp_path / "runs.json")) == base
    assert shape(load(tmp_path / "runs.jsonl")) == base


def test_langfuse_nested_children_list_and_data_page(tmp_path):
    trace = json.loads((TRACES / "langfuse_trace.json").read_text())
    nested = copy.deepcopy(trace)
    agent, *rest = nested["observations"]
    agent["children"] = [{k: v for k, v in o.items() if k != "parentObservationId"} for o in rest]
    nested["observations"] = [agent]
    base = shape(load(trace))
    assert shape(load(nested)) == base
    two = copy.deepcopy(trace)
    two["id"] = "second"
    got = load_document({"data": [trace, two]})
    assert [t.id for t in got.trajectories] == [trace["id"], "second"]


def test_openinference_phoenix_span_json(tmp_path):
    """Phoenix's span JSON (context, span_kind, flat attributes), one span per line."""
    from trajaudit.engine.trace.adapters.otel import read_spans

    doc = json.loads("[" + ",".join((TRACES / "openinference.jsonl").read_text().splitlines()) + "]")
    spans, _ = read_spans(doc)
    lines = []
    for s in spans:
        attrs = {k: v for k, v in s.attributes.items() if k != "openinference.span.kind"}
        lines.append({"name": s.name, "context": {"trace_id": s.trace_id, "span_id": s.span_id},
                      "parent_id": s.parent_id, "span_kind": s.attributes["openinference.span.kind"],
                      "start_time": "2025-01-01T00:00:00.%06dZ" % (s.start % 1_000_000_000 // 1000),
                      "end_time": None, "status_code": "OK", "attributes": attrs})
    (tmp_path / "phoenix.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    t = load(tmp_path / "phoenix.jsonl")
    assert t.source.format == "openinference"
    assert shape(t) == shape(load(TRACES / "chat.json"))


def test_inspect_eval_read_without_inspect_ai_gives_the_same_run(monkeypatch):
    with_lib = load(TRACES / "inspect_log.eval")
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)  # import fails: the documented zip layout
    without = load(TRACES / "inspect_log.eval")
    assert shape(without) == shape(with_lib)
    assert without.id == with_lib.id == "task/retail-1"


def test_older_span_event_form():
    """GenAI content as span events (gen_ai.system/user/assistant/tool.message, gen_ai.choice)."""
    def ev(name, **attrs):
        return {"name": name, "timeUnixNano": "1", "attributes": _kv(attrs)}

    chat1 = span(T1, "1" * 16, None, "chat m", 100, {"gen_ai.operation.name": "chat", "gen_ai.system": "openai"}, events=[
        ev("gen_ai.system.message", content="Be careful."), ev("gen_ai.user.message", content="Refund order 7"),
        ev("gen_ai.choice", index=0, finish_reason="tool_calls", message={"role": "assistant", "tool_calls": [
            {"id": "r1", "type": "function", "function": {"name": "refund", "arguments": "{\"order\": 7}"}}]})])
    chat2 = span(T1, "2" * 16, None, "chat m", 300, {"gen_ai.operation.name": "chat"}, events=[
        ev("gen_ai.user.message", content="Refund order 7"),
        ev("gen_ai.assistant.message", tool_calls=[{"id": "r1", "type": "function",
                                                    "function": {"name": "refund", "arguments": "{\"order\": 7}"}}]),
        ev("gen_ai.tool.message", id="r1", content="Error: order 7 is not refundable"),
        ev("gen_ai.choice", index=0, finish_reason="stop", message={"content": "Refunded!"})])
    t = load(_otlp([chat1, chat2]))
    assert [s.kind for s in t.steps] == ["system", "user", "agent", "tool", "agent"]
    assert t.steps[2].tool_calls[0].arguments == {"order": 7}
    assert t.steps[3].tool_output.is_error and t.steps[3].tool_output.call_id == "r1"
    assert t.final_answer == "Refunded!"


def test_sdk_span_json_form():
    """The Python SDK's span JSON (ConsoleSpanExporter), made by the real SDK."""
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exp = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exp))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("invoke_agent helper") as a:
        a.set_attribute("gen_ai.operation.name", "invoke_agent")
        a.set_attribute("gen_ai.agent.name", "helper")
        with tracer.start_as_current_span("chat m") as c:
            c.set_attribute("gen_ai.operation.name", "chat")
            c.set_attribute("gen_ai.input.messages", json.dumps([text("user", "hi")]))
            c.set_attribute("gen_ai.output.messages", json.dumps([text("assistant", "hello")]))
    docs = [json.loads(s.to_json()) for s in exp.get_finished_spans()]
    t = load(docs)
    assert t.source.format == "otel"
    assert [(s.kind, s.agent, s.content) for s in t.steps] == [("user", None, "hi"), ("agent", "helper", "hello")]


# -- bad input ----------------------------------------------------------------------------------------

def test_interleaved_traces_are_split_by_trace_id():
    a, b = small_trace(T1, "alpha", "1"), small_trace(T2, "beta", "2")
    mixed = [x for pair in zip(b, a, strict=True) for x in pair]
    got = load_document(_otlp(mixed))
    assert [t.id for t in got.trajectories] == [T2, T1]
    by = {t.id: t for t in got.trajectories}
    assert [s.content for s in by[T1].steps if s.kind == "user"] == ["question 1"]
    assert by[T1].agents == ("alpha",) and by[T2].agents == ("beta",)
    assert [s.kind for s in by[T1].steps] == ["user", "agent", "tool", "agent"]


def test_missing_parent_duplicate_span_and_clock_skew():
    spans = small_trace(T1)
    spans[1]["startTimeUnixNano"] = "50"  # the first chat starts before its agent span (clock skew)
    spans.append(copy.deepcopy(spans[2]))  # the tool span exported twice
    orphan = span(T1, "9" * 16, "f" * 16, "chat m", 500,
                  chat_attrs([text("user", "question 1")], [text("assistant", "late note")]))
    t = load(_otlp(spans + [orphan]))
    assert t.metadata["duplicate_spans"] == 1 and t.metadata["missing_parents"] == 1
    assert [s.kind for s in t.steps] == ["user", "agent", "tool", "agent", "agent"]
    assert t.steps[1].agent == "helper"  # still under its agent span despite starting before it
    assert t.steps[4].content == "late note" and t.steps[4].agent == "assistant"  # orphan: read as a root


def test_spans_without_genai_attributes_are_ignored_and_counted():
    spans = small_trace(T1) + [span(T1, "8" * 16, "1" + "0" * 15, "GET /orders", 250, {"http.method": "GET"})]
    t = load(_otlp(spans))
    assert t.metadata["ignored_spans"] == 1 and len(t.steps) == 4


def test_a_trace_of_only_non_genai_spans_is_reported_alone():
    spans = small_trace(T1) + [span(T2, "7" * 16, None, "GET /", 1, {"http.method": "GET"})]
    got = load_document(_otlp(spans), file="x.json")
    assert [t.id for t in got.trajectories] == [T1]
    assert len(got.problems) == 1 and "no agent, model-call or tool span (1 span(s) ignored" in got.problems[0].message


def test_tool_span_whose_call_is_not_in_the_trace_gets_a_synthesized_call():
    spans = [span(T1, "1" * 16, None, "execute_tool search", 10,
                  {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                   "gen_ai.tool.call.arguments": {"q": "x"}, "gen_ai.tool.call.result": "found"})]
    t = load(_otlp(spans))
    assert [s.kind for s in t.steps] == ["agent", "tool"]
    assert FLAG_SYNTHESIZED_CALL in t.steps[0].flags and t.steps[0].tool_calls[0].arguments == {"q": "x"}
    assert t.steps[1].tool_output.call_id == t.steps[0].tool_calls[0].id


def test_failed_tool_span_is_an_error_output():
    spans = small_trace(T1)
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup", "gen_ai.tool.call.id": "c1",
             "error.type": "TimeoutError"}
    spans[2] = span(T1, "1" + "2" * 15, "1" + "0" * 15, "execute_tool lookup", 300, attrs,
                    status={"code": 2, "message": "timed out"})
    spans = spans[:3]
    t = load(_otlp(spans))
    assert t.steps[2].tool_output.is_error and "timed out" in t.steps[2].content


def test_truncated_otlp_line_is_reported_and_the_rest_read(tmp_path):
    lines = (TRACES / "otel_genai.jsonl").read_text().splitlines()
    cut = lines[:-1] + [lines[-1][: len(lines[-1]) // 2]]  # the last batch (the agent span) cut short
    (tmp_path / "cut.jsonl").write_text("\n".join(cut) + "\n")
    res = load_path(tmp_path / "cut.jsonl")
    assert len(res.trajectories) == 1 and len(res.problems) == 1
    assert res.problems[0].record == len(lines) - 1 and "invalid JSON" in res.problems[0].message
    assert len(res.trajectories[0].steps) == 7
    assert res.trajectories[0].metadata["missing_parents"] == 5  # the agent span is lost: its 3 chat and 2 tool
    assert res.trajectories[0].agents == ("assistant",)  # spans are roots, and no agent names them


def test_eval_file_that_is_not_a_zip_fails_alone(tmp_path):
    (tmp_path / "broken.eval").write_bytes(b"this is not a zip")
    (tmp_path / "ok.eval").write_bytes((TRACES / "inspect_log.eval").read_bytes())
    with zipfile.ZipFile(tmp_path / "empty.eval", "w") as z:
        z.writestr("readme.txt", "hello")
    res = load_many([tmp_path])
    assert [t.id for t in res.trajectories] == ["task/retail-1"]
    msgs = sorted(p.message for p in res.problems)
    assert len(msgs) == 2
    assert "broken.eval" in msgs[0] and "not a zip archive" in msgs[0]
    assert "empty.eval" in msgs[1] and "no header.json or samples/" in msgs[1]


def test_inspect_sample_without_messages_is_reported_alone():
    log = json.loads((TRACES / "inspect_log.json").read_text())
    log["samples"].append({"id": "broken", "epoch": 1})
    got = load_document(log, file="log.json")
    assert len(got.trajectories) == 1 and len(got.problems) == 1
    assert "no 'messages' list" in got.problems[0].message


# -- the generator still works with the installed libraries -------------------------------------------

LIBS = ("opentelemetry.instrumentation.openai_v2", "openinference.instrumentation.openai", "langsmith", "inspect_ai",
        "langfuse")


@pytest.mark.skipif(any(importlib.util.find_spec(m.split(".")[0]) is None for m in LIBS),
                    reason="the fixture libraries are not installed (pip install -e '.[fixtures]')")
def test_fixtures_regenerate_and_still_parse(tmp_path):
    """CI regenerates every fixture with the real libraries and reads it back: an upstream change of
    shape shows here, not in a user's trace."""
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_trace_fixtures.py"), "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "skipped" not in r.stdout, r.stdout
    chat = shape(load(tmp_path / "chat.json"))
    for name, fmt in FIXTURES.items():
        t = load(tmp_path / name)
        assert t.source.format == fmt
        if name in WITH_CONTENT:
            assert shape(t) == chat, name


def test_eval_member_too_large_is_refused(tmp_path, monkeypatch):
    from trajaudit.engine.trace.adapters import files

    monkeypatch.setattr(files, "MAX_MEMBER_BYTES", 100)
    res = load_many([TRACES / "inspect_log.eval"])
    assert not res.trajectories and len(res.problems) == 1
    assert "larger than 100 bytes uncompressed (refused)" in res.problems[0].message


def _eval_zip(path, sample: bytes):
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("header.json", json.dumps({"version": 2, "status": "success", "eval": {"task": "t"}}))
        zf.writestr("samples/1_epoch_1.json", sample)
    return path


def test_eval_member_inflating_like_a_zip_bomb_is_refused_by_its_ratio(tmp_path):
    """The per-member limit let a 1.4 MB .eval holding a 500 MB sample through (1.7 GB of memory): a
    member over 32 MiB inflating more than 200x is refused from the zip's directory, member named."""
    filler = b" " * (33 * 1024 * 1024)  # 33 MiB of one byte: deflates some 1000x
    bomb = _eval_zip(tmp_path / "bomb.eval", b'{"id": 1, "messages": [], "pad": "' + filler + b'"}')
    res = load_many([bomb])
    assert not res.trajectories and len(res.problems) == 1
    msg = res.problems[0].message
    assert msg.startswith(f"{bomb}: Inspect .eval member samples/1_epoch_1.json inflates ")
    assert msg.endswith("x; at most 200x for a member over 33,554,432 bytes): refused as a zip bomb")


def test_a_zip_bomb_split_into_members_under_the_ratio_floor_is_refused(tmp_path):
    """Fresh-user pass: 16 members of 31 MiB each (under the 32 MiB floor of the per-member ratio
    check), 334x each, took 15.7 s and 650 MB to read from a 1.5 MB .eval: the ratio is also checked
    over all the members together."""
    filler = b" " * (17 * 1024 * 1024)  # two members of 17 MiB: each under the floor, 34 MiB together
    bomb = tmp_path / "split.eval"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("header.json", json.dumps({"version": 2, "status": "success", "eval": {"task": "t"}}))
        for k in (1, 2):
            zf.writestr(f"samples/{k}_epoch_1.json", b'{"id": %d, "messages": [], "pad": "' % k + filler + b'"}')
    res = load_many([bomb])
    assert not res.trajectories and len(res.problems) == 1
    msg = res.problems[0].message
    assert msg.startswith(f"{bomb}: Inspect .eval members inflate ") and "bytes) : refused" not in msg
    assert msg.endswith("x; at most 200x over 33,554,432 bytes): refused as a zip bomb")


def test_eval_members_too_large_together_are_refused(monkeypatch):
    from trajaudit.engine.trace.adapters import files

    monkeypatch.setattr(files, "MAX_TOTAL_BYTES", 100)
    res = load_many([TRACES / "inspect_log.eval"])
    assert not res.trajectories and len(res.problems) == 1
    assert "Inspect .eval members are larger than 100 bytes uncompressed together (refused at member " \
        in res.problems[0].message


def test_nested_agents_name_their_own_steps():
    """An orchestrator delegating to a sub-agent: each model call's steps belong to the nearest
    enclosing invoke_agent span; the sub-agent's own prompt and task are new steps of the run."""
    def agent(sid, parent, name, start, end):
        return span(T1, sid, parent, f"invoke_agent {name}", start,
                    {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}, end=end)

    spans = [
        agent("1" * 16, None, "orchestrator", 0, 1000),
        span(T1, "2" * 16, "1" * 16, "chat m", 10, chat_attrs([text("user", "plan a trip")],
                                                              [text("assistant", "delegating to booker")])),
        agent("3" * 16, "1" * 16, "booker", 100, 500),
        span(T1, "4" * 16, "3" * 16, "chat m", 110, chat_attrs([text("system", "You book."), text("user", "book Rome")],
                                                               [text("assistant", "booked Rome")])),
        span(T1, "5" * 16, "1" * 16, "chat m", 600, chat_attrs(
            [text("user", "plan a trip"), text("assistant", "delegating to booker"), text("user", "booker: booked Rome")],
            [text("assistant", "your trip is planned")])),
    ]
    t = load(_otlp(spans))
    assert [(s.kind, s.agent) for s in t.steps] == [
        ("user", None), ("agent", "orchestrator"), ("system", None), ("user", None), ("agent", "booker"),
        ("user", None), ("agent", "orchestrator")]
    assert t.agents == ("orchestrator", "booker")
    assert t.steps[4].metadata["span_id"] == "4" * 16


def test_remote_agent_span_with_messages_and_no_model_call_under_it():
    """invoke_agent CLIENT spans of a remote agent (the service ran the model) carry the messages:
    they are the steps; an agent span with model calls under it is only a name."""
    remote = span(T1, "1" * 16, None, "invoke_agent travel", 0, {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "travel",
        "gen_ai.input.messages": [text("user", "book Rome")],
        "gen_ai.output.messages": [text("assistant", "booked")]}, end=50)
    t = load(_otlp([remote]))
    assert [(s.kind, s.agent, s.content) for s in t.steps] == [("user", None, "book Rome"), ("agent", "travel", "booked")]
    local = small_trace(T2, prefix="2")
    local[0] = span(T2, "2" + "0" * 15, None, "invoke_agent helper", 100, {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper",
        "gen_ai.input.messages": [text("user", "question 2")], "gen_ai.output.messages": [text("assistant", "answer 2")]},
        end=1000)
    t = load(_otlp(local))
    assert [s.kind for s in t.steps] == ["user", "agent", "tool", "agent"]  # not doubled by the agent span's own copy


def test_cli_audits_the_whole_fixture_folder(tmp_path):
    """`trajaudit audit` over every format at once (a folder: .json, .jsonl and .eval files)."""
    out = tmp_path / "d.jsonl"
    r = CliRunner().invoke(main, ["audit", str(TRACES), "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == len(FIXTURES) + 1  # and chat.json
    assert sorted(Path(d["file"]).name for d in rows) == sorted([*FIXTURES, "chat.json"])
    for d in rows:
        steps = 2 if d["file"].endswith("nocontent.jsonl") else 4  # no messages: the cancel call is step 2
        assert (d["critical_step"], d["category"]) == (steps, "instruction_adherence_failure"), d["file"]


def test_eval_zip_is_read_without_inspect_ai_and_says_what_to_install(monkeypatch):
    """Inspect writes .eval members Zstandard-compressed (zip method 93), which Python's zipfile cannot
    read: without inspect_ai the documented layout is read through the zstandard package, with the same
    steps; without either, the error names the extra to install."""
    path = TRACES / "inspect_log.eval"
    with_inspect = load(path)
    monkeypatch.setitem(sys.modules, "inspect_ai", None)
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)
    without = load(path)
    assert [(s.kind, s.content, [c.name for c in s.tool_calls]) for s in without.steps] == \
        [(s.kind, s.content, [c.name for c in s.tool_calls]) for s in with_inspect.steps]
    assert len(without.steps) == 7
    monkeypatch.setitem(sys.modules, "zstandard", None)
    with pytest.raises(TraceFormatError, match=r"Zstandard-compressed: install 'trajaudit\[inspect\]'"):
        load(path)


def test_a_zstandard_member_inflating_past_its_declared_size_is_refused(tmp_path, monkeypatch):
    """decompress(max_output_size=) is ignored for a frame stating its content size: a member whose zip
    entry declares 10 bytes (passing every directory check) inflated to whatever its frame said."""
    import struct

    zstandard = pytest.importorskip("zstandard")
    frame = zstandard.ZstdCompressor().compress(json.dumps({"id": 1, "messages": [], "pad": "x" * 5000}).encode())
    path = tmp_path / "lying.eval"
    with zipfile.ZipFile(path, "w") as zf:  # stored, then relabelled Zstandard (method 93) declaring 10 bytes
        zf.writestr("header.json", json.dumps({"version": 2, "status": "success", "eval": {"task": "t"}}))
        zf.writestr("samples/1_epoch_1.json", frame)
    data = bytearray(path.read_bytes())
    local = data.rindex(b"PK\x03\x04", 0, data.index(b"samples/1_epoch_1.json"))
    struct.pack_into("<H", data, local + 8, 93)
    struct.pack_into("<I", data, local + 22, 10)
    central = data.rindex(b"PK\x01\x02", 0, data.rindex(b"samples/1_epoch_1.json"))
    struct.pack_into("<H", data, central + 10, 93)
    struct.pack_into("<I", data, central + 24, 10)
    path.write_bytes(bytes(data))
    monkeypatch.setitem(sys.modules, "inspect_ai", None)
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)
    with pytest.raises(TraceFormatError, match=r"member samples/1_epoch_1.json inflates to more than the 10 bytes "
                                               r"the zip declares for it \(refused\)"):
        load(path)


def test_damaged_eval_members_are_named_not_called_a_non_zip(tmp_path, monkeypatch):
    """Final fresh-user pass: a deflated member with a bad CRC was "not an Inspect .eval log: the file is
    not a zip archive" (it is one), and a corrupt Zstandard member an "internal error while loading:
    ZstdError". Both name the damaged member."""
    monkeypatch.setitem(sys.modules, "inspect_ai", None)
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)
    path = tmp_path / "crc.eval"
    with zipfile.ZipFile(path, "w") as zf:  # stored: the member's bytes are in the file as they are
        zf.writestr("header.json", json.dumps({"version": 2, "status": "success", "eval": {"task": "t"}}))
        zf.writestr("samples/1_epoch_1.json", json.dumps({"id": 1, "messages": []}))
    data = path.read_bytes().replace(b'{"id": 1,', b'{"id": 2,', 1)
    path.write_bytes(data)
    with pytest.raises(TraceFormatError, match=r"member samples/1_epoch_1.json is damaged: Bad CRC-32"):
        load(path)
    zstandard = pytest.importorskip("zstandard")
    import struct

    frame = bytearray(zstandard.ZstdCompressor().compress(json.dumps({"id": 1, "messages": []}).encode()))
    frame[4] |= 0x03  # the frame header claims a dictionary it was not made with
    path = tmp_path / "zstd.eval"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("header.json", json.dumps({"version": 2, "status": "success", "eval": {"task": "t"}}))
        zf.writestr("samples/1_epoch_1.json", bytes(frame))
    data = bytearray(path.read_bytes())
    local = data.rindex(b"PK\x03\x04", 0, data.index(b"samples/1_epoch_1.json"))
    struct.pack_into("<H", data, local + 8, 93)
    central = data.rindex(b"PK\x01\x02", 0, data.rindex(b"samples/1_epoch_1.json"))
    struct.pack_into("<H", data, central + 10, 93)
    path.write_bytes(bytes(data))
    with pytest.raises(TraceFormatError, match=r"member samples/1_epoch_1.json is not valid Zstandard data: "):
        load(path)
