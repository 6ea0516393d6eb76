"""Taxonomies as data: the four shipped YAML taxonomies, label normalization, bad files."""

from __future__ import annotations

import pytest

from trajaudit.engine import taxonomy as tx
from trajaudit.engine.schema import schema_errors
from trajaudit.engine.taxonomy import (
    TaxonomyError,
    UnknownCategoryError,
    label_key,
    list_taxonomies,
    load_taxonomy,
    parse_taxonomy,
)


def test_shipped_taxonomies_and_their_categories():
    assert list_taxonomies() == ["agentrx", "citation", "drift", "searchauditor"]
    ax = load_taxonomy("agentrx")
    assert len(ax.categories) == 10 and ax.fallback == "inconclusive" and "inconclusive" in ax
    assert [c.number for c in ax.categories] == list(range(1, 11))
    assert set(load_taxonomy("searchauditor").ids) == {
        "candidate_mismanagement", "search_coverage_gap", "constraint_neglect", "unverified_source_reliance",
        "entity_relation_misbinding", "unsupported_answer", "inconclusive"}
    assert load_taxonomy("searchauditor").boundary_summary.startswith("Look at what happened")
    drift = load_taxonomy("drift")
    assert len(drift.ids) == 7 and [s.id for s in drift.stages] == [
        "plan", "retrieve", "verify", "extract", "compute", "decide", "recover", "finalize"]
    assert load_taxonomy("citation").ids[:4] == (
        "hallucination", "uncited_input_reliance", "uncited_output", "insufficient_citations")
    for name in list_taxonomies():
        tax = load_taxonomy(name)
        assert schema_errors("taxonomy", tax.to_dict()) == []
        assert all(c.checklist and c.definition for c in tax.categories)


def test_every_tau_ground_truth_spelling_normalizes(tau_gold):
    ax = load_taxonomy("agentrx")
    got = {f["failure_category"]: ax.normalize(f["failure_category"]) for r in tau_gold for f in r["failures"]}
    assert got == {
        "Instruction Adherence Failure": "instruction_adherence_failure",
        "Misinterpretation of Tool Output": "misinterpretation_of_tool_output",
        "Invalid Invocation": "invalid_invocation",
        "Underspecified User Intent": "underspecified_user_intent",
        "Intent Plan Misalignment": "intent_plan_misalignment",
        "Intent Not Supported": "intent_not_supported",
        "System Failure": "system_failure",
    }


@pytest.mark.parametrize("label, expected", [
    ("Instruction/Plan Adherence Failure", "instruction_adherence_failure"),
    ("intent–plan misalignment", "intent_plan_misalignment"),
    ("Under-specified User Intent", "underspecified_user_intent"),
    ("FailureCase.MISINTERPRETATION_OF_TOOL_OUTPUT", "misinterpretation_of_tool_output"),
    ("Misinterpretation of Tool Output / Handoff Failure", "misinterpretation_of_tool_output"),
    ("9", "system_failure"),
    (10, "inconclusive"),
    ("  GUARDRAILS triggered ", "guardrails_triggered"),
])
def test_agentrx_spellings(label, expected):
    assert load_taxonomy("agentrx").normalize(label) == expected


def test_unknown_labels():
    ax = load_taxonomy("agentrx")
    assert ax.try_normalize("Candidate Mismanagement") is None
    assert ax.try_normalize("") is None and ax.try_normalize(None) is None
    with pytest.raises(UnknownCategoryError, match="not a category of taxonomy 'agentrx'"):
        ax.normalize("Candidate Mismanagement")
    assert load_taxonomy("searchauditor").normalize("Entity–Relation Misbinding") == "entity_relation_misbinding"
    assert label_key("Search & Retrieval") == label_key("search and retrieval")


def test_unknown_name_and_bad_files(tmp_path):
    with pytest.raises(TaxonomyError, match="unknown taxonomy .*shipped: agentrx"):
        load_taxonomy("agentrxx")
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "schema_version: 1\nid: t\nname: T\nsource: s\ncategories:\n"
        "  - id: a\n    name: A\n    definition: d\n    checklist: [q]\n"
        "  - id: B-bad\n    name: B\n    definition: d\n    checklist: [q]\n")
    with pytest.raises(TaxonomyError) as e:
        load_taxonomy(bad)
    assert e.value.line == 10 and e.value.path == "$.categories[1].id" and "bad.yaml:10" in str(e.value)
    clash = ("schema_version: 1\nid: t\nname: T\nsource: s\nfallback: z\ncategories:\n"
             "  - {id: a, name: Alpha, definition: d, checklist: [q]}\n"
             "  - {id: b, name: B, definition: d, checklist: [q], aliases: [ALPHA]}\n")
    with pytest.raises(TaxonomyError, match="label 'ALPHA' of 'b' clashes with category 'a'") as e:
        parse_taxonomy(clash, file="x.yaml")
    assert e.value.line == 8
    with pytest.raises(TaxonomyError, match="fallback 'z' is not a category id"):
        parse_taxonomy(clash.replace("aliases: [ALPHA]", "aliases: [Beta]"))
    with pytest.raises(TaxonomyError, match="invalid YAML"):
        parse_taxonomy("id: [unclosed\n")


def test_shipped_taxonomies_read_back_from_the_cache_equal_the_parsed_ones(fresh_pack_cache, monkeypatch):
    """A first load parses each shipped taxonomy and stores it; a later process (the memo emptied)
    rebuilds it from the entry without parsing, equal to the parsed one in every field and type; an
    edited entry is not read."""
    tx._load_shipped.cache_clear()
    parsed = {n: tx.load_taxonomy(n) for n in tx.list_taxonomies()}
    entries = sorted(fresh_pack_cache.glob("*.json"))
    assert len(entries) == len(parsed)
    tx._load_shipped.cache_clear()

    def no_parse(*a, **k):
        raise AssertionError("parsed again")

    parse = tx.parse_taxonomy
    monkeypatch.setattr(tx, "parse_taxonomy", no_parse)
    for n, t in parsed.items():
        back = tx.load_taxonomy(n)
        assert back is not t and back == t and repr(back) == repr(t)
        assert back.ids == t.ids and back.normalize(t.categories[0].name) == t.categories[0].id
    monkeypatch.setattr(tx, "parse_taxonomy", parse)
    for p in entries:
        p.write_bytes(p.read_bytes().replace(b'"id"', b'"ID"', 1))
    tx._load_shipped.cache_clear()
    assert {n: repr(tx.load_taxonomy(n)) for n in parsed} == {n: repr(t) for n, t in parsed.items()}
    tx._load_shipped.cache_clear()
