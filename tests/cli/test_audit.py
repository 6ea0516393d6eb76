"""`trajaudit audit`: batches, JSONL output valid against the diagnosis schema, reports, bad input."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest
import report_page
from cli_kit import NEVER_FIRING_PACK, TIMEOUT_PACK
from click.testing import CliRunner
from hostile_kit import cli, diagnoses, good_run, one_line, snapshot, write_json

from trajaudit.cli import main
from trajaudit.engine.schema import schema_errors


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])




def _deep_list(tmp_path: Path, name: str = "deep.json") -> Path:
    p = tmp_path / name
    p.write_text("[" * 5000 + "]" * 5000)
    return p


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def run_offline(*args):
    """``run`` with the LLM environment variables emptied (no endpoint configured by the machine)."""
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, env=NO_LLM_ENV)


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
    rows = report_page.runs(page)
    assert [r["step"] for r in rows] == [d["critical_step"] for d in diags] and rows[0]["id"] == "2"
    assert all(r["basis"] == "fallback" for r in rows)  # a baseline's step is a guess, marked as such
    assert len(report_page.details(page)) == 29
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//|<link|@import|url\(""", page)  # no network assets
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
    keep = tmp_path / "d.jsonl"
    keep.write_text("kept\n")
    r = CliRunner().invoke(main, ["audit", str(tmp_path / "nothing-here"), "--strategy", "first", "-o", str(keep)])
    assert r.exit_code == 2 and "no such file or folder" in r.output  # a usage error, before anything is written
    assert keep.read_text() == "kept\n"


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


ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "data" / "tau_retail_sample.json"  # 3 tau runs, the first with id "2"
NO_LLM_ENV = {"TRAJAUDIT_BASE_URL": "", "TRAJAUDIT_MODEL": "", "TRAJAUDIT_LLM_CONFIG": ""}


def closed_port_url() -> str:
    """An http://127.0.0.1 URL on a port nothing listens on (bound, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/v1"


PACK = """pack: inner
rules:
  - id: mention
    type: PROTOCOL
    severity: {sev}
    targets: [instruction_adherence_failure]
    guard: step.kind == "agent"
    assert: 'content !~ "(?i)refund"'
"""


@pytest.fixture()
def two_packs(tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(PACK.format(sev="critical"))
    b.write_text(PACK.format(sev="info"))
    return a, b


def test_audit_refuses_a_rule_id_defined_by_two_packs_like_check(two_packs, tmp_path):
    a, b = two_packs
    out = tmp_path / "d.jsonl"
    for first, second in ((a, b), (b, a)):
        for cmd in (("audit", SAMPLE, "-o", out, "-q"), ("check", SAMPLE)):
            r = run_offline(*cmd, "--rules", first, "--rules", second)
            assert r.exit_code == 2, (cmd, r.output)
            assert f"error: rule id inner.mention is defined by both {first} and {second}" \
                in r.stderr.replace("\n", "")
    assert not out.exists()  # stopped before any run
    r = run_offline("check", SAMPLE, "--rules", a, "--rules", a)  # the same pack twice is one pack
    assert r.exit_code == 1 and "3 run(s), 1 rule(s)" in r.stderr


def test_audit_refuses_a_user_pack_redefining_a_default_packs_rule(tmp_path):
    generic = tmp_path / "g.yaml"
    generic.write_text(PACK.replace("pack: inner", "pack: generic.system").replace("id: mention", "id: tool-traceback")
                       .format(sev="info"))
    r = run_offline("audit", SAMPLE, "--rules", generic, "-o", tmp_path / "d.jsonl", "-q")
    assert r.exit_code == 2
    err = r.stderr.replace("\n", "")
    assert f"rule id generic.system.tool-traceback is defined by both generic and {generic}" in err
    assert "generic is a default pack: turn the default packs off (--no-default-packs" in err
    assert run_offline("audit", SAMPLE, "--rules", generic, "--no-default-packs", "-o", tmp_path / "d.jsonl",
               "-q").exit_code == 0
    # a shipped domain pack (applied to runs calling its tools) counts too
    domain = tmp_path / "t.yaml"
    domain.write_text(PACK.replace("pack: inner", "pack: tau_retail").replace("id: mention", "id: explicit-yes-before-write")
                      .format(sev="info"))
    r = run_offline("audit", SAMPLE, "--rules", domain, "-o", tmp_path / "d.jsonl", "-q")
    assert r.exit_code == 2
    assert f"rule id tau_retail.explicit-yes-before-write is defined by both {domain} and tau_retail" \
        in r.stderr.replace("\n", "")


@pytest.mark.parametrize("cached", [False, True])
def test_audit_with_an_endpoint_refusing_connections_stops_after_the_first_run(tmp_path, cached):
    url = closed_port_url()
    cfg = tmp_path / "llm.yaml"
    cfg.write_text(f"llm:\n  base_url: {url}\n  model: m\n  max_retries: 1\n  timeout: 2\n")
    out = tmp_path / "d.jsonl"
    cache = ["--cache", str(tmp_path / "c.sqlite3")] if cached else ["--no-cache"]
    r = CliRunner().invoke(main, ["audit", str(SAMPLE), "--strategy", "all-at-once", "--llm-config", str(cfg),
                                  *cache, "-o", str(out)], env=NO_LLM_ENV, catch_exceptions=False)
    assert r.exit_code == 2 and "Traceback" not in r.output
    err = r.stderr.replace("\n", "")
    assert err.count("cannot reach") == 1  # one message, not one per run (3 runs)
    assert f"all-at-once: cannot reach {url} (after 1 retries): [Errno 111] Connection refused" in err
    assert "the batch was stopped" in err and "skipped" not in err
    said = ("answers already received are in the LLM cache" if cached
            else "the LLM cache is off (--no-cache): a re-run asks for every answer again")
    assert said in one_line(r.stderr) and ("LLM cache (" in one_line(r.stderr)) == cached
    assert not out.exists()


def test_a_deep_file_in_a_folder_is_skipped_and_the_batch_goes_on(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    _deep_list(folder, "a_deep.json")
    (folder / "b.json").write_text(SAMPLE.read_text())
    out = tmp_path / "d.jsonl"
    r = run("audit", folder, "-o", out)
    assert r.exit_code == 1
    assert f"skipped: {folder / 'a_deep.json'}: nested too deeply" in one_line(r.stderr)
    assert len(out.read_text().splitlines()) == 3


def test_audit_summary_names_it(tmp_path):
    run = write_json(tmp_path / "run.json", good_run("a"))
    pack = tmp_path / "p.yaml"
    pack.write_text(NEVER_FIRING_PACK)
    before = snapshot(tmp_path)
    r = cli("audit", run, "--rules", pack, "--no-default-packs", "-o", tmp_path / "d.jsonl")
    assert r.exit_code == 0, r.output
    assert [d["trajectory_id"] for d in diagnoses(tmp_path / "d.jsonl")] == ["a"]
    assert {k: v for k, v in snapshot(tmp_path).items() if not k.endswith("d.jsonl")} == before
    assert "note: 1 rule(s) never applied on these 1 run(s) (their guard never held): mine.never" in one_line(r.stderr)


def test_unknown_taxonomy_is_a_usage_error(tmp_path, tau_file):
    r = invoke("audit", tau_file, "--taxonomy", "bogus", "-o", tmp_path / "d.jsonl")
    assert r.exit_code == 2 and "bogus" in r.output


def test_a_taxonomy_no_applied_rule_targets_is_warned_about_for_the_offline_strategy(tmp_path, tau_file):
    r = invoke("audit", tau_file, "--taxonomy", "searchauditor", "-q", "-o", tmp_path / "d.jsonl")
    assert r.exit_code == 0, r.output
    assert "warning: --taxonomy searchauditor: no rule applied targets a searchauditor category" in one_line(r.output)
    assert {d["category"] for d in diagnoses(tmp_path / "d.jsonl")} == {"inconclusive"}
    pack = tmp_path / "search.yaml"
    pack.write_text("pack: search\nrules:\n  - id: any-agent\n    type: PROTOCOL\n    targets: [unsupported_answer]\n"
                    "    guard: step.kind == 'agent'\n    assert: \"true\"\n")
    quiet = [invoke("audit", tau_file, *extra, "-q", "-o", tmp_path / f"q{i}.jsonl")
             for i, extra in enumerate([("--taxonomy", "searchauditor", "--rules", pack), ("--taxonomy", "agentrx"),
                                        ("--taxonomy", "searchauditor", "-s", "first")])]
    assert [(q.exit_code, "warning" in q.output) for q in quiet] == [(0, False)] * 3


def test_progress_bar_on_a_terminal_and_no_rich_progress_import_without_one(tmp_path, monkeypatch):
    """The bar is drawn when stderr is a terminal; without one (``-q``, a pipe) ``audit`` never imports
    ``rich.progress`` (a fresh process's start-up, issue 22)."""
    import io
    import os
    import subprocess
    import sys

    from rich.console import Console

    import trajaudit.cli.audit as audit_cmd

    runs = write_json(tmp_path / "runs.json", [good_run(f"r{i}") for i in range(3)])
    seen = io.StringIO()
    monkeypatch.setattr(audit_cmd, "console", lambda err=False: Console(file=seen, force_terminal=True, width=100))
    res = run_offline("audit", runs, "-o", tmp_path / "d.jsonl")
    assert res.exit_code == 0, res.output
    assert "auditing" in seen.getvalue() and "3/3" in seen.getvalue()
    assert len((tmp_path / "d.jsonl").read_text().splitlines()) == 3
    code = ("import sys; from trajaudit.cli import main\n"
            "try:\n    main(['audit', sys.argv[1], '-q', '-o', sys.argv[2]])\nexcept SystemExit:\n    pass\n"
            "print('rich.progress' in sys.modules, 'trajaudit.cli.check' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(runs), str(tmp_path / "e.jsonl")], capture_output=True,
                         text=True, cwd=Path(__file__).resolve().parents[2], env={**os.environ, **NO_LLM_ENV, "PYTHONPATH": "."})
    assert out.stdout.split()[-2:] == ["False", "False"], out.stdout + out.stderr
    assert (tmp_path / "e.jsonl").read_text() == (tmp_path / "d.jsonl").read_text()


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_stops_audit_with_130_and_no_traceback(tmp_path, jobs):
    # SIGINT to the whole process group, as a terminal's Ctrl-C: the workers of --jobs leave it to the
    # parent (no traceback per worker), the command says "interrupted" and exits 130 (not click's
    # "Aborted!" with exit 1, audit's "some run was skipped"); the old -o file is kept
    import os
    import signal
    import subprocess
    import sys
    import time

    from conftest import TAU

    runs = json.loads((TAU / "trajectories.json").read_text())
    big = tmp_path / "big.jsonl"
    big.write_text("".join(json.dumps({**t, "id": f"{t.get('id', 'r')}-{k}"}) + "\n" for k in range(40) for t in runs))
    out = tmp_path / "out.jsonl"
    out.write_text("KEEP\n")
    # SIGINT as the default action in the child: a shell's background job (a CI step, `pytest &`)
    # starts with it ignored, and Python then keeps it ignored (the batch ran to the end, exit 0)
    p = subprocess.Popen([sys.executable, "-m", "trajaudit", "audit", str(big), "-o", str(out), "--jobs", jobs, "-q"],
                         stderr=subprocess.PIPE, text=True, start_new_session=True, cwd=ROOT,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(2.5)
    assert p.poll() is None, "the batch ended before the interrupt: make it larger"
    os.killpg(p.pid, signal.SIGINT)
    err = p.communicate(timeout=60)[1]
    assert p.returncode == 130, err
    assert err.strip() == "interrupted"
    assert out.read_text() == "KEEP\n"


def test_summary_warns_when_runs_ran_out_of_rule_time(tmp_path):
    # --run-timeout cut the rule evaluation of every run: the diagnoses are marked degraded, and the
    # summary says so (it said "N run(s) audited, 0 skipped" and nothing else)
    path = write_json(tmp_path / "runs.json", [good_run("r1"), good_run("r2", item="X2")])
    cut = CliRunner().invoke(main, ["audit", str(path), "-o", str(tmp_path / "a.jsonl"), "--run-timeout", "0.000001"])
    assert cut.exit_code == 0, cut.output
    assert all(json.loads(line)["metadata"].get("degraded") for line in (tmp_path / "a.jsonl").read_text().splitlines())
    assert "warning: 2 run(s) ran out of rule-evaluation time (--run-timeout)" in " ".join(cut.output.split())
    whole = CliRunner().invoke(main, ["audit", str(path), "-o", str(tmp_path / "b.jsonl")])
    assert whole.exit_code == 0 and "rule-evaluation time" not in whole.output


# Fresh-user pass: `audit -q` dropped that warning with the summary (it was only in the JSONL's
# metadata.degraded). -q hides the progress bar and the summary table, not a warning that the results
# are incomplete; the exit code stays 0 (the diagnoses were made, marked degraded).

def test_quiet_audit_still_warns_when_runs_ran_out_of_rule_time(tmp_path):
    path = write_json(tmp_path / "runs.json", [good_run("r1"), good_run("r2", item="X2")])
    cut = invoke("audit", path, "-o", tmp_path / "a.jsonl", "--run-timeout", "0.000001", "-q")
    assert cut.exit_code == 0, cut.output
    assert one_line(cut.stderr) == ("warning: 2 run(s) ran out of rule-evaluation time (--run-timeout): the checks "
                                    "left were 'unknown', so their diagnoses rest on partial evidence "
                                    "(metadata.degraded)")
    assert invoke("audit", path, "-o", tmp_path / "b.jsonl", "-q").stderr == ""


# Fresh-user pass: under the time budget the summary's "rule(s) never applied" note listed 1 rule
# where 3 never applied (the budget's 'unknown' at a cut rule's first candidate step counted as the
# rule having applied). Now the rules the budget left unevaluated are named apart.

def test_audit_summary_names_the_rules_the_time_budget_left_unevaluated(tmp_path):
    pack = tmp_path / "p4.yaml"
    pack.write_text(TIMEOUT_PACK)
    path = write_json(tmp_path / "runs.json", [good_run("r1"), good_run("r2", item="X2")])
    args = ("audit", path, "--rules", pack, "--no-default-packs", "-o", tmp_path / "a.jsonl")
    whole = one_line(invoke(*args).stderr)
    assert ("note: 3 rule(s) never applied on these 2 run(s) (their guard never held): p4.guard-false, "
            "p4.guard-false-too, p4.no-such-tool") in whole
    cut = invoke(*args, "--run-timeout", "0.000001")
    assert cut.exit_code == 0, cut.output
    said = one_line(cut.stderr)
    assert "note: 1 rule(s) never applied on these 2 run(s) (their guard never held): p4.no-such-tool" in said
    assert ("note: 3 rule(s) not evaluated on these 2 run(s) (rule evaluation ran out of time first, --run-timeout; "
            "whether they apply is not known): p4.fires, p4.guard-false, p4.guard-false-too") in said


# Hostile-user pass: `audit --rules BROKEN.yaml`, a pack whose rules compile but cannot be evaluated on
# the runs (a division by zero, len() of a step range), said nothing at all: the diagnoses rested on
# rules that gave no verdict, and only `check` told. Now a warning names the rules, the checks and the
# runs (with -q too); the diagnoses, the exit code and stdout are what they were.

def test_audit_warns_when_a_rule_could_not_be_evaluated(tmp_path):
    from test_check import BROKEN_PACK

    pack = tmp_path / "bad.yaml"
    pack.write_text(BROKEN_PACK)
    path = write_json(tmp_path / "runs.json", [good_run("r1"), good_run("r2", item="X2")])
    warning = ("warning: 14 check(s) could not be evaluated in 2 of 2 run(s) (bad.div at 6 step(s), first reason: "
               "evaluation error: division by zero (10 / 0); bad.range at 6 step(s), first reason: evaluation "
               "error: len() of a StepRange; bad.sometimes at 2 step(s), first reason: evaluation error: division "
               "by zero (10 / 0)): those rules gave no verdict there, so the diagnoses rest on partial evidence "
               "(`trajaudit check` lists each such check)")
    loud = invoke("audit", path, "--rules", pack, "-o", tmp_path / "a.jsonl")
    assert loud.exit_code == 0, loud.output
    assert warning in one_line(loud.stderr)
    quiet = invoke("audit", path, "--rules", pack, "-o", "-", "-q")
    assert quiet.exit_code == 0 and one_line(quiet.stderr) == warning
    assert quiet.stdout == (tmp_path / "a.jsonl").read_text()  # stdout: the diagnoses alone
    assert [d["trajectory_id"] for d in diagnoses(tmp_path / "a.jsonl")] == ["r1", "r2"]
    fine = invoke("audit", path, "-o", tmp_path / "b.jsonl", "-q")
    assert fine.exit_code == 0 and fine.stderr == ""  # no evaluation error: no warning
