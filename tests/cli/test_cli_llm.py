"""`trajaudit llm ping` and the reusable LLM options (flags, environment, config file)."""

from __future__ import annotations

import click
from click.testing import CliRunner
from conftest import ROOT
from llm_server import Status

from trajaudit.cli import main
from trajaudit.cli.common import LLMOptions, handle_errors, llm_config_from_options, llm_options

EXAMPLES = ROOT / "examples"
NO_LLM_ENV = {"TRAJAUDIT_BASE_URL": "", "TRAJAUDIT_MODEL": "", "TRAJAUDIT_LLM_CONFIG": ""}


def cli(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, env=env)


def test_ping_prints_model_and_latency(llm_server):
    llm_server.script("pong")
    res = CliRunner().invoke(main, ["llm", "ping", "--base-url", llm_server.url, "--model", "scripted-model"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0].startswith(f"ok  {llm_server.url}  model scripted-model  latency ")
    assert lines[1] == "served models: scripted-model" and lines[2] == "reply: 'pong'"
    assert llm_server.model_requests == 1 and llm_server.calls == 1


def test_ping_reads_the_environment(llm_server):
    llm_server.script("pong")
    env = {"TRAJAUDIT_BASE_URL": llm_server.url, "TRAJAUDIT_MODEL": "env-model", "OPENAI_API_KEY": "sk-test"}
    res = CliRunner().invoke(main, ["llm", "ping"], env=env)
    assert res.exit_code == 0, res.output
    assert "model env-model" in res.output and llm_server.requests[0]["model"] == "env-model"


def test_ping_without_endpoint_or_with_a_broken_one_exits_2(llm_server, tmp_path):
    res = CliRunner().invoke(main, ["llm", "ping"], env={"TRAJAUDIT_BASE_URL": "", "TRAJAUDIT_MODEL": ""})
    assert res.exit_code == 2 and "no LLM endpoint configured" in res.output and "--strategy" not in res.output
    assert "Traceback" not in res.output
    llm_server.script(Status(418, "teapot"))
    res = CliRunner().invoke(main, ["llm", "ping", "--base-url", llm_server.url, "--model", "m"])
    assert res.exit_code == 2 and "answered HTTP 418: teapot" in res.output
    bad = tmp_path / "llm.yaml"
    bad.write_text("base_url: http://127.0.0.1:1/v1\nmodel: m\nmax_tokns: 3\n")
    res = CliRunner().invoke(main, ["llm", "ping", "--llm-config", str(bad)])
    assert res.exit_code == 2 and "did you mean 'max_tokens'" in res.output


def test_llm_options_precedence_and_cache(tmp_path):
    seen: list[LLMOptions] = []

    @click.command()
    @llm_options
    @handle_errors
    def cmd(llm_opts: LLMOptions) -> None:
        seen.append(llm_opts)

    cfg = tmp_path / "llm.toml"
    cfg.write_text('base_url = "http://127.0.0.1:9/v1"\nmodel = "file-model"\ntimeout = 7\n'
                   f'cache_path = "{tmp_path / "file-cache.sqlite3"}"\n')
    r = CliRunner().invoke(cmd, ["--llm-config", str(cfg), "--model", "flag-model"],
                           env={"TRAJAUDIT_MODEL": "env-model", "OPENAI_API_KEY": "sk-env"})
    assert r.exit_code == 0, r.output
    c = llm_config_from_options(seen[-1])
    assert (c.model, c.base_url, c.timeout, c.api_key) == ("flag-model", "http://127.0.0.1:9/v1", 7, "sk-env")
    assert c.cache_path == str(tmp_path / "file-cache.sqlite3")
    CliRunner().invoke(cmd, ["--llm-config", str(cfg)], env={"TRAJAUDIT_MODEL": "env-model"})
    assert llm_config_from_options(seen[-1]).model == "env-model"
    CliRunner().invoke(cmd, ["--llm-config", str(cfg), "--cache", str(tmp_path / "c.db")])
    assert llm_config_from_options(seen[-1]).cache_path == str(tmp_path / "c.db")
    CliRunner().invoke(cmd, ["--llm-config", str(cfg), "--no-cache"])
    assert llm_config_from_options(seen[-1]).cache_path is None
    assert llm_config_from_options(seen[-1]).public()["api_key"] == "***"


def test_llm_missing_endpoint_advice_fits_the_command():
    r = cli("cite", EXAMPLES / "citation" / "ev_market.json", "--llm", env=NO_LLM_ENV)
    text = r.stderr.replace("\n", "")
    assert r.exit_code == 2 and "--strategy" not in text
    assert "Without an LLM, run `trajaudit cite` without --llm (the approximate offline judge)." in text
    r = cli("llm", "ping", env=NO_LLM_ENV)
    text = r.stderr.replace("\n", "")
    assert r.exit_code == 2 and "--strategy" not in text and "pass --base-url URL and --model NAME" in text
    assert "`llm ping` checks an endpoint, so it needs one." in text
    r = cli("audit", EXAMPLES / "citation" / "ev_market.json", "--strategy", "agentrx", env=NO_LLM_ENV)
    assert r.exit_code == 2 and "--strategy offline" in r.stderr.replace("\n", "")  # audit has --strategy


def test_default_llm_cache_is_off_without_a_home_folder(tmp_path, monkeypatch, capsys):
    """HOME=/nonexistent (a service account): the default answer cache never creates the home folder;
    it is off with a warning. A --cache path the user gives is still created."""
    opts = LLMOptions(base_url="http://127.0.0.1:9/v1", model="m")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", "")  # expanduser("~") would say "/": no cache at the filesystem root
    assert llm_config_from_options(opts).cache_path is None
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert llm_config_from_options(opts).cache_path is None
    said = capsys.readouterr().err
    assert said.startswith("warning: LLM answer cache off: no home folder") and not (tmp_path / "home").exists()
    given = LLMOptions(base_url="http://127.0.0.1:9/v1", model="m", cache=str(tmp_path / "x" / "c.db"))
    assert llm_config_from_options(given).cache_path == str(tmp_path / "x" / "c.db")
    (tmp_path / "home").mkdir()
    expected = str(tmp_path / "home" / ".cache" / "trajaudit" / "llm-cache.sqlite3")
    assert llm_config_from_options(opts).cache_path == expected
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # the XDG base directory, as the pack cache
    assert llm_config_from_options(opts).cache_path == str(tmp_path / "xdg" / "trajaudit" / "llm-cache.sqlite3")
