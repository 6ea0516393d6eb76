"""trajaudit/safe_yaml.py: user-supplied YAML (and TOML) nested thousands of levels deep: PyYAML and tomllib recurse per level,
so a trace mapping, citation mapping, taxonomy or LLM config file of ``[[[[…`` raised ``RecursionError``
(a traceback from ``show --mapping`` and ``cite --mapping``). Now every such file is refused with an
error naming it (``safe_yaml.py``; rule packs had their own guard already)."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from trajaudit import safe_yaml
from trajaudit.cli import main
from trajaudit.engine.taxonomy import TaxonomyError, load_taxonomy
from trajaudit.engine.trace.adapters.mapping import MappingAdapter
from trajaudit.errors import ConfigError, TraceFormatError
from trajaudit.llm.config import load_config_file

DEEP = "[" * 3000 + "]" * 3000  # deeper than the interpreter's recursion limit allows PyYAML to compose
MIDDLE = "{a: " * 150 + "1" + "}" * 150  # composes, but deeper than MAX_DEPTH (100)


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.mark.parametrize("text", [DEEP, MIDDLE])
def test_safe_yaml_refuses_deep_documents_as_yaml_errors(text):
    with pytest.raises(safe_yaml.YAMLTooDeep, match="nested too deeply") as e:
        safe_yaml.load(f"x: {text}")
    assert isinstance(e.value, yaml.YAMLError)  # the callers' "invalid YAML" handling applies


def test_safe_yaml_keeps_ordinary_documents():
    nested = "{a: " * 99 + "1" + "}" * 99  # 99 mappings + the top one = 100 levels: allowed
    doc = safe_yaml.load(f"x: {nested}")
    assert doc["x"]["a"]["a"]["a"] is not None
    assert safe_yaml.load("messages: log\nfields: {role: kind}") == {"messages": "log", "fields": {"role": "kind"}}
    assert safe_yaml.load("") is None
    with pytest.raises(yaml.YAMLError):
        safe_yaml.load("a: [1, 2")


@pytest.mark.parametrize("text", [DEEP, MIDDLE])
def test_trace_mapping_file(tmp_path, text):
    m = tmp_path / "deep.yaml"
    m.write_text(f"messages: {text}\n", encoding="utf-8")
    with pytest.raises(TraceFormatError, match="cannot read mapping: YAML nested too deeply") as e:
        MappingAdapter.from_file(m)
    assert e.value.file == str(m)
    trace = tmp_path / "run.json"
    trace.write_text(json.dumps([{"role": "user", "content": "hi"}]), encoding="utf-8")
    res = run("show", trace, "--mapping", m)
    assert res.exit_code == 2
    assert "deep.yaml: cannot read mapping: YAML nested too deeply" in res.output
    res = run("cite", trace, "--mapping", m)
    assert res.exit_code == 2 and "YAML nested too deeply" in res.output


def test_taxonomy_file(tmp_path):
    t = tmp_path / "tax.yaml"
    t.write_text(f"id: x\ncategories: {DEEP}\n", encoding="utf-8")
    with pytest.raises(TaxonomyError, match="invalid YAML: YAML nested too deeply"):
        load_taxonomy(t)


@pytest.mark.parametrize("name, text", [("llm.yaml", f"model: {DEEP}\n"), ("llm.toml", f"model = {DEEP}\n")])
def test_llm_config_file(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match="nested too deeply") as e:
        load_config_file(p)
    assert name in str(e.value)


# Hostile-user pass: a YAML syntax error in a --mapping, a citation mapping or an --llm-config file was
# PyYAML's text over seven lines, twice 'in "<unicode string>", line 3, column 3' (the text was read
# before it was parsed). Now one line naming the file, the line and column and the problem, as packs do.

def test_a_yaml_syntax_error_is_one_line_with_its_position(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("messages: steps\nrole:\n  - a\n - b: [c\n", encoding="utf-8")
    said = "not valid YAML at line 4, column 2: expected <block end>, but found '<block sequence start>'"
    trace = tmp_path / "run.json"
    trace.write_text(json.dumps([{"role": "user", "content": "hi"}]), encoding="utf-8")
    for cmd in (("show", trace, "--mapping", bad), ("cite", trace, "--mapping", bad)):
        res = run(*cmd)
        assert res.exit_code == 2
        assert res.stderr.startswith(f"error: {bad}: cannot read mapping: {said}") and "unicode string" not in res.stderr
        assert res.stderr.count("\n") == 1
    with pytest.raises(ConfigError) as e:
        load_config_file(bad)
    assert str(e.value) == f"{bad}: {said}"
