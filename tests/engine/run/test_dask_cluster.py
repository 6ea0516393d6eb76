"""Audits on a real Dask cluster (``audit --scheduler``, ``trajaudit.distributed``): a LocalCluster of
two worker processes started here (one for the module, torn down after), the same output as a serial
run — also when a worker is killed mid-batch —, Parquet in and out, the LLM answer cache and rate limit
shared by the workers, and the CLI against a ``dask scheduler`` and a ``dask worker`` started as their
own processes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed", reason="needs the Dask extra: pip install 'trajaudit[dask]'")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from distributed import Client  # noqa: E402

from trajaudit.distributed import (  # noqa: E402
    DIAGNOSIS_COLUMNS,
    audit_bag,
    connect,
    read_diagnoses_parquet,
    write_diagnoses_parquet,
)
from trajaudit.engine.run.batch import audit_paths  # noqa: E402
from trajaudit.engine.run.cluster import LoadSpec, audit_on_cluster  # noqa: E402
from trajaudit.engine.run.pipeline import AuditSpec  # noqa: E402
from trajaudit.engine.trace.shards import ParquetMapping, plan_file  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "data"


@pytest.fixture(scope="module")
def client():
    """The cluster of ``--scheduler local:2``: two worker processes of one thread each (the machine's
    two cores), for the whole module, closed after it."""
    with connect("local:2") as c:
        yield c


def serial(paths, spec=AuditSpec(), **kw):
    """(diagnosis JSON lines, problem messages) of the serial streaming path (what the CLI writes)."""
    lines = {}
    batch = audit_paths([str(p) for p in paths], spec, on_result=lambda i, r: lines.__setitem__(i, r.diagnosis.to_json()),
                        **kw)
    return [lines[i] for i in sorted(lines)], [p.message for p in batch.problems]


def on_cluster(client, paths, spec=AuditSpec(), load=LoadSpec(), **kw):
    lines = {}
    batch = audit_on_cluster(client, [str(p) for p in paths], spec, load,
                             on_result=lambda i, r: lines.__setitem__(i, r.diagnosis.to_json()), **kw)
    assert sorted(lines) == list(range(len(lines)))  # streamed in input order, each index once
    return [lines[i] for i in sorted(lines)], [p.message for p in batch.problems]


def test_who_and_when_folder_and_tau_file_give_the_serial_output(client, ww_dir, tau_file, tmp_path):
    from click.testing import CliRunner

    from trajaudit.cli import main

    args = ["audit", str(ww_dir), str(tau_file), "-q"]
    here = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "s.jsonl"), "--report", str(tmp_path / "s.html")])
    there = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "c.jsonl"), "--report", str(tmp_path / "c.html"),
                                      "--scheduler", client.scheduler.address])
    assert here.exit_code == there.exit_code == 0, there.output
    assert (tmp_path / "c.jsonl").read_bytes() == (tmp_path / "s.jsonl").read_bytes()
    assert len((tmp_path / "s.jsonl").read_text().splitlines()) == 126 + 29
    assert (tmp_path / "c.html").read_bytes() == (tmp_path / "s.html").read_bytes()


def _jsonl_with_defects(tau_file, path):
    """The tau runs as JSONL, with a blank line, a line that is not JSON and a run without a decision
    step among them (records are line numbers, so the shards must count every line)."""
    runs = json.loads(tau_file.read_text())
    lines = [json.dumps(r) for r in runs]
    lines[3:3] = [""]
    lines[10:10] = ["{not json"]
    lines[17:17] = [json.dumps([{"role": "user", "content": "only a user"}])]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_large_jsonl_file_is_split_into_record_ranges_with_the_serial_records_and_problems(client, tau_file, tmp_path):
    f = _jsonl_with_defects(tau_file, tmp_path / "tau.jsonl")
    shards = plan_file(str(f), str(f), shard_runs=5)
    assert len(shards) == 7 and [s.first for s in shards] == [0, 5, 10, 15, 20, 25, 30]
    assert not any(s.whole for s in shards) and shards[-1].stop is None
    want = serial([f])
    seen = []
    got = on_cluster(client, [f], load=LoadSpec(shard_runs=5), progress=lambda done, total: seen.append((done, total)))
    assert got == want
    assert seen[0] == (0, 32) and seen[-1] == (30, 30) and len(seen) == 1 + 7  # the lines, then per task the runs
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert len(want[0]) == 29 and len(want[1]) == 2
    assert "line 11" in want[1][0] and "record 17" in want[1][1]
    records = [json.loads(line)["record"] for line in got[0]]
    assert records == [r for r in range(32) if r not in (3, 10, 17)]


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("final", [True, False])
def test_record_ranges_read_exactly_what_the_loader_reads(tmp_path, newline, final):
    from trajaudit.engine.trace.loader import load_path
    from trajaudit.engine.trace.shards import read_shard

    runs = json.loads((EXAMPLES / "tau_retail_sample.json").read_text())
    lines = [json.dumps(runs[k % 3]) for k in range(9)]
    lines[2:2] = ["", "[1, 2"]
    f = tmp_path / "runs.jsonl"
    f.write_bytes((newline.join(lines) + (newline if final else "")).encode())
    whole = load_path(f)
    for n in (1, 2, 3, 4, 10, 11, 12):
        shards = plan_file(str(f), str(f), shard_runs=n)
        assert len(shards) == -(-11 // n) if n < 11 else len(shards) == 1
        parts = [read_shard(s) for s in shards]
        assert [t.to_dict() for p in parts for t in p.trajectories] == [t.to_dict() for t in whole.trajectories]
        assert [p.message for part in parts for p in part.problems] == [p.message for p in whole.problems]


def _kill_a_busy_worker(client):
    """SIGKILL the process of a worker that has tasks in flight (its tasks are lost mid-run); its pid."""
    pids = client.run(os.getpid)
    busy = [w for w, keys in client.processing().items() if keys]
    assert busy, "no worker had a task in flight"
    victim = pids[busy[0]]
    os.kill(victim, signal.SIGKILL)
    return victim


def test_a_worker_killed_mid_batch_still_gives_the_serial_output_once(client, tau_file, tmp_path):
    f = _jsonl_with_defects(tau_file, tmp_path / "tau.jsonl")
    want = serial([f])
    killed = []

    def progress(done, total):
        if not killed and done >= 2:  # a shard in: the other 15 are queued or running on both workers
            killed.append(_kill_a_busy_worker(client))

    got = on_cluster(client, [f], load=LoadSpec(shard_runs=2), progress=progress)
    assert killed, "no worker was killed"
    assert got == want  # every run once, in order: the lost worker's shards ran again elsewhere
    client.wait_for_workers(2, timeout=60)  # the nanny restarts the killed process
    assert killed[0] not in client.run(os.getpid).values()


def _tau_rows(tau_file):
    return [{"trace": json.dumps(r), "note": f"row {i}"} for i, r in enumerate(json.loads(tau_file.read_text()))]


def test_parquet_in_and_out_round_trip(client, tau_file, tmp_path):
    rows = _tau_rows(tau_file)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "tau.parquet", row_group_size=7)
    (tmp_path / "tau.jsonl").write_text("".join(r["trace"] + "\n" for r in rows))
    want, _ = serial([tmp_path / "tau.jsonl"])
    url = (tmp_path / "tau.parquet").as_uri()  # file:// through fsspec
    got, problems = on_cluster(client, [url], load=LoadSpec(shard_runs=10))
    assert [s.stop for s in plan_file(url, url, shard_runs=10)] == [10, 20, 29]  # across row groups of 7
    assert not problems
    strip = [{k: v for k, v in json.loads(x).items() if k != "file"} for x in want]
    assert [{k: v for k, v in json.loads(x).items() if k != "file"} for x in got] == strip
    assert {json.loads(x)["file"] for x in got} == {url}
    out = (tmp_path / "d.parquet").as_uri()
    write_diagnoses_parquet(out, got)
    table = pq.read_table(tmp_path / "d.parquet")
    assert table.schema.names == [n for n, _, _ in DIAGNOSIS_COLUMNS]
    assert read_diagnoses_parquet(out) == got
    assert table.column("record").to_pylist() == list(range(29))
    assert table.column("critical_step").to_pylist() == [json.loads(x)["critical_step"] for x in got]


def test_parquet_rows_of_messages_with_a_run_id_column(client, tau_file, tmp_path):
    runs = json.loads(tau_file.read_text())[:8]
    docs, rows = [], []
    for i, r in enumerate(runs):
        msgs = [{k: m[k] for k in ("role", "content", "tool_calls", "tool_call_id", "name") if m.get(k) is not None}
                for m in r["traj"]]
        docs.append({"id": f"run{i}", "messages": msgs})
        rows += [{"conversation": f"run{i}", "role": m["role"], "content": m.get("content"),
                  "name": m.get("name"), "tool_call_id": m.get("tool_call_id"),
                  "tool_calls_json": json.dumps(m["tool_calls"]) if "tool_calls" in m else None} for m in msgs]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "msgs.parquet", row_group_size=50)
    (tmp_path / "msgs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    want, _ = serial([tmp_path / "msgs.jsonl"])
    load = LoadSpec(shard_runs=3, parquet=ParquetMapping(run_column="conversation"))
    shards = plan_file(str(tmp_path / "msgs.parquet"), "m.parquet", shard_runs=3, parquet=load.parquet)
    assert [s.first for s in shards] == [0, 3, 6] and shards[0].kind == "parquet-messages"
    got, problems = on_cluster(client, [tmp_path / "msgs.parquet"], load=load)
    assert not problems and len(got) == 8
    drop = ("file",)
    assert ([{k: v for k, v in json.loads(x).items() if k not in drop} for x in got]
            == [{k: v for k, v in json.loads(x).items() if k not in drop} for x in want])


def test_memory_urls_in_and_out_through_fsspec_with_the_local_scheduler(tau_file, tmp_path):
    import dask
    import fsspec

    f = _jsonl_with_defects(tau_file, tmp_path / "tau.jsonl")
    want, problems = serial([f])
    fs = fsspec.filesystem("memory")
    fs.pipe("/trajaudit-test/in/tau.jsonl", f.read_bytes())
    try:
        with dask.config.set(scheduler="sync"):  # memory:// lives in this process: no workers
            records = audit_bag("memory://trajaudit-test/in/", shard_runs=8).compute()
        diagnoses = [r for r in records if r["error"] is None]
        assert [r["record"] for r in diagnoses] == [json.loads(x)["record"] for x in want]
        assert {r["file"] for r in records} == {"memory://trajaudit-test/in/tau.jsonl"}
        assert sorted(r["record"] for r in records if r["error"]) == [10, 17]
        out = "memory://trajaudit-test/out/d.parquet"
        write_diagnoses_parquet(out, [json.dumps({k: v for k, v in r.items() if k != "error"}) for r in diagnoses])
        assert [json.loads(x)["critical_step"] for x in read_diagnoses_parquet(out)] == [
            json.loads(x)["critical_step"] for x in want]
    finally:
        fs.rm("/trajaudit-test", recursive=True)


def test_audit_bag_gives_diagnosis_records_and_a_dataframe(client, tmp_path):
    import dask.bag as db

    want, _ = serial([EXAMPLES])
    bag = audit_bag(str(EXAMPLES), client=client)
    records = bag.compute()
    assert [json.dumps({k: v for k, v in r.items() if k != "error"}) for r in records] == [
        json.dumps(json.loads(x)) for x in want]
    frame = audit_bag([str(EXAMPLES)], client=client, frame=True).compute()
    assert list(frame.columns) == [n for n, _, _ in DIAGNOSIS_COLUMNS]
    assert list(frame["diagnosis"]) == [json.dumps(json.loads(x), ensure_ascii=False) for x in want]
    runs = json.loads((EXAMPLES / "tau_retail_sample.json").read_text())
    docs = db.from_sequence([runs[0], [{"role": "user", "content": "hi"}], {"messages": []}], npartitions=1)
    got = audit_bag(docs, client=client).compute()
    assert [r["error"] for r in got[:1]] == [None] and got[0]["critical_step"] == json.loads(want[0])["critical_step"]
    assert [r["trajectory_id"] for r in got[1:]] == [None, None]
    assert got[1]["error"] == "run has no messages (format: openai)"
    assert got[2]["error"].endswith(": run has no decision steps (no agent message): nothing to diagnose")


def test_llm_answers_are_cached_across_workers_and_the_rate_limit_holds_cluster_wide(client, llm_server, tmp_path):
    from strategy_helpers import judge_for

    from trajaudit import load_many
    from trajaudit.llm import LLMConfig

    runs = load_many([EXAMPLES]).trajectories
    judge = judge_for(runs)
    lock, state = threading.Lock(), {"now": 0, "peak": 0}

    def respond(req):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.05)
        with lock:
            state["now"] -= 1
        return judge(req)

    llm_server.responder = respond
    cache = tmp_path / "shared-cache.sqlite3"
    config = LLMConfig(base_url=llm_server.url, model="scripted-model", api_key="k", timeout=10.0, max_retries=1,
                       concurrency=1, cache_path=str(cache))
    spec = AuditSpec(strategy="all-at-once", llm=config)
    got, problems = on_cluster(client, [EXAMPLES], spec)
    assert not problems and len(got) == 6
    assert llm_server.calls == 6 and state["peak"] == 1  # one request at a time over both workers
    leases = client.run_on_scheduler(lambda dask_scheduler: dict(dask_scheduler.extensions["semaphores"].max_leases))
    assert list(leases.values()) == [1]
    import sqlite3

    with sqlite3.connect(cache) as db:
        assert db.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 6
    again, _ = serial([EXAMPLES], spec)  # here, from the file the workers filled: no call
    assert llm_server.calls == 6

    def strip(lines):
        return [{k: v for k, v in json.loads(x).items() if k != "usage"} for x in lines]

    assert strip(again) == strip(got)


def test_a_shard_whose_task_fails_is_reported_and_the_others_are_written(client, monkeypatch, tmp_path):
    import trajaudit.engine.run.cluster as cluster
    from trajaudit.engine.trace.shards import Shard

    good = plan_file(str(EXAMPLES / "tau_retail_sample.json"), str(EXAMPLES / "tau_retail_sample.json"))
    bad = Shard("nosuchprotocol://x/runs.jsonl", "nosuchprotocol://x/runs.jsonl", kind="jsonl", first=64,
                start=10, whole=False)
    monkeypatch.setattr(cluster, "plan", lambda client, paths, load: [bad, *good])
    got, problems = on_cluster(client, ["ignored"])
    assert len(got) == 3 and len(problems) == 1
    assert problems[0].startswith("nosuchprotocol://x/runs.jsonl, records from 64: not audited: the task failed "
                                  "on the cluster (ValueError: ")


def test_an_unreachable_llm_endpoint_stops_the_batch_as_locally(client, tmp_path):
    from trajaudit.errors import LLMUnreachableError
    from trajaudit.llm import LLMConfig

    config = LLMConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key="k", timeout=2.0, max_retries=0,
                       cache_path=None)
    with pytest.raises(LLMUnreachableError, match="cannot reach http://127.0.0.1:9/v1"):
        on_cluster(client, [EXAMPLES], AuditSpec(strategy="all-at-once", llm=config))


def test_without_the_extra_scheduler_is_a_clear_usage_error(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from trajaudit.cli import main

    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    r = CliRunner().invoke(main, ["audit", str(EXAMPLES), "-o", str(tmp_path / "d.jsonl"), "--scheduler", "local:2"])
    assert r.exit_code == 2
    assert "pip install 'trajaudit[dask]'" in r.output and "distributed" in r.output
    r = CliRunner().invoke(main, ["audit", str(tmp_path / "x.parquet"), "-o", str(tmp_path / "d.jsonl")])
    assert r.exit_code == 2 and "--scheduler" in r.output


def test_importing_trajaudit_imports_no_dask():
    code = ("import sys, trajaudit, trajaudit.cli, trajaudit.distributed, trajaudit.engine.run.cluster\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed', 'pyarrow', 'fsspec'))\n"
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_on_a_dask_scheduler_and_worker_started_as_processes(tmp_path):
    from click.testing import CliRunner

    from trajaudit.cli import main

    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [subprocess.Popen([sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--no-dashboard"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        procs.append(subprocess.Popen([sys.executable, "-m", "dask", "worker", address, "--nworkers", "1",
                                       "--nthreads", "1", "--no-nanny", "--no-dashboard", "--host", "127.0.0.1"],
                                      env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        here = CliRunner().invoke(main, ["audit", str(EXAMPLES), "-q", "-o", str(tmp_path / "serial.jsonl"),
                                         "--report", str(tmp_path / "s.md")])
        assert here.exit_code == 0, here.output
        with Client(address, timeout=60) as c:
            c.wait_for_workers(1, timeout=60)
        cmd = [sys.executable, "-m", "trajaudit", "audit", str(EXAMPLES), "-q", "--scheduler", address,
               "-o", (tmp_path / "d.parquet").as_uri(), "--report", str(tmp_path / "c.md")]
        there = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert there.returncode == 0, there.stderr
        lines = (tmp_path / "serial.jsonl").read_text().splitlines()
        assert len(lines) == 6 and read_diagnoses_parquet(tmp_path / "d.parquet") == lines  # the same bytes
        assert (tmp_path / "c.md").read_bytes() == (tmp_path / "s.md").read_bytes()
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
