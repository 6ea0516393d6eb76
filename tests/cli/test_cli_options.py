"""trajaudit/cli/options.py: the shared input options (--input-format and its old spellings, unknown
format names refused up front)."""

from __future__ import annotations

import json

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
