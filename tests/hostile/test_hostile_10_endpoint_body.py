"""Class 10: an LLM endpoint answering HTTP 200 with a body that is not a chat completion (truncated
JSON, an HTML error page from a proxy).

Was: the run was skipped as "internal error: JSONDecodeError" with a traceback, not classed as an
endpoint error and not retried. Now it is an endpoint error, retried like a 5xx (``max_retries``
times), then reported for that run; the batch's other runs are diagnosed. Real HTTP server on
127.0.0.1 (tests/llm_server.py)."""

from __future__ import annotations

import json

import pytest
from hostile_kit import cli, good_run, ids, one_line, snapshot, write_jsonl
from llm_server import Raw

GOOD = {"critical_step": 2, "agent": "assistant", "category": "intent_plan_misalignment", "confidence": 0.5,
        "reason": "x"}
BODIES = {"truncated": (Raw('{"id": "x", "object": "chat.completion", "choices": [{"message": {"content": "'),
                        "a body that is not JSON"),
          "html": (Raw("<html><body>502 Bad Gateway</body></html>", "text/html"),
                   "not a chat completion but str '<html><body>502 Bad Gateway</body></html>'")}


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
