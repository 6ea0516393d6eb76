"""AgentRx step records (Hugging Face microsoft/AgentRx: ``{trajectory_id, instruction, steps:
[{index, substeps}]}``) and their annotation JSONL: the ``agentrx_steps`` adapter, the gold loader,
pairing ("2" <-> "tau_retail_2") and scoring by source position (docs/input.md).

The fixtures are written in tmp_path from the Magentic-One runs of tests/data/magentic (grouped
into steps as consecutive turns of one speaker) and from the shared tau-bench runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from trajaudit import audit, load
from trajaudit.cli import main as cli
from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.trace.adapters.agentrx_steps import MAX_LITERAL_TOKENS, parse_substeps
from trajaudit.engine.trace.ir import FLAG_DROPPED_MESSAGE, FLAG_SPLIT_MESSAGE
from trajaudit.engine.trace.loader import load_path
from trajaudit.errors import TraceFormatError
from trajaudit.eval import evaluate, load_gold
from trajaudit.eval.gold import GoldItem, detect_gold_format, suffix_aliases
from trajaudit.eval.runs import scored_step

MAG = Path(__file__).resolve().parents[2] / "data" / "magentic"
IDS = {"m1_blocked_pricing": "0f8d4c2a-1b7e-4e38-9a51-6c2d0e7f3b19",
       "m3_scroll_loop": "5e1f" * 16,
       "m5_invented_year": "b7c3a9e2-44d0-4f6a-8e21-93a5d1c0f7e4",
       "m7_missing_file": "c2a8e6f1-9d3b-4a57-b0e4-71f5c3d9a8b2"}
STRING_RUN = "m5_invented_year"  # its substeps are written as Python repr strings


def _speaker(role: str) -> str:
    return role.split(" (")[0]


def groups(messages: list[dict]) -> list[list[int]]:
    """Consecutive messages of one speaker form one step (the Orchestrator's thought, its ledger and
    its instruction to an agent are one step)."""
    out: list[list[int]] = []
    for i, m in enumerate(messages):
        if out and _speaker(messages[out[-1][-1]]["role"]) == _speaker(m["role"]):
            out[-1].append(i)
        else:
            out.append([i])
    return out


def group_of(messages: list[dict], i: int) -> int:
    return next(g for g, members in enumerate(groups(messages)) if i in members)


def record(tid: str, messages: list[dict], *, as_string: bool = False) -> dict:
    steps = []
    for g, members in enumerate(groups(messages)):
        subs = [{"sub_index": j, "role": messages[i]["role"], "content": messages[i]["content"]}
                for j, i in enumerate(members)]
        steps.append({"index": g + 1, "substeps": repr(subs) if as_string else subs})
    return {"trajectory_id": tid, "instruction": messages[0]["content"], "steps": steps}


def bare(name: str) -> list[dict]:
    return json.loads((MAG / "agentrx" / f"{name}.json").read_text())


GOLD_MESSAGE = {"m1_blocked_pricing": 4, "m3_scroll_loop": 8, "m5_invented_year": 11, "m7_missing_file": 11}


@pytest.fixture()
def magentic(tmp_path) -> Path:
    lines = [json.dumps(record(tid, bare(name), as_string=name == STRING_RUN)) for name, tid in IDS.items()]
    broken = {"trajectory_id": "deadbeef", "instruction": "x",
              "steps": [{"index": 1, "substeps": "[{'role': 'human', 'content': 'unterminated'"}]}
    lines.insert(2, json.dumps(broken))
    p = tmp_path / "magentic_dataset.jsonl"
    p.write_text("\n".join(lines) + "\n")
    return p


@pytest.fixture()
def magentic_gold(tmp_path) -> Path:
    rows = []
    for name, tid in IDS.items():
        msgs = bare(name)
        g = group_of(msgs, GOLD_MESSAGE[name]) + 1
        rows.append({"trajectory_id": tid, "failure_summary": "s", "num_failures": 1,
                     "failures": [{"failure_id": "1", "step_number": g, "step_reason": "r",
                                   "failure_category": "Invention of New Information", "category_reason": "c",
                                   "failed_agent": _speaker(msgs[GOLD_MESSAGE[name]]["role"])}],
                     "root_cause": {"failure_id": "1", "reason_for_root_cause": "why"},
                     "root_cause_failure_id": "1", "root_cause_reason": "why"})
    p = tmp_path / "magentic_one.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_magentic_records_load_one_step_per_substep(magentic):
    res = load_path(magentic)
    assert [t.id for t in res.trajectories] == [IDS[n] for n in IDS]
    assert len(res.problems) == 1
    pr = res.problems[0]
    assert pr.record == 2
    assert pr.message.startswith(f"{magentic}, record 2, $.steps[0].substeps: 'substeps' string is neither a JSON "
                                 "nor a Python-literal list (SyntaxError: ")
    t = res.trajectories[3]  # m7: 20 messages in 12 steps
    assert (t.source.format, len(t.steps)) == ("agentrx_steps", 20)
    assert [s.source_number for s in t.steps] == [0, 1, 1, 1, 2, 3, 3, 4, 5, 5, 6, 7, 7, 8, 9, 9, 10, 11, 11, 11]
    assert [s.index for s in t.steps if FLAG_SPLIT_MESSAGE in s.flags] == [2, 3, 6, 9, 12, 15, 18, 19]
    assert t.agents == ("Orchestrator", "WebSurfer", "FileSurfer")
    assert (t.steps[0].kind, t.steps[3].metadata["target"], t.steps[3].metadata["substep"]) == ("user", "WebSurfer", 2)
    assert t.task == bare("m7_missing_file")[0]["content"]
    # the record whose substeps are Python repr strings reads like the others
    s = res.trajectories[2]
    assert (s.id, len(s.steps), s.steps[1].agent) == (IDS[STRING_RUN], len(bare(STRING_RUN)), "Orchestrator")


def test_same_run_in_three_shapes_same_critical_substep(magentic):
    """Format invariance: Who&When hand-crafted file, AgentRx bare list, AgentRx step record."""
    ww = audit(load(MAG / "who_and_when" / "m7_missing_file.json"))
    bl = audit(load(MAG / "agentrx" / "m7_missing_file.json"))
    st = audit(load(magentic, record=4))  # JSONL line 4 (the broken record is line 2)
    assert st.trajectory_id == IDS["m7_missing_file"]
    assert ww.critical_step == bl.critical_step == st.critical_step == 11
    assert (ww.agent, ww.category) == (st.agent, st.category) == ("Orchestrator", "invention_of_new_information")
    assert "source_message" not in ww.metadata and "source_message" not in bl.metadata
    assert st.metadata["source_message"] == group_of(bare("m7_missing_file"), 11) == 7


def test_eval_pairs_by_id_and_scores_step_groups(magentic, magentic_gold, tmp_path):
    assert detect_gold_format(magentic_gold) == "agentrx"
    gold = load_gold(magentic_gold)
    assert gold.format == "agentrx" and gold.problems == []
    assert gold[IDS["m7_missing_file"]].critical_step == 7
    pred = tmp_path / "pred.jsonl"
    r = CliRunner().invoke(cli, ["audit", str(magentic), "-o", str(pred)])
    assert r.exit_code == 1, r.output  # the broken record was skipped
    assert "record 2" in r.output
    diags = [json.loads(x) for x in pred.read_text().splitlines()]
    assert {d["trajectory_id"]: (d["critical_step"], d["metadata"].get("source_message")) for d in diags} == {
        IDS["m1_blocked_pricing"]: (4, 2), IDS["m3_scroll_loop"]: (2, 1),
        IDS["m5_invented_year"]: (11, 7), IDS["m7_missing_file"]: (11, 7)}
    r = CliRunner().invoke(cli, ["eval", "--gold", str(magentic_gold), "--pred", str(pred), str(magentic),
                                 "--format", "json", "--bootstrap", "10"])
    assert r.exit_code == 1, r.output  # the dataset's broken record is reported again
    rep = json.loads(r.stdout)
    m = rep["metrics"]
    # gold groups: m1 2, m3 5, m5 7, m7 7 -> three exact (m3 predicted group 1)
    assert round(m["step_exact"]["value"] * 4) == 3
    rows = {row["key"]: row for row in rep["rows"]}
    assert (rows[IDS["m3_scroll_loop"]]["gold_step"], rows[IDS["m3_scroll_loop"]]["pred_step"]) == (5, 1)
    assert rows[IDS["m7_missing_file"]]["n_steps"] == 12  # steps (groups), not substeps
    # the gold preview is the first substep of the gold group, the prediction's the critical substep
    assert rows[IDS["m7_missing_file"]]["gold_preview"].startswith("Orchestrator: Updated Ledger")
    # eval running the strategy itself (run_strategy) scores the same positions as audit's diagnoses
    r = CliRunner().invoke(cli, ["eval", str(magentic), "--gold", str(magentic_gold), "-s", "offline",
                                 "--format", "json", "--bootstrap", "10"])
    assert r.exit_code == 1, r.output
    again = json.loads(r.stdout)
    assert [(x["pred_step"], x["exact"]) for x in again["rows"]] == [(x["pred_step"], x["exact"]) for x in rep["rows"]]
    assert round(again["metrics"]["step_exact"]["value"] * 4) == 3


def test_annotations_as_json_list_and_root_cause_fields(magentic_gold, tmp_path):
    rows = [json.loads(x) for x in magentic_gold.read_text().splitlines()]
    for r in rows:
        del r["root_cause"]  # only the flat root_cause_failure_id is left
    rows[0]["root_cause"] = {"failure_id": "9"}  # disagrees with root_cause_failure_id "1"
    p = tmp_path / "gold.json"
    p.write_text(json.dumps(rows))
    gold = load_gold(p)
    assert [g.critical_step for g in gold.values()] == [None, 5, 7, 7]
    assert gold.problems[0] == (f"{IDS['m1_blocked_pricing']}: root_cause.failure_id '9' and root_cause_failure_id "
                                "'1' differ (used root_cause.failure_id)")
    assert gold[IDS["m7_missing_file"]].reason == "why"  # root_cause_reason
    bad = tmp_path / "bad.jsonl"
    bad.write_text(magentic_gold.read_text().splitlines()[0] + "\n{not json\n")
    g2 = load_gold(bad)
    assert len(g2) == 1 and g2.problems == ["line 2: not valid JSON (Expecting property name enclosed in double "
                                            "quotes) (skipped)"]


def _tau_record(rec: dict) -> dict:
    """A tau run as a step record: one step per message; tool calls kept as OpenAI fields."""
    steps = []
    for g, m in enumerate(rec["traj"]):
        sub = {"sub_index": 0, "role": m["role"], "content": m.get("content") or ""}
        sub.update({k: m[k] for k in ("tool_calls", "tool_call_id", "name") if k in m})
        steps.append({"index": g + 1, "substeps": [sub]})
    first_user = next(m["content"] for m in rec["traj"] if m["role"] == "user")
    return {"trajectory_id": f"tau_retail_{rec['task_id']}", "instruction": first_user, "steps": steps}


def test_tau_records_pair_with_bare_annotation_ids(tmp_path, tau_file, tau_gold):
    recs = json.loads(tau_file.read_text())[:3]
    gt = {str(e["trajectory_id"]): e for e in tau_gold}
    data = tmp_path / "tau_retail_dataset.jsonl"
    data.write_text("".join(json.dumps(_tau_record(r)) + "\n" for r in recs))
    ann = tmp_path / "tau_retail.jsonl"
    ann.write_text("".join(json.dumps(gt[str(r["task_id"])]) + "\n" for r in recs))
    runs = load_path(data).trajectories
    orig = [load(tau_file, record=i) for i in range(3)]
    assert [t.id for t in runs] == [f"tau_retail_{r['task_id']}" for r in recs]
    for a, b in zip(runs, orig, strict=True):  # one substep per step: the same steps as the tau reading
        assert [(s.kind, s.agent, s.tool_names, s.source_number) for s in a.steps] == \
               [(s.kind, s.agent, s.tool_names, s.source_number - 1) for s in b.steps]
        assert not any(FLAG_SPLIT_MESSAGE in s.flags for s in a.steps)
    gold = load_gold(ann)
    assert sorted(gold) == sorted(str(r["task_id"]) for r in recs)
    assert suffix_aliases(gold, [t.id for t in runs]) == {t.id: t.id.rsplit("_", 1)[1] for t in runs}
    diags = [audit(t) for t in runs]
    base = evaluate(load_gold(tau_file.parent / "ground_truth.json"), [audit(t) for t in orig], trajectories=orig, resamples=10)
    rep = evaluate(gold, diags, trajectories=runs, resamples=10)
    assert rep.n_matched == 3 and "unmatched_predictions" not in rep.problems
    assert [row.pred_step for row in rep.rows] == [d.critical_step for d in diags]
    sub = {row.key: row.exact for row in base.rows if row.key in gold}
    assert {row.key: row.exact for row in rep.rows} == sub


def test_ambiguous_suffixes_do_not_pair():
    assert suffix_aliases(["2", "12"], ["tau_retail_2", "tau_retail_12"]) == {"tau_retail_2": "2",
                                                                              "tau_retail_12": "12"}
    assert suffix_aliases(["2"], ["a_2", "b_2"]) == {}  # two runs end with _2
    assert suffix_aliases(["2"], ["2", "tau_retail_2"]) == {}  # a run has the id itself
    assert suffix_aliases(["2", "retail_2"], ["tau_retail_2"]) == {}  # two keys fit one run
    assert suffix_aliases(["2"], ["_2", "tau_retail_2_"]) == {}


def test_one_scoring_rule_for_split_runs():
    """source_message (split Anthropic messages, step records) wins over critical_step; a cleared
    critical_step is no prediction whatever the metadata says."""
    d = Diagnosis.from_dict({"trajectory_id": "r", "critical_step": 5, "metadata": {"source_message": 3}})
    assert scored_step(d) == 3
    assert scored_step(Diagnosis.from_dict({"trajectory_id": "r", "critical_step": 5})) == 5
    assert scored_step(Diagnosis.from_dict({"trajectory_id": "r", "critical_step": None,
                                            "metadata": {"source_message": 3}})) is None
    t = load(Path(__file__).resolve().parents[2] / "data" / "dialects" / "anthropic_parallel.jsonl", record=0)
    a = audit(t)
    assert a.metadata["source_message"] == t.steps[a.critical_step].source_number
    rep = evaluate({t.id: GoldItem(t.id, a.metadata["source_message"])}, [a], trajectories=[t], resamples=10)
    assert rep.metrics["step_exact"].value == 1.0


def test_substeps_strings_are_parsed_safely():
    assert parse_substeps('[{"role": "user", "content": "hi"}]', "$") == [{"role": "user", "content": "hi"}]
    assert parse_substeps("[{'role': 'WebSurfer', 'content': None, 'x': (1, True)}]", "$") == [
        {"role": "WebSurfer", "content": None, "x": [1, True]}]
    cases = {
        "__import__('os').system('true')": "neither a JSON nor a Python-literal list (ValueError: malformed node",
        "[{'role': 'a', 'content': {1, 2}}]": "(ValueError: set is not JSON data)",
        "[{1: 'a'}]": "(ValueError: a key is not a string (1))",
        "{'role': 'a'}": "'substeps' string holds a dict, not a list",
        "[" * 150 + "]" * 150: "'substeps' string: nested too deeply",  # JSON, refused by safe_json
        "[" * 150 + "None" + "]" * 150: "'substeps' string: nested too deeply",  # a literal, then too_deep
        "(" * 300 + ")" * 300: "too many nested parentheses",
        "[" + "None," * (MAX_LITERAL_TOKENS + 1) + "None]": "too many elements",
    }
    for text, why in cases.items():
        with pytest.raises(TraceFormatError) as e:
            parse_substeps(text, "$.steps[4].substeps")
        assert why in str(e.value) and "$.steps[4].substeps" in str(e.value), str(e.value)[:200]
    with pytest.raises(TraceFormatError, match=re.escape("'substeps' must be a list (or a string holding one), got int")):
        parse_substeps(3, "$")


def test_a_refused_expression_is_named_without_its_memory_address():
    """literal_eval's ValueError names the node by its repr ("<ast.Call object at 0x7f…>"): the skip
    line, and so an audit report listing it, differed from run to run (--jobs 2 vs serial too)."""
    text = "[{'role': 'human', 'content': __import__('os').system('true')}, {'role': 'x', 'content': 10**9}]"
    messages = set()
    for _ in range(2):
        with pytest.raises(TraceFormatError) as e:
            parse_substeps(text, "$.steps[0].substeps")
        messages.add(str(e.value))
    assert messages == {"$.steps[0].substeps: 'substeps' string is neither a JSON nor a Python-literal list "
                        "(ValueError: malformed node or string on line 1: Call expression)"}


def test_empty_step_and_forced_format(tmp_path):
    msgs = bare("m1_blocked_pricing")
    rec = record("r1", msgs)
    rec["steps"].insert(1, {"index": 2, "substeps": []})
    for k, s in enumerate(rec["steps"]):
        s["index"] = k + 1
    p = tmp_path / "one.json"
    p.write_text(json.dumps([rec, {"trajectory_id": "r2", "steps": "nope"}]))
    res = load_path(p, format="agentrx_steps")
    t = res.trajectories[0]
    assert FLAG_DROPPED_MESSAGE in t.flags and t.steps[1].source_number == 2
    assert [p.message.split(": ", 1)[1] for p in res.problems] == ["'steps' must be a list, got str (format: agentrx_steps)"]
    d = audit(t)
    assert d.metadata["source_message"] == t.steps[d.critical_step].source_number
    r = CliRunner().invoke(cli, ["show", str(p), "--record", "0"])
    assert r.exit_code == 0 and " msg " in r.output


def test_gold_modules_share_one_definition_without_a_cycle(tmp_path):
    """gold_agentrx takes the gold types and readers from gold_items, not back from gold.py (which
    imports gold_agentrx): no forwarding functions with local imports in gold.py."""
    import ast

    import trajaudit.eval.gold as gold
    import trajaudit.eval.gold_agentrx as gold_agentrx
    import trajaudit.eval.gold_items as gold_items

    assert gold.load_agentrx_gold is gold_agentrx.load_agentrx_gold
    assert gold.suffix_aliases is gold_agentrx.suffix_aliases
    assert gold.GoldItem is gold_agentrx.GoldItem is gold_items.GoldItem

    def imports(mod) -> set[str]:
        tree = ast.parse(Path(mod.__file__).read_text())
        return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}

    assert "trajaudit.eval.gold" not in imports(gold_agentrx) | imports(gold_items)
    assert "trajaudit.eval.gold_agentrx" not in imports(gold_items)
    ann = tmp_path / "gold.json"  # detect_gold_format's JSON branch uses agentrx_entry too
    ann.write_text(json.dumps([{"trajectory_id": "a", "root_cause_failure_id": "1"}, {"trajectory_id": "b",
                                                                                    "failures": []}]))
    assert detect_gold_format(ann) == "agentrx"
    ann.write_text(json.dumps([{"trajectory_id": "a", "root_cause_failure_id": "1"}, {"trajectory_id": "b"}]))
    with pytest.raises(Exception, match="unknown gold format"):
        detect_gold_format(ann)
