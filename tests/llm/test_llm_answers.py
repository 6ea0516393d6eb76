"""Reading odd endpoint answers (trajaudit/llm/answers.py, through the client and the strategies on the
scripted OpenAI-protocol server of tests/llm_server.py): a 200 answer that is no chat completion, content
as a list of parts, usage counts that are not numbers, ``2.0`` for an integer step, ``NaN`` in the JSON,
and a huge invalid answer clipped in the schema re-ask. Each test fails without its fix."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from hostile_kit import cli, good_run, ids, one_line, snapshot, write_jsonl
from llm_server import Raw, Reply, schema_name
from strategy_helpers import with_evidence

from trajaudit.cli import main
from trajaudit.engine.strategies.context import AuditContext
from trajaudit.engine.strategies.registry import default_strategies

BODIES = {"truncated": (Raw('{"id": "x", "object": "chat.completion", "choices": [{"message": {"content": "'),
                        "a body that is not JSON"),
          "html": (Raw("<html><body>502 Bad Gateway</body></html>", "text/html"),
                   "not a chat completion but str '<html><body>502 Bad Gateway</body></html>'")}


GOOD = {"critical_step": 2, "agent": "assistant", "category": "intent_plan_misalignment", "confidence": 0.5,
        "reason": "x"}


def _two_runs(tmp_path, tau_file):
    runs = json.loads(tau_file.read_text())[:2]
    path = tmp_path / "two.json"
    path.write_text(json.dumps(runs))
    return path


def _audit(tmp_path, llm_server, path, strategy="all-at-once"):
    out = tmp_path / "d.jsonl"
    res = CliRunner().invoke(main, ["audit", str(path), "-s", strategy, "--base-url", llm_server.url,
                                    "--model", "m", "--no-cache", "-q", "-o", str(out)])
    lines = out.read_text().splitlines() if out.exists() else []
    return res, [json.loads(x) for x in lines]


def test_a_200_answer_that_is_not_a_chat_completion_fails_that_run_with_a_clear_error(tmp_path, llm_server, tau_file):
    """Was: an HTML page or plain text with HTTP 200 (a proxy, a web UI at the wrong --base-url) made
    the openai package return a str and the client crash on ``resp.choices``: 'internal error:
    AttributeError' with a logged traceback. Now one run fails naming the URL; the next is audited."""
    page = Raw("<html><body>Please log in</body></html>", "text/html")
    llm_server.script(page, page, page, page, GOOD)  # the first try and the client's 3 retries (issue 18)
    res, diags = _audit(tmp_path, llm_server, _two_runs(tmp_path, tau_file))
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output and "AttributeError" not in res.output
    said = " ".join(res.output.split())
    assert (f"all-at-once: endpoint error: {llm_server.url} answered HTTP 200 with not a chat completion but str "
            "'<html><body>Please log in</body></html>' (after 3 retries); is it the OpenAI-compatible API root "
            "(usually ending in /v1)?") in said
    assert [d["trajectory_id"] for d in diags] == ["3"] and diags[0]["critical_step"] == 2


def test_content_as_a_list_of_parts_and_odd_usage_counts_are_read(tmp_path, llm_server, tau_file):
    """Was: ``content`` given as text parts ('list' object has no attribute 'strip') and a ``usage``
    with non-numeric counts (int('lots')) were internal errors."""
    body = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": [{"type": "text", "text": json.dumps(GOOD)[:20]},
                                                 {"type": "text", "text": json.dumps(GOOD)[20:]}]}}],
            "usage": {"prompt_tokens": "lots", "completion_tokens": None}}
    llm_server.script(Raw(json.dumps(body)), Raw(json.dumps(body)))
    res, diags = _audit(tmp_path, llm_server, _two_runs(tmp_path, tau_file))
    assert res.exit_code == 0, res.output
    assert [d["critical_step"] for d in diags] == [2, 2]
    assert diags[0]["usage"]["input_tokens"] == 0 and diags[0]["usage"]["output_tokens"] == 0
    assert diags[0]["usage"]["output_chars"] == len(json.dumps(GOOD))


def test_an_integral_float_step_is_that_step_not_the_last_decision(llm_server, llm_client, tau_runs):
    """Was: JSON Schema counts 2.0 as an integer, so ``"critical_step": 2.0`` passed validation, then
    every strategy read it as 'model gave no step number (2.0); used the last decision step' (step
    30 on tau run 2) — and drift dropped keeper claims at step 2.0 as 'not a decision step'."""
    t = tau_runs["2"]
    llm_server.script(json.dumps(GOOD).replace('"critical_step": 2', '"critical_step": 2.0'))
    d = default_strategies().get("all-at-once").diagnose(*with_evidence(t, AuditContext(llm=llm_client)))
    assert d.critical_step == 2 and d.metadata["notes"] == []
    assert d.metadata["model_step"] == 2 and type(d.metadata["model_step"]) is int

    def hybrid(req):
        assert schema_name(req) == "hybrid"
        return Reply('{"critical_step": 8.0, "category": "intent_plan_misalignment", "confidence": 1.0, '
                     '"reason": "r", "agrees_with_offline": false}')
    llm_server.responder = hybrid
    d = default_strategies().get("hybrid").diagnose(*with_evidence(t, AuditContext(llm=llm_client)))
    assert d.critical_step == 8 and not any("no step number" in n for n in d.metadata["notes"])
    assert d.confidence == 1.0


def test_nan_in_an_answer_is_invalid_json_and_never_reaches_diagnoses_jsonl(tmp_path, llm_server, tau_file):
    """Was: Python's parser accepts NaN, jsonschema lets a NaN confidence pass minimum/maximum, and
    searchauditor copied the report's confidence into metadata: diagnoses.jsonl got a bare ``NaN``
    (not JSON: jq, JavaScript and strict parsers reject the line). Now NaN is a schema re-ask."""
    def respond(req):
        name = schema_name(req)
        base = {"critical_step": 2, "category": "intent_plan_misalignment", "reason": "r"}
        if name == "searchauditor-adjudicate":
            return dict(base, confidence=0.5, supporting_steps=[2], sources=["holistic"])
        extra = {"searchauditor-backward": {"constraints": []}, "searchauditor-forward": {"plan": []}}.get(name, {})
        return json.dumps(dict(base, confidence=0.5, **extra)).replace("0.5", "NaN")
    llm_server.responder = respond
    path = tmp_path / "one.json"
    path.write_text(json.dumps(json.loads(tau_file.read_text())[:1]))
    res, _ = _audit(tmp_path, llm_server, path, "searchauditor")
    # every report answers NaN twice: each is invalid (re-asked once), so the run fails
    assert res.exit_code == 1
    assert "the answer is not valid JSON (NaN is not a JSON number)" in " ".join(res.output.split())
    assert llm_server.calls == 6  # 3 reports x (answer + one re-ask)
    # the one run could not be audited: nothing is written (no -o file made), so no NaN can reach it
    assert "no run could be audited" in " ".join(res.output.split()) and not (tmp_path / "d.jsonl").exists()


def test_a_huge_invalid_answer_is_not_echoed_whole_in_the_re_ask(llm_server, llm_client):
    """Was: the schema re-ask quoted the invalid answer verbatim: a server ignoring max_tokens that
    sent 5 MB made the second request 5 MB (a context-length error on any real server)."""
    from trajaudit.llm.client import parse_json_answer  # still importable from the client

    schema = {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}}
    llm_server.script("x" * 2_000_000, '{"a": 1}')
    assert llm_client.chat_json([{"role": "user", "content": "q"}], schema, name="t") == {"a": 1}
    said = llm_server.requests[1]["messages"][-2]
    limit = 8 * llm_client.config.max_tokens
    assert said["role"] == "assistant" and said["content"].startswith("x" * limit)
    assert said["content"].endswith(f"[… {2_000_000 - limit} more characters of this answer cut …]")
    assert len(said["content"]) < limit + 100
    assert parse_json_answer('{"a": 2.0}', _validator(schema)) == ({"a": 2}, None)


def _validator(schema):
    import jsonschema

    return jsonschema.Draft202012Validator(schema)


# Class 10: an LLM endpoint answering HTTP 200 with a body that is not a chat completion (truncated
# JSON, an HTML error page from a proxy).
#
# Was: the run was skipped as "internal error: JSONDecodeError" with a traceback, not classed as an
# endpoint error and not retried. Now it is an endpoint error, retried like a 5xx (``max_retries``
# times), then reported for that run; the batch's other runs are diagnosed. Real HTTP server on
# 127.0.0.1 (tests/llm_server.py).

@pytest.mark.parametrize("kind", list(BODIES))
def test_a_broken_body_is_an_endpoint_error_retried_then_reported_per_run(tmp_path, llm_server, kind):
    body, said = BODIES[kind]
    runs = write_jsonl(tmp_path / "runs.jsonl", [json.dumps(good_run("ok1")), json.dumps(good_run("bad")),
                                                 json.dumps(good_run("ok2"))])
    asked = {"bad": 0}

    def respond(req):
        if "flight, bad." in json.dumps(req):
            asked["bad"] += 1
            return body
        return GOOD
    llm_server.responder = respond
    config = tmp_path / "llm.yaml"
    config.write_text(f"base_url: {llm_server.url}\nmodel: m\nmax_retries: 2\n")
    out = tmp_path / "d.jsonl"
    before = snapshot(tmp_path)
    r = cli("audit", runs, "-s", "all-at-once", "--llm-config", config, "--no-cache", "-q", "-o", out)
    assert r.exit_code == 1, r.output
    assert ids(out) == ["ok1", "ok2"]
    text = one_line(r.stderr)
    assert f"skipped: {runs}, record 1 (run bad): all-at-once: endpoint error: {llm_server.url} answered HTTP 200 " \
           f"with {said}" in text and "(after 2 retries)" in text
    assert asked["bad"] == 3  # the first try and two retries, as for a 5xx
    assert "Traceback" not in r.output and "internal error" not in r.output
    assert {k: v for k, v in snapshot(tmp_path).items() if k != str(out)} == before  # inputs untouched
