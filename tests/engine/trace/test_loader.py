"""trajaudit/engine/trace/loader.py: loading files and folders (load, load_path) on documents it must
refuse or skip with the file and line named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT

from trajaudit.engine.trace.loader import load, load_path
from trajaudit.errors import TraceFormatError

EX = ROOT / "examples"
SAMPLE = EX / "data" / "tau_retail_sample.json"  # 3 runs


def _deep_list(tmp_path: Path, name: str = "deep.json") -> Path:
    p = tmp_path / name
    p.write_text("[" * 5000 + "]" * 5000)
    return p


@pytest.mark.parametrize("doc", ["list", "meta"])
def test_load_refuses_deep_documents_with_the_file(tmp_path, doc):
    p = _deep_list(tmp_path) if doc == "list" else tmp_path / "deep.json"
    if doc == "meta":
        p.write_text('[{"role": "user", "content": "hi", "meta": ' + '{"a": ' * 5000 + "1" + "}" * 5000 + "}]")
    with pytest.raises(TraceFormatError, match="nested too deeply") as ei:
        load(p)
    assert ei.value.file == str(p)


def test_deep_jsonl_line_is_skipped_alone(tmp_path):
    p = tmp_path / "runs.jsonl"
    good = json.loads(SAMPLE.read_text())[0]
    p.write_text("[" * 3000 + "]" * 3000 + "\n" + json.dumps(good) + "\n")
    res = load_path(p)
    assert len(res.trajectories) == 1 and len(res.problems) == 1
    assert "JSON on line 1 nested too deeply" in res.problems[0].message
