"""trajaudit/checkers/tool_schemas.py: tool schemas (OpenAI function list) checked against the JSON
Schema metaschema when read, with the tool and the schema path named."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from trajaudit.cli import main


def cli(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, env=env)


@pytest.mark.parametrize(("params", "problem"), [
    ({"type": "object", "properties": {"order_id": {"type": "strng"}}},
     "invalid JSON Schema at parameters.properties.order_id.type: 'strng' is not valid under any of the given"),
    ({"type": "string"}, 'parameters must describe an object ("type": "object"), got "type": "string"'),
    (["order_id"], "parameters must be a JSON Schema object, got list"),
    ({"type": "object", "required": "order_id"}, "invalid JSON Schema at parameters.required: 'order_id' is not of"),
])
def test_invalid_tool_parameters_are_a_clear_error(tau_one, tmp_path, params, problem):
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"type": "function", "function": {"name": "ping"}},
                                 {"type": "function", "function": {"name": "get_order", "parameters": params}}]))
    for args in (["check", tau_one, "--tools", tools], ["audit", tau_one, "--tools", tools, "-o", tmp_path / "d.jsonl"]):
        r = cli(*args)
        text = r.stderr.replace("\n", "")
        assert r.exit_code == 2 and "Traceback" not in r.output, (args, r.output)
        assert f"error: {tools}, element 1: tool 'get_order': " in text and problem in text, (args, text)


def test_valid_tool_schemas_still_load(tau_one, tau_file):
    r = cli("check", tau_one, "--tools", tau_file.parent / "tools.json", "--format", "json")
    assert r.exit_code in (0, 1) and json.loads(r.stdout)[0]["trajectory_id"] == "2"
