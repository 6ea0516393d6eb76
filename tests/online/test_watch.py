"""``trajaudit watch``: a growing JSONL file followed like tail -f; violations printed as settled (issue 20)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from trajaudit.engine.run.monitor import Monitor
from trajaudit.engine.run.pipeline import AuditSpec, build_context
from trajaudit.online.watch import END_MARKER, watch

ROOT = Path(__file__).resolve().parents[2]
RUN = [
    {"role": "system", "content": "You are a retail agent. Authenticate the user before any change."},
    {"role": "user", "content": "Please cancel order #W0000001, yes I confirm, no longer needed."},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "cancel_pending_order", "arguments": json.dumps({"order_id": "#W0000001", "reason": "no longer needed"})}}]},
    {"role": "tool", "tool_call_id": "c1", "name": "cancel_pending_order", "content": '{"order_id": "#W0000001", "status": "cancelled"}'},
    {"role": "assistant", "content": "Your order #W0000001 is cancelled."},
]


def _writer(path: Path, lines: list[str], delay: float, end: str | None) -> threading.Thread:
    def run() -> None:
        with path.open("a", encoding="utf-8") as f:
            for line in lines:
                time.sleep(delay)
                half = len(line) // 2  # a line arrives in two writes: read once its newline is there
                f.write(line[:half])
                f.flush()
                time.sleep(delay / 2)
                f.write(line[half:] + "\n")
                f.flush()
            if end == "marker":
                f.write(json.dumps(END_MARKER) + "\n")
                f.flush()
        if end == "remove":
            time.sleep(delay)
            os.remove(path)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _cli(*args: str, timeout: float = 120) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-m", "trajaudit", "watch", *args], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert p.stderr.readline().startswith("watching ")  # the file is open: the writer may start
    return p


def test_watch_cli_json_until_end_marker(tmp_path):
    f = tmp_path / "run.jsonl"
    f.write_text("")
    p = _cli(str(f), "--format", "json", "--poll", "0.05")
    t = _writer(f, [json.dumps(m) for m in RUN], 0.15, "marker")
    out, err = p.communicate(timeout=180)
    t.join()
    rows = [json.loads(x) for x in out.splitlines()]
    viol = [r for r in rows if r["event"] == "violation"]
    assert any(r["rule_id"] == "tau_retail.authenticate-before-write" and r["step"] == 2 for r in viol)
    assert rows[-1]["event"] == "end" and rows[-1]["reason"] == "end-marker" and rows[-1]["steps"] == 5
    assert p.returncode == 1, err  # an error-level violation: check's exit code


def test_watch_cli_file_removed_and_bad_line(tmp_path):
    f = tmp_path / "run.jsonl"
    f.write_text("")
    p = _cli(str(f), "--format", "json", "--poll", "0.05", "--fail-on", "critical")
    lines = [json.dumps(RUN[1]), "{not json", json.dumps({"role": "assistant", "content": "Hello, how can I help?"})]
    t = _writer(f, lines, 0.1, "remove")
    out, err = p.communicate(timeout=180)
    t.join()
    rows = [json.loads(x) for x in out.splitlines()]
    assert any(r["event"] == "skipped" and r["line"] == 2 for r in rows), out + err
    assert "run.jsonl:2: not JSON" in err
    assert rows[-1]["reason"] == "removed" and rows[-1]["steps"] == 2
    assert p.returncode == 1  # a skipped line fails the gate, as in check


def test_watch_skips_malformed_message_lines_and_goes_on(tmp_path):
    """A JSON line whose message is malformed is reported `skipped: FILE:LINE: why`; the rest of the run
    is read and checked as if the line were absent."""
    f = tmp_path / "run.jsonl"
    bad = [{"role": 5, "content": "x"}, {"role": "user", "content": {"text": "x"}},
           {"role": "assistant", "content": None, "tool_calls": {"id": "c9"}},
           {"message": {"role": "assistant", "content": None, "tool_calls": [{"id": "c9", "function": {"arguments": "{}"}}]}}]
    lines = [json.dumps(RUN[0]), json.dumps(RUN[1]), *map(json.dumps, bad), *map(json.dumps, RUN[2:])]
    f.write_text("\n".join(lines) + "\n" + json.dumps(END_MARKER) + "\n")
    r = subprocess.run([sys.executable, "-m", "trajaudit", "watch", str(f), "--format", "json"], cwd=ROOT,
                       capture_output=True, text=True, timeout=180)
    assert f"skipped: {f}:3: message 2: 'role' must be a string, got int" in r.stderr, r.stderr
    assert f"skipped: {f}:4: message 2: 'content' must be a string, null or a list of parts, got dict" in r.stderr
    assert f"skipped: {f}:5: message 2: 'tool_calls' must be a list, got dict" in r.stderr
    assert f"skipped: {f}:6: message 2: tool_calls[0] has no function name" in r.stderr
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["line"] for x in rows if x["event"] == "skipped"] == [3, 4, 5, 6]
    assert rows[-1]["reason"] == "end-marker" and rows[-1]["steps"] == 5 and rows[-1]["skipped_lines"] == 4
    viol = [x for x in rows if x["event"] == "violation"]
    assert any(x["rule_id"] == "tau_retail.authenticate-before-write" and x["step"] == 2 for x in viol)
    assert r.returncode == 1


def test_watch_until_idle_clean_run_exits_0(tmp_path):
    f = tmp_path / "run.jsonl"
    f.write_text(json.dumps({"role": "user", "content": "What is 2+2?"}) + "\n"
                 + json.dumps({"message": {"role": "assistant", "content": "4"}, "ts": 1}) + "\n")
    r = subprocess.run([sys.executable, "-m", "trajaudit", "watch", str(f), "--until-idle", "0.3"], cwd=ROOT,
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "run ended (idle) after 2 step(s): 0 violation(s)" in r.stderr


def test_watch_equals_batch_and_stops_on_alarm(tmp_path, tau_runs):
    """The API: records settled while following equal the batch log; --stop-on-alarm stops early."""
    t = max(tau_runs.values(), key=lambda t: len(t.steps))
    f = tmp_path / "tau.jsonl"
    f.write_text("".join(json.dumps({"step": s.to_dict()}) + "\n" for s in t.steps) + json.dumps(END_MARKER) + "\n")
    ctx = build_context(AuditSpec())
    m = Monitor(context=ctx, run_id=t.id, task=t.task, source=t.source)
    res = watch(f, m, poll=0.01)
    assert res.reason == "end-marker" and not res.skipped
    from trajaudit.engine.run.evidence import gather
    assert m.log.to_dict() == gather(t, ctx).log.to_dict()
    m2 = Monitor(context=ctx, run_id=t.id, task=t.task, source=t.source, alarm_threshold=0.0)
    res2 = watch(f, m2, poll=0.01, stop_on_alarm=True)
    if res2.reason == "alarm":
        assert m2.alarm is not None and len(m2.steps) <= len(t.steps)
        assert m2.diagnosis().metadata["basis"] == "finding"


def test_watch_cli_waits_for_a_file_not_created_yet(tmp_path):
    """Like `tail -F`: watch starts before the agent writes its log, says so on stderr, and reads the
    file from its first line once it appears."""
    f = tmp_path / "later.jsonl"
    p = _cli(str(f), "--format", "json", "--poll", "0.05", "--until-idle", "60")
    assert p.stderr.readline().startswith(f"{f} does not exist yet: waiting for it to be created (at most 60 s")
    assert not f.exists()
    t = _writer(f, [json.dumps(m) for m in RUN], 0.1, "marker")  # creates the file (mode "a")
    out, err = p.communicate(timeout=180)
    t.join()
    rows = [json.loads(x) for x in out.splitlines()]
    assert rows[-1]["event"] == "end" and rows[-1]["reason"] == "end-marker" and rows[-1]["steps"] == 5, out + err
    assert any(r["event"] == "violation" and r["rule_id"] == "tau_retail.authenticate-before-write" and r["step"] == 2
               for r in rows)
    assert p.returncode == 1, err


def test_watch_api_waits_for_the_file(tmp_path):
    """The API: on_wait is called once, then the lines written to the new file are all read."""
    f = tmp_path / "api.jsonl"
    waits: list[float] = []
    ctx = build_context(AuditSpec())
    created = threading.Event()

    def create_after_wait() -> None:
        created.wait(30)
        f.write_text("".join(json.dumps(m) + "\n" for m in RUN) + json.dumps(END_MARKER) + "\n")

    t = threading.Thread(target=create_after_wait, daemon=True)
    t.start()

    def on_wait() -> None:
        waits.append(time.monotonic())
        created.set()

    m = Monitor(context=ctx, run_id="api")
    res = watch(f, m, until_idle=30, poll=0.02, on_wait=on_wait)
    t.join()
    assert len(waits) == 1 and res.reason == "end-marker" and len(m.steps) == len(RUN) and not res.skipped
    batch = Monitor(context=ctx, run_id="api")
    batch.add_history(RUN)
    batch.close()
    assert m.log.to_dict() == batch.log.to_dict()


def test_watch_file_never_created_ends_with_until_idle(tmp_path):
    f = tmp_path / "never.jsonl"
    r = subprocess.run([sys.executable, "-m", "trajaudit", "watch", str(f), "--until-idle", "0.3", "--format", "json"],
                       cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert json.loads(r.stdout.splitlines()[-1])["reason"] == "missing"
    assert f"{f} was never created: nothing was checked" in r.stderr
    assert r.returncode == 1


def test_watch_missing_directory_is_a_usage_error(tmp_path):
    f = tmp_path / "no-such-dir" / "run.jsonl"
    r = subprocess.run([sys.executable, "-m", "trajaudit", "watch", str(f)], cwd=ROOT, capture_output=True, text=True,
                       timeout=180, env={**os.environ, "COLUMNS": "1000"})  # the long path on one line
    assert r.returncode == 2, r.stderr
    assert f"cannot watch {f}: its directory {f.parent} does not exist" in r.stderr
    assert "watching" not in r.stderr


def test_watch_table_prints_styled_labels_not_markup_tags(tmp_path):
    """The default (table) output: `FAIL step N RULE (severity) message`, the style tags rendered,
    not printed as text; a rule message with brackets is printed literally."""
    f = tmp_path / "run.jsonl"
    f.write_text("".join(json.dumps(m) + "\n" for m in RUN) + json.dumps(END_MARKER) + "\n")
    r = subprocess.run([sys.executable, "-m", "trajaudit", "watch", str(f)], cwd=ROOT, capture_output=True,
                       text=True, timeout=180)
    assert r.returncode == 1, r.stderr
    line = next(x for x in r.stdout.splitlines() if "tau_retail.authenticate-before-write" in x)
    assert line.startswith("FAIL step    2  tau_retail.authenticate-before-write  (error)")
    assert "[bold" not in r.stdout and "[/]" not in r.stdout and "[dim]" not in r.stdout


def test_watch_option_ranges_are_checked(tmp_path):
    f = tmp_path / "run.jsonl"
    f.write_text("")
    for args in (["--poll", "-1"], ["--poll", "0"], ["--until-idle", "-3"], ["--alarm-threshold", "5"]):
        r = subprocess.run([sys.executable, "-m", "trajaudit", "watch", str(f), *args], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 2, (args, r.stderr)
        assert f"Invalid value for '{args[0]}'" in r.stderr and "watching" not in r.stderr


# -- fresh-user defects (issue 20): Ctrl-C, a run cut by the alarm, FIFOs, truncation --------------------------

def _call(cid: str, name: str, args: dict) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [{"id": cid, "type": "function", "function": {
        "name": name, "arguments": json.dumps(args)}}]}


def _out(cid: str, name: str, content: str) -> dict:
    return {"role": "tool", "tool_call_id": cid, "name": name, "content": content}


#: a failed lookup (step 3 errors), then a write before authentication (the alarm, at threshold 0, is raised
#: at step 3); the run then recovers: the lookup succeeds at step 7 and the answer closes the run
RECOVERS = [RUN[0], RUN[1],
            _call("c0", "get_order_details", {"order_id": "W0000001"}),
            _out("c0", "get_order_details", "Error: order not found"),
            _call("c1", "cancel_pending_order", {"order_id": "#W0000001", "reason": "no longer needed"}),
            _out("c1", "cancel_pending_order", '{"order_id": "#W0000001", "status": "cancelled"}'),
            _call("c2", "get_order_details", {"order_id": "#W0000001"}),
            _out("c2", "get_order_details", '{"order_id": "#W0000001", "status": "cancelled"}'),
            {"role": "assistant", "content": "Your order #W0000001 is cancelled."}]
#: end-of-run rules that fail on RECOVERS cut at step 3, and hold on the whole run
CUT_ONLY = {"generic.protocol.run-ends-after-failed-call", "generic.protocol.failed-call-unrecovered"}


def _finish(p: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """``p.communicate`` that kills the watch when it does not end in time (then fails the test)."""
    try:
        return p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise


def _read_rest(p: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """The rest of ``p``'s output through its own pipe objects (``communicate`` would lose what an
    earlier ``readline`` buffered); the watch is killed if it does not end in time."""
    timer = threading.Timer(timeout, p.kill)
    timer.start()
    try:
        out, err = p.stdout.read(), p.stderr.read()
        p.wait()
    finally:
        timer.cancel()
    assert p.returncode != -signal.SIGKILL, "the watch did not end"
    return out, err


def _rows(out: str) -> list[dict]:
    return [json.loads(x) for x in out.splitlines()]


def test_watch_ctrl_c_prints_the_summary_and_exits_130(tmp_path):
    """SIGINT (Ctrl-C) mid-run: the violations settled so far were printed; the last object is
    {"event": "end", "reason": "interrupted"}, stderr says the end-of-run rules were not settled, exit 130
    (it used to end in click's "Aborted!", exit 1, with no end event)."""
    f = tmp_path / "run.jsonl"
    f.write_text("".join(json.dumps(m) + "\n" for m in RUN[:3]))  # ends on a call not answered yet
    p = _cli(str(f), "--format", "json", "--poll", "0.05")
    first = json.loads(p.stdout.readline())  # the write before authentication, settled at step 2
    assert first["event"] == "violation" and first["step"] == 2
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    out, err = _read_rest(p, 60)
    rows = [first, *_rows(out)]
    assert rows[-1] == {"event": "end", "reason": "interrupted", "steps": 3,
                        "violations": sum(r["event"] == "violation" for r in rows),
                        "at_or_above": 1, "skipped_lines": 0, "after_stop": 0}, out + err
    assert "interrupted before the run's end: the end-of-run rules were not settled" in err.replace("\n", " ")
    assert "call-has-output" not in out  # the call left unanswered by the interruption is not a violation
    assert "Aborted" not in err and "Traceback" not in err
    assert p.returncode == 130


def test_watch_ctrl_c_table_format(tmp_path):
    f = tmp_path / "run.jsonl"
    f.write_text(json.dumps(RUN[1]) + "\n")
    p = _cli(str(f), "--poll", "0.05")
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    _, err = _finish(p, 60)
    assert "run ended (interrupted) after 1 step(s)" in err and p.returncode == 130, err


def test_stop_on_alarm_keeps_the_cut_runs_end_of_run_verdicts_apart(tmp_path):
    """--stop-on-alarm: what closing the cut run settles (a failed last call, because the run was
    stopped right after it) is printed as `after_stop`, not as the agent's violations; the whole
    run has none of those failures."""
    f = tmp_path / "run.jsonl"
    f.write_text("".join(json.dumps(m) + "\n" for m in RECOVERS) + json.dumps(END_MARKER) + "\n")
    r = subprocess.run([sys.executable, "-m", "trajaudit", "watch", str(f), "--format", "json", "--stop-on-alarm",
                        "--alarm-threshold", "0"], cwd=ROOT, capture_output=True, text=True, timeout=180)
    rows = _rows(r.stdout)
    alarm = next(x for x in rows if x["event"] == "alarm")
    assert alarm["step"] == 3
    after = [x for x in rows if x["event"] == "after_stop"]
    assert {x["rule_id"] for x in after} == CUT_ONLY and all(x["verdict"] == "fail" for x in after)
    viol = [x for x in rows if x["event"] == "violation"]
    assert not CUT_ONLY & {x["rule_id"] for x in viol}
    end = rows[-1]
    assert end["reason"] == "alarm" and end["steps"] == 4
    assert end["violations"] == len(viol) and end["after_stop"] == 2
    assert "2 end-of-run verdict(s) on the stopped run, not counted" in r.stderr.replace("\n", " ")
    assert r.returncode == 1
    table = subprocess.run([sys.executable, "-m", "trajaudit", "watch", str(f), "--stop-on-alarm", "--alarm-threshold",
                            "0"], cwd=ROOT, capture_output=True, text=True, timeout=180,
                           env={**os.environ, "COLUMNS": "200"})
    labelled = [x for x in table.stdout.splitlines() if x.startswith("after stop step")]
    assert sorted(x.split()[4] for x in labelled) == sorted(CUT_ONLY), table.stdout
    assert not any(x.startswith("FAIL") and any(c in x for c in CUT_ONLY) for x in table.stdout.splitlines())
    whole = subprocess.run([sys.executable, "-m", "trajaudit", "watch", str(f), "--format", "json"], cwd=ROOT,
                           capture_output=True, text=True, timeout=180)
    assert not CUT_ONLY & {x.get("rule_id") for x in _rows(whole.stdout)}  # the agent recovered


def test_watch_api_after_stop(tmp_path):
    f = tmp_path / "run.jsonl"
    f.write_text("".join(json.dumps(m) + "\n" for m in RECOVERS) + json.dumps(END_MARKER) + "\n")
    m = Monitor(context=build_context(AuditSpec()), run_id="cut", alarm_threshold=0.0)
    handed: list = []
    res = watch(f, m, stop_on_alarm=True, poll=0.01, on_records=handed.extend)
    assert res.reason == "alarm" and res.lines == 4 and m.alarm == 3
    assert {r.rule_id for r in res.after_stop if r.verdict == "fail"} == CUT_ONLY
    assert not CUT_ONLY & {r.rule_id for r in res.records if r.verdict == "fail"}
    assert handed == res.records  # on_records never saw the cut run's verdicts
    assert {r.rule_id for r in m.log.records if r.verdict == "fail"} >= CUT_ONLY  # the log of the cut run holds them


def test_watch_fifo_until_idle_with_no_writer(tmp_path):
    """A named pipe nobody writes to: --until-idle ends the run (it used to block in open() forever)."""
    fifo = tmp_path / "run.pipe"
    os.mkfifo(fifo)
    r = subprocess.run([sys.executable, "-m", "trajaudit", "watch", str(fifo), "--until-idle", "0.5", "--format", "json"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)  # (run kills it on timeout)
    assert _rows(r.stdout)[-1]["reason"] == "idle" and r.returncode == 0, r.stderr


def test_watch_fifo_reads_lines_as_written_and_idles_while_the_writer_is_silent(tmp_path):
    """A writer keeps the pipe open and goes quiet: each line is read when written (not once 64 kB or
    the writer's close arrive), and --until-idle ends the run while the writer still holds it open."""
    fifo = tmp_path / "run.pipe"
    os.mkfifo(fifo)
    p = _cli(str(fifo), "--format", "json", "--poll", "0.05", "--until-idle", "1.5")
    done = threading.Event()

    def write() -> None:
        with open(fifo, "w", encoding="utf-8") as w:  # opens once the watch holds the read end
            for m in RUN[:3]:
                w.write(json.dumps(m) + "\n")
                w.flush()
                time.sleep(0.1)
            done.wait(60)  # silent, still open

    t = threading.Thread(target=write, daemon=True)
    t.start()
    try:
        out, err = _finish(p, 40)
    finally:
        done.set()
        t.join(10)
    rows = _rows(out)
    assert rows[-1]["reason"] == "idle" and rows[-1]["steps"] == 3, out + err
    assert any(r["event"] == "violation" and r["rule_id"] == "tau_retail.authenticate-before-write" for r in rows)


def test_watch_stops_when_the_file_is_truncated(tmp_path):
    """Copy-and-truncate rotation (or a rewrite): the file becomes shorter than what was read; the
    watch says so and stops (reason `truncated`, exit 1) rather than read another run's lines as this
    run's; the cut run's end-of-run verdicts are not counted."""
    f = tmp_path / "run.jsonl"
    f.write_text("".join(json.dumps(m) + "\n" for m in RECOVERS[:4]))
    p = _cli(str(f), "--format", "json", "--poll", "0.05")
    time.sleep(1.5)  # the four lines are read
    f.write_text(json.dumps(RUN[1]) + "\n")  # truncated and rewritten, shorter
    out, err = _finish(p, 60)
    rows = _rows(out)
    end = rows[-1]
    assert end["event"] == "end" and end["reason"] == "truncated" and end["steps"] == 4, out + err
    assert f"{f} was truncated after line 4 (log rotation or a rewrite): the watch stops here" in err, err
    assert not CUT_ONLY & {r.get("rule_id") for r in rows if r["event"] == "violation"}
    assert {r["rule_id"] for r in rows if r["event"] == "after_stop"} == CUT_ONLY
    assert p.returncode == 1


def test_ir_step_without_index_names_file_line_step_and_field(tmp_path):
    """An IR step lacking `index`: watch names the file, the line, the step it would be and the missing
    field, in the batch loader's words (it used to say `not an IR step: 'index'`); the batch loader
    names the file, the step's position and the field for the same fault in an IR document."""
    from trajaudit import load_many

    m = Monitor(context=build_context(AuditSpec()))
    m.add_history(RUN)
    dicts = [s.to_dict() for s in m.steps]
    del dicts[2]["index"]
    f = tmp_path / "steps.jsonl"
    f.write_text("".join(json.dumps({"step": d}) + "\n" for d in dicts) + json.dumps(END_MARKER) + "\n")
    r = subprocess.run([sys.executable, "-m", "trajaudit", "watch", str(f), "--format", "json"], cwd=ROOT,
                       capture_output=True, text=True, timeout=180, env={**os.environ, "COLUMNS": "1000"})
    assert f"skipped: {f}:3: not an IR step (it would be step 2): $.step: 'index' is a required property" \
        in r.stderr, r.stderr
    assert _rows(r.stdout)[-1]["steps"] == 4 and r.returncode == 1
    doc = m.trajectory().to_dict()
    del doc["steps"][2]["index"]
    ir = tmp_path / "run.ir.json"
    ir.write_text(json.dumps(doc))
    res = load_many([ir])
    assert not res.trajectories and len(res.problems) == 1
    said = str(res.problems[0])
    assert str(ir) in said and "$.steps[2]: 'index' is a required property" in said, said


def test_watch_sigterm_ends_like_ctrl_c_with_exit_143(tmp_path):
    """SIGTERM (a supervisor stopping the watch): the same summary as Ctrl-C, reason "terminated", exit 143
    (it used to die silently with the signal, printing no end event)."""
    f = tmp_path / "run.jsonl"
    f.write_text("".join(json.dumps(m) + "\n" for m in RUN[:3]))
    p = _cli(str(f), "--format", "json", "--poll", "0.05")
    first = json.loads(p.stdout.readline())
    assert first["event"] == "violation" and first["step"] == 2
    time.sleep(0.3)
    p.send_signal(signal.SIGTERM)
    out, err = _read_rest(p, 60)
    rows = [first, *_rows(out)]
    assert rows[-1]["event"] == "end" and rows[-1]["reason"] == "terminated" and rows[-1]["steps"] == 3, out + err
    assert "stopped by SIGTERM before the run's end" in err.replace("\n", " ")
    assert "Traceback" not in err
    assert p.returncode == 143


def test_watch_skips_hostile_json_lines_and_goes_on(tmp_path):
    """A line nested 100,000 deep or holding a 5,000-digit integer is skipped with the batch loader's
    limit message and the run goes on (it used to stop the watch: internal error, exit 2, no end event)."""
    f = tmp_path / "run.jsonl"
    deep = "[" * 100_000 + "]" * 100_000
    huge = '{"role": "user", "content": "x", "n": ' + "1" * 5000 + "}"
    lines = [json.dumps(RUN[0]), deep, huge, *map(json.dumps, RUN[1:]), json.dumps(END_MARKER)]
    f.write_text("\n".join(lines) + "\n")
    r = subprocess.run([sys.executable, "-m", "trajaudit", "watch", str(f), "--format", "json"], cwd=ROOT,
                       capture_output=True, text=True, timeout=180)
    assert "internal error" not in r.stderr, r.stderr
    assert f"skipped: {f}:2: not read: nested too deeply (more than 100 levels" in r.stderr, r.stderr
    assert f"skipped: {f}:3: not read: integer literal too long" in r.stderr, r.stderr
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert rows[-1]["event"] == "end" and rows[-1]["reason"] == "end-marker" and rows[-1]["skipped_lines"] == 2
    assert rows[-1]["steps"] == len(RUN)
    assert r.returncode == 1


def test_follow_reads_a_long_line_in_linear_time(tmp_path):
    """A line spanning many 64 KiB reads is joined from its pieces once its newline arrives (the
    buffer used to be re-joined and re-split at every read: quadratic, 22 s for a 60 MB line); the
    text and the line numbers around it are exact, including a last line without its newline."""
    from trajaudit.online.watch import follow

    f = tmp_path / "run.jsonl"
    big = "x" * 2_000_000 + "\u00e9"  # ~31 reads; a 2-byte UTF-8 character at the end
    f.write_text(f"a\n{big}\nb\nc")
    got = list(follow(f, until_idle=0.0, poll=0.0))
    assert [(n, len(t)) for n, t in got] == [(1, 1), (2, len(big)), (3, 1), (4, 1)]
    assert got[1][1] == big and got[3][1] == "c"


def test_watch_ctrl_c_while_the_packs_load_exits_130(tmp_path, monkeypatch):
    """Ctrl-C before the watch follows its file (the packs are loading): a line saying nothing was read,
    exit 130 (it was click's "Aborted!", exit 1 — which `watch` uses for "a violation was found")."""
    from click.testing import CliRunner

    import trajaudit.cli.online as online

    def interrupted(*a, **k):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    monkeypatch.setattr(online, "build_context", interrupted)
    r = CliRunner().invoke(online.watch_cmd, [str(tmp_path / "run.jsonl")])
    assert r.exit_code == 130, (r.exit_code, r.output)
    assert "interrupted before the watch started: nothing of" in r.stderr and "Aborted" not in r.output


def test_watch_warns_about_a_line_that_is_not_utf8(tmp_path):
    """A line with bytes that are not UTF-8 is read with them replaced, and watch says so (as `audit`
    does for a file) — it used to replace them silently."""
    f = tmp_path / "run.jsonl"
    f.write_bytes(json.dumps(RUN[0]).encode() + b'\n{"role": "user", "content": "caf\xe9 bad"}\n'
                  + json.dumps(END_MARKER).encode() + b"\n")
    r = subprocess.run([sys.executable, "-m", "trajaudit", "watch", str(f), "--format", "json"], cwd=ROOT,
                       capture_output=True, text=True, timeout=180)
    assert f"warning: {f}:2 is not valid UTF-8; undecodable bytes were replaced" in r.stderr, r.stderr
    assert f"{f}:1 is not" not in r.stderr
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert rows[-1]["event"] == "end" and rows[-1]["steps"] == 2 and rows[-1]["skipped_lines"] == 0
