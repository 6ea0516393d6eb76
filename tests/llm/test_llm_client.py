"""The LLM client through the real ``openai`` package against the scripted server on 127.0.0.1:
configuration, cache, usage, the structured-output retry, and every transport fault."""

from __future__ import annotations

import dataclasses
import json
import socket
import subprocess
import sys
import threading

import pytest
from llm_server import Reply, Sleep, Status, schema_name

from trajaudit.errors import ConfigError, LLMError
from trajaudit.llm import LLMClient, LLMConfig, ResponseCache, build_config, load_config_file, tracking

SCHEMA = {"type": "object", "required": ["step", "label"], "additionalProperties": False,
          "properties": {"step": {"type": "integer", "minimum": 0}, "label": {"type": "string", "enum": ["a", "b"]}}}
MSGS = [{"role": "system", "content": "You answer in JSON."}, {"role": "user", "content": "Which step?"}]


# -- configuration -----------------------------------------------------------------------------------

def test_no_endpoint_names_flags_variables_and_offline():
    with pytest.raises(ConfigError) as e:
        build_config({"base_url": None, "model": None})
    text = str(e.value)
    for needle in ("--base-url", "--model", "TRAJAUDIT_BASE_URL", "TRAJAUDIT_MODEL", "OPENAI_API_KEY",
                   "--strategy offline", "missing: base_url, model"):
        assert needle in text


def test_config_file_yaml_and_toml_with_flags_winning(tmp_path):
    y = tmp_path / "llm.yaml"
    y.write_text("llm:\n  base_url: http://127.0.0.1:9/v1\n  model: from-file\n  temperature: 0.5\n  concurrency: 2\n")
    t = tmp_path / "llm.toml"
    t.write_text('base_url = "http://127.0.0.1:9/v1"\nmodel = "toml-model"\nmax_tokens = 77\n')
    c = build_config({"model": "from-flag", "base_url": None}, config_file=y)
    assert (c.base_url, c.model, c.temperature, c.concurrency) == ("http://127.0.0.1:9/v1", "from-flag", 0.5, 2)
    assert build_config({}, config_file=t).max_tokens == 77
    assert load_config_file(t)["model"] == "toml-model"


def test_config_file_errors_are_clear(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("base_url: http://x/v1\nmodle: m\n")
    with pytest.raises(ConfigError, match=r"unknown LLM setting 'modle' \(did you mean 'model'\?\)"):
        load_config_file(bad)
    bad.write_text("base_url: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config_file(bad)
    bad.write_text("base_url: http://x/v1\nmodel: m\ntimeout: fast\n")
    with pytest.raises(ConfigError, match="'timeout' has the wrong type"):
        load_config_file(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config_file(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="base_url must be an http"):
        LLMConfig(base_url="127.0.0.1:8080", model="m")


def test_core_imports_do_not_import_openai():
    code = ("import sys, trajaudit, trajaudit.llm, trajaudit.engine.strategies.llm\n"
            "from trajaudit.engine.strategies.registry import default_strategies\n"
            "reg = default_strategies()\n"
            "[reg.get(n) for n in ('all-at-once', 'step-by-step', 'binary-search', 'searchauditor', 'drift',"
            " 'hybrid')]\n"
            "print('openai' in sys.modules, 'networkx' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"  # nor the claim graph's networkx: drift loads it when it runs


# -- answers, cache and usage ------------------------------------------------------------------------

def test_chat_json_sends_json_schema_and_caches(llm_server, llm_config):
    llm_server.script({"step": 3, "label": "a"})
    with LLMClient(llm_config) as client:
        assert client.chat_json(MSGS, SCHEMA, name="pick step") == {"step": 3, "label": "a"}
        req = llm_server.requests[0]
        assert req["model"] == "scripted-model" and req["messages"] == MSGS and req["temperature"] == 0.0
        assert req["response_format"]["type"] == "json_schema"
        assert req["response_format"]["json_schema"]["schema"] == SCHEMA
        assert schema_name(req) == "pick_step"
        u = client.usage.to_dict()
        assert (u["requests"], u["calls"], u["cache_hits"]) == (1, 1, 0)
        assert u["input_chars"] == sum(len(m["content"]) for m in MSGS) and u["output_chars"] == len('{"step": 3, "label": "a"}')
        assert u["input_tokens"] == u["input_chars"] // 4  # the server's reported usage is used
    # a new client on the same cache file: served from disk, 0 HTTP calls
    llm_server.reset_counts()
    with LLMClient(llm_config) as again:
        assert again.chat_json(MSGS, SCHEMA, name="pick step") == {"step": 3, "label": "a"}
        assert llm_server.calls == 0
        u = again.usage.to_dict()
        assert (u["requests"], u["calls"], u["cache_hits"], u["input_tokens"]) == (1, 0, 1, 0)
        assert u["input_chars"] > 0  # sizes are still reported from the cache entry


def test_cache_key_covers_model_messages_params_and_schema(llm_server, llm_config):
    llm_server.responder = lambda req: {"step": len(llm_server.requests), "label": "a"}
    with LLMClient(llm_config) as client:
        client.chat_json(MSGS, SCHEMA, name="x")
        client.chat_json(MSGS, SCHEMA, name="other name, same request")  # name is not in the key
        assert llm_server.calls == 1
        client.chat_json(MSGS + [{"role": "user", "content": "more"}], SCHEMA, name="x")
        client.chat_json(MSGS, {**SCHEMA, "maxProperties": 5}, name="x")
        assert llm_server.calls == 3
    with LLMClient(dataclasses.replace(llm_config, temperature=0.7)) as hot:
        hot.chat_json(MSGS, SCHEMA, name="x")
    with LLMClient(dataclasses.replace(llm_config, model="other-model")) as other:
        other.chat_json(MSGS, SCHEMA, name="x")
    assert llm_server.calls == 5
    assert len(ResponseCache(llm_config.cache_path)) == 5


def test_no_cache_config_always_calls(llm_server, llm_config):
    llm_server.responder = lambda req: {"step": 1, "label": "b"}
    with LLMClient(dataclasses.replace(llm_config, cache_path=None)) as client:
        client.chat_json(MSGS, SCHEMA, name="x")
        client.chat_json(MSGS, SCHEMA, name="x")
    assert llm_server.calls == 2


def test_tracking_counts_per_batch_and_map_bounds_concurrency(llm_server, llm_config):
    active, peak, lock = [0], [0], threading.Lock()

    def slow(req):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        import time
        time.sleep(0.05)
        with lock:
            active[0] -= 1
        return {"step": int(req["messages"][-1]["content"]), "label": "a"}

    llm_server.responder = slow
    cfg = dataclasses.replace(llm_config, concurrency=2)
    with LLMClient(cfg) as client:
        with tracking() as batch:
            out = client.map(lambda i: client.chat_json([{"role": "user", "content": str(i)}], SCHEMA, name="b"),
                             range(8))
        assert [o["step"] for o in out] == list(range(8))
        assert batch.calls == 8 and batch.requests == 8
        with tracking() as second:
            client.chat_json([{"role": "user", "content": "3"}], SCHEMA, name="b")
        assert (second.calls, second.cache_hits) == (0, 1)
        assert client.usage.calls == 8 and client.usage.cache_hits == 1
    assert peak[0] <= 2


def test_chat_text(llm_server, llm_client):
    llm_server.script("plain words")
    assert llm_client.chat_text(MSGS, name="t") == "plain words"
    assert "response_format" not in llm_server.requests[0]
    llm_server.script(Reply(content=""))
    with pytest.raises(LLMError, match="empty answer"):
        llm_client.chat_text(MSGS + [{"role": "user", "content": "again"}], name="t")


# -- structured-output retry -------------------------------------------------------------------------

def test_malformed_json_then_corrected_after_one_retry(llm_server, llm_client):
    llm_server.script('{"step": 2, "label": ', {"step": 2, "label": "b"})
    assert llm_client.chat_json(MSGS, SCHEMA, name="x") == {"step": 2, "label": "b"}
    retry = llm_server.requests[1]["messages"]
    assert retry[:2] == MSGS
    assert retry[2] == {"role": "assistant", "content": '{"step": 2, "label": '}
    assert retry[3]["role"] == "user" and "not valid JSON" in retry[3]["content"]
    assert llm_client.usage.schema_retries == 1 and llm_client.usage.calls == 2


def test_schema_violation_twice_raises(llm_server, llm_client):
    llm_server.script({"step": -1, "label": "a"}, {"step": 1, "label": "zzz"})
    with pytest.raises(LLMError, match=r"still invalid after one retry.*\$\.label.*'zzz' is not one of"):
        llm_client.chat_json(MSGS, SCHEMA, name="x")
    assert "$.step" in llm_server.requests[1]["messages"][-1]["content"]  # the first error was quoted back
    assert llm_server.calls == 2 and llm_client.usage.failures == 1
    assert len(llm_client.cache) == 0  # invalid answers are never cached


def test_code_fence_is_tolerated(llm_server, llm_client):
    llm_server.script('```json\n{"step": 4, "label": "a"}\n```')
    assert llm_client.chat_json(MSGS, SCHEMA, name="x") == {"step": 4, "label": "a"}
    assert llm_server.calls == 1


def test_json_schema_rejected_falls_back_to_json_object(llm_server, llm_client):
    llm_server.reject_json_schema = True
    llm_server.script({"step": 5, "label": "a"}, {"step": 6, "label": "b"})
    assert llm_client.chat_json(MSGS, SCHEMA, name="x") == {"step": 5, "label": "a"}
    assert llm_client.structured_mode == "json_object"
    second = llm_server.requests[1]
    assert second["response_format"] == {"type": "json_object"}
    assert json.dumps(SCHEMA, ensure_ascii=False) in second["messages"][0]["content"]  # the schema is in the prompt
    assert llm_client.chat_json(MSGS + [{"role": "user", "content": "next"}], SCHEMA, name="x")["step"] == 6
    assert llm_server.requests[2]["response_format"] == {"type": "json_object"}


def test_refusal_raises_with_its_text(llm_server, llm_client):
    llm_server.script(Reply(content=None, refusal="I can't help with auditing this."))
    with pytest.raises(LLMError, match="the model refused: I can't help with auditing this."):
        llm_client.chat_json(MSGS, SCHEMA, name="x")
    assert llm_server.calls == 1


# -- transport faults (the openai client's own retries) -----------------------------------------------

def test_429_with_retry_after_then_success(llm_server, llm_client):
    llm_server.script(Status(429, "rate limited", retry_after=0.05), {"step": 1, "label": "a"})
    assert llm_client.chat_json(MSGS, SCHEMA, name="x") == {"step": 1, "label": "a"}
    assert llm_server.calls == 2 and llm_client.usage.calls == 1


def test_500_then_success(llm_server, llm_client):
    llm_server.script(Status(500, "boom", retry_after=0.01), {"step": 1, "label": "b"})
    assert llm_client.chat_json(MSGS, SCHEMA, name="x") == {"step": 1, "label": "b"}
    assert llm_server.calls == 2


def test_timeout_then_success(llm_server, llm_config):
    llm_server.script(Sleep(1.5), {"step": 7, "label": "a"})
    with LLMClient(dataclasses.replace(llm_config, timeout=0.5, max_retries=1)) as client:
        assert client.chat_json(MSGS, SCHEMA, name="x") == {"step": 7, "label": "a"}
    assert llm_server.calls == 2


def test_timeout_exhausting_retries_raises(llm_server, llm_config):
    llm_server.script(Sleep(1.0), Sleep(1.0))
    with LLMClient(dataclasses.replace(llm_config, timeout=0.3, max_retries=1)) as client:
        with pytest.raises(LLMError, match=r"no answer from http://127\.0\.0\.1:\d+/v1 within 0\.3s \(after 1 retries\)"):
            client.chat_json(MSGS, SCHEMA, name="x")
        assert client.usage.failures == 1
    assert llm_server.calls == 2


def test_persistent_500_and_endpoint_down(llm_server, llm_config):
    llm_server.script(*[Status(500, retry_after=0.01)] * 3)
    with LLMClient(dataclasses.replace(llm_config, max_retries=2)) as client:
        with pytest.raises(LLMError, match="answered HTTP 500: scripted error"):
            client.chat_json(MSGS, SCHEMA, name="x")
    assert llm_server.calls == 3
    llm_server.stop()
    with LLMClient(dataclasses.replace(llm_config, max_retries=0)) as client:
        with pytest.raises(LLMError, match="cannot reach"):
            client.chat_json(MSGS, SCHEMA, name="x")


# -- model output is data -------------------------------------------------------------------------------

def test_model_output_is_never_executed(llm_server, llm_client, tmp_path):
    marker = tmp_path / "pwned"
    payload = f"__import__('pathlib').Path({str(marker)!r}).write_text('x')"
    free = {"type": "object", "required": ["label"], "properties": {"label": {"type": "string"}}}
    fenced = f"```python\n{payload}\n```"
    llm_server.script({"label": payload}, payload, fenced, fenced)
    assert llm_client.chat_json(MSGS, free, name="x") == {"label": payload}  # returned verbatim, as a string
    assert llm_client.chat_text(MSGS, name="t") == payload
    with pytest.raises(LLMError, match="not valid JSON"):  # code is not JSON: rejected, not run
        llm_client.chat_json(MSGS + [{"role": "user", "content": "2"}], free, name="x")
    assert not marker.exists()


def closed_port_url() -> str:
    """An http://127.0.0.1 URL on a port nothing listens on (bound, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/v1"


def test_only_a_connection_that_cannot_be_made_is_unreachable(llm_server, llm_config):
    import dataclasses

    from llm_server import Sleep, Status

    from trajaudit.errors import LLMError, LLMUnreachableError
    from trajaudit.llm import LLMClient

    msgs = [{"role": "user", "content": "hi"}]
    with LLMClient(dataclasses.replace(llm_config, base_url=closed_port_url(), max_retries=0)) as client:
        with pytest.raises(LLMUnreachableError, match="Connection refused"):
            client.chat_text(msgs, name="x", use_cache=False)
    llm_server.script(Status(500), Sleep(1.0, "late"))
    with LLMClient(dataclasses.replace(llm_config, max_retries=0, timeout=0.3)) as client:
        for what in ("answered HTTP 500", "no answer from"):
            with pytest.raises(LLMError, match=what) as e:
                client.chat_text(msgs, name="x", use_cache=False)
            assert not isinstance(e.value, LLMUnreachableError)
