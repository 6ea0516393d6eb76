"""Claim ledger and claim-dependency graph (issue 5) on real runs and minimal edits of them."""

from __future__ import annotations

import dataclasses

import pytest

from trajaudit.engine.claims import ClaimConfig, Support, build_claim_graph
from trajaudit.engine.claims.normalize import norm_number
from trajaudit.engine.trace.ir import Step, ToolCall, Trajectory


def _claim(g, step, value, kind=None):
    hits = [c for c in g.claims if c.step == step and c.value == value and (kind is None or c.kind == kind)]
    assert hits, f"no claim {value!r} at step {step}: {[(c.step, c.value) for c in g.claims]}"
    return hits[0]


def test_tau2_available_count_conflicts_with_latest_tool_output(tau_runs):
    g = build_claim_graph(tau_runs["2"])
    c = _claim(g, 6, "11", "count")
    assert c.address == "steps.6.content[21:49]"
    assert c.text == "11 available T-shirt options"
    assert c.status is Support.CONFLICTING
    assert c.evidence_address == "steps.5.content.variants"
    assert c.evidence_value == 10  # 10 of the 12 variants have "available": true
    assert c.consequential and c.final_steps == [6]  # a reply to the user's question
    p = g.propagate()
    assert p.first_error_step == 6
    assert p.chains[6] == [c.id]


def test_tau2_ids_copied_from_tool_output_are_direct(tau_runs):
    g = build_claim_graph(tau_runs["2"])
    order = _claim(g, 28, "w2378156") if any(c.step == 28 and c.value == "w2378156" for c in g.claims) \
        else next(c for c in g.claims if c.value == "w2378156")
    assert order.status is Support.DIRECT and order.step == 24
    assert order.address == "steps.24.tool_calls.0.arguments.order_id"
    assert order.evidence_address == "steps.13.content[443:452]"  # the user's order list
    assert order.reused_in == [26, 28]
    item = _claim(g, 28, "4602305039")
    assert item.kind == "id" and item.status is Support.DIRECT
    assert item.address == "steps.28.tool_calls.0.arguments.item_ids.0"
    assert item.evidence_address.startswith("steps.25.content[")
    assert 28 in item.final_steps  # return_delivered_order_items is a write call
    assert 28 in g.write_steps


def test_invented_item_id_in_write_call_is_missing(tau_runs):
    t = tau_runs["2"]
    s28 = t.steps[28]
    call = s28.tool_calls[0]
    args = dict(call.arguments, item_ids=["4602305039", "4202497723", "1234567890"])  # last id never shown
    steps = list(t.steps)
    steps[28] = dataclasses.replace(s28, tool_calls=(dataclasses.replace(call, arguments=args),))
    g = build_claim_graph(dataclasses.replace(t, steps=tuple(steps)))
    c = _claim(g, 28, "1234567890")
    assert c.status is Support.MISSING and c.evidence_address is None
    assert c.address == "steps.28.tool_calls.0.arguments.item_ids.2"
    p = g.propagate()
    assert 28 in p.error_steps and p.roles[28] == "commit"
    assert p.first_error_step == 6  # the earlier count conflict stays first


def test_status_and_completion_claims(tau_runs):
    g = build_claim_graph(tau_runs["2"])
    st = _claim(g, 26, "delivered", "status")
    assert st.status is Support.DIRECT and st.evidence_address == "steps.25.content.status"
    done = _claim(g, 30, "processed", "status")
    assert done.status is Support.DIRECT and done.evidence_address == "steps.29.content"


def test_fabricated_figures_propagate_to_final_answer(ww_runs):
    # Who&When 10: the agent states census figures no tool or user gave, computes with them, answers.
    g = build_claim_graph(ww_runs["10"])
    fabricated = [c for c in g.at(5) if c.status is Support.MISSING and c.consequential]
    assert fabricated, [(c.value, c.status) for c in g.at(5)]
    assert g.final_step == 9
    p = g.propagate()
    assert p.first_error_step == 5
    assert 9 in p.error_steps


def test_benign_unsupported_claim_is_not_an_error():
    steps = (
        Step(index=0, kind="user", role="user", content="What is the capital of France?"),
        Step(index=1, kind="agent", role="assistant", agent="a", content="Maybe the population is 2,100,000."),
        Step(index=2, kind="agent", role="assistant", agent="a", content="I'll look it up.",
             tool_calls=(ToolCall(name="search", arguments={"q": "capital of France"}, id="1"),)),
    )
    from trajaudit.engine.trace.ir import Source

    t = Trajectory(id="x", steps=steps, source=Source(format="openai"))
    g = build_claim_graph(t, ClaimConfig(replies_are_final=False))
    c = _claim(g, 1, "2100000")
    assert c.status is Support.MISSING and not c.consequential
    assert g.propagate().error_steps == ()


@pytest.mark.parametrize("text,value", [
    ("$1,819.92", "1819.92"), ("1.234,5", "1234.5"), ("2.5 million", "2500000"), ("١٢٣", "123"),
    ("eleven", "11"), ("50.880", "50.88"), ("1 234", "1234"), ("3,5", "3.5"), ("1.2.3", None),
])
def test_number_normalization(text, value):
    assert norm_number(text) == value


def test_a_completion_after_only_look_ups_is_not_supported_by_them():
    """"has been processed" after a get_order that succeeded: a look-up shows state, it does not do what
    the claim says was done — the claim is not DIRECT through it (it was, citing the look-up); after a
    successful write-like call it is."""
    from trajaudit import load

    def run(tool):
        return load([
            {"role": "user", "content": "Please refund order 7."},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": tool, "arguments": '{"order_id": "7"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "name": tool, "content": '{"order_id": "7", "status": "pending"}'},
            {"role": "assistant", "content": "Your refund has been processed successfully."},
        ])

    looked = [c for c in build_claim_graph(run("get_order")).claims if c.step == 3 and c.value == "processed"]
    assert looked and all(c.status is not Support.DIRECT for c in looked), [(c.value, c.status) for c in looked]
    assert "only read-only tools succeeded (get_order)" in looked[0].note
    done = [c for c in build_claim_graph(run("refund_order")).claims if c.step == 3 and c.value == "processed"]
    assert done and done[0].status is Support.DIRECT and done[0].evidence_address == "steps.2.content"
    # names split as ClaimConfig.is_write_tool splits them: PascalCase, upper case, kebab-case
    for tool in ("GetOrder", "GET_ORDER", "fetch-order"):
        looked = [c for c in build_claim_graph(run(tool)).claims if c.step == 3 and c.value == "processed"]
        assert looked and looked[0].status is Support.MISSING, (tool, [(c.value, c.status) for c in looked])
    done = [c for c in build_claim_graph(run("RefundOrder")).claims if c.step == 3 and c.value == "processed"]
    assert done and done[0].status is Support.DIRECT


def test_a_number_with_two_adjacent_digits_swapped_conflicts_with_the_number_shown():
    from trajaudit import load
    from trajaudit.engine.claims.support import transposed

    assert transposed(12483, 12843) and transposed(2013, 2031)
    assert not transposed(12483, 12483)       # the same number is support, not a misreading
    assert not transposed(123, 213)           # under 4 digits: too easy a coincidence
    assert not transposed(12483, 12348)       # a rotation, not one adjacent swap
    assert not transposed(12483, 12883)       # a different digit, not a swap
    assert not transposed(1248.5, 1284.5) and not transposed(-12483, 12843)
    t = load([{"role": "user", "content": "What was the 2020 population of Harlow Creek?"},
              {"role": "assistant", "content": None, "tool_calls": [
                  {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q": "Harlow Creek"}'}}]},
              {"role": "tool", "tool_call_id": "c1", "name": "search", "content": "Population (2020): 12,483"},
              {"role": "assistant", "content": "The population was 12,843 in 2020."}])
    c = _claim(build_claim_graph(t), 3, "12843")
    assert c.status is Support.CONFLICTING and c.evidence_value == 12483 and "swapped" in c.note


def test_terminal_escape_sequences_are_not_numbers():
    """"\\x1b[0m" (a colour reset pasted from a terminal) held "0m" as a number claim (fresh-user pass):
    CSI sequences are blanked before the scan, offsets of the other claims unchanged, and the same text
    without escapes gives the same claims."""
    from trajaudit import load
    from trajaudit.engine.claims.extract import RegexExtractor
    from trajaudit.engine.claims.patterns import mask_escapes

    text = "Build: \x1b[32mOK\x1b[0m, 12 tests passed for order 98765 \x1b[1;31mfailed\x1b[0m at 3.5 s."
    got = [(x.kind, x.value, x.text, x.address) for x in RegexExtractor().text_mentions(text, 3, "steps.3.content")]
    a = text.index("12 tests")
    b = text.index("98765")
    c = text.index("3.5 s")
    assert [g[:3] for g in got] == [("count", "12", "12 tests"), ("number", "98765", "98765"),
                                    ("number", "3.5", "3.5 s")]
    assert [g[3] for g in got] == [f"steps.3.content[{a}:{a + 8}]", f"steps.3.content[{b}:{b + 5}]",
                                   f"steps.3.content[{c}:{c + 5}]"]
    assert mask_escapes(text) == text.replace("\x1b[32m", " " * 5).replace("\x1b[0m", " " * 4) \
        .replace("\x1b[1;31m", " " * 7)
    assert mask_escapes("a \x1b lone ESC, an unfinished \x1b[") == "a \x1b lone ESC, an unfinished \x1b["
    g = build_claim_graph(load([{"role": "user", "content": "Run the tests."},
                                {"role": "assistant", "content": "\x1b[0mDone: 42 passed\x1b[0m"}]))
    assert [c.value for c in g.claims if c.step == 1 and c.kind == "number"] == ["42"]


def test_terminal_escape_sequences_are_not_evidence_values():
    """The evidence side too: a tool output pasted from a terminal ("\\x1b[0m") does not supply the
    number 0 (or the value "0m", "1;31m") that a claim could lean on; its real values keep their
    offsets, and the digest equals its reference definition."""
    from trajaudit.engine.claims import sources

    text = "\x1b[1;31mstatus: delivered\x1b[0m, 5 items, order 98765"
    d = sources.digest(text, "tool", 100_000)
    assert [n[0] for n in d.numbers] == [5.0, 98765.0]
    assert not any(k in d.values for k in ("0", "0m", "1;31m", "31m"))
    five = text.index("5 items")
    assert d.suffix("5") == f"[{five}:{five + 1}]"
    values, _ = sources._analyse_reference(text, "tool", 100_000)
    assert values == d.values


def test_osc_string_and_8_bit_escape_sequences_are_not_values():
    """Beyond CSI (fresh-user pass): an OSC 8 hyperlink's URL became the URL claim
    "https://ex.com/o/777\\x1b\\\\order\\x1b" (a false claim-values-grounded violation), a window title
    "\\x1b]0;win 31337\\x07" the number claim 31337, the 8-bit CSI "\\x9b31m" the claim "31m". OSC, DCS/APC/
    PM/SOS strings, two-byte ESC sequences and 8-bit CSI/OSC are blanked too (the hyperlink's text
    stays, its URL is not displayed); offsets kept; mis-decoded UTF-8 quotes (U+009D) are left."""
    from trajaudit.engine.claims.extract import RegexExtractor
    from trajaudit.engine.claims.patterns import has_escapes, mask_escapes

    def claims(text):
        return [(x.kind, x.value, x.text) for x in RegexExtractor().text_mentions(text, 1, "steps.1.content")]

    link = "\x1b]8;;https://ex.com/o/777\x1b\\order\x1b]8;;\x1b\\"
    assert mask_escapes(link) == " " * 27 + "order" + " " * 7
    assert claims(f"See {link} 4521 for details.") == [("number", "4521", "4521")]
    assert claims("\x1b]0;win 31337\x07Total: 48 files") == [("count", "48", "48 files")]
    assert claims("\x1b]2;title 31337\x1b\\ok") == []
    assert claims("\x9b31mred\x9b0m 7.5 kg") == [("number", "7.5", "7.5 kg")]
    assert claims("\x9d0;win 31337\x07 done") == []
    assert claims("\x1bP1$r0;31m\x1b\\ \x1b_app 55555\x1b\\ \x1b^pm 66666\x1b\\ \x1bXsos 77777\x1b\\ 9.5 s") \
        == [("number", "9.5", "9.5 s")]
    assert mask_escapes("\x1b7saved\x1b8 \x1b(B42 kg\x1bc") == "  saved   " + "   42 kg  "
    # text between two mis-decoded curly quotes ("\u00e2\u20ac\x9c" ... "\u00e2\u20ac\x9d") is not a command
    quoted = "He said \u00e2\u20ac\x9chello\u00e2\u20ac\x9d 4521 times \u00e2\u20ac\x9cbye\u00e2\u20ac\x9d"
    assert mask_escapes(quoted) == quoted
    # unfinished sequences are left as they are
    for s in ("\x1b]0;title with no end", "\x1bP no end", "\x9b", "\x9d0;x"):
        assert mask_escapes(s) == s
    assert has_escapes("a\x9bb") and has_escapes("\x9d") and has_escapes("\x1b") and not has_escapes("a\u009a")


def test_an_osc_8_hyperlink_is_no_ungrounded_claim_in_check():
    """``check`` on a run whose answer holds an OSC 8 hyperlink reported the URL with the escape
    characters glued to it as a value the tools never showed (generic.provenance.claim-values-grounded);
    the link text is checked as before."""
    from trajaudit import load
    from trajaudit.engine.run.batch import audit_trajectories
    from trajaudit.engine.run.pipeline import AuditSpec

    link = "\x1b]8;;https://ex.com/o/777\x1b\\order\x1b]8;;\x1b\\"
    run = load([{"role": "user", "content": "Open my order."},
                {"role": "assistant", "content": f"Here is your {link}."}])
    res = audit_trajectories([run], AuditSpec())
    assert not res.problems
    recs = [r for r in res.results[0].log.records if r.rule_id == "generic.provenance.claim-values-grounded"]
    assert not [r for r in recs if "ex.com" in r.message], [r.message for r in recs]


def test_a_number_keeps_its_unit_and_currency_across_a_blanked_escape_sequence():
    """docs/claims.md's known limit: "\\x1b[1m12\\x1b[0m%" is displayed "12%", but blanking the colour
    codes left "12" and "%" apart, so "3\\x1b[0m km" was no claim (a bare small number), "$\\x1b[1m40" the
    number 40 instead of money, on the claim side and in evidence. A number is read with the unit, scale
    word or currency sign that only blanked sequences (and at most one space) separate it from: the
    claims of the displayed text, their addresses spanning the sequences; the evidence digest the same,
    equal to its reference definition. Two real spaces still part them; digits are not glued."""
    from trajaudit.engine.claims import sources
    from trajaudit.engine.claims.extract import RegexExtractor

    def claims(text):
        return [(x.kind, x.value, x.text, x.address) for x in RegexExtractor().text_mentions(text, 1, "s")]

    text = "Discount \x1b[1m12\x1b[0m% on $\x1b[1m40\x1b[0m, \x1b[1m3\x1b[0m km away"
    shown = "Discount 12% on $40, 3 km away"
    got, plain = claims(text), claims(shown)
    assert [g[:3] for g in got] == [g[:3] for g in plain] == [("number", "12", "12%"), ("money", "40", "$40"),
                                                              ("number", "3", "3 km")]
    a, b, c = text.index("12"), text.index("$"), text.index("3\x1b")
    assert [g[3] for g in got] == [f"s[{a}:{text.index('%') + 1}]", f"s[{b}:{text.index('40') + 2}]",
                                   f"s[{c}:{text.index('km') + 2}]"]
    d = sources.digest(text, "tool", 100_000)
    assert d.numbers == ((12.0, a, text.index("%") + 1), (40.0, b, text.index("40") + 2), (3.0, c, text.index("km") + 2))
    assert sources._analyse_reference(text, "tool", 100_000)[0] == d.values
    assert claims("share 12\x1b[0m  % and 12\x1b[0m34 rows")[:1] == [("number", "12", "12", "s[6:8]")]
