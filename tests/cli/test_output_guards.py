"""trajaudit/cli/outputs.py and the output checks of cli/common.py: no command writes an output file over
a file it was given to read (trace, gold, predictions, tools, pack, mapping, a file found by expanding a
folder): exit 2 naming both, the input left as it was; two outputs of one command never share a path;
an output is replaced atomically, so a full disk leaves the old file intact (robustness classes 4, 5, 9)."""

from __future__ import annotations

import json
import os
import resource
import shutil
from pathlib import Path

import pytest
from cli_kit import LONE, run_no_traceback
from click.testing import CliRunner
from hostile_kit import (
    cli,
    cli_process,
    comparable,
    diagnoses,
    good_run,
    one_line,
    snapshot,
    write_json,
    write_jsonl,
)

from trajaudit.cli import main

LIMIT = 8192  # bytes: far less than the new diagnoses


def _limited():
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


@pytest.fixture
def batch(tmp_path):
    return write_jsonl(tmp_path / "runs.jsonl", [json.dumps(good_run(f"r{i}", item=f"F{i}")) for i in range(12)])


_run = run_no_traceback


EX = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def files(tmp_path, tau_file):
    run = tmp_path / "run.json"
    run.write_text(tau_file.read_text(encoding="utf-8"), encoding="utf-8")
    tools = tmp_path / "tools.json"
    shutil.copy(tau_file.parent / "tools.json", tools)
    gold = tmp_path / "gold.json"
    shutil.copy(tau_file.parent / "ground_truth.json", gold)
    cite = tmp_path / "cite.json"
    shutil.copy(EX / "citation" / "ev_market.json", cite)
    return {"run": run, "tools": tools, "gold": gold, "cite": cite}


@pytest.mark.parametrize("args, victim, option, what", [
    (["check", "{run}", "--rules", "generic", "-o", "{run}"], "run", "-o/--output", "the input file"),
    (["check", "{run}", "--tools", "{tools}", "-o", "{tools}"], "tools", "-o/--output", "the --tools file"),
    (["audit", "{run}", "--tools", "{tools}", "-o", "{tools}"], "tools", "-o/--output", "the --tools file"),
    (["audit", "{run}", "--rules", "{pack}", "-o", "{pack}"], "pack", "-o/--output", "the rule pack"),
    (["check", "{run}", "--rules", "{pack}", "-o", "{pack}"], "pack", "-o/--output", "the rule pack"),
    (["rules", "from-tools", "{tools}", "-o", "{tools}"], "tools", "-o/--output", "the --tools file"),
    (["eval", "{run}", "--gold", "{gold}", "-s", "first", "-o", "{gold}"], "gold", "-o/--output", "the gold file"),
    (["eval", "{run}", "--gold", "{gold}", "-s", "first", "--save-pred", "{run}"], "run", "--save-pred",
     "the input file"),
    (["cite", "{cite}", "--html", "{cite}"], "cite", "--html", "the input file"),
    (["cite", "{cite}", "--log", "{cite}"], "cite", "--log", "the input file"),
])
def test_outputs_never_replace_inputs(files, tmp_path, args, victim, option, what):
    # the message names what the input is: a tools file or a rule pack is not "the trace"
    files = {**files, "pack": tmp_path / "pack.yaml"}
    shutil.copy(EX / "rules" / "tau_retail_example.yaml", files["pack"])
    before = files[victim].read_bytes()
    argv = [a.format(**{k: str(v) for k, v in files.items()}) for a in args]
    r = CliRunner().invoke(main, argv)
    assert r.exit_code == 2, r.output
    path = str(files[victim])
    said = one_line(r.output)
    if what == "the input file":
        assert f"{option} {path!r} is the input file {path!r}: writing it would overwrite the trace" in said
    else:
        assert f"{option} {path!r} is {what} {path!r}: writing it would overwrite it; choose another output path" \
            in said
    assert files[victim].read_bytes() == before


@pytest.mark.parametrize("args, option, bad", [
    (["audit", "{run}", "-o", "{tmp}/missing/d.jsonl", "--report", "{tmp}/r.html"], "-o/--output", "{tmp}/missing/d.jsonl"),
    (["audit", "{run}", "-o", "{tmp}/d.jsonl", "--report", "{tmp}/missing/r.md"], "--report", "{tmp}/missing/r.md"),
    (["audit", "{run}", "-o", "{tmp}/d.jsonl", "--report", "{run}/r.html"], "--report", "{run}/r.html"),
    (["eval", "{run}", "--gold", "{gold}", "-s", "first", "--save-pred", "{tmp}/missing/p.jsonl"], "--save-pred",
     "{tmp}/missing/p.jsonl"),
])
def test_an_output_folder_that_does_not_exist_is_refused_before_the_batch(files, tmp_path, args, option, bad):
    """Was: the batch was audited first and the write failed at the end ("…: No such file or
    directory"): with -o in a missing folder neither the diagnoses nor the report were written."""
    names = {"tmp": tmp_path, **{k: str(v) for k, v in files.items()}}
    r = CliRunner().invoke(main, [a.format(**names) for a in args])
    assert r.exit_code == 2, r.output
    out = bad.format(**names)
    why = "does not exist; create it first" if "missing" in bad else "is a file, not a folder"
    assert f"error: {option} {out!r}: the folder {str(Path(out).parent)!r} {why}" in " ".join(r.output.split())
    assert "audited" not in r.output and not list(tmp_path.glob("[dr].*"))  # nothing was audited or written


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
    # the diagnoses written into an audited folder before are trajaudit's own output, not a trace: the
    # next audit of the folder leaves them out (with a note) and replaces them (it refused them once,
    # issue 18, and before that read them as a trace)
    first = _run("audit", tmp_path, "-q", "-o", tmp_path / "d.jsonl")
    before = (tmp_path / "d.jsonl").read_bytes()
    res = _run("audit", tmp_path, "-q", "-o", tmp_path / "d.jsonl")
    assert res.exit_code == first.exit_code and "left out 1 file(s)" in " ".join(res.output.split())
    assert (tmp_path / "d.jsonl").read_bytes() == before


# Class 4: ``-o`` naming a trace inside a folder (or glob) being audited.
#
# Was: the trace was overwritten, exit 0 (the guard covered explicit paths, symlinks and hard links,
# not files found by expanding a folder or glob). Now every output is compared with every input file
# after expansion: exit 2 naming both, nothing written.

@pytest.mark.parametrize("how", ["folder", "glob", "nested", "link"])
def test_an_output_that_is_an_expanded_input_is_refused(tmp_path, how):
    runs = tmp_path / "runs"
    (runs / "sub").mkdir(parents=True)
    victim = write_json(runs / "sub" / "b.json", good_run("b"))
    write_json(runs / "a.json", good_run("a"))
    target = victim
    if how == "link":
        target = tmp_path / "alias.json"
        os.symlink(victim, target)
    given = {"folder": runs, "nested": runs, "link": runs, "glob": str(runs / "**" / "*.json")}[how]
    before = snapshot(runs)
    for args in (("audit", given, "-q", "-o", target), ("check", given, "--rules", "generic", "-o", target),
                 ("convert", victim, "-o", target)):
        r = cli(*args)
        assert r.exit_code == 2, (args, r.output)
        assert f"is the input file '{victim}': writing it would overwrite the trace" in one_line(r.stderr)
        assert snapshot(runs) == before
    assert json.loads(victim.read_text())["id"] == "b"


def test_eval_save_pred_and_report_in_the_dataset_folder_are_refused(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    write_json(runs / "a.json", good_run("a"))
    gold = tmp_path / "gold.jsonl"
    gold.write_text('{"trajectory_id": "a", "critical_step": 4}\n')
    before = snapshot(runs)
    for opt in ("--save-pred", "-o"):
        r = cli("eval", runs, "--gold", gold, "-s", "offline", opt, runs / "a.json")
        assert r.exit_code == 2 and "is the input file" in one_line(r.stderr), r.output
    assert snapshot(runs) == before


# ``13.json/`` and ``sub/../13.json`` (``sub`` missing): no file to ``os.stat`` — the guard found no
# input there — but the write went through ``os.path.realpath``, which tidies both into ``13.json``.
#
# Was: every command below replaced the input 13.json (the gold file for eval --save-pred), exit 0.
# Now: the guard compares the resolved path, exit 2 "is the input file" (or "the gold file"), the file untouched.

_TIDIED = [
    (["audit", "{run}", "-q", "-o", "{out}"], "run"),
    (["check", "{run}", "--format", "json", "-q", "-o", "{out}"], "run"),
    (["eval", "{run}", "--gold", "{gold}", "-s", "offline", "--save-pred", "{out}"], "gold"),
]
_SUFFIXED = [(["convert", "{run}", "-o", "{out}"], "run"), (["repair", "{run}", "-o", "{out}"], "run")]


# (convert and repair refuse 'x.json/' already: their -o must end in .json)
@pytest.mark.parametrize("form, args, victim", [("{}/", *a) for a in _TIDIED]
                         + [("{sub}/../{name}", *a) for a in _TIDIED + _SUFFIXED])
def test_an_output_path_tidied_into_an_input_is_refused(tmp_path, form, args, victim):
    files = {"run": write_json(tmp_path / "13.json", good_run("a")), "gold": tmp_path / "gold.json"}
    files["gold"].write_text('{"trajectory_id": "a", "critical_step": 4}\n')
    target = files[victim]
    out = form.format(target, sub=tmp_path / "sub", name=target.name)
    before = snapshot(tmp_path)
    r = cli(*[a.format(out=out, run=files["run"], gold=files["gold"]) for a in args])
    assert r.exit_code == 2, r.output
    said = ("is the gold file '{}': writing it would overwrite it;" if victim == "gold"  # not "the trace"
            else "is the input file '{}': writing it would overwrite the trace").format(target)
    assert f"{out!r} {said}" in one_line(r.stderr)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("form, why", [
    ("{tmp}/new.jsonl/", "ends with '/', which names a folder, not a file: drop the trailing '/'"),
    ("{tmp}/sub/../new.jsonl", "the folder '{tmp}/sub/..' cannot be followed: '{tmp}/sub' does not exist, and the "
                               "system resolves '..' after it, not before; create it or drop the '..'"),
])
@pytest.mark.parametrize("args", [["audit", "{run}", "-q", "-o", "{out}"], ["check", "{run}", "-q", "-o", "{out}"],
                                  ["eval", "{run}", "--gold", "{gold}", "-s", "offline", "--save-pred", "{out}"]])
def test_an_output_path_the_system_would_not_open_is_refused(tmp_path, form, why, args):
    """A new file behind such a path: the system's open() fails on both, realpath wrote tmp/new.jsonl.
    Now refused with the reason before the batch; nothing written."""
    run = write_json(tmp_path / "13.json", good_run("a"))
    gold = tmp_path / "gold.json"
    gold.write_text('{"trajectory_id": "a", "critical_step": 4}\n')
    out = form.format(tmp=tmp_path)
    before = snapshot(tmp_path)
    r = cli(*[a.format(out=out, run=run, gold=gold) for a in args])
    assert r.exit_code == 2, r.output
    assert f"{out}: {why.format(tmp=tmp_path)}" in one_line(r.stderr).replace("' : ", ": ").replace("': ", ": ")
    assert snapshot(tmp_path) == before


def test_atomic_write_refuses_what_the_system_would_not_open(tmp_path):
    """convert, repair, cite … reach atomic_write without check_output_folder: it refuses too, naming the path."""
    from trajaudit.cli.outputs import atomic_write
    for out in (f"{tmp_path}/sub/../new.json", f"{tmp_path}/new.json/"):
        with pytest.raises(OSError) as e:
            atomic_write(out, ["x"])
        assert e.value.filename == out and "'..'" in e.value.strerror or "trailing '/'" in e.value.strerror
    assert list(tmp_path.iterdir()) == []
    r = cli("convert", write_json(tmp_path / "a.json", good_run("a")), "-o", f"{tmp_path}/sub/../b.json")
    assert r.exit_code == 2 and f"{tmp_path}/sub/../b.json: the folder" in one_line(r.stderr)
    assert not (tmp_path / "b.json").exists()


@pytest.mark.parametrize("out", ["/dev/stdout", "/proc/self/fd/1"])
@pytest.mark.parametrize("args", [["audit", "{run}", "-q"], ["check", "{run}", "-q", "--format", "json"]])
def test_o_dev_stdout_writes_to_a_pipe(tmp_path, out, args):
    """stdout a pipe (``trajaudit audit X -o /dev/stdout -q | wc -c``): the link resolves to 'pipe:[…]',
    and a temporary file was made beside it — "/dev/stdout: No such file or directory", exit 2, nothing
    written. Now written through directly, as /dev/null and FIFOs are (the subprocess's stdout is a pipe)."""
    if not os.path.exists(out):
        pytest.skip(f"no {out} here")
    run = write_json(tmp_path / "13.json", good_run("a"))
    r = cli_process(*[a.format(run=run) for a in args], "-o", out)
    assert r.returncode in (0, 1) and "No such file" not in r.stderr, r.stderr  # check: 1 = violations found
    if args[0] == "audit":
        assert [d["trajectory_id"] for d in map(json.loads, r.stdout.splitlines())] == ["a"]
    else:
        assert [x["trajectory_id"] for x in json.loads(r.stdout)] == ["a"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["13.json"]


def test_a_device_output_needs_no_writable_folder(tmp_path, monkeypatch):
    """-o /dev/stdout (a FIFO, /dev/null) is written through, nothing is made beside it: a user who may
    not write to /dev (anyone but root) was refused "the folder '/dev' is not writable" before the batch."""
    from trajaudit.cli.common import check_output_folder
    from trajaudit.errors import TrajauditError
    monkeypatch.setattr(os, "access", lambda *a, **k: False)  # as a user without write access to the folders
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for out in ("/dev/null", str(fifo)):
        check_output_folder(out)
    with pytest.raises(TrajauditError, match="is not writable"):
        check_output_folder(str(tmp_path / "d.jsonl"))


# Class 5: two outputs of one command naming the same file (``-o X.html --report X.html``).
#
# Was: the JSONL was silently replaced by the HTML, exit 0. Now: exit 2 naming both options, before
# the batch; an existing file there is untouched.

def test_o_and_report_on_one_path_are_refused(tmp_path):
    run = write_json(tmp_path / "run.json", good_run("a"))
    for name in ("x.html", "x.md"):
        x = tmp_path / name
        for existing in (False, True):
            if existing:
                x.write_text("old\n")
            r = cli("audit", run, "-q", "-o", x, "--report", x)
            assert r.exit_code == 2, r.output
            assert f"-o/--output and --report name the same file '{x}'" in one_line(r.stderr)
            assert (x.read_text() == "old\n") if existing else not x.exists()


def test_a_link_to_the_other_output_is_the_same_file(tmp_path):
    run = write_json(tmp_path / "run.json", good_run("a"))
    report = tmp_path / "r.html"
    report.write_text("old report\n")
    alias = tmp_path / "d.jsonl"
    os.symlink(report, alias)
    r = cli("audit", run, "-q", "-o", alias, "--report", report)
    assert r.exit_code == 2 and "name the same file" in one_line(r.stderr)
    assert report.read_text() == "old report\n"


def test_eval_report_and_save_pred_on_one_path_are_refused(tmp_path):
    run = write_json(tmp_path / "a.json", good_run("a"))
    gold = tmp_path / "gold.jsonl"
    gold.write_text('{"trajectory_id": "a", "critical_step": 4}\n')
    out = tmp_path / "o.txt"
    r = cli("eval", run, "--gold", gold, "-s", "offline", "-o", out, "--save-pred", out)
    assert r.exit_code == 2 and "-o/--output and --save-pred name the same file" in one_line(r.stderr)
    assert not out.exists()


def test_different_outputs_are_written(tmp_path):
    run = write_json(tmp_path / "run.json", good_run("a"))
    r = cli("audit", run, "-q", "-o", tmp_path / "d.jsonl", "--report", tmp_path / "d.html")
    assert r.exit_code == 0 and (tmp_path / "d.jsonl").exists() and (tmp_path / "d.html").exists()


# Class 9: the disk fills up (here: a small ``RLIMIT_FSIZE``) while ``-o`` replaces an earlier file.
#
# Was: ``open(path, "wb")`` truncated the old diagnoses first; the new file ended in a torn line and the
# old one was gone. Now outputs are written to a temporary file in the same folder, fsynced and renamed:
# the write fails (exit 2, the error named), the old file survives byte for byte, no temporary file is
# left. With ``--resume`` the lines are appended as runs finish: a write cut by the limit leaves a torn
# last line, which the next ``--resume`` cuts away before finishing the batch.

@pytest.mark.parametrize("option,name", [("-o", "d.jsonl"), ("--report", "r.html"), ("--report", "r.md")])
def test_the_old_output_survives_a_full_disk(tmp_path, batch, option, name, monkeypatch):
    monkeypatch.setenv("TRAJAUDIT_NO_CACHE", "1")  # the pack cache would write too
    out = tmp_path / "out"
    out.mkdir()
    old = out / name
    old.write_bytes(b"the earlier file\n" * 20)
    before = old.read_bytes()
    args = ["audit", batch, "-q", option, old] + (["-o", out / "d2.jsonl"] if option == "--report" else [])
    r = cli_process(*args, preexec=_limited, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "File too large" in one_line(r.stderr) and "Traceback" not in r.stderr
    # named as a file the user gave (-o is written before --report), not as the temporary file
    assert one_line(r.stderr).strip() in {f"error: {old}: File too large", f"error: {out / 'd2.jsonl'}: File too large"}
    assert old.read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == sorted({name, *(["d2.jsonl"] if option == "--report" else [])}) \
        or sorted(p.name for p in out.iterdir()) == [name]  # no temporary file left behind


def test_resume_cuts_the_torn_line_a_full_disk_left_and_finishes(tmp_path, batch, monkeypatch):
    monkeypatch.setenv("TRAJAUDIT_NO_CACHE", "1")
    whole = tmp_path / "whole.jsonl"
    assert cli("audit", batch, "-q", "-o", whole).exit_code == 0
    out = tmp_path / "d.jsonl"
    r = cli_process("audit", batch, "-q", "--resume", "-o", out, preexec=_limited, timeout=120)
    assert r.returncode == 2 and "File too large" in one_line(r.stderr), r.stderr
    cut = out.read_bytes()
    assert 0 < len(cut) <= LIMIT and not cut.endswith(b"\n")  # complete lines, then a torn one
    end = cut.rfind(b"\n") + 1
    complete = cut[:end].count(b"\n")
    r = cli("audit", batch, "-q", "--resume", "-o", out)
    assert r.exit_code == 0, r.output
    assert f"a torn last line ({len(cut) - end} bytes" in one_line(r.stderr)
    assert f"{complete} run(s) already diagnosed there were skipped" in one_line(r.stderr)
    got = sorted(json.dumps(comparable(d), sort_keys=True) for d in diagnoses(out))
    assert got == sorted(json.dumps(comparable(d), sort_keys=True) for d in diagnoses(whole))


@pytest.mark.parametrize("extra", [[], ["--format", "sarif"]])
def test_audit_finding_no_trace_files_leaves_the_outputs_alone(tmp_path, extra):
    # a folder with no trace file (empty, or only other files) is a usage error (exit 2): the existing
    # -o and --report files are kept, and none is created where none was
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.py").write_text("x = 1\n")
    out, rep = tmp_path / "out.jsonl", tmp_path / "r.html"
    out.write_text("KEEP\n")
    rep.write_text("KEEPR\n")
    r = CliRunner().invoke(main, ["audit", str(empty), "-o", str(out), "--report", str(rep), *extra])
    assert r.exit_code == 2, r.output
    assert "no trace files found" in r.output
    assert out.read_text() == "KEEP\n" and rep.read_text() == "KEEPR\n"
    fresh = tmp_path / "fresh.out"
    r = CliRunner().invoke(main, ["audit", str(empty), "-o", str(fresh), *extra])
    assert r.exit_code == 2 and not fresh.exists()


#: an existing -o the failed batches below must keep: a diagnosis line (--resume refuses other content)
KEEP = '{"schema_version": 1, "trajectory_id": "k", "critical_step": 0, "category": "x", "strategy": "first"}\n'


@pytest.mark.parametrize("extra", [[], ["--format", "sarif"], ["--jobs", "2"], ["--resume"]])
def test_audit_loading_no_run_leaves_the_outputs_alone(tmp_path, extra):
    # every input unreadable (invalid JSON, a run with no messages, a run not in the forced format):
    # each is named, then exit 2 as for an empty folder; the existing -o/--report files are kept and
    # none is created where none was (the batch used to replace them with empty output, exit 1)
    bad = tmp_path / "bad.json"
    bad.write_text("{bad")
    empty = write_json(tmp_path / "empty.json", {"messages": []})
    out, rep = tmp_path / "out.jsonl", tmp_path / "r.html"
    out.write_text(KEEP)
    rep.write_text("KEEPR\n")
    r = CliRunner().invoke(main, ["audit", str(bad), str(empty), "-o", str(out), "--report", str(rep), *extra])
    text = one_line(r.output)
    assert r.exit_code == 2, r.output
    assert f"skipped: {bad}: invalid JSON at line 1 column 2" in text
    assert f"skipped: {empty}: run has no messages" in text
    assert (f"error: no trajectory could be loaded from {bad}, {empty} (each skipped input is named above): "
            "nothing was written") in text
    assert out.read_text() == KEEP and rep.read_text() == "KEEPR\n"
    # a good OpenAI run read as another format does not fit it: skipped too; no output file is created
    other = write_json(tmp_path / "other.json", good_run("o1"))
    fresh, fresh_rep = tmp_path / "fresh.out", tmp_path / "fresh.md"
    r = CliRunner().invoke(main, ["audit", str(bad), str(other), "--input-format", "tau", "-o", str(fresh),
                                  "--report", str(fresh_rep), *extra])
    assert r.exit_code == 2, r.output
    assert f"skipped: {other}: not in the 'tau' format" in one_line(r.output)
    assert f"error: no trajectory could be loaded from {bad}, {other}" in one_line(r.output)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json", "empty.json", "other.json", "out.jsonl", "r.html"]


def test_audit_where_some_run_loads_writes_it_and_exits_1(tmp_path):
    # one good run beside an unreadable file: the good one is diagnosed and written, exit 1 (a run skipped)
    bad = tmp_path / "bad.json"
    bad.write_text("{bad")
    good = write_json(tmp_path / "good.json", good_run("g1"))
    out = tmp_path / "out.jsonl"
    out.write_text(KEEP)
    r = CliRunner().invoke(main, ["audit", str(bad), str(good), "-o", str(out), "-q"])
    assert r.exit_code == 1, r.output
    assert f"skipped: {bad}: invalid JSON" in one_line(r.output) and "error:" not in r.output
    assert [d["trajectory_id"] for d in diagnoses(out)] == ["g1"]


@pytest.mark.parametrize("extra", [[], ["--format", "sarif"], ["--resume"]])
def test_audit_where_runs_load_but_none_is_audited_leaves_the_outputs_alone(tmp_path, llm_server, extra):
    # every run loads, but the LLM endpoint answers nothing usable: each run is skipped (named), then
    # exit 1 (the runs failed, not the options) and the existing -o/--report files are kept, none is
    # created where none was (they were replaced by empty ones: "no run could be audited")
    llm_server.responder = lambda request: "not a diagnosis at all"
    runs = write_json(tmp_path / "chat.json", [good_run("a"), good_run("b")])
    out, rep = tmp_path / "keep.jsonl", tmp_path / "keep.md"
    out.write_text(KEEP)
    rep.write_text("KEEPR\n")
    llm = ["-s", "all-at-once", "--base-url", llm_server.url, "--model", "m", "--no-cache"]
    env = {"TRAJAUDIT_LLM_CONFIG": ""}
    r = CliRunner().invoke(main, ["audit", str(runs), *llm, "-o", str(out), "--report", str(rep), *extra], env=env)
    text = one_line(r.output)
    assert r.exit_code == 1, r.output
    assert text.count("skipped:") == 2 and "Traceback" not in text
    assert "error: no run could be audited (2 skipped, each named above): nothing was written" in text
    assert out.read_text() == KEEP and rep.read_text() == "KEEPR\n"
    fresh, fresh_rep = tmp_path / "fresh.out", tmp_path / "fresh.md"
    r = CliRunner().invoke(main, ["audit", str(runs), *llm, "-q", "-o", str(fresh), "--report", str(fresh_rep),
                                  *extra], env=env)
    assert r.exit_code == 1 and "nothing was written" in one_line(r.output)  # -q keeps the error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chat.json", "keep.jsonl", "keep.md"]


def test_a_cluster_batch_whose_tasks_all_died_is_not_called_unreadable():
    # a shard whose task kept killing its workers is a worker problem, not an unreadable input: the
    # audit goes on to its outputs and exit 1 as before (only input problems stop it with exit 2)
    from trajaudit.cli.audit import _Kept, _stop_if_nothing_loaded
    from trajaudit.engine.run.batch import BatchResult
    from trajaudit.engine.run.cluster import _lost
    from trajaudit.engine.trace.shards import Shard

    lost = _lost([Shard("a.jsonl", "a.jsonl", "jsonl", first=3, whole=False)], RuntimeError("KilledWorker"))
    assert [(p.file, p.record, p.stage) for p in lost.problems] == [("a.jsonl", 3, "worker")]
    assert _stop_if_nothing_loaded(_Kept(None, title="t"), BatchResult(problems=lost.problems)) is None


# `-o -` means stdout wherever stdout can take the output (check, rules from-tools, eval's report, as
# audit's); it made a file literally named '-' (`check 13.json --format sarif -o - -q`). Where stdout
# cannot take it (eval --save-pred beside the report on stdout, judge fit's weights, serve's appended
# diagnoses) '-' is refused (exit 2) instead of creating that file.

def test_o_dash_is_stdout_for_check_rules_from_tools_and_eval(files, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli("check", files["run"], "--format", "sarif", "-o", "-", "-q")
    assert r.exit_code in (0, 1), r.output
    assert json.loads(r.stdout)["version"] == "2.1.0"
    r = cli("check", files["run"], "--format", "json", "-o", "-", "-q")
    assert isinstance(json.loads(r.stdout), list)
    r = cli("rules", "from-tools", files["tools"], "-o", "-")
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("# Synthesized by `trajaudit rules from-tools tools.json`") and "rules:" in r.stdout
    assert "written to" not in r.stderr
    r = cli("eval", files["run"], "--gold", files["gold"], "-s", "first", "--format", "json", "-o", "-")
    assert r.exit_code in (0, 1), r.output
    assert json.loads(r.stdout)["strategies"] == ["first"]
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("args, option, why", [
    (["eval", "{run}", "--gold", "{gold}", "-s", "first", "--save-pred", "-"], "--save-pred",
     "the diagnoses are written to a file (stdout carries the report), not to stdout"),
    (["judge", "fit", "{run}", "--gold", "{gold}", "-o", "-"], "-o/--output", "the weights are written to a file"),
    (["serve", "--otlp", "1", "-o", "-"], "-o/--output", "the diagnoses are appended to a file"),
])
def test_o_dash_is_refused_where_stdout_cannot_take_the_output(files, tmp_path, monkeypatch, args, option, why):
    monkeypatch.chdir(tmp_path)
    r = cli(*[a.format(**files) for a in args])
    assert r.exit_code == 2, r.output
    assert f"error: {option} '-': {why}" in one_line(r.stderr)
    assert "./- for a file named '-'" in one_line(r.stderr)
    assert not (tmp_path / "-").exists()
