"""Shared fixtures: paths to the annotated data in ../shared/data and loaded runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import settings

from trajaudit.engine.run.evidence import clear_caches

# Property tests draw fresh random examples on every local run (they keep finding new inputs). CI sets
# HYPOTHESIS_PROFILE=ci: the same examples every run, no example database, no per-example deadline, so
# a red CI always means a reproducible failure, never an unlucky draw or a slow machine.
settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# A child process (``python -m trajaudit …``) must see the $COLUMNS of the environment the tests ran in:
# readline, imported by pytest, puts COLUMNS=80 and LINES=24 into the C environment (not os.environ), which
# children inherit, so a message line to a pipe was wrapped at 80 columns as if the user had set $COLUMNS.
for _name in ("COLUMNS", "LINES"):
    if _name not in os.environ:
        os.unsetenv(_name)

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("TRAJAUDIT_TEST_DATA") or ROOT.parent / "shared" / "data")  # override: a worktree elsewhere
TAU = DATA / "tau_retail"
WW = DATA / "who_and_when" / "algorithm_generated"


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"shared data not found at {path} (the repository expects ../shared/data beside it)")
    return path


@pytest.fixture(scope="session", autouse=True)
def _pack_cache_dir(tmp_path_factory):
    """Tests never write to the user's cache: the on-disk pack cache lives in a session temp dir."""
    old = os.environ.get("TRAJAUDIT_CACHE_DIR")
    os.environ["TRAJAUDIT_CACHE_DIR"] = str(tmp_path_factory.mktemp("pack-cache"))
    yield
    if old is None:
        os.environ.pop("TRAJAUDIT_CACHE_DIR", None)
    else:
        os.environ["TRAJAUDIT_CACHE_DIR"] = old


@pytest.fixture
def fresh_pack_cache(tmp_path, monkeypatch):
    """An empty on-disk pack cache of the test's own (``TRAJAUDIT_CACHE_DIR``, caching on) and the
    per-process caches cleared before and after: a test that writes and reads cache entries."""
    d = tmp_path / "cache"
    monkeypatch.setenv("TRAJAUDIT_CACHE_DIR", str(d))
    monkeypatch.delenv("TRAJAUDIT_NO_CACHE", raising=False)
    clear_caches()
    yield d
    clear_caches()


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


@pytest.fixture(scope="module")
def tau_one(tau_file, tmp_path_factory):
    """The first tau-retail run (id '2', 32 steps) alone in a file: fast to audit."""
    p = tmp_path_factory.mktemp("tau1") / "tau1.json"
    p.write_text(json.dumps(json.loads(tau_file.read_text())[:1]))
    return p


# --- LLM layer: the scripted OpenAI-protocol server and the real local model ----------------------

def pytest_addoption(parser):
    parser.addoption("--run-localllm", action="store_true", default=False,
                     help="run the end-to-end tests against the real local model (scripts/build_local_llm.sh)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-localllm"):
        return
    skip = pytest.mark.skip(reason="needs --run-localllm (and scripts/build_local_llm.sh)")
    for item in items:
        if "localllm" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def llm_server():
    """A started :class:`llm_server.ScriptedLLMServer` on 127.0.0.1 (stopped after the test)."""
    from llm_server import ScriptedLLMServer

    server = ScriptedLLMServer().start()
    yield server
    server.stop()


@pytest.fixture
def llm_config(llm_server, tmp_path):
    """An LLMConfig pointing at ``llm_server``, with a fresh sqlite cache in ``tmp_path``."""
    from trajaudit.llm import LLMConfig

    return LLMConfig(base_url=llm_server.url, model="scripted-model", api_key="test-key", timeout=5.0,
                     max_retries=2, concurrency=4, cache_path=str(tmp_path / "llm-cache.sqlite3"))


@pytest.fixture
def llm_client(llm_config):
    """An LLMClient on ``llm_config`` (closed after the test)."""
    from trajaudit.llm import LLMClient

    client = LLMClient(llm_config)
    yield client
    client.close()


@pytest.fixture(scope="session")
def local_llm(tmp_path_factory):
    """The real local model (llama-server + SmolLM2-135M) on a free port; only with --run-localllm.

    A missing build is an error (not a skip), so CI fails loudly if the build step did not run.
    """
    from localllm import LocalLLM

    server = LocalLLM(tmp_path_factory.mktemp("llama") / "llama-server.log")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def protocol():
    """The generic.protocol pack, compiled (its policy-conditioned rules' tests: tests/policy_runs.py)."""
    from trajaudit import compile_rules, load_pack

    return compile_rules(load_pack("generic.protocol"))
