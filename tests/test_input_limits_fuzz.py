"""The input limits (safe_json.py, safe_yaml.py, the mapping adapter, regular_files.py, the loader)
fuzzed: fuzzing that reaches the classes of issue 18: hypothesis strategies with unbounded integers, very
long strings, deep nesting, random mapping expressions and random file kinds. The properties: loading
and auditing never raise anything but documented errors, the good runs beside a hostile one are always
diagnosed, every hostile one is reported with file and record, nothing blocks.

CI runs these with the fixed profile (``HYPOTHESIS_PROFILE=ci``, tests/conftest.py). A longer local run:
``TRAJAUDIT_FUZZ_EXAMPLES=2000 python -m pytest tests/hostile/test_hostile_fuzz.py --hypothesis-show-statistics``."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import yaml
from hostile_kit import good_run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajaudit import safe_json, safe_yaml
from trajaudit.engine.run.batch import audit_paths
from trajaudit.engine.run.pipeline import AuditSpec
from trajaudit.engine.trace.adapters import MappingAdapter
from trajaudit.engine.trace.loader import load_document, load_many
from trajaudit.errors import TraceFormatError

_N = int(os.environ.get("TRAJAUDIT_FUZZ_EXAMPLES", "0"))
FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
                **({"max_examples": _N} if _N else {}))

GOOD = json.dumps(good_run("good"))


# --- JSON texts: unbounded integers, long strings, deep nesting ----------------------------------------

digits = st.integers(min_value=1, max_value=9000).map(lambda n: "7" * n)  # integer literals up to 9,000 digits
big_ints = st.one_of(st.integers().map(str), digits, digits.map(lambda d: "-" + d))
long_strings = st.integers(min_value=0, max_value=200_000).map(lambda n: json.dumps("x" * n))
scalars = st.one_of(big_ints, long_strings, st.sampled_from(["null", "true", "1.5e308", "-0", '"\\ud800"', "1e99999"]))


@st.composite
def json_texts(draw):
    """A JSON text: a scalar wrapped in up to 3,000 levels of arrays/objects, or a run with a hostile field."""
    depth = draw(st.integers(min_value=0, max_value=3000))
    value = draw(scalars)
    if draw(st.booleans()):
        opens = "".join(draw(st.sampled_from(["[", '{"k": '])) for _ in range(min(depth, 50)))
        opens += "[" * max(0, depth - 50)
        closes = "".join("]" if o == "[" else "}" for o in reversed(_tokens(opens)))
        return opens + value + closes
    run = good_run("hostile")
    text = json.dumps(run)
    return text[:-1] + f', "extra": {value}' + "}"


def _tokens(opens: str) -> list[str]:
    out, i = [], 0
    while i < len(opens):
        if opens[i] == "[":
            out.append("[")
            i += 1
        else:
            out.append("{")
            i += len('{"k": ')
    return out


@FUZZ
@given(st.lists(json_texts(), min_size=1, max_size=3))
def test_hostile_jsonl_lines_never_sink_the_good_runs(texts):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "runs.jsonl"
        path.write_text("\n".join([GOOD, *texts, GOOD]) + "\n", encoding="utf-8")
        res = load_many([path])
        loaded = {t.source.record for t in res.trajectories}
        assert {0, len(texts) + 1} <= loaded  # the good lines, whatever sits between them
        assert loaded | {p.record for p in res.problems} == set(range(len(texts) + 2))
        for p in res.problems:
            assert p.message.startswith(f"{path}, record {p.record}") and "internal error" not in p.message


@FUZZ
@given(json_texts())
def test_a_hostile_document_is_one_problem_or_a_run_never_a_crash(text):
    with tempfile.TemporaryDirectory() as tmp:
        bad = Path(tmp) / "bad.json"
        bad.write_text(text, encoding="utf-8")
        (Path(tmp) / "good.json").write_text(GOOD, encoding="utf-8")
        got: list[str] = []
        res = audit_paths([tmp], AuditSpec(), on_result=lambda i, r: got.append(r.trajectory.id))
        assert "good" in got
        assert all("internal error" not in p.message for p in res.problems)
        assert len(got) + len(res.problems) >= 2 or got.count("good") == 1


@FUZZ
@given(json_texts())
def test_safe_json_raises_only_documented_errors(text):
    try:
        safe_json.loads(text)
    except safe_json.LimitExceeded as e:
        assert e.limit_name in ("depth", "int_digits", "string_chars")
    except json.JSONDecodeError:
        pass


# --- YAML: long scalars and aliases --------------------------------------------------------------------

@FUZZ
@given(st.integers(min_value=1, max_value=9000), st.integers(min_value=0, max_value=12), st.booleans())
def test_yaml_limits_are_documented_errors(n_digits, fan, as_string):
    scalar = ("'" + "9" * n_digits + "'") if as_string else "9" * n_digits
    text = f"a: &x [{scalar}]\n" + "".join(f"b{i}: &b{i} [{', '.join(['*x'] * fan)}]\n" for i in range(3))
    try:
        doc = safe_yaml.load(text)
    except safe_yaml.YAMLLimitError as e:
        assert e.limit_name in ("int_digits", "string_chars", "alias_nodes", "depth")
        assert as_string is False and n_digits > 4300
    else:
        assert doc["a"] == [scalar.strip("'") if as_string else int(scalar)]
    assert issubclass(safe_yaml.YAMLLimitError, yaml.YAMLError)


# --- random mapping expressions ------------------------------------------------------------------------

PIECES = ["messages", "goal", "id", "@", "`1`", "`\"s\"`", "`" + "9" * 5000 + "`", "[0]", "[*]", "[?role=='user']",
          "abs(@)", "length(@)", "to_string(@)", "keys(@)", "sort(@)", "max(@)", "sum(@)", "join(',', @)"]


@st.composite
def expressions(draw, depth=0):
    if depth > 6 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(PIECES))
    op = draw(st.sampled_from(["pipe", "dot", "paren", "or", "func", "filter", "deep"]))
    a = draw(expressions(depth + 1))
    if op == "pipe":
        return f"{a} | {draw(expressions(depth + 1))}"
    if op == "dot":
        return f"{a}.{draw(st.sampled_from(['content', 'role', 'x']))}"
    if op == "paren":
        return f"({a})"
    if op == "or":
        return f"{a} || {draw(expressions(depth + 1))}"
    if op == "func":
        return f"{draw(st.sampled_from(['abs', 'length', 'to_number', 'keys', 'not_null']))}({a})"
    if op == "filter":
        return f"messages[?{a}]"
    n = draw(st.integers(1, 3000))
    return "(" * n + a + ")" * n


@FUZZ
@given(expressions(), st.sampled_from(["task", "id", "messages", "fields.role"]),
       st.one_of(st.integers(), st.text(max_size=50), st.lists(st.integers(), max_size=3), st.none()))
def test_random_mapping_expressions_are_refused_or_reported_per_run(expr, key, goal):
    spec: dict = {"messages": "messages"}
    if key.startswith("fields."):
        spec["fields"] = {"role": expr}
    else:
        spec[key] = expr
    try:
        adapter = MappingAdapter(spec, origin="m.yaml")
    except TraceFormatError as e:
        assert "m.yaml" in str(e)
        return
    runs = {"runs": [good_run("a") | {"goal": goal}, good_run("b") | {"goal": goal}]}
    adapter2 = MappingAdapter({**spec, "runs": "runs"}, origin="m.yaml")
    try:
        res = load_document(runs, file="f.json", mapping=adapter2)
    except TraceFormatError:
        return  # the document as a whole does not match: one error naming the file
    assert len(res.trajectories) + len(res.problems) == 2
    assert all("internal error" not in p.message for p in res.problems)
    assert adapter.origin == "m.yaml"


# --- random file kinds ---------------------------------------------------------------------------------

KINDS = ["good", "hostile", "fifo", "dangling", "folder", "empty", "socket"]


@FUZZ
@given(st.lists(st.sampled_from(KINDS), min_size=1, max_size=6), json_texts())
def test_random_file_kinds_are_each_reported_never_opened_if_special(kinds, hostile):
    import socket

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        expected_good, special = [], []
        socks = []
        for i, kind in enumerate(kinds):
            p = root / f"f{i}.json"
            if kind == "good":
                p.write_text(GOOD)
                expected_good.append(p)
            elif kind == "hostile":
                p.write_text(hostile)
            elif kind == "fifo":
                os.mkfifo(p)
                special.append(p)
            elif kind == "dangling":
                os.symlink(root / "nowhere.json", p)
                special.append(p)
            elif kind == "folder":
                p.mkdir()  # a folder named *.json is searched, not read
            elif kind == "empty":
                p.write_text("")
            elif kind == "socket":
                s = socket.socket(socket.AF_UNIX)
                try:
                    s.bind(str(p))
                    special.append(p)
                except OSError:
                    pass
                socks.append(s)
        try:
            res = load_many([root])  # a FIFO opened for reading would block here
        finally:
            for s in socks:
                s.close()
        good_files = {t.source.file for t in res.trajectories if t.id == "good"}
        assert good_files == {str(p) for p in expected_good}
        reported = {p.file for p in res.problems}
        for p in special:
            assert str(p) in reported
            msg = next(x.message for x in res.problems if x.file == str(p))
            assert "not a regular file (not opened)" in msg
