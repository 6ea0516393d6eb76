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


# Hostile-user pass: `check --tools LINK` with a dangling link said "cannot read tool schemas: [Errno 22]
# a dangling symbolic link, not a regular file (not opened): 'LINK'" (the errno and the path again).
# Now the reason alone after the path, as for trace files.

def test_an_unreadable_tools_file_is_named_once_with_its_reason(tmp_path):
    from hostile_kit import good_run, write_json

    runs = write_json(tmp_path / "runs.json", good_run("a"))
    link = tmp_path / "tools.json"
    link.symlink_to(tmp_path / "missing.json")
    r = cli("check", runs, "--tools", link)
    assert r.exit_code == 2
    assert " ".join(r.stderr.split()) == (f"error: {link}: cannot read tool schemas: a dangling symbolic link, not a "
                                          "regular file (not opened)")


def test_rules_from_tools_and_repair_name_an_unreadable_input_once(tmp_path):
    import os

    from hostile_kit import good_run, write_json

    link = tmp_path / "in.json"
    link.symlink_to(tmp_path / "missing.json")
    r = cli("rules", "from-tools", link, "-o", "-")
    assert r.exit_code == 2 and " ".join(r.stderr.split()) == (
        f"error: {link}: cannot read tool schemas: a dangling symbolic link, not a regular file (not opened)")
    fifo = tmp_path / "d.jsonl"  # --diagnosis must exist (click): a FIFO, refused unopened
    os.mkfifo(fifo)
    r = cli("repair", write_json(tmp_path / "r.json", good_run("a")), "--diagnosis", fifo, "-o", tmp_path / "out.json")
    assert r.exit_code == 2 and " ".join(r.stderr.split()) == (
        f"error: {fifo}: cannot read diagnoses: a FIFO (named pipe), not a regular file (not opened)")
