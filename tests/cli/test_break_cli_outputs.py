"""Defects found by a break-it pass over the CLI's outputs (repair, convert, audit reports, show) on odd
inputs. Each test fails without its fix."""

from __future__ import annotations

import json

from click.testing import CliRunner

from trajaudit.cli import main

# a legal JSON escape: json.loads gives a lone surrogate, which strict UTF-8 cannot encode
LONE = '[{"role": "system", "content": "policy"}, {"role": "user", "content": "refund order \\ud800 now"}, ' \
       '{"role": "assistant", "content": "Refunded 12 dollars."}]'


def _run(*args):
    res = CliRunner().invoke(main, [str(a) for a in args])
    assert "Traceback" not in res.output
    return res


def test_a_lone_surrogate_in_a_message_does_not_crash_any_output(tmp_path):
    """Was: UnicodeEncodeError tracebacks ('surrogates not allowed') from convert, repair, show and
    audit --report: every writer encoded strictly. Now the surrogate is written as the escape
    ``\\ud800`` (in JSON the same string again)."""
    src = tmp_path / "run.json"
    src.write_text(LONE)
    ir = tmp_path / "ir.json"
    assert _run("convert", src, "-o", ir).exit_code == 0
    assert json.loads(ir.read_text(encoding="utf-8"))["steps"][1]["content"] == "refund order \ud800 now"
    out = tmp_path / "resumed.json"
    res = _run("repair", src, "--template", "-o", out)
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text(encoding="utf-8"))[1]["content"] == "refund order \ud800 now"
    for report in ("r.html", "r.md"):
        res = _run("audit", src, "-q", "-o", tmp_path / "d.jsonl", "--report", tmp_path / report)
        assert res.exit_code == 0, res.output
        assert (tmp_path / report).read_bytes().decode("utf-8")  # valid UTF-8
    res = _run("show", src)
    assert res.exit_code == 0 and "refund order \\ud800 now" in res.output


def test_an_output_path_that_is_the_input_file_is_refused(tmp_path):
    """Was: ``audit runs.jsonl -o runs.jsonl`` (and repair/convert -o FILE) silently replaced the
    trace with diagnoses (or a prefix): the input was lost. Now: exit 2 naming both, file untouched."""
    runs = tmp_path / "runs.jsonl"
    runs.write_text(json.dumps(json.loads(LONE.replace("\\ud800", "W1"))) + "\n")
    before = runs.read_bytes()
    for args in (("audit", runs, "-q", "-o", runs), ("convert", runs, "-o", runs)):
        res = _run(*args)
        assert res.exit_code == 2
        assert f"-o/--output '{runs}' is the input file '{runs}': writing it would overwrite the trace" \
            in " ".join(res.output.split())
        assert runs.read_bytes() == before
    src = tmp_path / "run.json"
    src.write_text(runs.read_text())
    res = _run("repair", src, "--template", "-o", src)
    assert res.exit_code == 2 and "is the input file" in res.output and src.read_text() == runs.read_text()
    # a file found by expanding an audited folder is an input too (issue 18): the diagnoses written into
    # the folder before are read as traces by the next audit of it, so replacing them is refused
    assert _run("audit", tmp_path, "-q", "-o", tmp_path / "d.jsonl").exit_code in (0, 1)
    before = (tmp_path / "d.jsonl").read_bytes()
    res = _run("audit", tmp_path, "-q", "-o", tmp_path / "d.jsonl")
    assert res.exit_code == 2 and "is the input file" in res.output and (tmp_path / "d.jsonl").read_bytes() == before


def test_repair_with_a_diagnosis_of_the_wrong_field_types_is_a_usage_error(tmp_path):
    """Was: a diagnoses line with ``"critical_step": "6"`` or a non-string ``repair`` reached
    resume_document: TypeError/AttributeError tracebacks, exit 1."""
    src = tmp_path / "run.json"
    src.write_text(LONE.replace("\\ud800", "W1"))
    audit = _run("audit", src, "-q", "-o", tmp_path / "d.jsonl")
    d = json.loads((tmp_path / "d.jsonl").read_text())
    for field, value, why in (("critical_step", "2", "critical_step must be an integer or null, got '2'"),
                              ("critical_step", 2.5, "critical_step must be an integer or null, got 2.5"),
                              ("repair", 12345, "repair must be a string or null, got int")):
        bad = tmp_path / "bad.jsonl"
        bad.write_text(json.dumps({**d, field: value}) + "\n")
        res = _run("repair", src, "--diagnosis", bad, "-o", tmp_path / "out.json")
        assert res.exit_code == 2, res.output
        said = " ".join(res.output.split())
        assert f"{bad}:1: not a diagnosis (trajectory_id '{d['trajectory_id']}'): ValueError: {why}" in said
    assert audit.exit_code == 0
