"""CLI defects a fresh user found (second round): repair applying another data set's diagnosis, audit
silently keeping one of two rules with the same id, check passing a CI gate on a skipped input, cite
dumping the whole input, a dead LLM endpoint failing every run after retries, and help/output polish."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from trajaudit.cli import main

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "data" / "tau_retail_sample.json"  # 3 tau runs, the first with id "2"
NO_LLM_ENV = {"TRAJAUDIT_BASE_URL": "", "TRAJAUDIT_MODEL": "", "TRAJAUDIT_LLM_CONFIG": ""}

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, env=NO_LLM_ENV)


def closed_port_url() -> str:
    """An http://127.0.0.1 URL on a port nothing listens on (bound, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/v1"


def diagnosis_line(file: str, record: int | None, step: int, agent: str) -> str:
    return json.dumps({"schema_version": 1, "trajectory_id": "2", "file": file, "record": record,
                       "critical_step": step, "agent": agent, "category": "intent_plan_misalignment",
                       "taxonomy": "agentrx", "confidence": 0.2, "rationale": "r", "strategy": "offline"}) + "\n"


# --- 5. repair --diagnosis: an id match naming another trace file is not this run's diagnosis ---------

def test_repair_refuses_a_diagnosis_of_another_data_sets_run_with_the_same_id(tmp_path):
    ww = tmp_path / "ww.jsonl"  # Who&When file 2.json has the trajectory id "2", like tau task 2
    ww.write_text(diagnosis_line("/data/who_and_when/algorithm_generated/2.json", None, 2, "Verification_Expert"))
    out = tmp_path / "r.json"
    r = run("repair", SAMPLE, "--record", "0", "--diagnosis", ww, "-o", out)
    assert r.exit_code == 2 and "Traceback" not in r.output
    err = r.stderr.replace("\n", "")
    assert f"{ww}: no diagnosis for run '2' (tau_retail_sample.json, record 0; 1 line(s) read)" in err
    assert "line 1: its file 2.json is not the run's tau_retail_sample.json" in err
    assert not out.exists()
    # another record of the same file is refused too; the run's own line (any folder) is used
    ww.write_text(diagnosis_line(str(SAMPLE), 1, 5, "assistant")
                  + diagnosis_line("elsewhere/tau_retail_sample.json", 0, 2, "assistant"))
    r = run("repair", SAMPLE, "--record", "0", "--diagnosis", ww, "-o", out)
    assert r.exit_code == 0, r.output
    assert "2: critical step 2 (assistant, intent_plan_misalignment, offline)" in r.stderr
    assert len(json.loads(out.read_text())) == 3  # messages 0..1 + the directive


def test_other_run_is_the_rule_eval_pairs_by():
    from trajaudit.engine.diagnosis import Diagnosis, other_run

    d = Diagnosis.from_dict({"trajectory_id": "2", "file": "/a/2.json", "record": None, "critical_step": 1,
                             "category": "x", "taxonomy": "agentrx", "confidence": 0.1, "rationale": "",
                             "strategy": "s"})
    assert other_run(d, "/b/tau.json", 0) == "its file 2.json is not the run's tau.json"
    assert other_run(d, "/elsewhere/2.json", None) is None
    assert other_run(d, None, None) is None


# --- 6. audit: two packs defining one rule id is an error, as in check -----------------------------------

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
            r = run(*cmd, "--rules", first, "--rules", second)
            assert r.exit_code == 2, (cmd, r.output)
            assert f"error: rule id inner.mention is defined by both {first} and {second}" \
                in r.stderr.replace("\n", "")
    assert not out.exists()  # stopped before any run
    r = run("check", SAMPLE, "--rules", a, "--rules", a)  # the same pack twice is one pack
    assert r.exit_code == 1 and "3 run(s), 1 rule(s)" in r.stderr


def test_audit_refuses_a_user_pack_redefining_a_default_packs_rule(tmp_path):
    generic = tmp_path / "g.yaml"
    generic.write_text(PACK.replace("pack: inner", "pack: generic.system").replace("id: mention", "id: tool-traceback")
                       .format(sev="info"))
    r = run("audit", SAMPLE, "--rules", generic, "-o", tmp_path / "d.jsonl", "-q")
    assert r.exit_code == 2
    err = r.stderr.replace("\n", "")
    assert f"rule id generic.system.tool-traceback is defined by both generic and {generic}" in err
    assert "generic is a default pack: turn the default packs off (--no-default-packs" in err
    assert run("audit", SAMPLE, "--rules", generic, "--no-default-packs", "-o", tmp_path / "d.jsonl",
               "-q").exit_code == 0
    # a shipped domain pack (applied to runs calling its tools) counts too
    domain = tmp_path / "t.yaml"
    domain.write_text(PACK.replace("pack: inner", "pack: tau_retail").replace("id: mention", "id: explicit-yes-before-write")
                      .format(sev="info"))
    r = run("audit", SAMPLE, "--rules", domain, "-o", tmp_path / "d.jsonl", "-q")
    assert r.exit_code == 2
    assert f"rule id tau_retail.explicit-yes-before-write is defined by both {domain} and tau_retail" \
        in r.stderr.replace("\n", "")


# --- 7. check: a skipped input fails the gate ------------------------------------------------------------

def test_check_exits_1_when_an_input_was_skipped(tmp_path, ww_dir):
    empty = tmp_path / "empty.json"
    empty.write_text("")
    r = run("check", ww_dir / "1.json", empty, "--rules", "generic.system", "--fail-on", "critical")
    assert r.exit_code == 1, r.output
    assert f"skipped: {empty}: file is empty" in r.stderr
    assert "1 run(s), 3 rule(s): 0 violation(s), 0 at or above critical; 1 input(s) skipped" in r.stderr
    assert run("check", ww_dir / "1.json", "--rules", "generic.system", "--fail-on", "critical").exit_code == 0
    assert "exit 1 also when an input was skipped" in " ".join(run("check", "--help").output.split())


# --- 10. cite on a trace that is not a citation run ------------------------------------------------------

def test_cite_on_another_trace_says_what_was_expected_and_found_briefly():
    r = run("cite", SAMPLE)
    assert r.exit_code == 2 and "Traceback" not in r.output
    err = " ".join(r.stderr.split())
    assert len(err) < 600, err  # was ~3 KB of the input, the reason cut off
    assert 'not a citation run: expected a JSON object with "format": "trajaudit.citation-run"' in err
    assert "found a JSON list of 3 item(s) (the first an object with keys task_id, reward, traj, trial, records)" in err
    assert "pass --mapping M.yaml" in err
    assert "Retail agent policy" not in err


# --- 15. a dead LLM endpoint stops the batch -------------------------------------------------------------

def test_audit_with_an_endpoint_refusing_connections_stops_after_the_first_run(tmp_path):
    url = closed_port_url()
    cfg = tmp_path / "llm.yaml"
    cfg.write_text(f"llm:\n  base_url: {url}\n  model: m\n  max_retries: 1\n  timeout: 2\n")
    out = tmp_path / "d.jsonl"
    r = CliRunner().invoke(main, ["audit", str(SAMPLE), "--strategy", "all-at-once", "--llm-config", str(cfg),
                                  "--no-cache", "-o", str(out)], env=NO_LLM_ENV, catch_exceptions=False)
    assert r.exit_code == 2 and "Traceback" not in r.output
    err = r.stderr.replace("\n", "")
    assert err.count("cannot reach") == 1  # one message, not one per run (3 runs)
    assert f"all-at-once: cannot reach {url} (after 1 retries): [Errno 111] Connection refused" in err
    assert "the batch was stopped" in err and "skipped" not in err
    assert not out.exists()


def test_only_a_connection_that_cannot_be_made_is_unreachable(llm_server, llm_config):
    import dataclasses

    from llm_server import Sleep, Status

    from trajaudit.errors import LLMError, LLMUnreachableError
    from trajaudit.llm import LLMClient

    msgs = [{"role": "user", "content": "hi"}]
    with LLMClient(dataclasses.replace(llm_config, base_url=closed_port_url(), max_retries=0)) as client:
        with pytest.raises(LLMUnreachableError, match="Connection refused"):
            client.chat_text(msgs, name="x", use_cache=False)
    llm_server.script(Status(500), Sleep(1.0, "late"))
    with LLMClient(dataclasses.replace(llm_config, max_retries=0, timeout=0.3)) as client:
        for what in ("answered HTTP 500", "no answer from"):
            with pytest.raises(LLMError, match=what) as e:
                client.chat_text(msgs, name="x", use_cache=False)
            assert not isinstance(e.value, LLMUnreachableError)


def test_the_batch_loop_stops_on_an_unreachable_endpoint(llm_config, tau_runs):
    import dataclasses

    from trajaudit.engine.run.batch import audit_trajectories
    from trajaudit.engine.run.pipeline import AuditSpec
    from trajaudit.errors import LLMUnreachableError

    runs = list(tau_runs.values())[:3]
    cfg = dataclasses.replace(llm_config, base_url=closed_port_url(), max_retries=0, cache_path=None)
    done = []
    with pytest.raises(LLMUnreachableError):
        audit_trajectories(runs, AuditSpec(strategy="all-at-once", llm=cfg), progress=done.append)
    assert done == []  # the first run raised; the others were not tried


# --- 16. polish -----------------------------------------------------------------------------------------

def test_repair_output_must_be_json(tmp_path):
    r = run("repair", SAMPLE, "--record", "0", "-o", tmp_path / "r.txt")
    assert r.exit_code == 2
    assert "-o/--output must end in .json (the resumed run is one JSON document), got" in r.stderr
    assert not (tmp_path / "r.txt").exists()


def test_cite_cuts_table_text_at_a_word_with_an_ellipsis():
    from trajaudit.cli.cite import _cut

    text = "Tesla's share fell to 19.9% while BYD gained two points, as smaller makers continued to drop another share"
    cut = _cut(text, 100)
    assert cut == "Tesla's share fell to 19.9% while BYD gained two points, as smaller makers continued to drop…"
    assert _cut("short", 100) == "short"


@pytest.mark.parametrize("cmd", ["audit", "check", "claims", "cite", "repair", "show"])
def test_help_has_examples_and_no_seed_jargon(cmd):
    out = run(cmd, "--help").output
    assert "Examples:\n    trajaudit " in out  # \b keeps the lines as written
    assert "seed 003" not in out


def test_a_pack_including_generic_with_overrides_replaces_the_default_generic(tmp_path, ww_dir):
    from trajaudit import load_path
    from trajaudit.engine.run.batch import audit_trajectories
    from trajaudit.engine.run.pipeline import AuditSpec

    pack = tmp_path / "my.yaml"
    pack.write_text("pack: my\nversion: 1\ninclude:\n  - pack: generic\n    params: {closing: 'bye'}\n"
                    "overrides:\n  generic.provenance.claim-values-grounded: {severity: info}\n"
                    "disable: [generic.system.tool-traceback]\nrules: []\n", encoding="utf-8")
    runs = load_path(ww_dir / "1.json").trajectories
    res = audit_trajectories(runs, AuditSpec(rules=(str(pack),)))
    assert not res.problems
    recs = res.results[0].log.records
    ids = {r.rule_id for r in recs}
    assert "generic.system.tool-traceback" not in ids and "generic.system.tool-system-error" in ids
    assert {r.severity for r in recs if r.rule_id == "generic.provenance.claim-values-grounded"} == {"info"}
    r = run("audit", ww_dir / "1.json", "--rules", pack, "-o", tmp_path / "o.jsonl", "-q")
    assert r.exit_code == 0, r.output
