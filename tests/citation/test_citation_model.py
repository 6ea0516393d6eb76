"""The invocation model and its readers: native JSON form, jmespath mappings, markers, bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trajaudit.citation import CitationMapping, OutputRef, load_run, run_from_dict
from trajaudit.citation.model import (
    DEFAULT_CITATION_PATTERN,
    CitationResolver,
    Document,
    extract_markers,
    sentences_with_citations,
    split_sentences,
)
from trajaudit.errors import TraceFormatError

EX = Path(__file__).resolve().parents[2] / "examples" / "citation"
PAT = re.compile(DEFAULT_CITATION_PATTERN)


def test_example_run_structure():
    run = load_run(EX / "ev_market.json")
    assert run.id == "ev-market-2023" and run.final == "orchestrator-1"
    assert [i.id for i in run.invocations] == ["searcher-1", "searcher-2", "searcher-3", "researcher-1", "orchestrator-1"]
    r = run.invocation("researcher-1")
    # query + 3 + 2 + 1 searcher outputs, one input unit per upstream output
    assert [u.kind for u in r.inputs] == ["query", "snippet", "snippet", "note", "note", "note", "snippet"]
    assert r.inputs[0].citations == frozenset() and r.inputs[3].citations == {"D1"}
    assert r.inputs[3].sources == (OutputRef("searcher-1", 2),)
    assert r.inputs[6].citations == {"D3"}  # the URL citation resolved to the document id
    orch = run.final_invocation
    assert len(orch.outputs) == 7
    assert orch.outputs[2].text == "China accounted for about 60% of new electric car registrations."
    assert orch.outputs[2].citations == frozenset()
    assert orch.outputs[6].citations == {"D1"} and orch.outputs[6].raw_citations == ("https://example.org/ev-outlook-2024/",)
    assert orch.outputs[1].text.endswith("up 35% on 2022.") and "[" not in orch.outputs[1].text
    assert run.invocation("searcher-1").outputs[0].kind == "snippet"
    assert set(run.graph().edges) == {("searcher-1", "researcher-1"), ("searcher-2", "researcher-1"),
                                      ("searcher-3", "researcher-1"), ("researcher-1", "orchestrator-1")}


def test_markers_attach_to_the_sentence_they_end():
    res = CitationResolver({"D1": Document("D1", "", "https://a.org/x"), "D2": Document("D2", "")}, {"7": "D2"})
    clean, sents = sentences_with_citations(
        "Sales rose 35% in 2023. [D1] Prices fell [7; https://A.org/x/#frag]. No source here. Dr. Smith agrees [D2].",
        PAT, res)
    assert clean == "Sales rose 35% in 2023. Prices fell. No source here. Dr. Smith agrees."
    assert [(clean[s.start:s.end], sorted(s.citations)) for s in sents] == [
        ("Sales rose 35% in 2023.", ["D1"]), ("Prices fell.", ["D1", "D2"]), ("No source here.", []),
        ("Dr. Smith agrees.", ["D2"])]


def test_markdown_links_and_decimals_are_not_markers_or_boundaries():
    clean, markers = extract_markers("See [the survey](https://x.org) for 3.5 million [S1, S2].", PAT)
    assert clean == "See [the survey](https://x.org) for 3.5 million." and markers[0][2] == ["S1", "S2"]
    assert len(split_sentences("It grew 3.5 times, e.g. in Asia. Then it fell.")) == 2


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.text("abcXYZ 0123.,%", min_size=1, max_size=25),
                          st.lists(st.sampled_from(["D1", "D2", "7"]), max_size=2)), min_size=1, max_size=6))
def test_sentence_splitting_properties(pieces):
    text = " ".join(p + (" [" + ", ".join(c) + "]" if c else "") + "." for p, c in pieces)
    res = CitationResolver({}, {})
    clean, sents = sentences_with_citations(text, PAT, res)
    assert "[" not in clean
    last = 0
    for s in sents:
        assert last <= s.start < s.end <= len(clean) and clean[s.start:s.end].strip() == clean[s.start:s.end]
        last = s.end
    cited = {c for _, cs in pieces for c in cs}
    assert set().union(*(s.citations for s in sents)) == cited


# ------------------------------------------------------------------------------------------ bad input

def _doc(**over):
    d = {"format": "trajaudit.citation-run", "documents": [{"id": "D1", "text": "Sales rose 35%."}],
         "invocations": [{"id": "a", "agent": "searcher", "inputs": [{"document": "D1"}], "outputs": ["Sales rose 35% [D1]."]},
                         {"id": "b", "agent": "writer", "inputs": [{"from": "a"}], "outputs": ["Sales rose 35% [D1]."]}]}
    d.update(over)
    return d


@pytest.mark.parametrize("mutate, path, message", [
    (lambda d: d.pop("format"), "$", "'format' is a required property"),
    (lambda d: d["invocations"][1].update(id="b.c"), "$.invocations[1].id", "does not match"),
    (lambda d: d["invocations"][1]["inputs"].append({"kind": "note"}), "$.invocations[1].inputs[1]", "not valid"),
    (lambda d: d["invocations"][0]["outputs"].append(42), "$.invocations[0].outputs[1]", "not valid"),
    (lambda d: d["invocations"][1].update(id="a"), "$.invocations[1].id", "duplicate invocation id 'a'"),
    (lambda d: d["invocations"][0]["inputs"][0].update(document="D9"), "$.invocations[0].inputs[0].document",
     "unknown document 'D9'"),
    (lambda d: d["invocations"][1]["inputs"][0].update({"from": "x.outputs.0"}), "$.invocations[1].inputs[0].from",
     "unknown invocation or output 'x.outputs.0'"),
    (lambda d: d["invocations"][1]["inputs"][0].update({"from": ["a.outputs.3"]}), "$.invocations[1].inputs[0].from[0]",
     "output 3 of 'a', which has 1"),
    (lambda d: d["invocations"][0]["inputs"].append({"from": "b"}), "$.invocations", "cycle: "),
    (lambda d: d.update(final="zz"), "$.final", "final invocation 'zz' does not exist"),
    (lambda d: d["invocations"].append({"id": "c", "agent": "x", "outputs": ["Other [D1]."]}), "$.final",
     "cannot infer the final invocation (candidates: b, c)"),
    (lambda d: d.update(citation_pattern="[("), "$.citation_pattern", "invalid citation_pattern"),
    (lambda d: d.update(citation_pattern=r"\[\w+\]"), "$.citation_pattern", "needs a capturing group"),
    (lambda d: d["invocations"][0].update(output_text="X [D1]."), "$.invocations[0].output_text", "not both"),
    (lambda d: d["invocations"][0]["outputs"].append("[D1]"), "$.invocations[0].outputs[1].text", "only citation markers"),
])
def test_bad_runs_raise_with_file_and_json_path(tmp_path, mutate, path, message):
    d = _doc()
    mutate(d)
    p = tmp_path / "run.json"
    p.write_text(json.dumps(d))
    with pytest.raises(TraceFormatError) as ei:
        load_run(p)
    e = ei.value
    assert e.file == str(p) and e.json_path == path and message in e.message, str(e)
    assert str(p) in str(e) and path in str(e)


@pytest.mark.parametrize("content, message", [(b"", "file is empty"), (b"{", "invalid JSON at line 1"),
                                              (b"\xff\xfe{}", "looks UTF-16 encoded")])
def test_unreadable_files(tmp_path, content, message):
    p = tmp_path / "x.json"
    p.write_bytes(content)
    with pytest.raises(TraceFormatError, match=message):
        load_run(p)


def test_final_is_inferred_and_output_text_is_split():
    d = _doc()
    d["invocations"][1] = {"id": "b", "agent": "writer", "inputs": [{"from": "a.outputs.0", "text": "Sales rose."}],
                           "output_text": "Sales rose 35% [D1]. That is all."}
    run = run_from_dict(d)
    assert run.final == "b" and [o.text for o in run.final_invocation.outputs] == ["Sales rose 35%.", "That is all."]
    unit = run.final_invocation.inputs[0]
    assert unit.text == "Sales rose." and unit.citations == {"D1"} and unit.sources == (OutputRef("a", 0),)


# ------------------------------------------------------------------------------------------ mappings

def test_mapping_produces_the_native_run():
    native = load_run(EX / "ev_market.json")
    mapped = load_run(EX / "aiq_like_trace.json", mapping=EX / "mappings" / "aiq_like.yaml")
    assert mapped.format == "aiq-like" and mapped.final == native.final and mapped.id == native.id
    for a, b in zip(native.invocations, mapped.invocations, strict=True):
        assert (a.id, a.agent, [u.text for u in a.inputs], [u.sources for u in a.inputs]) == \
               (b.id, b.agent, [u.text for u in b.inputs], [u.sources for u in b.inputs])
        assert [(o.text, o.kind) for o in a.outputs] == [(o.text, o.kind) for o in b.outputs]
        # citation ids differ (D1 vs 1) but map one to one
        assert [len(o.citations) for o in a.outputs] == [len(o.citations) for o in b.outputs]


@pytest.mark.parametrize("spec, message", [
    ([1, 2], "at least an 'invocations' expression"),
    ({"invocations": "spans", "runs": "x"}, "unknown mapping keys: runs"),
    ({"invocations": "spans[?"}, "bad jmespath for 'invocations'"),
    ({"invocations": "spans", "input": {"url": "u"}}, "unknown input fields: url"),
    ({"invocations": "spans", "kinds": {"output": {"x": "summary"}}}, "kinds.output maps to unknown kinds ['summary']"),
])
def test_bad_mappings(spec, message):
    with pytest.raises(TraceFormatError, match=re.escape(message)):
        CitationMapping(spec, origin="m.yaml")


def test_mapping_errors_name_the_trace_and_the_mapped_path(tmp_path):
    trace = json.loads((EX / "aiq_like_trace.json").read_text())
    trace["spans"][2]["attributes"]["parents"] = ["searcher-9"]
    p = tmp_path / "t.json"
    p.write_text(json.dumps(trace))
    with pytest.raises(TraceFormatError) as ei:
        load_run(p, mapping=EX / "mappings" / "aiq_like.yaml")
    msg = str(ei.value)
    assert str(p) in msg and "$.invocations[1].inputs[1].from" in msg and "searcher-9" in msg
    assert "document produced by mapping" in msg
    m = tmp_path / "m.yaml"
    m.write_text("invocations: 'nope'\n")
    with pytest.raises(TraceFormatError, match="'invocations' does not yield a list"):
        load_run(p, mapping=m)


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                     max_leaves=8)


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(["format", "documents", "invocations", "final", "aliases", "citation_pattern"]), _json,
       st.integers(0, 1), st.sampled_from(["id", "agent", "inputs", "outputs", "output_text", "output_kind"]))
def test_any_malformed_value_is_a_trace_format_error(key, value, k, inv_key):
    """Replacing any top-level or invocation value by arbitrary JSON loads or raises TraceFormatError, nothing else."""
    for target in ("top", "invocation"):
        d = _doc()
        if target == "top":
            d[key] = value
        else:
            d["invocations"][k][inv_key] = value
        try:
            run_from_dict(d, file="fuzz.json")
        except TraceFormatError as e:
            assert e.file == "fuzz.json" and e.json_path
