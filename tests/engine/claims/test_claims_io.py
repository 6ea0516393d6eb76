"""Claim graph: edges, exports, validation-log records, the CLI, the extractor protocol, bad input."""

from __future__ import annotations

import json

import networkx as nx
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajaudit.cli import main
from trajaudit.engine.claims import ClaimConfig, ClaimExtractor, RegexExtractor, Support, build_claim_graph
from trajaudit.engine.claims.export import to_graphml, to_node_link, to_text
from trajaudit.engine.config import AuditConfig
from trajaudit.engine.schema import schema_errors
from trajaudit.engine.trace.ir import Source, Step, ToolCall, ToolOutput, Trajectory
from trajaudit.engine.validation_log import ValidationLog


def test_graph_edges_on_tau2(tau_runs):
    g = build_claim_graph(tau_runs["2"])
    G = g.graph
    assert isinstance(G, nx.DiGraph)
    count = next(c for c in g.claims if c.kind == "count")
    assert G.has_edge(count.id, "step:6", key="introduced-at")
    assert G.has_edge(count.id, "step:5", key="conflicts-with")
    assert G.has_edge(count.id, "step:6", key="reaches-final")
    order = next(c for c in g.claims if c.value == "w2378156" and c.kind == "id")
    assert G.has_edge(order.id, "step:13", key="supported-by")
    assert G.has_edge(order.id, "step:28", key="reused-in")
    item = next(c for c in g.claims if c.value == "4602305039")
    assert G.has_edge(item.id, order.id, key="derived-from")  # item ids came from get_order_details(#W2378156)
    assert G.nodes["step:6"]["kind"] == "agent"


def test_exports_round_trip(tau_runs, tmp_path):
    g = build_claim_graph(tau_runs["2"])
    data = json.loads(json.dumps(to_node_link(g)))
    back = nx.node_link_graph(data, edges="links")
    assert back.number_of_nodes() == g.graph.number_of_nodes()
    assert back.number_of_edges() == g.graph.number_of_edges()
    assert data["ledger"]["propagation"]["first_error_step"] == 6
    p = tmp_path / "g.graphml"
    p.write_text(to_graphml(g))
    gm = nx.read_graphml(p)
    assert gm.number_of_edges() == g.graph.number_of_edges()
    assert gm.nodes["c2"]["status"] == "CONFLICTING"
    text = to_text(g, only_unsupported=True)
    assert "c2 CONFLICTING count    '11 available T-shirt options' @ steps.6.content[21:49]" in text
    assert "first error step: 6" in text


def test_records_enter_the_validation_log(tau_runs):
    recs = build_claim_graph(tau_runs["2"]).to_records()
    conflict = [r for r in recs if r.rule_id == "claims.conflicting-evidence"]
    assert len(conflict) == 1
    r = conflict[0]
    assert (r.step, r.verdict, r.severity, r.rule_type, r.origin) == (6, "fail", "error", "RELATIONAL_POST", "claims")
    assert r.targets == ("misinterpretation_of_tool_output",)
    assert [e.address for e in r.evidence] == ["steps.6.content[21:49]", "steps.5.content.variants"]
    assert r.evidence[1].value == 10
    log = ValidationLog("2")
    log.extend(recs)
    assert schema_errors("validation_log", log.to_dict()) == []


def test_missing_claims_are_provenance_records(ww_runs):
    g = build_claim_graph(ww_runs["10"])
    recs = g.to_records()
    missing = [r for r in recs if r.rule_id == "claims.missing-support" and r.severity == "error"]
    assert missing and all(r.rule_type == "PROVENANCE" for r in missing)
    assert missing[0].targets == ("invention_of_new_information",)
    assert missing[0].step == 5
    prop = [r for r in recs if r.rule_id == "claims.propagates-unsupported"]
    assert {r.step for r in prop} >= {9}


def test_claim_cap_is_reported(tau_runs):
    g = build_claim_graph(tau_runs["2"], AuditConfig(max_claims_per_step=2))
    assert any("steps.26: claim cap 2" in n for n in g.incomplete)
    assert len([c for c in g.claims if c.step == 26]) <= 2
    caps = {r.step: r for r in g.to_records() if r.rule_id == "claims.claim-cap"}
    assert caps[26].verdict == "unknown" and "max_claims_per_step" in caps[26].reason


def test_extractor_protocol_and_pluggability(tau_runs):
    assert isinstance(RegexExtractor(), ClaimExtractor)

    class OnlyIds:
        name = "only-ids"

        def extract(self, trajectory, step, config):
            for mn in RegexExtractor().extract(trajectory, step, config):
                if mn.kind == "id":
                    yield mn

    assert isinstance(OnlyIds(), ClaimExtractor)
    g = build_claim_graph(tau_runs["2"], extractors=[OnlyIds()])
    assert {c.kind for c in g.claims} == {"id", "final"}
    assert g.propagate().error_steps == ()


def test_cli_table_json_graphml(tau_file):
    r = CliRunner().invoke(main, ["claims", str(tau_file), "--record", "0", "--unsupported"])
    assert r.exit_code == 0, r.output
    assert "first error step: 6" in r.output and "CONFLICTING" in r.output and "11 available" in r.output
    r = CliRunner().invoke(main, ["claims", str(tau_file), "--record", "0", "--format", "json"])
    doc = json.loads(r.output)
    assert doc["ledger"]["claims"][1]["status"] == "CONFLICTING"
    r = CliRunner().invoke(main, ["claims", str(tau_file), "--record", "0", "--format", "graphml"])
    assert r.output.startswith("<?xml") and "conflicts-with" in r.output
    r = CliRunner().invoke(main, ["claims", str(tau_file), "--format", "graphml"])
    assert r.exit_code == 2 and "choose one with --record" in r.output


def test_cli_bad_input(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("{not json")
    r = CliRunner().invoke(main, ["claims", str(p)])
    assert r.exit_code == 2 and "invalid JSON" in r.output and "Traceback" not in r.output


def _run(tool_text: str, agent_text: str) -> Trajectory:
    steps = (
        Step(index=0, kind="user", role="user", content="help"),
        Step(index=1, kind="agent", role="assistant", agent="a",
             tool_calls=(ToolCall(name="fetch", arguments={"url": "https://x.org"}, id="1"),)),
        Step(index=2, kind="tool", role="tool", content=tool_text, tool_output=ToolOutput(call_id="1")),
        Step(index=3, kind="agent", role="assistant", agent="a", content=agent_text),
        Step(index=4, kind="user", role="user", content="thanks"),
    )
    return Trajectory(id="t", steps=steps, source=Source(format="openai"), final_answer=agent_text)


def test_huge_html_and_binary_are_bounded():
    html = "<tr><td>#W8841234</td><td>$1,234.50</td><td>2024-01-02</td></tr>\n" * 40_000  # ~2.6 MB
    binary = "".join(chr(33 + (i * 7919) % 0x2F00) for i in range(200_000))
    t = _run(html + binary, "Order #W8841234 costs $1,234.50; order #W7654321 costs 99.5 €. 订单 ١٢٣٤٥ " + binary[:5000])
    g = build_claim_graph(t)  # speed on large inputs is measured in benchmarks/bench_claims.py, not here
    by_value = {c.value: c for c in g.claims}
    assert by_value["w8841234"].status is Support.DIRECT
    assert by_value["1234.5"].status is Support.DIRECT
    assert by_value["w7654321"].status is Support.MISSING


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=400), st.text(max_size=400))
def test_any_text_builds_a_graph(tool_text, agent_text):
    g = build_claim_graph(_run(tool_text, agent_text), ClaimConfig(max_claims_per_step=20))
    p = g.propagate()
    assert all(s in (1, 3) for s in p.error_steps)
    assert all(c.status in Support for c in g.claims)
