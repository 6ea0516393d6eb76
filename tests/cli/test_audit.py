"""`trajaudit audit`: batches, JSONL output valid against the diagnosis schema, reports, bad input."""

from __future__ import annotations

import json

from click.testing import CliRunner

from trajaudit.cli import main
from trajaudit.engine.schema import schema_errors


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_audit_tau_with_baseline_writes_valid_jsonl_and_reports(tau_file, tmp_path):
    out, html, md = tmp_path / "d.jsonl", tmp_path / "r.html", tmp_path / "r.md"
    r = run("audit", tau_file, "--strategy", "last", "-o", out, "--report", html)
    assert r.exit_code == 0, r.output
    diags = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(diags) == 29
    assert all(schema_errors("diagnosis", d) == [] for d in diags)
    first = diags[0]
    assert first["trajectory_id"] == "2" and first["record"] == 0 and first["critical_step"] == 30
    assert first["strategy"] == "last" and first["agent"] == "assistant"
    page = html.read_text()
    assert page.count('class="step critical"') == 29 and "http://" not in page and "<script" not in page
    assert run("audit", tau_file, "--strategy", "first", "-o", out, "--report", md, "-q").exit_code == 0
    assert "| 2 | 2 | inconclusive | assistant |" in md.read_text()


def test_audit_folder_with_parallel_jobs_matches_serial(ww_dir, tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    assert run("audit", ww_dir, "--strategy", "random", "-o", a, "-q").exit_code == 0
    assert run("audit", ww_dir, "--strategy", "random", "-o", b, "-q", "--jobs", "2").exit_code == 0
    da = [json.loads(x) for x in a.read_text().splitlines()]
    db = [json.loads(x) for x in b.read_text().splitlines()]
    assert len(da) == 126 and [d["critical_step"] for d in da] == [d["critical_step"] for d in db]
    assert [d["trajectory_id"] for d in da][:3] == ["1", "2", "3"]  # natural order of file names


def test_bad_inputs_are_reported_and_the_batch_finishes(tmp_path, tau_file):
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "notes.txt").write_text("not a trace")  # ignored: not a trace file suffix
    (folder / "broken.json").write_text("{oops")
    (folder / "nodecision.json").write_text(json.dumps([{"role": "user", "content": "hello?"}]))
    (folder / "ok.json").write_text(json.dumps([{"role": "user", "content": "hi"},
                                                {"role": "assistant", "content": "hello"}]))
    out = tmp_path / "d.jsonl"
    r = CliRunner().invoke(main, ["audit", str(folder), "--strategy", "first", "-o", str(out), "-q"])
    assert r.exit_code == 1
    assert "broken.json" in r.output and "invalid JSON" in r.output
    assert "no decision steps" in r.output
    assert [json.loads(x)["trajectory_id"] for x in out.read_text().splitlines()] == ["ok"]


def test_usage_errors_exit_2(tmp_path, tau_file):
    r = CliRunner().invoke(main, ["audit", str(tau_file), "--strategy", "frist"])
    assert r.exit_code == 2 and "did you mean first" in r.output
    r = CliRunner().invoke(main, ["audit", str(tau_file), "--report", "x.pdf"])
    assert r.exit_code == 2
    r = CliRunner().invoke(main, ["audit", str(tmp_path / "nothing-here"), "--strategy", "first",
                                  "-o", str(tmp_path / "d.jsonl")])
    assert r.exit_code == 1 and "cannot read" in r.output


def test_python_api_audit_on_bundled_example():
    from pathlib import Path

    import trajaudit

    ex = Path(__file__).resolve().parents[2] / "examples" / "data"
    d = trajaudit.audit(ex / "tau_retail_sample.json", record=0)
    assert (d.trajectory_id, d.critical_step, d.category, d.agent) == ("2", 6, "misinterpretation_of_tool_output",
                                                                       "assistant")
    assert "steps.5" in " ".join(e.address for e in d.evidence)
    d = trajaudit.audit(ex / "tau_retail_sample.json", record=1, tools=str(ex.parent / "tools" / "tau_retail_tools.json"))
    assert (d.trajectory_id, d.critical_step, d.category) == ("34", 16, "invalid_invocation")


def test_audit_table_gives_the_message_position_of_a_split_anthropic_run(tmp_path):
    msgs = [{"role": "user", "content": "Cancel orders A1 and B2."},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get_order", "input": {"id": "A1"}},
                                              {"type": "tool_use", "id": "t2", "name": "get_order", "input": {"id": "B2"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": '{"status": "delivered"}'},
                                         {"type": "tool_result", "tool_use_id": "t2", "content": '{"status": "pending"}'}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t3", "name": "cancel_order", "input": {"id": "A1"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t3", "is_error": True,
                                          "content": "Error: delivered orders cannot be cancelled"}]},
            {"role": "assistant", "content": "Both orders are cancelled."}]
    src = tmp_path / "split.json"
    src.write_text(json.dumps({"system": "You are a shop agent.", "messages": msgs}))
    r = CliRunner().invoke(main, ["audit", str(src), "-o", str(tmp_path / "d.jsonl")])
    d = json.loads((tmp_path / "d.jsonl").read_text())
    assert (d["critical_step"], d["metadata"]["source_message"]) == (4, 3)
    assert "4 (msg 3)" in r.output
