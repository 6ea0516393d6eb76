"""The default alarm threshold (watch/guard --alarm-threshold, Monitor) is the one the leave-one-dataset-out
replay in benchmarks/RESULTS.md supports, and the CLI's help shows it (issue 20)."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from trajaudit.cli import main
from trajaudit.engine.run.monitor import DEFAULT_ALARM_THRESHOLD, Monitor
from trajaudit.online.guard import Guard

ROOT = Path(__file__).resolve().parents[2]


def _every_threshold() -> dict[str, dict[float, tuple[int, int]]]:
    """RESULTS.md's online-detection "Every threshold" table: set -> threshold -> (alarmed, early)."""
    text = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    section = text[text.index("## Online detection (issue 20)"):]
    section = section[section.index("Every threshold"):]
    out: dict[str, dict[float, tuple[int, int]]] = {}
    for m in re.finditer(r"^\| ([^|]+?) \| (0\.\d+) \| (\d+) \| (\d+) \|", section, re.M):
        out.setdefault(m[1], {})[float(m[2])] = (int(m[3]), int(m[4]))
    return out


def test_default_threshold_is_the_pooled_lodo_choice_in_results_md():
    table = _every_threshold()
    assert set(table) == {"tau-retail", "Who&When"}

    def utility(name: str, th: float) -> int:  # alarms at or after the gold step minus early alarms
        alarmed, early = table[name][th]
        return (alarmed - early) - early

    ths = sorted(table["tau-retail"])
    pooled = max(ths, key=lambda th: (sum(utility(n, th) for n in table), -th))
    assert DEFAULT_ALARM_THRESHOLD == pooled == 0.5
    # each fold's own choice, as the table's first part says: 0.5 chosen on tau-retail, 0.4 on Who&When
    assert max(ths, key=lambda th: (utility("tau-retail", th), -th)) == 0.5
    assert max(ths, key=lambda th: (utility("Who&When", th), -th)) == 0.4
    text = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    assert f"`Monitor(alarm_threshold=)`): **{DEFAULT_ALARM_THRESHOLD}**" in text


def test_every_default_is_the_constant():
    assert Monitor().alarm_threshold == DEFAULT_ALARM_THRESHOLD
    from trajaudit.engine.run.pipeline import AuditSpec, build_context
    assert Guard(build_context(AuditSpec())).alarm_threshold == DEFAULT_ALARM_THRESHOLD
    for cmd in ("watch", "guard"):
        help_text = " ".join(CliRunner().invoke(main, [cmd, "--help"], terminal_width=200).output.split())
        assert f"[default: {DEFAULT_ALARM_THRESHOLD};" in help_text, cmd
