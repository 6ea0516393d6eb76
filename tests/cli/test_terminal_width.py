"""The width the CLI draws to: a $COLUMNS of 0 or a few columns is ignored like one that is no number
(fresh-user pass: ``COLUMNS=0 trajaudit audit missing.json`` exited 2 printing nothing, not even the
error, and ``COLUMNS=0 trajaudit show`` printed 0 bytes; ``COLUMNS=5`` printed a word per line)."""

from __future__ import annotations

import io

import pytest
from click.testing import CliRunner
from conftest import ROOT

from trajaudit.cli import main
from trajaudit.cli.common import MIN_COLUMNS, PIPE_WIDTH, console_width

OPENAI = ROOT / "examples" / "traces" / "openai_chat.json"


@pytest.mark.parametrize("columns", ["0", "5", "abc", ""])
def test_a_useless_columns_value_falls_back_to_the_default_width(monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    assert console_width(io.StringIO()) == PIPE_WIDTH


def test_a_usable_columns_value_is_the_width(monkeypatch):
    monkeypatch.setenv("COLUMNS", str(MIN_COLUMNS))
    assert console_width(io.StringIO()) == MIN_COLUMNS
    monkeypatch.setenv("COLUMNS", "123")
    assert console_width(io.StringIO()) == 123


@pytest.mark.parametrize("columns", ["0", "3"])
def test_errors_and_tables_are_printed_whatever_columns_says(tmp_path, columns):
    r = CliRunner().invoke(main, ["audit", str(tmp_path / "nonexist.json")], env={"COLUMNS": columns})
    assert r.exit_code == 2
    assert r.stderr.startswith("error: input ") and "nonexist.json': no such file or folder" in " ".join(r.stderr.split())
    assert len(r.stderr.splitlines()[0]) > 40  # one line, not a word per line
    r = CliRunner().invoke(main, ["show", str(OPENAI)], env={"COLUMNS": columns})
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert lines[0].startswith("openai_chat  [openai]  7 steps")
    assert 100 < max(len(x) for x in lines) <= PIPE_WIDTH  # the table as at the default width
    assert sum(1 for x in lines if x.startswith("│")) == 7  # a row per step
