"""`trajaudit show` and `trajaudit convert` through click's runner (streams injected)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import ROOT

from trajaudit import Trajectory, load_path
from trajaudit.cli import main


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


EX = ROOT / "examples"


def one_line(text: str) -> str:
    return " ".join(text.split())


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_help_on_every_command():
    for cmd in ([], ["show"], ["convert"]):
        r = run(*cmd, "--help")
        assert r.exit_code == 0 and "Usage:" in r.output


def test_show_tau_record(tau_file):
    r = run("show", tau_file, "--record", "0")
    assert r.exit_code == 0
    assert "get_product_details" in r.output and "Currently, there are 11 available T-shirt" in r.output
    assert "32 steps, 15 decision steps" in r.output


def test_show_every_who_and_when_file(ww_dir):
    for p in sorted(ww_dir.glob("*.json")):
        r = run("show", p)
        assert r.exit_code == 0, (p, r.output)
        assert "Computer_terminal" in r.output or "agent" in r.output


def test_convert_tau_to_jsonl_round_trips(tau_file, tmp_path):
    out = tmp_path / "ir.jsonl"
    r = run("convert", tau_file, "-o", out)
    assert r.exit_code == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 29
    t = Trajectory.from_dict(json.loads(lines[0]))
    assert t.id == "2" and t.steps[6].content.startswith("Currently, there are 11")


def test_convert_every_who_and_when_file(ww_dir, tmp_path):
    for p in sorted(ww_dir.glob("*.json"))[:126]:
        out = tmp_path / f"{p.stem}.ir.json"
        assert run("convert", p, "-o", out).exit_code == 0
        assert json.loads(out.read_text())["id"] == p.stem


def test_bad_input_exit_code_2_without_traceback(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text("{oops")
    r = CliRunner().invoke(main, ["show", str(p)])
    assert r.exit_code == 2 and "invalid JSON" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(main, ["show", str(p), "--format", "nope"])
    assert r.exit_code == 2


def test_show_prints_the_task_after_the_run_cut_at_a_word(tmp_path):
    task = "Please find the cheapest flight from Lisbon to Oslo " * 5
    msgs = {"task": task, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    p = tmp_path / "run.json"
    p.write_text(json.dumps(msgs), encoding="utf-8")
    r = CliRunner().invoke(main, ["show", str(p), "--width", "20"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    (line,) = [x for x in lines if x.startswith("task: ")]
    assert lines.index(line) > max(i for i, x in enumerate(lines) if "hello" in x)
    assert line == "task: Please find the cheapest flight from …"


@pytest.mark.parametrize("width", ["-5", "0", "9"])
def test_show_rejects_widths_below_10(width):
    r = run("show", EX / "traces" / "openai_chat.json", "--width", width)
    assert r.exit_code == 2 and f"Invalid value for '--width': {width} is not in the range x>=10" in one_line(r.stderr)


def test_show_accepts_width_10():
    assert run("show", EX / "traces" / "openai_chat.json", "--width", "10").exit_code == 0


@pytest.mark.parametrize("name", ["x.txt", "x", "x.json.bak"])
def test_convert_rejects_output_suffixes_other_than_json_and_jsonl(tmp_path, name):
    out = tmp_path / name
    r = run("convert", EX / "traces" / "openai_chat.json", "-o", out)
    assert r.exit_code == 2
    assert one_line(r.stderr) == f"error: -o/--output must end in .json, .jsonl or .ndjson, got {str(out)!r}"
    assert not out.exists()


def test_convert_output_reads_back_everywhere(tmp_path, tau_file):
    out = tmp_path / "ir.jsonl"
    assert invoke("convert", tau_file, "-o", out).exit_code == 0
    res = load_path(out)
    assert len(res.trajectories) == 29 and res.trajectories[0].id == "2"
    assert res.trajectories[0].steps[6].content.startswith("Currently, there are 11")
    r = invoke("audit", out, "-o", tmp_path / "d.jsonl", "-q")
    assert r.exit_code == 0
    first = json.loads((tmp_path / "d.jsonl").read_text().splitlines()[0])
    assert (first["trajectory_id"], first["critical_step"]) == ("2", 6)


# Hostile-user pass: `convert runs.jsonl -o ir.jsonl` with a bad line wrote the other runs and exited 0
# ("wrote 2 trajectory(ies)"): a pipeline step lost a run without failing, where audit and check exit 1
# for a skipped input. convert now writes the others, counts the skipped ones and exits 1.

def test_convert_exits_1_when_a_run_was_skipped(tmp_path):
    from hostile_kit import good_run

    src = tmp_path / "runs.jsonl"
    src.write_text(json.dumps(good_run("a")) + "\n{not json\n" + json.dumps(good_run("b")) + "\n")
    out = tmp_path / "ir.jsonl"
    r = run("convert", src, "-o", out)
    assert r.exit_code == 1
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == ["a", "b"]
    assert f"skipped: {src}, record 1: invalid JSON on line 2" in one_line(r.stderr)
    assert f"wrote 2 trajectory(ies) to {out}; 1 skipped (listed above)" in one_line(r.stderr)
    whole = run("convert", src, "--record", "2", "-o", tmp_path / "one.json")
    assert whole.exit_code == 0 and "skipped" not in whole.stderr


# Hostile-user pass: `convert runs.json --format json -o ir.jsonl` wrote one JSON document (a list) under
# a JSON Lines name without a word, where audit, check and eval warn on such a name (options.warn_output_name).

def test_convert_warns_when_the_name_says_another_layout(tmp_path):
    from hostile_kit import good_run, write_json

    src = write_json(tmp_path / "runs.json", [good_run("a"), good_run("b")])
    out = tmp_path / "ir.jsonl"
    r = run("convert", src, "--format", "json", "-o", out)
    assert r.exit_code == 0 and isinstance(json.loads(out.read_text()), list)
    assert (f"warning: -o {out}: writing one JSON document, but a name ending in .jsonl says JSON Lines; name the "
            "file .json, or give --format jsonl for JSON Lines") in one_line(r.stderr)
    for args in (("-o", tmp_path / "ir2.jsonl"), ("-o", tmp_path / "ir.json"), ("--format", "jsonl", "-o", out)):
        assert "warning" not in run("convert", src, *args).stderr, args
