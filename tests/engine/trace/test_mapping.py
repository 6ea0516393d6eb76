"""trajaudit/engine/trace/adapters/mapping.py through the CLI: a --mapping that cannot read a file
skips it with the reason, and one whose messages expression finds nothing names the expression."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import ROOT

from trajaudit.cli import main
from trajaudit.engine.trace.loader import load_path
from trajaudit.errors import TraceFormatError

EX = ROOT / "examples"
MAPPING = EX / "mappings" / "events.yaml"


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def one_line(text: str) -> str:
    return " ".join(text.split())


def test_mapping_reports_every_file_it_cannot_read_in_a_folder(tmp_path):
    out = tmp_path / "m.jsonl"
    r = cli("audit", EX / "traces", "--mapping", MAPPING, "-o", out)
    assert r.exit_code == 1, r.stderr
    err = one_line(r.stderr)
    assert "1 run(s) audited, 2 skipped" in err
    for name, fmt in (("magentic_one.json", "magentic"), ("openai_chat.json", "openai")):
        line = next(ln for ln in r.stderr.splitlines() if name in ln)
        assert line.startswith("skipped: ") and f"does not match the mapping {MAPPING}" in one_line(r.stderr)
        assert f"looks like the built-in {fmt!r} format" in one_line(r.stderr)
    assert "'runs' expression 'runs' yields" in err
    assert [json.loads(x)["trajectory_id"] for x in out.read_text().splitlines()] == ["refund-0042"]


def test_mapping_on_a_file_it_cannot_read_skips_it_with_the_reason(tmp_path):
    sample = EX / "data" / "tau_retail_sample.json"
    r = cli("audit", sample, "--mapping", MAPPING, "-o", "-", "-q")
    # as without --mapping when no run can be read: each file is reported and skipped, exit 1
    assert r.exit_code == 1, r.stderr
    err = one_line(r.stderr)
    assert "no trace files found" not in err
    assert f"skipped: {sample}: does not match the mapping {MAPPING}: the 'runs' expression 'runs' yields null" \
        in err
    assert "looks like the built-in 'tau' format" in err
    assert r.stdout == ""
    baseline = cli("audit", tmp_path / "none.json", "-o", "-", "-q")  # a path that does not exist: a usage error
    assert baseline.exit_code == 2


def test_mapping_whose_messages_expression_misses_names_it(tmp_path):
    mapping = tmp_path / "m.yaml"
    mapping.write_text("messages: events\n")
    with pytest.raises(TraceFormatError) as e:
        load_path(EX / "traces" / "openai_chat.json", mapping=mapping)
    msg = str(e.value)
    assert msg.startswith(f"{EX / 'traces' / 'openai_chat.json'}: does not match the mapping {mapping}:")
    assert "the 'messages' expression 'events' yields null, not a list" in msg
