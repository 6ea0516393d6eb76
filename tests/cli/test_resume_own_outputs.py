"""Fresh-user pass (defects 3, 4, 5, 8): trajaudit's own outputs inside an audited folder, the resume key
of plain runs, the latest line per run in ``eval --pred``, ``--resume --report``, and ``--resume`` into a
file that holds no diagnoses."""

from __future__ import annotations

import json
import shutil

from hostile_kit import ROOT, cli, diagnoses, good_run, one_line, write_jsonl

WHO = ROOT / "examples" / "data" / "who_and_when"


def _folder(tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(WHO, runs)
    return runs


# 3: `audit runs -o runs/diagnoses.jsonl` worked once; the second run, --resume and `check runs` read the
# diagnoses file as a trace (exit 2 "would overwrite the trace", exit 1 "no known trace format").

def test_a_second_audit_of_a_folder_holding_its_output_leaves_the_output_out(tmp_path):
    runs = _folder(tmp_path)
    out, rep = runs / "diagnoses.jsonl", runs / "report.html"
    gate = cli("check", runs, "-q", "--format", "json").exit_code  # the runs' own findings, before any output
    first = cli("audit", runs, "-o", out, "--report", rep, "-q")
    assert first.exit_code == 0, first.output
    before = out.read_text()
    again = cli("audit", runs, "-o", out, "--report", rep, "-q")
    assert again.exit_code == 0, again.output
    assert (f"note: left out 1 file(s) under the inputs that hold trajaudit output (diagnoses, check results, "
            f"SARIF, JUnit), not traces: {out}") in one_line(again.stderr)
    assert out.read_text() == before  # the same 3 diagnoses, not the diagnoses file audited as a trace
    resumed = cli("audit", runs, "-o", out, "-q", "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert "3 run(s) already diagnosed there were skipped" in one_line(resumed.stderr)
    checked = cli("check", runs, "-q", "--format", "json")
    assert checked.exit_code == gate, checked.output
    assert len(json.loads(checked.stdout)) == 3
    assert "left out 1 file(s)" in one_line(checked.stderr) and "skipped:" not in checked.stderr


def test_sarif_and_junit_in_the_checked_folder_are_left_out(tmp_path):
    """Final fresh-user pass: `check runs/ --format sarif -o runs/trajaudit.sarif.json` (the name the
    SARIF spec suggests) and a JUnit report under a .json name were read back by the next `check runs/`
    as traces ("no known trace format matches", "invalid JSON"): skipped inputs, exit 1 at the gate."""
    runs = _folder(tmp_path)
    gate = cli("check", runs, "-q", "--format", "json").exit_code
    for fmt, name in (("sarif", "trajaudit.sarif.json"), ("junit", "junit.json")):
        assert cli("check", runs, "--format", fmt, "-o", runs / name, "-q").exit_code == gate
    assert cli("audit", runs, "--format", "sarif", "-o", runs / "audit.json", "-q").exit_code == 0
    checked = cli("check", runs, "-q", "--format", "json")
    assert checked.exit_code == gate, checked.output
    assert len(json.loads(checked.stdout)) == 3 and "skipped:" not in checked.stderr
    assert "left out 3 file(s)" in one_line(checked.stderr)
    for name in ("trajaudit.sarif.json", "junit.json", "audit.json"):
        assert str(runs / name) in one_line(checked.stderr)


def test_check_output_in_the_checked_folder_is_left_out(tmp_path):
    runs = _folder(tmp_path)
    gate = cli("check", runs, "-q", "--format", "json")
    first = cli("check", runs, "-q", "-o", runs / "check.json")
    assert first.exit_code == gate.exit_code and len(json.loads((runs / "check.json").read_text())) == 3
    again = cli("check", runs, "-q", "--format", "json")
    assert again.exit_code == gate.exit_code, again.output
    assert "left out 1 file(s)" in one_line(again.stderr) and "skipped:" not in again.stderr
    assert again.stdout == gate.stdout


def test_eval_save_pred_in_the_dataset_folder(tmp_path):
    runs = _folder(tmp_path)
    pred = runs / "pred.jsonl"
    args = ("eval", runs, "--gold", WHO, "-s", "offline", "--format", "json", "--save-pred", pred)
    first = cli(*args)
    assert first.exit_code == 0, first.output
    again = cli(*args)
    assert again.exit_code == 0, again.output
    assert "left out 1 file(s)" in one_line(again.stderr) and again.stdout == first.stdout


def test_the_default_output_in_the_current_folder(tmp_path, monkeypatch):
    runs = _folder(tmp_path)
    monkeypatch.chdir(runs)
    assert cli("audit", ".", "-q").exit_code == 0
    r = cli("audit", ".", "-q")
    assert r.exit_code == 0, r.output
    assert len(diagnoses(runs / "diagnoses.jsonl")) == 3


def test_a_diagnoses_file_named_as_input_is_not_called_the_trace(tmp_path):
    runs = _folder(tmp_path)
    out = runs / "diagnoses.jsonl"
    assert cli("audit", runs, "-o", out, "-q").exit_code == 0
    r = cli("audit", out, "-o", out, "-q")
    assert r.exit_code == 2
    assert f"is the input file '{out}' (trajaudit diagnoses, read as a trace): writing it would overwrite it" \
        in one_line(r.stderr)
    only = tmp_path / "only"
    only.mkdir()
    shutil.copy(out, only / "d.jsonl")
    r = cli("check", only, "-q")
    assert r.exit_code == 2 and "only trajaudit output" in one_line(r.stderr)


def test_a_trace_at_the_output_path_is_still_refused(tmp_path):
    runs = _folder(tmp_path)
    r = cli("audit", runs, "-o", runs / "1.json", "-q")
    assert r.exit_code == 2 and "writing it would overwrite the trace" in one_line(r.stderr)


# 4: plain runs wrote no resume key, so --resume after them diagnosed everything again (duplicates);
# eval --pred then scored the first (older) line of each run.

def test_resume_after_a_plain_audit_or_save_pred_skips_every_run(tmp_path):
    runs = write_jsonl(tmp_path / "runs.jsonl", [json.dumps(good_run(f"r{i}")) for i in range(3)])
    out = tmp_path / "d.jsonl"
    assert cli("audit", runs, "-q", "-o", out).exit_code == 0
    assert all(len(d["metadata"]["resume_key"]) == 16 for d in diagnoses(out))
    r = cli("audit", runs, "-q", "-o", out, "--resume")
    assert r.exit_code == 0 and "3 run(s) already diagnosed there were skipped" in one_line(r.stderr)
    assert "duplicates" not in r.stderr and len(diagnoses(out)) == 3
    pred = tmp_path / "pred.jsonl"
    assert cli("eval", WHO, "--gold", WHO, "-s", "offline", "--format", "json", "--save-pred", pred).exit_code == 0
    r = cli("eval", WHO, "--gold", WHO, "-s", "offline", "--format", "json", "--save-pred", pred, "--resume")
    assert r.exit_code == 0 and "3 run(s) already diagnosed there were skipped" in one_line(r.stderr)
    assert len(diagnoses(pred)) == 3


def test_eval_pred_scores_the_last_line_of_each_run(tmp_path):
    both, offline = tmp_path / "both.jsonl", tmp_path / "offline.jsonl"
    assert cli("audit", WHO, "-q", "-s", "first", "-o", both, "--resume").exit_code == 0
    assert cli("audit", WHO, "-q", "-s", "offline", "-o", both, "--resume").exit_code == 0
    assert cli("audit", WHO, "-q", "-s", "offline", "-o", offline).exit_code == 0
    got = cli("eval", "--gold", WHO, "--pred", both, "--format", "json")
    want = cli("eval", "--gold", WHO, "--pred", offline, "--format", "json")
    assert got.exit_code == want.exit_code == 0, got.output
    assert "3 earlier diagnosis line(s) of runs diagnosed again further down" in one_line(got.stderr)
    g, w = json.loads(got.stdout), json.loads(want.stdout)
    assert g["strategies"] == ["offline"]
    g.pop("gold_source", None), w.pop("gold_source", None)
    assert g["metrics"] == w["metrics"]


# 5: --resume --report replaced the report with one of this invocation's runs (with nothing left to do,
# "0 run(s) audited") without a word.

def test_resume_report_says_what_it_covers_and_keeps_a_report_when_nothing_was_audited(tmp_path):
    runs = _folder(tmp_path)
    out, rep = tmp_path / "d.jsonl", tmp_path / "r.html"
    assert cli("audit", runs / "1.json", "-q", "-o", out, "--resume", "--report", rep).exit_code == 0
    r = cli("audit", runs, "-q", "-o", out, "--resume", "--report", rep)
    assert r.exit_code == 0, r.output
    assert f"note: --report {rep} covers the runs audited by this invocation only, not the diagnoses already " \
           f"in {out}" in one_line(r.stderr)
    assert "--resume: the runs audited by this invocation" in rep.read_text()
    kept = rep.read_bytes()
    r = cli("audit", runs, "-q", "-o", out, "--resume", "--report", rep)
    assert r.exit_code == 0 and f"note: --report {rep} was not written: every run was already diagnosed" \
        in one_line(r.stderr)
    assert rep.read_bytes() == kept


# 8: --resume called a user's JSON line "a diagnosis line without a resume key", cut the user's last
# line as "torn", and appended to a notes file.

def test_resume_refuses_a_file_that_holds_no_diagnoses_and_leaves_it_alone(tmp_path):
    run = write_jsonl(tmp_path / "runs.jsonl", [json.dumps(good_run("r1"))])
    for name, content in (("torn.jsonl", b'{"a":1}\n{"trunc'), ("notes.jsonl", b"buy milk\n"),
                          ("half.jsonl", b'{"trunc')):
        path = tmp_path / name
        path.write_bytes(content)
        r = cli("audit", run, "-q", "-o", path, "--resume")
        assert r.exit_code == 2, (name, r.output)
        assert f"--resume appends diagnoses to -o '{path}', but it holds other content" in one_line(r.stderr)
        assert path.read_bytes() == content
    # a diagnosis line trajaudit was killed writing is still cut away
    torn = tmp_path / "killed.jsonl"
    torn.write_bytes(b'{"schema_version": 1, "trajectory_id": "r')
    r = cli("audit", run, "-q", "-o", torn, "--resume")
    assert r.exit_code == 0 and "a torn last line (41 bytes" in one_line(r.stderr)
    assert [d["trajectory_id"] for d in diagnoses(torn)] == ["r1"]


def test_eval_with_the_gold_folder_as_dataset_saves_predictions_into_it_again(tmp_path):
    """Final fresh-user pass: `eval ww --gold ww -s offline --save-pred ww/p.jsonl` worked once; the second
    run and `--resume` were refused ("--save-pred 'ww/p.jsonl' is the gold file"), and with the gold
    folder alone as dataset the predictions file was read as gold and as traces. A Who&When gold folder
    leaves trajaudit's outputs out as the dataset folders do."""
    runs = _folder(tmp_path)
    pred = runs / "p.jsonl"
    args = ("eval", runs, "--gold", runs, "-s", "offline", "--bootstrap", "10", "--save-pred", pred)
    first = cli(*args)
    assert first.exit_code == 0, first.output
    saved = pred.read_text()
    for extra in ((), ("--resume",)):
        again = cli(*args, *extra)
        assert again.exit_code == 0, again.output
        assert f"not traces: {pred}" in one_line(again.stderr) and "gold file" not in again.stderr
        assert pred.read_text() == saved  # the same lines: resumed (all skipped) or written anew
    alone = cli("eval", "--gold", runs, "-s", "first", "--bootstrap", "10", "--format", "json")
    assert alone.exit_code == 0, alone.output
    assert "skipped" not in alone.stderr and f"not traces: {pred}" in one_line(alone.stderr)
    report = json.loads(alone.stdout)
    assert report["n_gold"] == report["n_predictions"] == len(diagnoses(pred)) == 3
