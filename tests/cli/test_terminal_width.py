"""The width the CLI draws to: a $COLUMNS of 0 or a few columns is ignored like one that is no number
(fresh-user pass: ``COLUMNS=0 trajaudit audit missing.json`` exited 2 printing nothing, not even the
error, and ``COLUMNS=0 trajaudit show`` printed 0 bytes; ``COLUMNS=5`` printed a word per line)."""

from __future__ import annotations

import io

import pytest
from cli_kit import TIMEOUT_PACK
from click.testing import CliRunner
from conftest import ROOT
from hostile_kit import good_run, one_line, write_json

from trajaudit.cli import main
from trajaudit.cli.common import MIN_COLUMNS, PIPE_WIDTH, console_width

OPENAI = ROOT / "examples" / "traces" / "openai_chat.json"
NO_LLM_ENV = {"TRAJAUDIT_BASE_URL": "", "TRAJAUDIT_MODEL": "", "TRAJAUDIT_LLM_CONFIG": ""}


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


def _within(lines, width):
    """Every line fits ``width``, but for one word (a rule id) too wide for any line, alone on its own."""
    too_wide = [x for x in lines if len(x) > width and len(x.split()) > 1]
    assert not too_wide, too_wide


@pytest.mark.parametrize("width", [40, 60, 72])
def test_notes_and_warnings_wrap_between_words_at_the_terminal_width(tmp_path, width):
    """Fresh-user pass at COLUMNS 40-72: the never-applied note's header (73 characters), the
    not-evaluated one (~130) and check's out-of-time warning (>200) were printed as one line each,
    which the terminal broke mid-word."""
    runs, pack = write_json(tmp_path / "runs.json", [good_run("r1"), good_run("r2", item="X2")]), tmp_path / "p4.yaml"
    pack.write_text(TIMEOUT_PACK)
    env = {**NO_LLM_ENV, "COLUMNS": str(width)}
    r = CliRunner().invoke(main, ["check", str(runs), "--rules", str(pack), "--run-timeout", "0.000001"], env=env)
    assert r.exit_code == 1
    lines = r.stderr.splitlines()
    _within(lines, width)
    warning = next(i for i, x in enumerate(lines) if x.startswith("warning: "))
    assert all(x.startswith("  ") for x in lines[warning + 1:])  # continuation lines indented
    text = one_line(r.stderr)  # every word whole: the lines joined give the messages back
    assert ("warning: 2 of 2 run(s) ran out of rule-evaluation time (--run-timeout 1e-06 s): 3 rule(s) were not "
            "evaluated to the end there, their checks left 'unknown' (runs: r1, r2); the result is incomplete, so the exit "
            "code is 1") in text
    assert "note: 1 rule(s) never applied on these 2 run(s) (their guard never held): p4.no-such-tool" in text
    assert ("note: 3 rule(s) not evaluated on these 2 run(s) (rule evaluation ran out of time first, --run-timeout; "
            "whether they apply is not known): p4.fires, p4.guard-false, p4.guard-false-too") in text
    out = tmp_path / "d.jsonl"
    r = CliRunner().invoke(main, ["audit", str(ROOT / "examples" / "data" / "tau_retail_sample.json"), "-o", str(out)],
                           env=env)
    assert r.exit_code == 0
    lines = r.stderr.splitlines()
    _within(lines, width)
    note = next(i for i, x in enumerate(lines) if x.startswith("note: "))
    assert lines[note + 1].startswith("  ") and "note: 7 rule(s) never applied on these 3 run(s) (their guard never " \
        "held): generic.protocol.run-ends-on-announced-action," in one_line(r.stderr)


def test_a_warning_to_a_log_file_stays_one_line(tmp_path):
    """Off a terminal, without $COLUMNS, there is no display width to wrap at: one line per warning."""
    runs, pack = write_json(tmp_path / "runs.json", [good_run("r1"), good_run("r2", item="X2")]), tmp_path / "p4.yaml"
    pack.write_text(TIMEOUT_PACK)
    r = CliRunner().invoke(main, ["check", str(runs), "--rules", str(pack), "--run-timeout", "0.000001", "-q"],
                           env={**NO_LLM_ENV, "COLUMNS": ""})
    assert r.exit_code == 1 and len(r.stderr.splitlines()) == 1 and len(r.stderr) > PIPE_WIDTH


CONFIRM = "generic.protocol.confirmation-before-write"
MESSAGE = ("book_flight although the instructions require explicit confirmation, the agent never asked to confirm the "
           "action and the user's latest turn before it (steps.1) holds no explicit yes")


@pytest.mark.parametrize(("width", "header"), [
    (60, ["step", "rule / message"]),
    (70, ["step", "verdict", "rule / message"]),
    (100, ["step", "verdict", "severity", "rule", "message"]),
    (160, ["step", "verdict", "severity", "rule", "message", "evidence"]),
])
def test_check_table_leaves_columns_out_instead_of_squeezing_them(width, header):
    """Fresh-user pass at COLUMNS=60: every column of check's table was squeezed ("evidenc|e",
    "generic|.protoc|ol.no-r…"). Now whole columns are left out (evidence, severity), the message goes
    under its rule id, then the verdict is left out; rule ids and words stay whole."""
    from rich.cells import cell_len

    r = CliRunner().invoke(main, ["check", str(OPENAI)], env={**NO_LLM_ENV, "COLUMNS": str(width)})
    assert r.exit_code == 1
    lines = r.stdout.splitlines()
    assert max(cell_len(x) for x in lines) <= width
    cells = [[c.strip() for c in x.strip("┃│").split("┃" if "┃" in x else "│")] for x in lines if x[:1] in "┃│"]
    assert cells[0] == header
    rows = cells[1:]
    assert rows[0][0] == "4" and rows[0][header.index("rule / message" if "rule / message" in header else "rule")] \
        == CONFIRM  # the rule id whole on its line
    text = " ".join(row[-1 if "rule / message" in header else header.index("message")] for row in rows)
    assert " ".join(text.split()) == (CONFIRM + " " + MESSAGE if "rule / message" in header else MESSAGE)
    if "evidence" in header:
        addresses = " ".join(row[-1] for row in rows).split()
        assert addresses == ["steps.4.tool_calls.0,", "steps.1,", "steps[0:4],", "steps.1.content"]


def test_the_incomplete_caption_is_left_justified(tmp_path):
    """Fresh-user pass (``check … --run-timeout 1e-6``): the caption's last line was centred under the table."""
    runs, pack = write_json(tmp_path / "runs.json", [good_run("r1")]), tmp_path / "p4.yaml"
    pack.write_text(TIMEOUT_PACK)
    r = CliRunner().invoke(main, ["check", str(runs), "--rules", str(pack), "--run-timeout", "0.000001"],
                           env={**NO_LLM_ENV, "COLUMNS": "80"})
    lines = r.stdout.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("incomplete: "))
    caption = lines[start:]
    assert r.exit_code == 1 and len(caption) == 3 and all(x.strip() and not x.startswith(" ") for x in caption)
    assert " ".join(x.strip() for x in caption).endswith("(2 with candidate steps) not evaluated")


@pytest.mark.parametrize(("width", "header"), [
    (120, ["step", "verdict", "severity", "rule", "message"]),
    (140, ["step", "verdict", "severity", "rule", "message", "evidence"]),
])
def test_check_table_measures_cells_as_shown_with_control_characters(width, header):
    """The table measured its cells raw while the console shows ESC as ``\\x1b`` (4 cells, rich counts
    the raw ESC as 0): an address holding ESC got a column too narrow for it and was cut mid-way
    ("…arguments.k\\x1b[0m\\x1b[0m" | "\\x1b[0m\\x1b[0m"). Cells are measured as they are shown: the
    address (60 cells shown) is whole on its line, or the evidence column is left out."""
    from rich.cells import cell_len

    from trajaudit.cli.check import render_table
    from trajaudit.cli.common import _safe_console_class
    from trajaudit.engine.validation_log import Evidence, Record, ValidationLog

    esc = "\x1b[0m"
    log = ValidationLog("t")
    log.records.append(Record(0, "p.some-rule", "fail", message="m" + esc * 10 + " end",
                              evidence=(Evidence("steps.0.tool_calls.0.arguments.k" + esc * 4),)))
    log.records.append(Record(1, "p.other-rule", "fail", message="plain words that say what is wrong here",
                              evidence=(Evidence("steps.1.tool_calls.0.arguments.longer_key_name"),)))
    out = io.StringIO()
    _safe_console_class()(file=out, width=width, soft_wrap=False, highlight=False, markup=False).print(
        render_table(log, False, width))
    lines = out.getvalue().splitlines()
    assert "\x1b" not in out.getvalue() and max(cell_len(x) for x in lines) <= width
    cells = [[c.strip() for c in x.strip("┃│").split("┃" if "┃" in x else "│")] for x in lines if x[:1] in "┃│"]
    assert cells[0] == header
    if "evidence" in header:
        shown = [row[-1] for row in cells[1:] if row[-1]]
        assert shown == ["steps.0.tool_calls.0.arguments.k" + "\\x1b[0m" * 4,
                         "steps.1.tool_calls.0.arguments.longer_key_name"]
