"""Warming the rule patterns' analyses ahead of use (issue 20) changes no search result.

``compile_regex`` registers every rule pattern; ``warm_registered`` builds their literal analyses,
ASCII twins and branch plans (what the first search would build), and a ``Monitor`` calls it when
its rules are selected, so the first adds do not compile patterns.
"""

from __future__ import annotations

import re

from trajaudit import Monitor
from trajaudit.engine.dsl.compiler import compile_regex
from trajaudit.engine.dsl.regex import prefilter
from trajaudit.errors import RulePackError

TEXTS = ["", "a", "Your order #W1234567 is delivered.", "ORDER #w7654321 was CANCELLED today",
         "état: livré — order #W0000001 shipped", "no match here", "pending\npending"]

PATTERNS = [(r"(?i)\b(pending|shipped|delivered|cancell?ed)\b", ""), (r"#?\b([A-Za-z]{0,3}\d{5,})\b", ""),
            (["are these all the items", "anything else to (modify|exchange)"], "i")]


def _err(msg: str) -> RulePackError:
    return RulePackError(msg)


def _results(rx: re.Pattern[str]) -> list:
    out = []
    for t in TEXTS:
        out.append(prefilter.memo_search(rx, t, {}))
        out.append(prefilter.captures(rx, t))
    return out


def test_warm_registered_builds_analyses_and_keeps_results() -> None:
    cold = []
    for pattern, flags in PATTERNS:
        rx = compile_regex(pattern, flags, _err)
        assert prefilter._REGISTERED[id(rx)] is rx
        cold.append((rx, [(m.span() if (m := rx.search(t)) else None) for t in TEXTS],
                     [[m.group(1) if rx.groups else m.group(0) for m in rx.finditer(t)] for t in TEXTS]))
    prefilter.warm_registered()
    assert prefilter.warm_registered() == 0  # every registered pattern warmed once
    for rx, spans, caps in cold:
        info = prefilter.info_of(rx)
        assert info._twin is not None  # the ASCII twin analysis was built ahead of any search
        got = _results(rx)
        assert [g if g is None else tuple(g[:2]) for g in got[0::2]] == spans
        assert got[1::2] == caps


def test_monitor_warms_the_patterns_of_joining_packs() -> None:
    m = Monitor()
    m.add({"role": "user", "content": "Please cancel my order #W1234567, it is pending"})
    m.add({"role": "assistant", "content": "Your order #W1234567 is pending."})
    assert set(prefilter._REGISTERED) <= prefilter._WARM
    m.close()
