"""An output whose name says another format than the file gets is named on stderr (one helper,
``cli.options.warn_output_name``, for ``audit -o``, ``check -o`` and ``eval --save-pred``), after the
output checks: a refused output gets its error alone. A fresh-user pass found ``-o y.jsonl --format
sarif``, ``-o y.json --format junit``, ``-o y.json.gz`` (written uncompressed) and ``eval --save-pred
sp.json`` (JSON Lines) silent, and ``audit in.json -o in.json`` warning about JSON Lines just before
refusing to overwrite the input."""

from __future__ import annotations

import json

import pytest
from hostile_kit import cli, good_run, one_line, write_json

from trajaudit.cli.options import output_name_warning


@pytest.fixture
def run(tmp_path):
    return write_json(tmp_path / "a.json", good_run("a"))


def _warnings(r):
    """The output-name warnings on stderr (one line each: printed with soft_wrap)."""
    return [x[len("warning: "):] for x in r.stderr.splitlines() if x.startswith(("warning: -o ", "warning: --save-pred "))]


@pytest.mark.parametrize("args, name, expected", [
    (["audit", "-q", "--format", "sarif"], "y.jsonl",
     "writing a SARIF log, but a name ending in .jsonl says JSON Lines; name the file .sarif, or give --format "
     "jsonl for JSON Lines"),
    (["audit", "-q", "--format", "junit"], "y.json",
     "writing JUnit XML, but a name ending in .json says one JSON document; name the file .xml"),
    (["audit", "-q"], "y.json.gz",
     "the file is written uncompressed (JSON Lines), though its name ends in .gz; drop .gz from the name (and "
     "compress the file afterwards if you need to)"),
    (["check", "-q", "--format", "junit"], "y.json",
     "writing JUnit XML, but a name ending in .json says one JSON document; name the file .xml, or give --format "
     "json for one JSON document"),
    (["check", "-q", "--format", "sarif"], "y.jsonl",
     "writing a SARIF log, but a name ending in .jsonl says JSON Lines; name the file .sarif"),
    # without --format, check -o writes the JSON list (the tables are for the terminal): it was called a
    # text table ("name the file .txt") under c.html, and c.parquet got JSON silently
    (["check", "-q"], "c.html",
     "writing one JSON document, but a name ending in .html says HTML; name the file .json"),
    (["check", "-q"], "c.parquet",
     "writing one JSON document, but a name ending in .parquet says a Parquet table; name the file .json"),
    (["audit", "-q", "--format", "sarif"], "y.parquet",
     "writing a SARIF log, but a name ending in .parquet says a Parquet table; name the file .sarif"),
])
def test_a_name_for_another_format_is_named(run, tmp_path, args, name, expected):
    out = tmp_path / name
    r = cli(args[0], run, *args[1:], "-o", out)
    assert r.exit_code in (0, 1), r.output
    assert _warnings(r) == [f"-o {out}: {expected}"]
    assert out.exists()  # a warning, the file is written as asked
    if args == ["check", "-q"]:
        assert [x["trajectory_id"] for x in json.loads(out.read_text())] == ["a"]  # the JSON list, as said
    if name.endswith(".gz"):
        assert json.loads(out.read_text().splitlines()[0])["trajectory_id"] == "a"  # not gzip


def test_eval_save_pred_to_a_json_name_warns_that_it_writes_json_lines(run, tmp_path):
    gold = tmp_path / "gold.jsonl"
    gold.write_text('{"trajectory_id": "a", "critical_step": 4}\n')
    sp = tmp_path / "sp.json"
    r = cli("eval", run, "--gold", gold, "-s", "offline", "--save-pred", sp)
    assert _warnings(r) == [f"--save-pred {sp}: writing JSON Lines (one JSON document per line), not one JSON "
                            "document; name the file .jsonl"]
    assert [json.loads(x)["trajectory_id"] for x in sp.read_text().splitlines()] == ["a"]
    r = cli("eval", run, "--gold", gold, "-s", "offline", "--save-pred", tmp_path / "sp.jsonl")
    assert _warnings(r) == []


@pytest.mark.parametrize("args", [["audit", "-q"], ["check", "-q", "--format", "junit"],
                                  ["eval", "--gold", "{gold}", "-s", "offline", "--save-pred"]])
def test_a_refused_output_gets_its_error_alone(run, tmp_path, args):
    gold = tmp_path / "gold.jsonl"
    gold.write_text('{"trajectory_id": "a", "critical_step": 4}\n')
    argv = [args[0], run, *[a.format(gold=gold) for a in args[1:]]]
    before = run.read_bytes()
    r = cli(*argv, *([] if argv[-1] == "--save-pred" else ["-o"]), run)
    assert r.exit_code == 2
    assert one_line(r.stderr) == (f"error: {'--save-pred' if args[0] == 'eval' else '-o/--output'} '{run}' is the "
                                  f"input file '{run}': writing it would overwrite the trace; choose another output "
                                  "path")
    assert run.read_bytes() == before


def test_names_that_fit_are_quiet():
    for fmt, names in {"jsonl": ["d.jsonl", "d.ndjson", "d", "d.txt", "-"], "sarif": ["t.sarif", "t.sarif.json", "t.json"],
                       "junit": ["t.xml"], "json": ["r.json"], "table": ["r.txt", "r"]}.items():
        for name in names:
            assert output_name_warning("-o", name, fmt, offered=("jsonl", "sarif", "junit")) is None, (fmt, name)
    assert output_name_warning("-o", "d.json", "jsonl", chosen=True) is None  # --format jsonl given
    assert output_name_warning("-o", None, "jsonl") is None
    assert output_name_warning("-o", "d.parquet", "parquet") is None  # audit's JSONL under .parquet is Parquet
    for ext in (".gz", ".bz2", ".xz", ".zst", ".zip"):
        assert "written uncompressed" in output_name_warning("-o", f"d.jsonl{ext}", "jsonl")


def test_eval_report_name_for_another_format_is_named(run, tmp_path):
    """eval -o writes the report in the format its name says, or in --format when given: a Markdown
    report under r.json gets a warning that offers --format json (only --save-pred had one)."""
    gold = tmp_path / "gold.jsonl"
    gold.write_text('{"trajectory_id": "a", "critical_step": 4}\n')
    out = tmp_path / "r.json"
    r = cli("eval", run, "--gold", gold, "-s", "offline", "-o", out)
    assert _warnings(r) == [] and json.loads(out.read_text())  # the name chose the format
    r = cli("eval", run, "--gold", gold, "-s", "offline", "-o", out, "--format", "markdown")
    [said] = _warnings(r)
    assert said.startswith(f"-o {out}: writing Markdown, but a name ending in .json") and "--format json" in said
