"""The parsed JSON step texts that the rule stage and the claims stage share
(``engine/trace/json_content.py``): the same value as ``safe_json.loads`` (``None`` where it raises
``ValueError``), and an audit that shares them gives the claims a cold, unshared build gives."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from trajaudit import load_path, safe_json
from trajaudit.engine.claims import build_claim_graph, clear_caches
from trajaudit.engine.trace import json_content


def _reference(text: str) -> object:
    try:
        return safe_json.loads(text)
    except ValueError:
        return None


_pieces = st.sampled_from(['{', '}', '[', ']', '"a"', '"id"', ':', ',', ' ', '\n', '1', '-2.5e3', '0.1', 'NaN',
                           '-Infinity', 'null', 'true', 'false', '"\\u00e9"', '"\\"', 'x', '""', '[[[[', ']]]]',
                           '1' * 40])


@settings(max_examples=600, deadline=None)
@given(st.lists(_pieces, max_size=24).map("".join))
def test_parse_is_safe_json_loads_or_none(text):
    json_content.clear_memo()
    got = json_content.parse(text)
    assert repr(got) == repr(_reference(text))  # (repr: NaN equals itself)
    assert json_content.parse(text) is got  # memoized: the same document


def test_parse_over_the_limits_is_none_like_the_callers_made_it():
    deep = "[" * 5000 + "]" * 5000
    long_int = "[" + "7" * 5000 + "]"
    for text in (deep, long_int, "not json", "{\"a\": 1", ""):
        json_content.clear_memo()
        assert json_content.parse(text) is None
    big = json.dumps({"k": "v" * (json_content.MEMO_MAX_CHARS + 10)})
    assert json_content.parse(big) == {"k": "v" * (json_content.MEMO_MAX_CHARS + 10)}
    assert json_content.parse(big) is not json_content.parse(big)  # too long for the memo: parsed each time


def _claims(cg) -> str:
    rows = [(c.id, c.kind, c.value, c.address, c.status.value, c.evidence_address, repr(c.evidence_value), c.note,
             c.reused_in, c.derived_from, c.final_steps) for c in cg.claims]
    return json.dumps([rows, [r.to_dict() for r in cg.to_records()]], sort_keys=True, default=str)


def test_an_audit_shares_documents_and_gives_the_unshared_claims(tau_file, monkeypatch):
    from trajaudit.engine.run.evidence import clear_caches as clear_all
    from trajaudit.engine.run.evidence import gather
    from trajaudit.engine.run.pipeline import AuditSpec, build_context

    runs = load_path(tau_file).trajectories[:10]
    ctx = build_context(AuditSpec(tools=str(tau_file.parent / "tools.json")))
    seen: list[tuple[str, object]] = []
    parse = json_content.parse

    def recording(text: str) -> object:
        doc = parse(text)
        seen.append((text, doc))
        return doc

    monkeypatch.setattr(json_content, "parse", recording)
    clear_all(packs=False)
    shared = []
    for t in runs:
        start = len(seen)
        bundle = gather(t, ctx)
        mine = seen[start:]
        # the claims stage read documents the rule stage of the same run had parsed (one parse)
        shared.append(sum(1 for i, (_, d) in enumerate(mine) if d is not None
                          and any(d is e for _, e in mine[:i])))
        got = _claims(bundle.graph)
        monkeypatch.setattr(json_content, "parse", parse)
        clear_caches()  # the reference: the claims alone, every text parsed afresh
        assert _claims(build_claim_graph(t, ctx.config)) == got, t.id
        monkeypatch.setattr(json_content, "parse", recording)
    assert sum(shared) >= len(runs)  # (tau: ≈ 5 tool outputs per run are read by both stages)
    for text, doc in seen:  # no stage changed a document it was given
        assert repr(doc) == repr(_reference(text))
