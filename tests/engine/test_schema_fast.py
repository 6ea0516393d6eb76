"""The compiled fast path of schema validation (jsonschema-rs) agrees with jsonschema (the authority)."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from json_mutation import json_values, mutate

from trajaudit import load_path
from trajaudit.engine.schema import _fast_ok, fast_validator, is_valid, schema_errors, validator
from trajaudit.engine.trace.adapters import LoadOptions

SCHEMAS = ["trajectory", "validation_log", "diagnosis", "gold", "rule_pack", "taxonomy", "citation_run"]


@pytest.fixture(scope="module")
def ir_docs(tau_file) -> list[dict]:
    runs = load_path(tau_file, options=LoadOptions(validate=False)).trajectories
    return [t.to_dict() for t in runs[:3]]


def test_every_shipped_schema_gets_a_fast_path():
    for name in SCHEMAS:
        assert fast_validator(name) is not None, name


def test_fast_path_never_fetches_and_defers_on_non_json():
    import jsonschema_rs
    import pytest

    from trajaudit.engine.schema import _no_fetch

    with pytest.raises(jsonschema_rs.ValidationError, match="does not ship with trajaudit"):
        jsonschema_rs.validator_for({"$ref": "https://example.com/x.json"}, retriever=_no_fetch)
    assert not _fast_ok("gold", {1, 2})  # a set is not JSON: jsonschema decides
    assert schema_errors("gold", {1, 2}) != []


def test_real_runs_pass_both_validators(ir_docs):
    for d in ir_docs:
        assert _fast_ok("trajectory", d)
        assert validator("trajectory").is_valid(d)
        assert schema_errors("trajectory", d) == []


def test_rejections_are_reported_by_jsonschema(ir_docs):
    d = copy.deepcopy(ir_docs[0])
    expected = d["steps"][3]["is_decision"]
    d["steps"][3]["is_decision"] = not expected
    assert not _fast_ok("trajectory", d)
    assert not is_valid("trajectory", d)
    assert schema_errors("trajectory", d) == [f"$.steps[3].is_decision: {expected!r} was expected"]
    d = copy.deepcopy(ir_docs[0])
    d["schema_version"] = True  # a bool is not the integer 1 in either validator
    assert not _fast_ok("trajectory", d)
    assert schema_errors("trajectory", d) == ["$.schema_version: 1 was expected"]


_values = json_values(["", "agent", "tool", "x", "a.b", "1"], ["name", "x", "is_error"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fast_path_agrees_with_jsonschema_on_mutated_runs(ir_docs, data):
    """Differential check: random edits (replace, delete, add a key) of real IR documents."""
    doc = copy.deepcopy(data.draw(st.sampled_from(ir_docs)))
    doc["steps"] = doc["steps"][:6]
    mutate(doc, data, _values, ["extra", "kind", "name", "is_error"])
    assert _fast_ok("trajectory", doc) == validator("trajectory").is_valid(doc)


@settings(max_examples=150, deadline=None)
@given(doc=_values)
def test_fast_path_agrees_with_jsonschema_on_arbitrary_documents(doc):
    for name in SCHEMAS:
        assert _fast_ok(name, doc) == validator(name).is_valid(doc), name


def test_audit_outputs_pass_both_validators_and_mutations_agree(tau_file):
    from trajaudit.engine.run.batch import audit_trajectories
    from trajaudit.engine.run.pipeline import AuditSpec

    runs = load_path(tau_file).trajectories[:3]
    for r in audit_trajectories(runs, AuditSpec()).results:
        for name, doc in (("diagnosis", r.diagnosis.to_dict()), ("validation_log", r.log.to_dict())):
            assert _fast_ok(name, doc) and validator(name).is_valid(doc), name
            bad = copy.deepcopy(doc)
            bad["trajectory_id"] = 7
            assert _fast_ok(name, bad) == validator(name).is_valid(bad) is False


def test_shipped_taxonomies_read_the_same_with_libyaml():
    import yaml

    from trajaudit.engine.taxonomy import _shipped_dir, list_taxonomies

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for name in list_taxonomies():
        text = _shipped_dir().joinpath(f"{name}.yaml").read_text(encoding="utf-8")
        assert yaml.load(text, Loader=loader) == yaml.safe_load(text), name


def test_shipped_packs_read_the_same_with_libyaml(monkeypatch):
    from pathlib import Path

    import yaml

    from trajaudit.engine.packs import positions as pack_yaml
    from trajaudit.engine.packs.pack import resolve_pack, shipped_packs
    from trajaudit.engine.packs.positions import YamlDoc

    assert shipped_packs()
    for name in shipped_packs():
        path = resolve_pack(name)
        assert pack_yaml.is_shipped_file(path)
        text = Path(path).read_text(encoding="utf-8")
        fast = YamlDoc(text, str(path))
        monkeypatch.setattr(pack_yaml, "_fast_loader", lambda: yaml.SafeLoader)
        slow = YamlDoc(text, str(path))
        monkeypatch.undo()
        assert fast.data == slow.data and fast.marks == slow.marks, name
    assert not pack_yaml.is_shipped_file(__file__)
