"""trajaudit/llm/config.py, robustness class 11: ``max_retries: 1000000000`` (or any other numeric LLM setting out of range) in
``--llm-config``.

Was: no upper bound; against an endpoint answering 429 the batch never reached its next run. Now every
numeric setting has bounds (``trajaudit.llm.config.BOUNDS``); a value outside them is a usage error
(exit 2) naming the file, the setting, the value and the bounds, before any output is written."""

from __future__ import annotations

import pytest
from hostile_kit import cli, good_run, one_line, write_json

from trajaudit.errors import ConfigError
from trajaudit.llm.config import BOUNDS, LLMConfig

BAD = {"max_retries": ("1000000000", "max_retries must be between 0 and 20, got 1000000000"),
       "timeout": ("1.0e+12", "timeout must be between more than 0 and 3600 s, got 1000000000000.0"),
       "concurrency": ("100000", "concurrency must be between 1 and 64, got 100000"),
       "max_tokens": ("0", "max_tokens must be between 1 and 1e+06 tokens, got 0"),
       "context_chars": ("10", "context_chars must be between 1000 and 1e+08 characters, got 10"),
       "temperature": (".nan", "temperature must be between 0 and 2, got nan")}


@pytest.mark.parametrize("key", list(BAD))
def test_an_out_of_range_setting_is_refused_before_anything_is_written(tmp_path, key):
    value, said = BAD[key]
    run = write_json(tmp_path / "run.json", good_run("a"))
    config = tmp_path / "llm.yaml"
    config.write_text(f"base_url: http://127.0.0.1:9/v1\nmodel: m\n{key}: {value}\n")
    out = tmp_path / "d.jsonl"
    r = cli("audit", run, "-s", "all-at-once", "--llm-config", config, "-q", "-o", out)
    assert r.exit_code == 2, r.output
    assert f"{config}: invalid LLM configuration: {said}" in one_line(r.stderr)
    assert not out.exists() and "Traceback" not in r.output


def test_every_numeric_setting_is_bounded_in_the_api_too():
    assert set(BOUNDS) == {"temperature", "max_tokens", "timeout", "max_retries", "concurrency", "context_chars", "seed"}
    for key, (low, high, _) in BOUNDS.items():
        for bad in (high * 2 + 1, low - 1):
            with pytest.raises(ConfigError, match=key):
                LLMConfig(base_url="http://x/v1", model="m", **{key: bad})
        LLMConfig(base_url="http://x/v1", model="m", **{key: high if key != "seed" else 7})
