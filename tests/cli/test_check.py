"""`trajaudit check` (cli/check.py): exit codes."""

from __future__ import annotations

from click.testing import CliRunner

from trajaudit.cli import main

NO_LLM_ENV = {"TRAJAUDIT_BASE_URL": "", "TRAJAUDIT_MODEL": "", "TRAJAUDIT_LLM_CONFIG": ""}


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, env=NO_LLM_ENV)


def test_check_exits_1_when_an_input_was_skipped(tmp_path, ww_dir):
    empty = tmp_path / "empty.json"
    empty.write_text("")
    r = run("check", ww_dir / "1.json", empty, "--rules", "generic.system", "--fail-on", "critical")
    assert r.exit_code == 1, r.output
    assert f"skipped: {empty}: file is empty" in r.stderr
    assert "1 run(s), 3 rule(s): 0 violation(s), 0 at or above critical; 1 input(s) skipped" in r.stderr
    assert run("check", ww_dir / "1.json", "--rules", "generic.system", "--fail-on", "critical").exit_code == 0
    assert "exit 1 also when an input was skipped" in " ".join(run("check", "--help").output.split())
