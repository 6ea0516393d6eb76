"""A forced input format (``--input-format`` / ``format=``) on a batch with one run it cannot read:
the run is reported (file, record, the adapter's reason) and skipped, every other run loads, the exit
code says a run failed — as with auto-detection. A file that is not in the forced format at all is
one error naming the format, not one copy per record (docs/input.md "Forcing a format on a batch").

Batches are built in tmp_path from the real runs (tau-retail, Who&When) and the dialect and Magentic
fixtures, with one broken run inserted at record 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from trajaudit import load_many, load_path
from trajaudit.cli import main
from trajaudit.errors import FormatMismatchError


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


HERE = Path(__file__).resolve().parents[2]
DATA = HERE.parents[1] / "shared" / "data"  # as tests/conftest.py
TAU = DATA / "tau_retail"
WW = DATA / "who_and_when" / "algorithm_generated"
DIALECTS = HERE / "data" / "dialects"
MAGENTIC = HERE / "data" / "magentic" / "agentrx"
TAU_IDS = ["2", "3", "4"]  # task_id of the first three tau-retail records


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"shared data not found at {path}")
    return path


def _tau() -> list[dict]:
    return json.loads(_need(TAU / "trajectories.json").read_text())[:3]


def _dialect(name: str) -> list[dict]:
    doc = json.loads((DIALECTS / name).read_text())
    return [{**doc, "id": f"{name.split('_')[0]}-{i}"} for i in range(3)]


def _good_runs(fmt: str) -> tuple[list, list[str]]:
    """Three readable runs of ``fmt`` (real data) and the ids they load with."""
    if fmt == "tau":
        return _tau(), TAU_IDS
    if fmt == "openai":  # the tau runs' own OpenAI messages
        return [{"id": f"oa-{r['task_id']}", "messages": r["traj"]} for r in _tau()], ["oa-2", "oa-3", "oa-4"]
    if fmt == "ir":
        ir = load_path(_need(TAU / "trajectories.json")).trajectories[:3]
        return [t.to_dict() for t in ir], TAU_IDS
    name = {"anthropic": "anthropic_cancel.json", "openai_responses": "responses_cancel.json",
            "langchain": "langchain_cancel.json"}[fmt]
    stem = name.split("_")[0]
    return _dialect(name), [f"{stem}-0", f"{stem}-1", f"{stem}-2"]


# One run each format's own check refuses, and the reason it gives.
BAD = {
    "tau": ({"task_id": "broken", "trial": 0}, "object without a 'traj' list"),
    "openai": ({"id": "broken", "messages": [{"content": "a message without a role"}]},
               "expected chat messages: objects with a 'role' string"),
    "anthropic": ({"id": "broken", "messages": "not a list"}, "expected chat messages: objects with a 'role' string"),
    "openai_responses": ({"id": "broken", "input": [7]}, r"$.input[0] is not an item (an object with a 'type' or 'role')"),
    "langchain": ({"id": "broken", "messages": [{"role": "user", "content": "OpenAI, not LangChain"}]},
                  "expected LangChain messages: objects with a 'type' string"),
    "ir": ({"id": "broken"}, "not a trajaudit IR object (schema_version, source, steps)"),
    "who_and_when": ({"question": "q", "hist": []}, "not an object with a 'history' list"),
    "magentic": ([{"role": "user", "content": "plain OpenAI roles"}],
                 "all roles are plain OpenAI roles (use the openai format)"),
}
LIST_FORMATS = ["tau", "openai", "anthropic", "openai_responses", "langchain", "ir"]


def _one_run_per_doc(fmt: str) -> tuple[list, list[str]]:
    """Three readable single-run documents of ``fmt`` and their file stems (Who&When files, Magentic lists)."""
    if fmt == "who_and_when":
        files = [_need(WW) / f"{n}.json" for n in (1, 2, 3)]
    else:
        files = sorted(MAGENTIC.glob("*.json"))[:3]
    return [json.loads(p.read_text()) for p in files], [p.stem for p in files]


def _problem(res, fmt: str, file: Path, record: int | None) -> str:
    assert len(res.problems) == 1, res.problems
    p = res.problems[0]
    assert (p.file, p.record) == (str(file), record)
    where = f"{file}, record {record}" if record is not None else str(file)
    reason = BAD[fmt][1]
    assert p.message == f"{where}: not in the {fmt!r} format: {reason} (format: {fmt})"
    return p.message


@pytest.mark.parametrize("fmt", LIST_FORMATS)
def test_json_list_with_one_unreadable_run(fmt, tmp_path):
    good, ids = _good_runs(fmt)
    f = tmp_path / "batch.json"
    f.write_text(json.dumps([good[0], BAD[fmt][0], *good[1:]]))
    res = load_many([f], format=fmt)
    assert [t.id for t in res.trajectories] == ids
    if fmt != "ir":  # the IR keeps the source it was converted from (tau, records 0-2)
        assert [t.source.record for t in res.trajectories] == [0, 2, 3]
        assert {t.source.format for t in res.trajectories} == {fmt}
    _problem(res, fmt, f, 1)
    # the single-file API reads the same batch the same way, and --record picks a readable run
    assert [t.id for t in load_path(f, format=fmt).trajectories] == ids
    assert [t.id for t in load_path(f, format=fmt, record=2).trajectories] == ids[1:2]


@pytest.mark.parametrize("fmt", [*LIST_FORMATS, "who_and_when", "magentic"])
def test_jsonl_with_one_unreadable_line(fmt, tmp_path):
    if fmt in LIST_FORMATS:
        good, ids = _good_runs(fmt)
    else:
        good, _ = _one_run_per_doc(fmt)
        ids = ["batch#0", "batch#2", "batch#3"]  # stem#line for formats without their own run id
    f = tmp_path / "batch.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in [good[0], BAD[fmt][0], *good[1:]]))
    res = load_many([f], format=fmt)
    assert [t.id for t in res.trajectories] == ids
    _problem(res, fmt, f, 1)


@pytest.mark.parametrize("fmt", ["tau", "openai", "langchain", "who_and_when", "magentic"])
def test_folder_with_one_unreadable_file(fmt, tmp_path):
    if fmt in LIST_FORMATS:
        good, _ = _good_runs(fmt)
        good = [good[0]] if fmt == "tau" else good  # tau ids are task ids: keep one, as a one-record file
        stems = [f"run{i}" for i in range(len(good))]
    else:
        good, stems = _one_run_per_doc(fmt)
    for stem, run in zip(stems, good, strict=True):
        (tmp_path / f"{stem}.json").write_text(json.dumps(run))
    bad = tmp_path / "zz_broken.json"
    bad.write_text(json.dumps(BAD[fmt][0]))
    res = load_many([tmp_path], format=fmt)
    assert len(res.trajectories) == len(good)
    if fmt in ("who_and_when", "magentic"):
        assert [t.id for t in res.trajectories] == stems
    _problem(res, fmt, bad, None)


@pytest.mark.parametrize("forced", [False, True])
@pytest.mark.parametrize("fmt", LIST_FORMATS)
def test_non_run_elements_in_a_list_of_runs_are_skipped_alone(fmt, forced, tmp_path):
    # null and {} among the runs: before, the list stopped being a list of runs and the whole file was
    # one unreadable "message list" (forced) or matched no format at all (auto-detection)
    good, ids = _good_runs(fmt)
    f = tmp_path / "junk.json"
    f.write_text(json.dumps([good[0], None, good[1], {}, good[2]]))
    res = load_many([f], format=fmt if forced else None)
    assert [t.id for t in res.trajectories] == ids
    assert [p.record for p in res.problems] == [1, 3]
    assert all(p.message.startswith(f"{f}, record ") and p.message.endswith(f"(format: {fmt})")
               for p in res.problems)


# --- a file that is not in the forced format at all: one error per file ----------------------------

def test_jsonl_not_in_the_forced_format_is_one_error(tmp_path):
    tau = json.loads(_need(TAU / "trajectories.json").read_text())
    f = tmp_path / "tau.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in tau))
    res = load_many([f], format="openai")
    assert res.trajectories == [] and len(res.problems) == 1
    assert res.problems[0].record is None
    assert res.problems[0].message == (f"{f}: not in the 'openai' format: expected chat messages: objects with a "
                                       "'role' string (all 29 records; the first shown) (format: openai)")
    with pytest.raises(FormatMismatchError, match=r"not in the 'who_and_when' format: not an object with a "
                                                  r"'history' list \(all 29 records; the first shown\)"):
        load_path(f, format="who_and_when")


def test_json_list_not_in_the_forced_format_is_one_error(tmp_path):
    f = tmp_path / "bad.json"
    f.write_text(json.dumps([{"messages": "x"}, {"messages": [1]}, {"messages": [{"content": "no role"}]}]))
    with pytest.raises(FormatMismatchError) as e:
        load_path(f, format="openai")
    assert str(e.value) == (f"{f}: not in the 'openai' format: expected chat messages: objects with a 'role' "
                            "string (all 3 records; the first shown) (format: openai)")
    res = load_many([tmp_path, _need(TAU / "trajectories.json")], format="openai")  # one error per file
    assert [p.file for p in res.problems] == [str(f), str(TAU / "trajectories.json")]
    assert res.problems[1].message.endswith("not in the 'openai' format: expected chat messages: objects with a "
                                            "'role' string (format: openai)")


def test_a_message_list_is_one_run_not_n_records(tmp_path):
    """Was: one run given as a bare message list, forced as 'tau' (which splits any list), said
    "(all 32 records; the first shown)" — those are the 32 messages of one run."""
    f = tmp_path / "messages.json"
    f.write_text(json.dumps(_tau()[0]["traj"]))
    assert len(json.loads(f.read_text())) == 32
    with pytest.raises(FormatMismatchError) as e:
        load_path(f, format="tau")
    assert str(e.value) == f"{f}: not in the 'tau' format: object without a 'traj' list (format: tau)"
    assert e.value.records == 1


def test_jsonl_lines_of_run_lists_say_all_records_once(tmp_path):
    """Was: a JSONL file whose 3 lines each hold a list of 2 runs got the suffix twice: "...(all 2
    records; the first shown) (all 3 records; the first shown)". Now once, counting the 6 runs."""
    f = tmp_path / "lists.jsonl"
    f.write_text("".join(json.dumps([{"messages": "x"}, {"messages": [1]}]) + "\n" for _ in range(3)))
    with pytest.raises(FormatMismatchError) as e:
        load_path(f, format="openai")
    assert str(e.value) == (f"{f}: not in the 'openai' format: expected chat messages: objects with a 'role' "
                            "string (all 6 records; the first shown) (format: openai)")
    one = tmp_path / "one.jsonl"  # a single line: that line's problem, counted once
    one.write_text(f.read_text().splitlines()[0] + "\n")
    assert [p.message for p in load_many([one], format="openai").problems] == [
        f"{one}, record 0: not in the 'openai' format: expected chat messages: objects with a 'role' string "
        "(all 2 records; the first shown) (format: openai)"]


def test_a_jsonl_file_of_some_unreadable_lines_keeps_them_apart(tmp_path):
    # no collapse when anything else went wrong too (a line that is no JSON): every line is listed
    f = tmp_path / "mixed.jsonl"
    f.write_text(json.dumps({"task_id": 1}) + "\n{oops\n" + json.dumps({"task_id": 2}) + "\n")
    res = load_many([f], format="tau")
    assert res.trajectories == [] and [p.record for p in res.problems] == [0, 1, 2]


# --- the CLI: skip lines and exit codes ----------------------------------------------------------

def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture()
def tau_batch(tmp_path) -> Path:
    f = tmp_path / "tau_batch.json"
    good = _tau()
    f.write_text(json.dumps([good[0], BAD["tau"][0], *good[1:]]))
    return f


def test_cli_audit_check_eval_show_skip_the_unreadable_run(tau_batch, tmp_path):
    skip = f"skipped: {tau_batch}, record 1: not in the 'tau' format: object without a 'traj' list (format: tau)"
    out = tmp_path / "d.jsonl"
    r = run("audit", tau_batch, "--input-format", "tau", "--strategy", "first", "-o", out, "-q")
    assert r.exit_code == 1 and skip in " ".join(r.output.split())
    assert [json.loads(x)["trajectory_id"] for x in out.read_text().splitlines()] == TAU_IDS
    r = run("check", tau_batch, "--input-format", "tau", "--rules", "generic.protocol")
    assert r.exit_code == 1 and skip in " ".join(r.output.split())
    assert "3 run(s), " in r.output and "1 input(s) skipped" in r.output
    gold = TAU / "ground_truth.json"
    r = run("eval", tau_batch, "--gold", gold, "-s", "first", "--input-format", "tau", "--format", "json",
            "--bootstrap", "10")
    assert r.exit_code == 1 and json.loads(r.stdout)["n_predictions"] == 3
    assert skip in " ".join(r.stderr.split())
    assert run("show", tau_batch, "--input-format", "tau", "--record", "2").exit_code == 0
    r = run("show", tau_batch, "--input-format", "tau", "--record", "1")
    assert r.exit_code == 2 and (f"{tau_batch}, record 1: not in the 'tau' format: object without a 'traj' list"
                                 in " ".join(r.output.split()))


def test_cli_audit_of_a_file_not_in_the_forced_format(tmp_path):
    tau = json.loads(_need(TAU / "trajectories.json").read_text())
    f = tmp_path / "tau.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in tau))
    r = run("audit", f, "--input-format", "openai", "--strategy", "first", "-o", tmp_path / "d.jsonl", "-q")
    text = " ".join(r.output.split())
    assert r.exit_code == 2 and text.count("skipped:") == 1  # no run loaded: exit 2, -o not created
    assert f"skipped: {f}: not in the 'openai' format: expected chat messages" in text
    assert f"error: no trajectory could be loaded from {f}" in text and not (tmp_path / "d.jsonl").exists()


def test_a_jsonl_line_holding_several_unreadable_runs_is_one_problem(tmp_path):
    # a line that is a list of three non-tau objects: one problem for the line, not three copies
    good = _tau()
    f = tmp_path / "lines.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in [good[0], [{"a": 1}, {"b": 2}, {"c": 3}], good[1]]) + "\n")
    res = load_many([f], format="tau")
    assert [t.id for t in res.trajectories] == ["2", "3"]
    assert [(p.record, p.message) for p in res.problems] == [
        (1, f"{f}, record 1: not in the 'tau' format: object without a 'traj' list (all 3 records; the first "
            "shown) (format: tau)")]


def test_forcing_a_format_that_does_not_fit_is_refused(tmp_path, tau_file):
    # every run skipped, none loaded: a usage error (exit 2, as `check`), the -o file not created
    r = invoke("audit", tau_file, "--format", "openai", "-o", tmp_path / "d.jsonl", "-q")
    assert r.exit_code == 2 and "not in the 'openai' format" in r.output
    assert f"error: no trajectory could be loaded from {tau_file}" in " ".join(r.output.split())
    assert not (tmp_path / "d.jsonl").exists()
