"""Batches stream their results: `audit` keeps a diagnosis line and a summary row per run (and, for a
report, the log without its pass records) instead of every run's full validation log."""

from __future__ import annotations

import gc
import json
import weakref

import report_page
from click.testing import CliRunner

from trajaudit.cli import main
from trajaudit.engine.run.batch import audit_trajectories
from trajaudit.engine.run.pipeline import AuditSpec


def test_without_passes_keeps_findings_and_exact_counts(tau_runs):
    full = audit_trajectories([tau_runs["105"]], AuditSpec()).results[0].log
    slim = full.without_passes()
    assert slim.summary() == full.summary() and slim.summary()["verdicts"]["pass"] == 388
    assert [r for r in slim.records if r.verdict == "pass"] == []
    assert [(r.step, r.rule_id) for r in slim.records] == [(r.step, r.rule_id) for r in full.records if r.verdict != "pass"]
    assert slim.violations("info") == full.violations("info") and slim.incomplete == full.incomplete
    assert slim.without_passes().summary() == full.summary()  # idempotent


def test_on_result_streams_every_result_and_keeps_none(tau_runs):
    runs = [tau_runs[i] for i in ("2", "12", "47", "105")]
    seen = {}
    batch = audit_trajectories(runs, AuditSpec(), on_result=lambda i, r: seen.__setitem__(i, r.diagnosis))
    assert batch.results == [] and batch.problems == [] and sorted(seen) == [0, 1, 2, 3]
    kept = audit_trajectories(runs, AuditSpec())
    assert [seen[i].to_json() for i in range(4)] == [r.diagnosis.to_json() for r in kept.results]
    assert [seen[i].critical_step for i in range(4)] == [6, 18, 18, 42]


def test_cli_output_is_in_input_order_with_a_bad_run_in_between(tmp_path, tau_file):
    """Streaming keeps the JSONL in input order and the report complete; a broken record is skipped."""
    recs = [r for r in json.loads(tau_file.read_text()) if str(r["task_id"]) in ("2", "12", "47")]
    lines = [json.dumps(recs[0]), '{"traj": 7}', json.dumps(recs[1]), json.dumps(recs[2])]
    src = tmp_path / "runs.jsonl"
    src.write_text("\n".join(lines) + "\n")
    out, rep = tmp_path / "d.jsonl", tmp_path / "r.html"
    for jobs in ("1", "2"):
        r = CliRunner().invoke(main, ["audit", str(src), "-o", str(out), "--report", str(rep), "-q", "--jobs", jobs])
        assert r.exit_code == 1, r.output  # the broken record is reported and skipped
        got = [json.loads(x) for x in out.read_text().splitlines()]
        assert [(d["trajectory_id"], d["critical_step"]) for d in got] == [("2", 6), ("12", 18), ("47", 18)]
        html = rep.read_text()
        assert [r["id"] for r in report_page.runs(html)] == ["2", "12", "47"]
        assert [f'id="d{k}"' in html for k in range(4)] == [True, True, True, False]
        assert "skipped" in html and "Skipped runs (1)" in html


def test_iter_load_reads_one_file_at_a_time_and_load_many_is_its_concatenation(tmp_path, tau_file):
    from trajaudit.engine.trace.loader import iter_load, load_many

    recs = json.loads(tau_file.read_text())[:3]
    for i, r in enumerate(recs):
        (tmp_path / f"r{i}.json").write_text(json.dumps(r))
    (tmp_path / "r1b.json").write_text("{not json")
    it = iter_load([tmp_path])
    first_file, first = next(it)  # the other files are not read yet
    assert first_file.name == "r0.json" and [t.id for t in first.trajectories] == [str(recs[0]["task_id"])]
    rest = list(it)
    assert [p.name for p, _ in rest] == ["r1.json", "r1b.json", "r2.json"]
    assert rest[1][1].trajectories == [] and "r1b.json" in rest[1][1].problems[0].file
    whole = load_many([tmp_path])
    assert [t.id for t in whole.trajectories] == [str(r["task_id"]) for r in recs]
    assert [p.file for p in whole.problems] == [p.file for _, got in [(first_file, first), *rest] for p in got.problems]


def test_streamed_folder_batch_gives_the_same_results_in_order_with_exact_final_progress(tmp_path, tau_file):
    from trajaudit.engine.run.batch import audit_paths

    recs = json.loads(tau_file.read_text())[:4]
    for i, r in enumerate(recs):
        (tmp_path / f"r{i}.json").write_text(json.dumps(r if i != 2 else {"traj": []}))
    got, ticks = {}, []
    streamed = audit_paths([tmp_path], AuditSpec(), on_result=lambda i, r: got.__setitem__(i, r.diagnosis.to_json()),
                           progress=lambda done, total: ticks.append((done, total)))
    whole = audit_paths([tmp_path], AuditSpec())
    assert sorted(got) == [0, 1, 2] and [got[i] for i in range(3)] == [r.diagnosis.to_json() for r in whole.results]
    assert [p.message for p in streamed.problems] == [p.message for p in whole.problems] and len(whole.problems) == 1
    assert ticks[-1] == (3, 3) and [d for d, _ in ticks] == [1, 2, 3]


def test_a_jsonl_file_is_read_in_parts_with_the_same_runs_and_problems(tmp_path, tau_file):
    from trajaudit.engine.trace import loader

    recs = json.loads(tau_file.read_text())
    lines = [json.dumps({**recs[i % 29], "task_id": f"r{i}"}) for i in range(150)]
    lines[70] = "{broken"
    src = tmp_path / "many.jsonl"
    src.write_text("\n".join(lines) + "\n")
    parts = [got for _, got in loader.iter_load([src])]
    assert [len(p.trajectories) for p in parts] == [64, 64, 21]
    assert [p.record for part in parts for p in part.problems] == [70]
    whole = loader.load_path(src)
    assert [t.id for part in parts for t in part.trajectories] == [t.id for t in whole.trajectories]
    assert len(whole.trajectories) == 149 and [p.record for p in whole.problems] == [70]



def test_progress_total_of_a_streamed_jsonl_is_its_run_count_from_the_start(tmp_path, tau_file):
    """Parts of one JSONL file are not files: the total is estimated from its lines (exact here), not
    from the parts read so far (the bar read N/N throughout)."""
    from trajaudit.engine.run.batch import audit_paths

    recs = json.loads(tau_file.read_text())
    src = tmp_path / "many.jsonl"
    src.write_text("\n".join(json.dumps({**recs[i % 29], "task_id": f"r{i}"}) for i in range(70)) + "\n")
    ticks = []
    audit_paths([src], AuditSpec(), on_result=lambda i, r: None, progress=lambda d, t: ticks.append((d, t)))
    assert ticks == [(k, 70) for k in range(1, 71)]


def test_collector_paused_while_a_streamed_result_is_handed_over_and_a_runs_garbage_still_collected(tau_runs):
    """The collector stays paused until ``on_result`` returned (its first collection would otherwise
    traverse the whole result the caller still holds); after the batch it is on again, and the garbage
    cycles left while it was paused are collectable (not frozen)."""
    class Cycle:
        pass

    states, refs = [], []

    def take(i, r):
        states.append(gc.isenabled())
        c = Cycle()
        c.me = c  # garbage once this returns: only the cyclic collector frees it
        refs.append(weakref.ref(c))

    assert gc.isenabled()
    runs = [tau_runs[i] for i in ("2", "12", "47", "105")]
    audit_trajectories(runs, AuditSpec(), on_result=take)
    assert states == [False] * 4 and gc.isenabled()
    gc.collect()
    assert all(r() is None for r in refs)
