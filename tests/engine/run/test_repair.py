"""Repair (SearchAuditor seed 000 §5.4): `audit --repair` fills Diagnosis.repair (LLM or labelled
template), `trajaudit repair` writes the prefix before the critical step in the run's own format plus
the directive as a user message; the LLM sees only the diagnosis and evidence windows."""

from __future__ import annotations

import json

from click.testing import CliRunner
from llm_server import Reply, evidence_of, schema_name
from strategy_helpers import with_evidence

from trajaudit import load
from trajaudit.cli import main
from trajaudit.engine.run.repair_prefix import TEMPLATE_LABEL
from trajaudit.engine.schema import schema_errors
from trajaudit.engine.trace.loader import load_path

TAU_RECORDS = (0, 3, 13)  # runs "2", "12", "47"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def llm_flags(server, tmp_path):
    return ["--base-url", server.url, "--model", "scripted-model", "--cache", tmp_path / "cache.sqlite3"]


def three_tau(tau_file, tmp_path):
    """A tau file holding three of the runs (the records copied verbatim)."""
    records = json.loads(tau_file.read_text())
    path = tmp_path / "three.json"
    path.write_text(json.dumps([records[i] for i in TAU_RECORDS]))
    return path, [records[i] for i in TAU_RECORDS]


def middle(t):
    d = t.decision_steps
    return d[len(d) // 2].index


def scripted(runs):
    by_task = {t.task: t for t in runs}

    def respond(req):
        name, ev = schema_name(req), evidence_of(req)
        if name == "rule-synthesis-dynamic":
            return {"rules": []}
        if name == "agentrx":
            t = by_task[ev["task"]]
            return {"critical_step": middle(t), "agent": "assistant", "category": "intent_plan_misalignment",
                    "confidence": 0.6, "rationale": f"steps.{middle(t)} pursues the wrong goal", "evidence": [],
                    "violations_used": []}
        if name == "repair":
            k = int(req["messages"][1]["content"].split("the critical step is step ")[1].split(" ")[0])
            return {"directives": [{"directive": f"Re-read the user's request before redoing step {k}.",
                                    "addresses": [f"steps.{k}", "steps.100000"]},
                                   {"directive": "Confirm the plan with the user before any write.", "addresses": []}],
                    "summary": "Re-establish the goal first."}
        raise AssertionError(f"unexpected request {name}")

    return respond


def test_audit_agentrx_with_repair_then_resume_from_the_diagnosis(llm_server, tau_file, tmp_path):
    path, records = three_tau(tau_file, tmp_path)
    runs = load_path(path).trajectories
    llm_server.responder = scripted(runs)
    out = tmp_path / "d.jsonl"
    r = run("audit", path, "--strategy", "agentrx", "--repair", "-o", out, "-q", *llm_flags(llm_server, tmp_path))
    assert r.exit_code == 0, r.output
    diags = [json.loads(x) for x in out.read_text().splitlines()]
    assert [d["trajectory_id"] for d in diags] == ["2", "12", "47"]
    for d, t in zip(diags, runs, strict=True):
        assert schema_errors("diagnosis", d) == []
        k = middle(t)
        assert d["critical_step"] == k and d["metadata"]["repair"]["source"] == "llm"
        assert d["repair"] == (f"1. Re-read the user's request before redoing step {k}.\n"
                               "2. Confirm the plan with the user before any write.\nRe-establish the goal first.")
        assert d["metadata"]["repair"]["directives"][0]["addresses"] == [f"steps.{k}"]  # outside the windows: dropped
        assert d["usage"]["requests"] == 3  # synthesis, judge, repair
    # the repair synthesizer saw the diagnosis and two windows, not the run
    for req in (q for q in llm_server.requests if schema_name(q) == "repair"):
        ev = evidence_of(req)
        t = next(t for t in runs if t.task == ev["task"])
        shown = [s["step"] for s in ev["critical_window"] + ev["final_window"] if "step" in s]
        k = middle(t)
        assert k in shown and 0 not in shown and len(shown) <= len(t.steps) - 3  # the policy prompt is not shown
        assert shown == sorted(shown) and shown[-1] == len(t.steps) - 1  # a window at k and one at the end
        assert "pursues the wrong goal" in ev["rationale"]
    calls = llm_server.calls
    assert calls == 9 and llm_server.exhausted == 0
    # the same audit again: served entirely from the cache
    r = run("audit", path, "--strategy", "agentrx", "--repair", "-o", tmp_path / "again.jsonl", "-q",
            *llm_flags(llm_server, tmp_path))
    assert r.exit_code == 0 and llm_server.calls == calls
    assert [json.loads(x)["repair"] for x in (tmp_path / "again.jsonl").read_text().splitlines()] == \
        [d["repair"] for d in diags]

    # resume run "12" from its diagnosis: tau messages before the critical step, then the directive
    resumed = tmp_path / "resumed.json"
    r = run("repair", path, "--record", 1, "--diagnosis", out, "-o", resumed)
    assert r.exit_code == 0, r.output
    assert "directive from the diagnosis (llm)" in r.output
    doc = json.loads(resumed.read_text())
    k = diags[1]["critical_step"]
    assert doc[:-1] == [{key: v for key, v in m.items() if key != "index"} for m in records[1]["traj"][:k]]
    assert doc[-1] == {"role": "user", "content": diags[1]["repair"]}
    assert records[1]["info"]["task"]["instruction"] not in resumed.read_text()  # the hidden gold is not copied
    back = load_path(resumed).trajectories[0]
    assert back.source.format == "openai" and len(back.steps) == k + 1 and back.steps[-1].kind == "user"
    assert llm_server.calls == calls  # the directive came from the diagnosis: no call


def test_offline_repair_writes_a_labelled_template_in_who_and_when_format(ww_dir, tmp_path):
    src = ww_dir / "10.json"
    out = tmp_path / "d.jsonl"
    r = run("audit", src, "--repair", "-o", out, "-q")  # offline strategy, no endpoint: template
    assert r.exit_code == 0, r.output
    d = json.loads(out.read_text())
    assert d["repair"].startswith(TEMPLATE_LABEL) and d["metadata"]["repair"] == {"source": "template"}
    assert f"(step {d['critical_step']} of the original run)" in d["repair"]
    resumed = tmp_path / "resumed.json"
    r = run("repair", src, "-o", resumed)  # diagnoses now (offline) and writes the template
    assert r.exit_code == 0, r.output
    assert "directive from template" in r.output
    doc = json.loads(resumed.read_text())
    original = json.loads(src.read_text())
    k = d["critical_step"]
    assert set(doc) == {"question", "question_ID", "level", "system_prompt", "history"}  # no labels, no answer
    assert doc["history"][:-1] == original["history"][:k]
    assert doc["history"][-1] == {"role": "user", "name": "human", "content": d["repair"]}
    back = load_path(resumed).trajectories[0]
    assert back.source.format == "who_and_when" and back.steps[-1].kind == "user" and len(back.steps) == k + 1


def test_repair_keeps_openai_and_magentic_containers(tmp_path):
    msgs = [{"role": "system", "content": "Be careful."}, {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "5", "extra": {"kept": True}}, {"role": "user", "content": "Sure?"},
            {"role": "assistant", "content": "Yes, 5."}]
    wrapped = tmp_path / "run.json"
    wrapped.write_text(json.dumps({"id": "arith", "messages": msgs}))
    out = tmp_path / "o.json"
    r = run("repair", wrapped, "-o", out, "--strategy", "first")
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert doc["id"] == "arith" and doc["messages"][:2] == msgs[:2] and doc["messages"][2]["role"] == "user"
    assert doc["messages"][2]["content"].startswith(TEMPLATE_LABEL)
    mag = tmp_path / "mag.json"
    mag.write_text(json.dumps([{"role": "human", "content": "Find the file."},
                               {"role": "Orchestrator (thought)", "content": "Plan: ask WebSurfer."},
                               {"role": "Orchestrator (-> WebSurfer)", "content": "Search it."},
                               {"role": "WebSurfer", "content": "Found nothing."}]))
    r = run("repair", mag, "-o", out, "--strategy", "last", "--template")
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert [m["role"] for m in doc] == ["human", "Orchestrator (thought)", "Orchestrator (-> WebSurfer)", "human"]
    assert "Magentic-One list 0..2 verbatim" in r.output


def test_failed_llm_repair_falls_back_to_the_template_and_says_why(llm_server, tau_runs, llm_client):
    from trajaudit.engine.run.pipeline import audit_one
    from trajaudit.engine.strategies.context import AuditContext

    llm_server.script(Reply(refusal="no repairs today"))
    res = audit_one(tau_runs["2"], "offline", AuditContext(llm=llm_client, repair=True))
    d = res.diagnosis
    assert d.repair.startswith(TEMPLATE_LABEL) and d.metadata["repair"]["source"] == "template"
    assert "the model refused: no repairs today" in d.metadata["repair"]["note"]


def test_repair_usage_errors_exit_2(tau_file, tmp_path):
    r = CliRunner().invoke(main, ["repair", str(tau_file), "-o", str(tmp_path / "o.json")])
    assert r.exit_code == 2 and "holds 29 runs: pass --record N" in r.output
    r = CliRunner().invoke(main, ["repair", str(tau_file), "--record", "0", "--strategy", "agentrx",
                                  "-o", str(tmp_path / "o.json")])
    assert r.exit_code == 2 and "strategy 'agentrx' needs an LLM" in r.output and "--base-url" in r.output
    diag = tmp_path / "d.jsonl"
    diag.write_text(json.dumps({"trajectory_id": "nope", "critical_step": 1, "category": "x", "strategy": "s"}) + "\n")
    r = CliRunner().invoke(main, ["repair", str(tau_file), "--record", "0", "--diagnosis", str(diag),
                                  "-o", str(tmp_path / "o.json")])
    assert r.exit_code == 2 and "no diagnosis for run '2'" in r.output


def test_audit_llm_strategy_without_endpoint_exits_2(tau_file, tmp_path, monkeypatch):
    for var in ("TRAJAUDIT_BASE_URL", "TRAJAUDIT_MODEL", "TRAJAUDIT_LLM_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    r = CliRunner().invoke(main, ["audit", str(tau_file), "--strategy", "agentrx", "-o", str(tmp_path / "d.jsonl")])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "strategy 'agentrx' needs an LLM" in r.output and "--strategy offline" in r.output


def test_audit_with_worker_processes_uses_the_llm_and_matches_a_serial_run(llm_server, tau_file, tmp_path):
    path, _ = three_tau(tau_file, tmp_path)
    llm_server.responder = scripted(load_path(path).trajectories)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    r = run("audit", path, "--strategy", "agentrx", "--repair", "-o", a, "-q", "--jobs", 2, *llm_flags(llm_server, tmp_path))
    assert r.exit_code == 0, r.output
    assert llm_server.calls == 9  # each worker built its own client on the shared sqlite cache
    r = run("audit", path, "--strategy", "agentrx", "--repair", "-o", b, "-q", *llm_flags(llm_server, tmp_path))
    assert r.exit_code == 0 and llm_server.calls == 9  # the serial re-run is served from that cache

    def strip(line):
        return {k: v for k, v in json.loads(line).items() if k != "usage"}

    assert [strip(x) for x in a.read_text().splitlines()] == [strip(x) for x in b.read_text().splitlines()]


def test_a_strategy_s_own_repair_is_kept(tau_runs):
    import dataclasses

    from trajaudit.engine.run.repair_prefix import attach_repair
    from trajaudit.engine.strategies.context import AuditContext
    from trajaudit.engine.strategies.registry import default_strategies

    t = tau_runs["2"]
    d = default_strategies().get("last").diagnose(*with_evidence(t, AuditContext()))
    mine = dataclasses.replace(d, repair="1. Re-check the variant count.")
    kept = attach_repair(mine, t, llm=None)
    assert kept.repair == "1. Re-check the variant count." and kept.metadata["repair"] == {"source": "strategy"}
    assert attach_repair(d, t).repair.startswith(TEMPLATE_LABEL)


def test_resumed_prefix_never_ends_on_a_call_without_its_output(tau_runs):
    """A critical step that is a tool output (or one output of a parallel call) moves the cut back to
    the call: chat APIs refuse an assistant tool call without its result."""
    from trajaudit.engine.run.repair_prefix import resume_document

    t = tau_runs["2"]
    out = next(s for s in t.steps if s.kind == "tool")  # step 3 answers the call at step 2
    doc, desc = resume_document(t, out.index, "check the order first")
    assert out.index == 3 and len(doc) == 2 + 1 and "tool_calls" not in doc[-2]
    assert doc[-1] == {"role": "user", "content": "check the order first"}
    assert "not ..2: the tool call at step 2 would be left without its output" in desc
    doc, desc = resume_document(t, 2, "x")  # the call itself: unchanged
    assert len(doc) == 3 and "not .." not in desc
    msgs = [{"role": "user", "content": "two lookups"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "a", "name": "f", "content": "1"},
            {"role": "tool", "tool_call_id": "b", "name": "g", "content": "Error"}]
    from trajaudit.engine.trace.loader import load_document

    par = load_document(msgs).trajectories[0]
    doc, _ = resume_document(par, 3, "x")  # the second output of a parallel call
    assert [m["role"] for m in doc] == ["user", "user"]


def test_repair_and_eval_read_jsonl_lines_the_same_way(tmp_path):
    """repair finds a JSONL run's line by its record number, and eval/repair read diagnoses and gold
    JSONL: all split at newlines only, as the loader does (a raw U+2028 in a record)."""
    import json

    from trajaudit.engine.trace.text import jsonl_lines

    text = json.dumps({"a": "x\u2028y"}, ensure_ascii=False) + "\r\n" + json.dumps({"b": 1}) + "\n"
    assert [json.loads(x) for x in jsonl_lines(text) if x.strip()] == [{"a": "x\u2028y"}, {"b": 1}]
    assert len(text.splitlines()) == 3  # what the readers used to see


def test_repair_resumes_the_right_jsonl_record_after_a_line_with_u2028(tmp_path):
    import json

    from click.testing import CliRunner

    from trajaudit.cli import main

    first = {"id": "one", "messages": [{"role": "user", "content": "a\u2028b"}, {"role": "assistant", "content": "x"}]}
    second = {"id": "two", "messages": [
        {"role": "user", "content": "Cancel order W1"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "cancel_order", "arguments": '{"order_id": "W1"}'}}]},
        {"role": "tool", "tool_call_id": "c", "name": "cancel_order", "content": "Error: cannot cancel"},
        {"role": "assistant", "content": "Cancelled!"}]}
    src = tmp_path / "runs.jsonl"
    src.write_text(json.dumps(first, ensure_ascii=False) + "\n" + json.dumps(second) + "\n", encoding="utf-8")
    out = tmp_path / "resumed.json"
    r = CliRunner().invoke(main, ["repair", str(src), "--record", "1", "--template", "-o", str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    msgs = doc["messages"] if isinstance(doc, dict) else doc
    assert msgs[0]["content"] == "Cancel order W1" and msgs[-1]["role"] == "user"
    assert "OpenAI messages 0..0 verbatim" in r.output  # the record's own line, not a rebuild from the IR


def test_repair_of_an_anthropic_run_resumes_under_its_top_level_system_prompt():
    """Was a documented gap: the resumed prefix (OpenAI messages rebuilt from the IR) dropped the
    top-level `system`, so the agent resumed without the very policy the diagnosis said it broke."""
    from trajaudit.engine.run.repair_prefix import resume_document

    doc = {"system": "Obtain explicit user confirmation (yes) before cancelling anything.",
           "messages": [{"role": "user", "content": "Cancel order W1."},
                        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "cancel_order",
                                                           "input": {"id": "W1"}}]},
                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}]}
    t = load(doc)
    resumed, what = resume_document(t, 1, "Ask the user to confirm first.")
    assert [m["role"] for m in resumed] == ["system", "user", "user"]
    assert resumed[0]["content"] == doc["system"] and "the run's system prompt, then steps 0..0" in what
    plain = load({"messages": doc["messages"]}, format="anthropic")  # no system prompt: nothing added
    assert [m["role"] for m in resume_document(plain, 1, "x")[0]] == ["user", "user"]


def test_a_resumed_prefix_keeps_hidden_reasoning_hidden():
    """Fresh-user pass: repairing an Anthropic run turned the assistant's ``thinking`` block ("search
    first") into the visible ``content`` of the rebuilt OpenAI assistant message, and a Responses
    ``reasoning`` item into an assistant message of its own."""
    from trajaudit.engine.run.repair_prefix import resume_document

    doc = {"messages": [
        {"role": "user", "content": "Book the cheapest flight."},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "secret plan", "signature": "x"},
                                          {"type": "tool_use", "id": "t1", "name": "search", "input": {"q": "LIS"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "[]"}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "kept out", "signature": "y"},
                                          {"type": "text", "text": "Nothing found."}]},
        {"role": "user", "content": "Thanks."}]}
    t = load(doc, format="anthropic")
    assert t.steps[1].content == "secret plan"  # the audit still reads the reasons the step gave
    resumed = resume_document(t, 4, "Try again.")[0]
    assert resumed[1]["role"] == "assistant" and resumed[1]["content"] is None
    assert resumed[1]["tool_calls"][0]["function"]["name"] == "search"
    assert resumed[3]["content"] == "Nothing found."
    assert "secret plan" not in json.dumps(resumed) and "kept out" not in json.dumps(resumed)

    responses = {"input": [{"type": "message", "role": "user", "content": "Hi"}],
                 "output": [{"type": "reasoning", "id": "r1", "summary": [{"type": "summary_text", "text": "think"}]},
                            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello"}]},
                            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "?"}]}]}
    r = load(responses, format="openai_responses")
    kinds = [(s.kind, s.metadata.get("item_type")) for s in r.steps]
    assert ("agent", "reasoning") in kinds, kinds
    msgs = resume_document(r, len(r.steps) - 1, "x")[0]
    assert "think" not in json.dumps(msgs) and [m["content"] for m in msgs][-2:] == ["Hello", "x"]
