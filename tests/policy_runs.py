"""Shared by the tests of generic.protocol's policy-conditioned rules (test_confirmation_policy,
test_breakit_today): the rule ids and an OpenAI-chat tool call with its answer."""

from __future__ import annotations

import json

CONFIRM = "generic.protocol.confirmation-before-write"
HANDOFF = "generic.protocol.handoff-only-out-of-scope"


def call(i, name, args):
    """An assistant message calling ``name`` with ``args`` (id ``c{i}``) and its successful tool answer."""
    return [{"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]},
            {"role": "tool", "tool_call_id": f"c{i}", "name": name, "content": '{"ok": true}'}]
