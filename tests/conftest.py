"""Shared fixtures: paths to the annotated data in ../shared/data and loaded runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
TAU = DATA / "tau_retail"
WW = DATA / "who_and_when" / "algorithm_generated"


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"shared data not found at {path} (the repository expects ../shared/data beside it)")
    return path


@pytest.fixture(scope="session")
def tau_file() -> Path:
    """The 29 tau-retail runs."""
    return _need(TAU / "trajectories.json")


@pytest.fixture(scope="session")
def tau_gold() -> list[dict]:
    """AgentRx ground truth for the tau runs."""
    return json.loads(_need(TAU / "ground_truth.json").read_text())


@pytest.fixture(scope="session")
def ww_dir() -> Path:
    """The 126 Who&When algorithm-generated files."""
    return _need(WW)


@pytest.fixture(scope="session")
def tau_runs(tau_file):
    """All tau runs as IR, by id."""
    from trajaudit import load_path

    res = load_path(tau_file)
    assert not res.problems
    return {t.id: t for t in res.trajectories}


@pytest.fixture(scope="session")
def ww_runs(ww_dir):
    """All Who&When runs as IR, by id (the file stem)."""
    from trajaudit import load_many

    res = load_many([ww_dir])
    assert not res.problems
    return {t.id: t for t in res.trajectories}
