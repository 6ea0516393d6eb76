"""``trajaudit guard`` end to end: the official openai client -> the guard proxy -> the scripted OpenAI
server answering a tool call that violates a rule (issue 20)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import openai
import pytest
from guard_server import GuardServer, tool_call_completion, tool_call_stream
from llm_server import Raw, ScriptedLLMServer, Sleep, Status

from trajaudit.online.guard import assemble_stream, parse_sse, run_key

ROOT = Path(__file__).resolve().parents[2]
GUARD_PACK = str(ROOT / "examples" / "rules" / "guard_policies.yaml")
TOOLS = str(ROOT / "examples" / "tools" / "tau_retail_tools.json")

#: a write before the user is identified (tau_retail.authenticate-before-write)
UNAUTH = [{"role": "system", "content": "You are a retail agent. Authenticate the user before any change."},
          {"role": "user", "content": "Please cancel order #W0000001, yes I confirm, no longer needed."}]
CANCEL = ("cancel_pending_order", {"order_id": "#W0000001", "reason": "no longer needed"})
#: a tool call after a hand-off (example.guard.no-call-after-handoff)
HANDOFF = [{"role": "user", "content": "I want to return my order #W0000002."},
           {"role": "assistant", "content": None, "tool_calls": [{"id": "h1", "type": "function", "function": {
               "name": "transfer_to_human_agents", "arguments": json.dumps({"summary": "return"})}}]},
           {"role": "tool", "tool_call_id": "h1", "name": "transfer_to_human_agents", "content": "Transfer successful"}]
RETURN = ("return_delivered_order_items", {"order_id": "#W0000002", "item_ids": ["1"], "payment_method_id": "gc_1"})


@pytest.fixture()
def upstream():
    with ScriptedLLMServer() as s:
        yield s


def _client(url: str, **kw) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key="test", max_retries=0, **kw)


def test_block_non_streaming_write_before_authentication(upstream, tmp_path):
    upstream.script(Raw(tool_call_completion(*CANCEL)))
    with GuardServer(upstream.url, mode="block", log_path=tmp_path / "decisions.jsonl") as g:
        r = _client(g.url).chat.completions.create(model="m", messages=UNAUTH)
    msg = r.choices[0].message
    assert msg.tool_calls is None
    assert msg.content.startswith("[trajaudit guard] the proposed action was blocked")
    assert "tau_retail.authenticate-before-write" in msg.content
    rows = [json.loads(x) for x in (tmp_path / "decisions.jsonl").read_text().splitlines()]
    row = next(x for x in rows if x["rule"] == "tau_retail.authenticate-before-write")
    assert row["decision"] == "block" and row["verdict"] == "fail" and row["step"] == 2
    assert row["run_key"] == run_key(UNAUTH) and row["evidence"]


def test_annotate_non_streaming_passes_with_header(upstream, tmp_path):
    upstream.script(Raw(tool_call_completion(*CANCEL)))
    with GuardServer(upstream.url, mode="annotate", log_path=tmp_path / "d.jsonl") as g:
        raw = _client(g.url).chat.completions.with_raw_response.create(model="m", messages=UNAUTH)
    r = raw.parse()
    assert r.choices[0].message.tool_calls[0].function.name == "cancel_pending_order"
    assert raw.headers["x-trajaudit-decision"] == "annotate"
    findings = json.loads(raw.headers["x-trajaudit-findings"])
    assert any(f["rule"] == "tau_retail.authenticate-before-write" and f["verdict"] == "fail" for f in findings)


def test_block_streaming_tool_call_after_handoff(upstream):
    upstream.script(Raw(tool_call_stream(*RETURN), "text/event-stream"))
    with GuardServer(upstream.url, mode="block", rules=(GUARD_PACK,)) as g:
        stream = _client(g.url).chat.completions.create(model="m", messages=HANDOFF, stream=True)
        chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "example.guard.no-call-after-handoff" in text
    assert not any(c.choices[0].delta.tool_calls for c in chunks if c.choices)


def test_annotate_streaming_replays_the_tool_call(upstream):
    upstream.script(Raw(tool_call_stream(*RETURN), "text/event-stream"))
    with GuardServer(upstream.url, mode="annotate", rules=(GUARD_PACK,)) as g:
        resp = httpx.post(g.url + "/chat/completions", json={"model": "m", "messages": HANDOFF, "stream": True})
    assert resp.status_code == 200
    chunks, done = parse_sse(resp.text)
    assert done
    msg = assemble_stream(chunks)["choices"][0]["message"]
    assert msg["tool_calls"][0]["function"]["name"] == "return_delivered_order_items"
    assert json.loads(msg["tool_calls"][0]["function"]["arguments"]) == RETURN[1]
    assert "example.guard.no-call-after-handoff" in resp.headers["x-trajaudit-findings"]


def test_block_with_http_status(upstream):
    upstream.script(Raw(tool_call_completion(*CANCEL)))
    with GuardServer(upstream.url, mode="block", block_status=403) as g:
        with pytest.raises(openai.PermissionDeniedError) as e:
            _client(g.url).chat.completions.create(model="m", messages=UNAUTH)
    body = e.value.response.json()
    assert body["error"]["type"] == "trajaudit_violation"
    assert any(v["rule"] == "tau_retail.authenticate-before-write" for v in body["violations"])


def test_allowed_call_passes_unchanged(upstream):
    upstream.script(Raw(tool_call_completion("find_user_id_by_email", {"email": "a@b.c"})))
    with GuardServer(upstream.url, mode="block") as g:
        raw = _client(g.url).chat.completions.with_raw_response.create(model="m", messages=UNAUTH)
    assert raw.parse().choices[0].message.tool_calls[0].function.name == "find_user_id_by_email"
    assert raw.headers["x-trajaudit-decision"] in ("allow", "annotate")


def test_upstream_errors_pass_through(upstream):
    upstream.script(Status(429, "slow down", retry_after=3), Status(503, "overloaded"), Status(500))
    with GuardServer(upstream.url) as g:
        c = _client(g.url)
        with pytest.raises(openai.RateLimitError) as e:
            c.chat.completions.create(model="m", messages=UNAUTH)
        assert e.value.response.headers["retry-after"] == "3"
        assert e.value.body["message"] == "slow down"
        with pytest.raises(openai.InternalServerError) as e2:
            c.chat.completions.create(model="m", messages=UNAUTH)
        assert e2.value.status_code == 503 and e2.value.body["message"] == "overloaded"
        with pytest.raises(openai.InternalServerError) as e3:
            c.chat.completions.create(model="m", messages=UNAUTH, stream=True)
        assert e3.value.status_code == 500


def test_timeouts(upstream):
    upstream.script(Sleep(1.5, Raw(tool_call_completion(*CANCEL))), Sleep(1.5, Raw(tool_call_completion(*CANCEL))))
    with GuardServer(upstream.url, timeout=0.5) as g:  # the proxy's upstream timeout: 504
        with pytest.raises(openai.InternalServerError) as e:
            _client(g.url).chat.completions.create(model="m", messages=UNAUTH)
        assert e.value.status_code == 504 and "did not answer" in e.value.body["message"]
    with GuardServer(upstream.url, timeout=30) as g:  # the client's own timeout is the client's
        with pytest.raises(openai.APITimeoutError):
            _client(g.url, timeout=0.5).chat.completions.create(model="m", messages=UNAUTH)


def test_bad_input_one_request_at_a_time(upstream):
    upstream.responder = lambda req: Raw(tool_call_completion("find_user_id_by_email", {"email": "a@b.c"}))
    upstream.script(Raw('{"not": "a completion"}'), Raw("<html>proxy error</html>", "text/html"))
    with GuardServer(upstream.url, tools=TOOLS) as g:
        url = g.url + "/chat/completions"
        r = httpx.post(url, content=b"{not json")
        assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]
        r = httpx.post(url, json={"model": "m"})
        assert r.status_code == 400 and "'messages' list" in r.json()["error"]["message"]
        r = httpx.post(url, json={"model": "m", "messages": [{"role": "user", "content": "hi"}, 42]})
        assert r.status_code == 400 and "message 1" in r.json()["error"]["message"]
        r = httpx.post(url, json={"model": "m", "messages": UNAUTH})
        assert r.status_code == 502 and "not a chat completion" in r.json()["error"]["message"]
        r = httpx.post(url, json={"model": "m", "messages": UNAUTH})
        assert r.status_code == 502 and "not a chat completion" in r.json()["error"]["message"]
        upstream.script(Raw(tool_call_completion("delete_all_users", {})))
        r = httpx.post(url, json={"model": "m", "messages": UNAUTH})  # a tool the schemas do not declare
        assert r.status_code == 200 and "guard.unknown-tool" in r.json()["choices"][0]["message"]["content"]
        # still serving
        r = _client(g.url).chat.completions.create(model="m", messages=UNAUTH)
        assert r.choices[0].message.tool_calls, r.choices[0].message.content
        assert r.choices[0].message.tool_calls[0].function.name == "find_user_id_by_email"


def test_malformed_messages_answer_400_and_the_guard_keeps_serving(upstream, tmp_path):
    """A request whose conversation holds a malformed message (role not a string, content of a wrong
    type, tool_calls not a list, a nameless tool call) is refused with 400 naming the message and the
    fault, is not forwarded, and later requests are served and decided as before."""
    upstream.responder = lambda req: Raw(tool_call_completion(*CANCEL))
    log = tmp_path / "guard.jsonl"
    bad_cases = [
        ({"role": 5, "content": "hi"}, "message 1: 'role' must be a string, got int"),
        ({"role": "user", "content": 5}, "message 1: 'content' must be a string, null or a list of parts, got int"),
        ({"role": "assistant", "content": None, "tool_calls": "cancel"}, "message 1: 'tool_calls' must be a list, got str"),
        ({"role": "assistant", "content": None, "tool_calls": [{"id": "x", "function": {"arguments": "{}"}}]},
         "message 1: tool_calls[0] has no function name"),
    ]
    with GuardServer(upstream.url, tools=TOOLS, log_path=str(log)) as g:
        url = g.url + "/chat/completions"
        for bad, why in bad_cases:
            r = httpx.post(url, json={"model": "m", "messages": [UNAUTH[0], bad, UNAUTH[1]]})
            assert r.status_code == 400, r.text
            assert why in r.json()["error"]["message"], r.text
        assert upstream.calls == 0  # refused before forwarding
        r = _client(g.url).chat.completions.create(model="m", messages=UNAUTH)  # still serving, same decision
        assert "tau_retail.authenticate-before-write" in (r.choices[0].message.content or ""), r
        assert upstream.calls == 1
    decisions = [json.loads(x) for x in log.read_text().splitlines()]
    assert any(d.get("decision") == "block" for d in decisions), decisions


def test_assemble_stream_joins_deltas():
    chunks, done = parse_sse(tool_call_stream("f", {"a": 1, "b": "xyz"}))
    assert done
    msg = assemble_stream(chunks)["choices"][0]["message"]
    assert msg["tool_calls"] == [{"id": "call_1", "type": "function", "function": {"name": "f",
                                                                                   "arguments": '{"a": 1, "b": "xyz"}'}}]
    with pytest.raises(ValueError):
        assemble_stream([{"id": "x"}])


def test_stop_on_alarm_blocks_without_http(tmp_path):
    """Guard.decide with --stop-on-alarm: once the judge's estimate rests on a finding, the answer is blocked."""
    from trajaudit.engine.run.pipeline import AuditSpec, build_context
    from trajaudit.online.guard import Guard

    g = Guard(build_context(AuditSpec()), stop_on_alarm=True, alarm_threshold=0.0, block_on="critical")
    msg = {"role": "assistant", "content": None, "tool_calls": [{"id": "c9", "type": "function", "function": {
        "name": CANCEL[0], "arguments": json.dumps(CANCEL[1])}}]}
    dec = g.decide(UNAUTH, msg)
    assert dec.alarm and dec.decision == "block"
    assert any(f["rule"] == "guard.alarm" for f in dec.violations)
    g2 = Guard(build_context(AuditSpec()), stop_on_alarm=False, block_on="critical")
    assert g2.decide(UNAUTH, msg).decision == "annotate"  # error-level failure, below the critical floor


# -- the conversation cache: a request extending a cached conversation adds only its new messages ------------

#: the agent's answers, by the number of assistant messages already in the request
AGENT = [("get_order_details", {"order_id": "#W0000001"}, "c2"),
         ("cancel_pending_order", {"order_id": "#W0000001", "reason": "no longer needed"}, "c3"),  # before identification
         ("find_user_id_by_email", {"email": "yusuf.rossi@example.com"}, "c1"),
         ("get_user_details", {"user_id": "yusuf_rossi_9620"}, "c4")]
RESULTS = {"c1": "yusuf_rossi_9620", "c2": '{"order_id": "#W0000001", "status": "pending", "items": []}',
           "c3": '{"order_id": "#W0000001", "status": "cancelled"}', "c4": '{"user_id": "yusuf_rossi_9620"}'}


def _agent_upstream(req):
    turn = sum(1 for m in req["messages"] if m.get("role") == "assistant")
    name, args, cid = AGENT[min(turn, len(AGENT) - 1)]
    return Raw(tool_call_completion(name, args, call_id=cid))


def _converse(url: str, start: list[dict], turns: int) -> list[tuple[str, list]]:
    """An agent loop through the proxy: each answer (the client's model object, dumped with its null
    fields) and the tool's result are appended to the next request. Returns (decision, findings) per request."""
    c = _client(url)
    messages = list(start)
    out = []
    for _ in range(turns):
        raw = c.chat.completions.with_raw_response.create(model="m", messages=messages)
        msg = raw.parse().choices[0].message
        out.append((raw.headers["x-trajaudit-decision"], json.loads(raw.headers.get("x-trajaudit-findings", "[]"))))
        messages.append(msg.model_dump())  # "refusal": None, "audio": None ... as an agent sends it back
        call = msg.tool_calls[0]
        messages.append({"role": "tool", "tool_call_id": call.id, "name": call.function.name,
                         "content": RESULTS[call.id]})
    return out


START = [{"role": "system", "content": "You are a retail agent. Authenticate the user before any change."},
         {"role": "user", "content": "Cancel my order #W0000001, my email is yusuf.rossi@example.com. Yes, I confirm."}]


def test_cache_extends_a_conversation_with_the_same_decisions(upstream):
    upstream.responder = _agent_upstream
    with GuardServer(upstream.url, mode="annotate", cache_size=0) as g:
        fresh = _converse(g.url, START, 4)
        assert (g.guard.cache.hits, len(g.guard.cache)) == (0, 0)  # size 0: every request rebuilt
    with GuardServer(upstream.url, mode="annotate") as g:
        cached = _converse(g.url, START, 4)
        assert (g.guard.cache.hits, g.guard.cache.misses) == (3, 1)  # requests 2-4 extended the cached monitor
        assert len(g.guard.cache) == 1
    assert cached == fresh
    rules = {f["rule"] for _, fs in fresh for f in fs if f["verdict"] == "fail"}
    assert "tau_retail.authenticate-before-write" in rules  # the comparison is not between empty findings


def test_cache_diverging_prefix_rebuilds(upstream):
    upstream.responder = _agent_upstream
    edited = [START[0], {**START[1], "content": "Cancel order #W0000001 now."}]  # no identification, no confirmation
    with GuardServer(upstream.url, mode="annotate", cache_size=0) as g:
        want = _converse(g.url, edited, 3)
    with GuardServer(upstream.url, mode="annotate") as g:
        _converse(g.url, START, 3)
        misses = g.guard.cache.misses
        got = _converse(g.url, edited, 3)  # same system prompt, another user turn: not an extension
        assert g.guard.cache.misses == misses + 1 and g.guard.cache.hits == 2 + 2
        assert len(g.guard.cache) == 2
    assert got == want


def test_cache_evicted_and_expired_entries_rebuild(upstream):
    upstream.responder = _agent_upstream
    other = [START[0], {"role": "user", "content": "What is the status of order #W0000002?"}]
    with GuardServer(upstream.url, mode="annotate", cache_size=0) as g:
        want_a, want_b = _converse(g.url, START, 3), _converse(g.url, other, 3)
    with GuardServer(upstream.url, mode="annotate", cache_size=1) as g:
        cache = g.guard.cache
        got_a = _converse(g.url, START, 1)
        got_b = _converse(g.url, other, 1)  # evicts START's monitor (one entry)
        assert len(cache) == 1 and (cache.hits, cache.misses) == (0, 2)
        c = _client(g.url)
        messages = list(START)
        for i in range(3):  # START again: its monitor was evicted, so the second request rebuilds
            raw = c.chat.completions.with_raw_response.create(model="m", messages=messages)
            msg = raw.parse().choices[0].message
            if i:
                got_a.append((raw.headers["x-trajaudit-decision"],
                              json.loads(raw.headers.get("x-trajaudit-findings", "[]"))))
            messages += [msg.model_dump(), {"role": "tool", "tool_call_id": msg.tool_calls[0].id,
                                            "name": msg.tool_calls[0].function.name,
                                            "content": RESULTS[msg.tool_calls[0].id]}]
        assert (cache.hits, cache.misses) == (2, 3)  # the first START request rebuilt, the next two extended
    assert got_a == want_a and got_b == want_b[:1]
    with GuardServer(upstream.url, mode="annotate", cache_idle=0.05) as g:
        c = _client(g.url)
        r1 = c.chat.completions.create(model="m", messages=START).choices[0].message
        time.sleep(0.3)  # idle longer than cache_idle: expired
        nxt = START + [r1.model_dump(), {"role": "tool", "tool_call_id": r1.tool_calls[0].id,
                                         "name": r1.tool_calls[0].function.name, "content": RESULTS[r1.tool_calls[0].id]}]
        raw = c.chat.completions.with_raw_response.create(model="m", messages=nxt)
        assert (g.guard.cache.hits, g.guard.cache.misses) == (0, 2)
        assert (raw.headers["x-trajaudit-decision"], json.loads(raw.headers.get("x-trajaudit-findings", "[]"))) \
            == want_a[1]


@pytest.mark.parametrize("command", ["guard", "serve"])
def test_port_in_use_is_a_usage_error(tmp_path, command):
    """`guard` (as `serve`) on a port another program listens on: exit 2 and a message naming the
    address, before anything is served (no uvicorn traceback)."""
    import socket
    import subprocess
    import sys

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        args = (["guard", "--upstream", "http://127.0.0.1:9/v1", "--port", str(port), "--log", str(tmp_path / "g.jsonl")]
                if command == "guard" else ["serve", "--otlp", str(port), "-o", str(tmp_path / "d.jsonl")])
        r = subprocess.run([sys.executable, "-m", "trajaudit", *args], cwd=ROOT, capture_output=True, text=True,
                           timeout=120)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert f"cannot listen on 127.0.0.1:{port}" in r.stderr
    assert "in use" in r.stderr.lower() and "Traceback" not in r.stderr
    assert not (tmp_path / "g.jsonl").exists()


def test_unwritable_decision_log_is_a_usage_error_at_start(tmp_path):
    """`guard --log` in a folder that does not exist: exit 2 naming the log before anything is served
    (it used to start and answer every request with a 500)."""
    import subprocess
    import sys

    bad = tmp_path / "no" / "such" / "dir" / "g.jsonl"
    r = subprocess.run([sys.executable, "-m", "trajaudit", "guard", "--upstream", "http://127.0.0.1:9/v1",
                        "--port", str(_free()), "--log", str(bad)], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2, (r.returncode, r.stderr)
    flat = r.stderr.replace("\n", "")  # the message is wrapped to the terminal width
    assert "cannot write the decision log" in flat and str(bad) in flat
    assert "Traceback" not in r.stderr


def test_decision_log_lost_mid_run_still_serves_the_answer(upstream, tmp_path):
    """The decision log's folder removed while the proxy runs: the answer still reaches the client
    (the write failure is logged), not a 500."""
    logdir = tmp_path / "logs"
    logdir.mkdir()
    upstream.script(Raw(tool_call_completion(*CANCEL)))
    with GuardServer(upstream.url, mode="block", log_path=logdir / "decisions.jsonl") as g:
        logdir.rmdir()
        r = _client(g.url).chat.completions.create(model="m", messages=UNAUTH)
    assert r.choices[0].message.content.startswith("[trajaudit guard] the proposed action was blocked")
    assert not logdir.exists()


def _free() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("bad", ["notaurl", "localhost:8000/v1", "ftp://127.0.0.1/v1", "http://", "http://h:port/v1",
                                 "http://127.0.0.1:8000/v1?api-version=1"])
def test_upstream_that_is_not_an_http_url_is_a_usage_error(tmp_path, bad):
    """`guard --upstream notaurl`: exit 2 naming the value, before anything is served (it used to start
    and fail every request)."""
    import subprocess
    import sys

    try:
        r = subprocess.run([sys.executable, "-m", "trajaudit", "guard", "--upstream", bad, "--port", str(_free()),
                            "--log", str(tmp_path / "g.jsonl")], cwd=ROOT, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:  # (run kills it) it started serving
        pytest.fail(f"guard --upstream {bad!r} started serving")
    assert r.returncode == 2, (r.returncode, r.stderr)
    flat = " ".join(r.stderr.split())
    assert "error: --upstream: the upstream must be an http:// or https:// URL with a host" in flat
    assert repr(bad) in flat and "Traceback" not in r.stderr
    assert not (tmp_path / "g.jsonl").exists()


def test_check_upstream_accepts_http_and_https_and_build_app_checks(upstream):
    from trajaudit.engine.run.pipeline import AuditSpec, build_context
    from trajaudit.online.guard import Guard, GuardError, build_app, check_upstream

    for ok in ("http://127.0.0.1:8000/v1", "https://llm.internal/v1", "HTTP://[::1]:9/"):
        assert check_upstream(ok) == ok
    with pytest.raises(GuardError, match="'notaurl'"):
        build_app(Guard(build_context(AuditSpec())), "notaurl")
    upstream.script(Raw(tool_call_completion(*CANCEL)))  # a valid upstream still serves (the real client)
    with GuardServer(upstream.url, mode="annotate") as g:
        r = _client(g.url).chat.completions.create(model="m", messages=UNAUTH)
    assert r.choices[0].message.tool_calls[0].function.name == "cancel_pending_order"


def test_hostile_json_answers_400_or_502_and_the_guard_keeps_serving(upstream):
    """A request body nested 100,000 deep or holding a 5,000-digit integer is a 400 naming the limit
    (it was a 500 from json.loads' RecursionError / int conversion); an upstream answer nested so deep
    is a 502; the next request is served."""
    upstream.responder = lambda req: Raw(tool_call_completion("find_user_id_by_email", {"email": "a@b.c"}))
    upstream.script(Raw("[" * 100_000 + "]" * 100_000))
    with GuardServer(upstream.url, tools=TOOLS) as g:
        url = g.url + "/chat/completions"
        r = httpx.post(url, content=b'{"model": "m", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
        assert r.status_code == 400 and "nested too deeply" in r.json()["error"]["message"], r.text
        r = httpx.post(url, content=b'{"model": "m", "n": ' + b"1" * 5000 + b', "messages": []}')
        assert r.status_code == 400 and "digits" in r.json()["error"]["message"], r.text
        r = httpx.post(url, json={"model": "m", "messages": UNAUTH})
        assert r.status_code == 502 and "nested too deeply" in r.json()["error"]["message"], r.text
        r = _client(g.url).chat.completions.create(model="m", messages=UNAUTH)
        assert r.choices[0].message.tool_calls[0].function.name == "find_user_id_by_email"


def test_decision_log_dash_is_refused_before_anything_starts(tmp_path):
    """Hostile-user pass: `guard --log -` made a file named '-' in the working folder (where `-o -` is
    stdout for audit and check): the decisions are appended to a file, so '-' is refused (exit 2),
    before the port is even tried (here a busy one: the old code stopped on it instead)."""
    import os
    import socket
    import subprocess
    import sys

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        r = subprocess.run([sys.executable, "-m", "trajaudit", "guard", "--upstream", "http://127.0.0.1:9/v1",
                            "--port", str(busy.getsockname()[1]), "--log", "-"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert " ".join(r.stderr.split()) == ("error: --log '-': the decisions are appended to a file, not to stdout; give "
                                          "a file name (./- for a file named '-')")
    assert list(tmp_path.iterdir()) == []


#: the user authenticated and said an explicit yes to the cancellation: the call then breaks only its schema
CONFIRMED = [
    {"role": "system", "content": "You are a retail agent."},
    {"role": "user", "content": "cancel my order #W1234567 please, my email is yusuf@example.com"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "a1", "type": "function", "function": {
        "name": "find_user_id_by_email", "arguments": json.dumps({"email": "yusuf@example.com"})}}]},
    {"role": "tool", "tool_call_id": "a1", "name": "find_user_id_by_email", "content": "yusuf_rossi_9620"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "a2", "type": "function", "function": {
        "name": "get_order_details", "arguments": json.dumps({"order_id": "#W1234567"})}}]},
    {"role": "tool", "tool_call_id": "a2", "name": "get_order_details", "content": json.dumps(
        {"order_id": "#W1234567", "user_id": "yusuf_rossi_9620", "status": "pending", "items": []})},
    {"role": "assistant", "content": "I can cancel order #W1234567 (pending) for reason 'no longer needed'. "
                                     "Do you confirm (yes/no)?"},
    {"role": "user", "content": "yes"}]


@pytest.mark.parametrize("stream", [False, True])
def test_schema_violating_call_is_blocked_with_tools(upstream, tmp_path, stream):
    """cancel_pending_order({"order_id": 5}): `reason` missing and order_id not a string. The tools.*
    rules excuse a violation the tool tolerates or a later retry corrects, so they are decided only
    at the end of the run; the guard checks the --tools schemas on the proposed call itself."""
    bad = ("cancel_pending_order", {"order_id": 5})
    upstream.script(Raw(tool_call_stream(*bad)) if stream else Raw(tool_call_completion(*bad)))
    with GuardServer(upstream.url, mode="block", tools=TOOLS, log_path=tmp_path / "d.jsonl") as g:
        if stream:
            chunks = list(_client(g.url).chat.completions.create(model="m", messages=CONFIRMED, stream=True))
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            assert not any(c.choices and c.choices[0].delta.tool_calls for c in chunks)
        else:
            raw = _client(g.url).chat.completions.with_raw_response.create(model="m", messages=CONFIRMED)
            assert raw.headers["x-trajaudit-decision"] == "block"
            msg = raw.parse().choices[0].message
            assert msg.tool_calls is None
            text = msg.content
    assert text.startswith("[trajaudit guard] the proposed action was blocked: ")
    assert ("guard.tool-arguments (error): cancel_pending_order: the arguments break the declared schema: "
            "required-arguments: missing ['reason']; argument-types: ['order_id'] do not have "
            "the declared JSON type ({'order_id': ['string']})") in text
    rows = [json.loads(x) for x in (tmp_path / "d.jsonl").read_text().splitlines()]
    row = next(x for x in rows if x["rule"] == "guard.tool-arguments")
    assert row["decision"] == "block" and row["step"] == 8
    assert row["evidence"] == [{"address": "steps.8.tool_calls.0", "value": '{"order_id": 5}', "note": "call"}]


def test_call_keeping_to_its_schema_is_not_blocked_by_tools(upstream):
    upstream.script(Raw(tool_call_completion("cancel_pending_order",
                                             {"order_id": "#W1234567", "reason": "no longer needed"})))
    with GuardServer(upstream.url, mode="block", tools=TOOLS) as g:
        raw = _client(g.url).chat.completions.with_raw_response.create(model="m", messages=CONFIRMED)
    assert raw.parse().choices[0].message.tool_calls[0].function.name == "cancel_pending_order"
    assert "guard.tool-arguments" not in raw.headers.get("x-trajaudit-findings", "")
    assert raw.headers["x-trajaudit-decision"] != "block"


def test_rules_that_never_block_are_listed():
    """Rules decided after the call ran (its output) or at the run's end: named at start-up."""
    from trajaudit.cli.online import horizon_lines
    from trajaudit.engine.run.pipeline import AuditSpec, build_context
    from trajaudit.online.guard import rule_horizons

    h = rule_horizons(build_context(AuditSpec(tools=TOOLS)))
    assert "tools.required-arguments" in h["end"] and "generic.protocol.confirmation-before-write" in h["end"]
    assert h["outputs"] == ["tau_retail.one-user-per-conversation", "tau_retail.single-authenticated-user"]
    assert "tau_retail.authenticate-before-write" in h["step"]
    lines = horizon_lines(h)
    assert lines[0].startswith("2 rule(s) are decided when the call's output arrives, after the call ran, and never "
                               "block: tau_retail.one-user-per-conversation")
    assert lines[1].startswith(f"{len(h['end'])} rule(s) can only be decided when the run ends and never block: ")
    assert "tools.required-arguments" in lines[1]
