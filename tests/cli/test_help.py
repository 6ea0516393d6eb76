"""Every command's --help (cli/): examples, no jargon."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from trajaudit.cli import main

TRACE_COMMANDS = (["show"], ["convert"], ["audit"], ["repair"], ["check"], ["claims"], ["eval"])
NO_LLM_ENV = {"TRAJAUDIT_BASE_URL": "", "TRAJAUDIT_MODEL": "", "TRAJAUDIT_LLM_CONFIG": ""}


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, env=NO_LLM_ENV)


@pytest.mark.parametrize("cmd", ["audit", "check", "claims", "cite", "repair", "show"])
def test_help_has_examples_and_no_seed_jargon(cmd):
    out = run(cmd, "--help").output
    assert "Examples:\n    trajaudit " in out  # \b keeps the lines as written
    assert "seed 003" not in out


@pytest.mark.parametrize("cmd", TRACE_COMMANDS, ids=lambda c: c[0])
def test_help_lists_input_format_first(cmd):
    r = run(*cmd, "--help")
    assert r.exit_code == 0
    lines = [x.strip() for x in r.output.splitlines() if "--input-format" in x]
    assert len(lines) == 1 and lines[0].startswith("--input-format")  # the new name first, aliases after


@pytest.mark.parametrize("width", [50, 80, 120, 400])
def test_command_list_from_summaries_equals_clicks_own(width):
    """``trajaudit --help`` lists commands from COMMANDS' summaries without importing them; the list
    must be the one click writes from the commands themselves (a changed docstring fails here)."""
    import click

    ctx = click.Context(main, info_name="trajaudit")
    ours = click.HelpFormatter(width=width)
    main.format_commands(ctx, ours)
    clicks = click.HelpFormatter(width=width)
    click.Group.format_commands(main, ctx, clicks)
    assert ours.getvalue() == clicks.getvalue()
    assert "audit" in ours.getvalue() and "Commands:" in ours.getvalue()


def test_top_level_help_imports_no_command():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from trajaudit.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith(('trajaudit.cli.', 'networkx', 'z3'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "Commands:" in out
    # the two start-up modules the group needs (SIGTERM as Ctrl-C; log lines shown, not obeyed)
    # import nothing of trajaudit's commands; no command module is imported for the list
    assert out.strip().splitlines()[-1] == "['trajaudit.cli.signals', 'trajaudit.cli.terminal']"
