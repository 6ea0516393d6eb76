"""Shared pieces of the CLI tests: a pack with a rule that never fires, a run with a lone surrogate,
and a CliRunner call that must not end in a traceback."""

from __future__ import annotations

from typing import Any

from click.testing import CliRunner, Result

from trajaudit.cli import main

# one rule that applies to every agent step (with an example, so lint is quiet about it) and one
# whose guard names a tool no run calls: the "never fired" summaries and lint warnings
NEVER_FIRING_PACK = """pack: mine
rules:
  - id: fires
    type: PROTOCOL
    guard: step.kind == 'agent'
    assert: step.index >= 0
    examples:
      - {messages: [{role: assistant, content: hi}], expect: pass}
  - id: never
    type: PROTOCOL
    guard: step.tool == 'no_such_tool'
    assert: step.index >= 0
"""

# under a tiny --run-timeout: 'fires' applies, the two 'guard-false' rules have candidate steps where
# their guard is false, 'no-such-tool' has no candidate step at all (the only one known never to apply)
TIMEOUT_PACK = """pack: p4
rules:
  - id: fires
    type: PROTOCOL
    guard: step.kind == 'agent'
    assert: step.index >= 0
  - id: guard-false
    type: PROTOCOL
    guard: step.kind == 'agent' and step.index < 0
    assert: step.index >= 0
  - id: guard-false-too
    type: PROTOCOL
    guard: step.kind == 'user' and step.index > 1000
    assert: step.index >= 0
  - id: no-such-tool
    type: PROTOCOL
    guard: step.tool == 'no_such_tool'
    assert: step.index >= 0
"""

# a legal JSON escape: json.loads gives a lone surrogate, which strict UTF-8 cannot encode
LONE = '[{"role": "system", "content": "policy"}, {"role": "user", "content": "refund order \\ud800 now"}, ' \
       '{"role": "assistant", "content": "Refunded 12 dollars."}]'


def run_no_traceback(*args: Any) -> Result:
    """``trajaudit ARGS`` in-process; fails the test if the output holds a Python traceback."""
    res = CliRunner().invoke(main, [str(a) for a in args])
    assert "Traceback" not in res.output
    return res


__all__ = ["LONE", "NEVER_FIRING_PACK", "TIMEOUT_PACK", "run_no_traceback"]
