"""trajaudit/cli/options.py: the shared input options (--input-format and its old spellings, unknown
format names refused up front)."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner
from conftest import ROOT

from trajaudit.cli import main

NO_LLM_ENV = {"TRAJAUDIT_BASE_URL": "", "TRAJAUDIT_MODEL": "", "TRAJAUDIT_LLM_CONFIG": ""}
EX = ROOT / "examples"
KNOWN = "ir, magentic, openai, tau, who_and_when"


def cli(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, env=env)


def one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("cmd", [
    ["audit", "{f}", "-o", "-"], ["show", "{f}"], ["convert", "{f}", "-o", "{tmp}/x.json"],
    ["claims", "{f}"], ["check", "{f}"], ["repair", "{f}", "-o", "{tmp}/r.json"],
])
@pytest.mark.parametrize("flag", ["--input-format", "--format"])
def test_unknown_input_format_is_rejected_up_front(cmd, flag, tmp_path):
    f = EX / "traces" / "openai_chat.json"
    args = [a.format(f=f, tmp=tmp_path) for a in cmd]
    # --format chooses the output now (an input format's name there is the deprecated spelling): an
    # unknown name is refused naming the output formats and, for the input, the known input formats
    r = cli(*args, flag, "jsn")
    assert r.exit_code == 2, (cmd, r.stderr)
    err = one_line(r.stderr)
    assert "'jsn' is not one of" in err and all(n in err for n in KNOWN.split(", ")), err
    assert "skipped" not in err


def test_eval_trace_format_rejects_unknown_names(tmp_path):
    r = cli("eval", "--trace-format", "jsn", "--pred", tmp_path / "p.jsonl", "--gold", tmp_path / "g.json")
    assert r.exit_code == 2 and "'jsn' is not one of" in one_line(r.stderr)


def test_input_format_and_old_spellings_select_the_adapter(tau_file, tau_one, tmp_path):
    for args in (["show", tau_file, "--record", "0"], ["claims", tau_file, "--record", "0"],
                 ["convert", tau_one, "-o", tmp_path / "ir.json"],
                 ["audit", tau_one, "--strategy", "first", "-o", tmp_path / "d.jsonl", "-q"],
                 ["check", tau_one, "--rules", "generic.protocol"]):
        ok = cli(*args, "--input-format", "tau")
        assert ok.exit_code == 0, (args, ok.output)
        bad = cli(*args, "--input-format", "openai")
        assert "not in the 'openai' format" in bad.output.replace("\n", ""), args
    assert cli("show", tau_file, "--record", "0", "--format", "tau").exit_code == 0  # old alias
    assert "not in the 'openai' format" in cli("show", tau_file, "--format", "openai").output
    r = cli("repair", tau_one, "--input-format", "tau", "-o", tmp_path / "resumed.json", env=NO_LLM_ENV)
    assert r.exit_code == 0, r.output
    gold = tau_file.parent / "ground_truth.json"
    for opt in ("--input-format", "--trace-format"):  # eval: new name and old alias
        r = cli("eval", tau_one, "--gold", gold, "-s", "first", opt, "openai", "--bootstrap", "10")
        assert r.exit_code == 2 and "not in the 'openai' format" in r.stderr.replace("\n", "")
    r = cli("eval", tau_one, "--gold", gold, "-s", "first", "--input-format", "tau", "--format", "json",
            "--bootstrap", "10")
    assert r.exit_code == 0 and json.loads(r.stdout)["n_matched"] == 1


# --run-timeout took click.FloatRange(0 < x <= 86400) on audit, check and eval, each its own copy:
# 'nan' passed the range (every comparison with it is false) and meant no time budget at all. Now one
# type (options.RunTimeout) refuses nan, inf, 0 and negatives on every command, naming the option.

@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "0", "-1", "86401", "1e9", "abc", "1e-320", "1e400",
                                   "9" * 400])
@pytest.mark.parametrize("cmd", [["check", "{f}"], ["audit", "{f}", "-o", "{tmp}/d.jsonl"],
                                 ["eval", "--gold", "{f}", "--pred", "{f}"]])
def test_run_timeout_refuses_values_that_are_no_time_budget(tmp_path, cmd, value):
    f = tmp_path / "run.json"
    f.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]))
    args = [a.format(f=f, tmp=tmp_path) for a in cmd]
    r = CliRunner().invoke(main, [args[0], "--run-timeout", value, *args[1:]], env=NO_LLM_ENV)
    assert r.exit_code == 2, r.output
    assert f"Invalid value for '--run-timeout': {value!r} is not" in one_line(r.output)
    assert not (tmp_path / "d.jsonl").exists()


def test_run_timeout_is_one_option_type_on_every_command():
    import click

    from trajaudit.cli.options import RunTimeout

    ctx = click.Context(main)
    commands = {n: main.get_command(ctx, n) for n in main.list_commands(ctx)}
    commands.update({f"{n} {s}": c.commands[s] for n, c in list(commands.items()) if isinstance(c, click.Group)
                     for s in c.commands})
    takers = {name: p for name, c in commands.items() for p in c.params if p.name == "run_timeout"}
    assert set(takers) == {"audit", "check", "eval"}
    assert all(isinstance(p.type, RunTimeout) and p.default == 60.0 for p in takers.values())
    t = RunTimeout()
    assert t.convert("0.000001", None, None) == 1e-06 and t.convert("86400", None, None) == 86400.0


# The other durations and thresholds took click.FloatRange (or plain float): 'nan' passed, so
# `watch --until-idle nan` never ended and `serve --quiet-period nan` started; 'inf' passed where no
# maximum was set, and `--poll 1e300` overflowed time.sleep. They are FiniteRange types now.

@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e300", "-1"])
@pytest.mark.parametrize(("cmd", "option"), [
    (["serve", "--otlp", "18930"], "--quiet-period"), (["serve", "--otlp", "18930"], "--max-wait"),
    (["watch", "{f}"], "--until-idle"), (["watch", "{f}"], "--poll"), (["watch", "{f}"], "--alarm-threshold"),
    (["guard", "--upstream", "http://127.0.0.1:9/v1"], "--timeout"),
    (["guard", "--upstream", "http://127.0.0.1:9/v1"], "--cache-idle"),
    (["guard", "--upstream", "http://127.0.0.1:9/v1"], "--alarm-threshold"),
])
def test_durations_and_thresholds_refuse_nan_inf_and_out_of_range(tmp_path, cmd, option, value):
    f = tmp_path / "run.jsonl"
    f.write_text("")
    r = CliRunner().invoke(main, [a.format(f=f) for a in cmd] + [option, value], env=NO_LLM_ENV)
    assert r.exit_code == 2, r.output
    said = one_line(r.output)
    assert f"Invalid value for '{option}':" in said
    assert (f"{value!r} is not a finite number" in said) == (value.lower() in ("nan", "inf", "-inf")), said


def test_the_duration_types_take_finite_numbers_in_range():
    from trajaudit.cli.options import MAX_SECONDS, FiniteRange, seconds

    assert seconds(0).convert("2.5", None, None) == 2.5 and seconds(0).convert(MAX_SECONDS, None, None) == 1e7
    assert FiniteRange(0, 1).convert("0.7", None, None) == 0.7
    with pytest.raises(click.BadParameter, match="not in the range"):
        seconds(0, min_open=True).convert("0", None, None)
