"""What a fresh ``trajaudit audit`` imports (issue 22's start-up item): the offline audit path loads
neither the LLM client (nor its cache, thread pool, prompts), nor rich (with ``-q``), nor the trace
adapters of formats the input is not in. Each of those is loaded on first use, and the lazily
loaded names are the eager ones."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import trajaudit.llm as llm_layer
from trajaudit.llm import client, config, fitting, prompting, usage

ROOT = Path(__file__).resolve().parent.parent


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "; import sys; print(' '.join(sys.modules))"],
                         capture_output=True, text=True, cwd=ROOT, check=True).stdout
    return set(out.split())


def test_the_audit_command_module_imports_no_llm_client_rich_or_span_adapter():
    mods = _modules_after("import trajaudit.cli.audit")
    for name in ("trajaudit.llm.client", "trajaudit.llm.cache", "trajaudit.llm.prompting", "sqlite3", "rich",
                 "rich.console", "trajaudit.engine.trace.adapters.otel", "trajaudit.engine.trace.adapters.spans",
                 "trajaudit.report.html", "trajaudit.report.ci", "xml.etree.ElementTree", "trajaudit.distributed",
                 "trajaudit.engine.run.cluster", "trajaudit.engine.run.parallel", "trajaudit.engine.run.repair_prefix",
                 "trajaudit.engine.run.repair_writer", "trajaudit.engine.trace.shards", "tomllib",
                 "trajaudit.engine.packs.messages"):
        assert name not in mods, name


def test_report_names_load_on_first_use_and_are_the_modules_own():
    import trajaudit.report as report_layer
    from trajaudit.report import ci, html, markdown

    assert report_layer.HtmlReport is html.HtmlReport and report_layer.render_markdown is markdown.render_markdown
    assert report_layer.ci is ci and report_layer.ci.sarif_text is ci.sarif_text
    assert sorted(report_layer.__all__) == sorted(n for n in report_layer.__all__ if getattr(report_layer, n))


def test_llm_names_load_on_first_use_and_are_the_modules_own():
    assert llm_layer.LLMClient is client.LLMClient and llm_layer.LLMConfig is config.LLMConfig
    assert llm_layer.fit_steps is fitting.fit_steps and llm_layer.render_prompt is prompting.render_prompt
    assert llm_layer.tracking is usage.tracking and llm_layer.fitting is fitting
    for name in llm_layer.__all__:
        assert getattr(llm_layer, name) is not None and name in dir(llm_layer)
    code = ("import sys, trajaudit.llm as m; before = 'trajaudit.llm.client' in sys.modules; "
            "c = m.LLMClient; print(before, 'trajaudit.llm.client' in sys.modules, c.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.split() == ["False", "True", "trajaudit.llm.client"]
    try:
        llm_layer.no_such_name  # noqa: B018
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("unknown names must raise AttributeError")


def test_an_audit_from_warm_caches_imports_no_pyyaml(tmp_path, tau_file):
    """With the pack cache warm (packs and the shipped taxonomy stored as data), an audit parses no YAML:
    ``yaml`` and ``trajaudit.safe_yaml`` are not imported; the first, cold, process parses and stores them."""
    code = ("import sys, runpy; sys.argv = ['trajaudit', 'audit', {path!r}, '-q', '-o', {out!r}]\n"
            "try:\n    runpy.run_module('trajaudit', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print('yaml' in sys.modules, 'trajaudit.safe_yaml' in sys.modules)")
    env = {**os.environ, "TRAJAUDIT_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("TRAJAUDIT_NO_CACHE", None)
    seen = []
    for i in range(2):
        c = code.format(path=str(tau_file), out=str(tmp_path / f"out{i}.jsonl"))
        seen.append(subprocess.run([sys.executable, "-c", c], capture_output=True, text=True, cwd=ROOT, env=env,
                                   check=True).stdout.split())
    assert seen == [["True", "True"], ["False", "False"]]
    assert (tmp_path / "out0.jsonl").read_bytes() == (tmp_path / "out1.jsonl").read_bytes()


def test_safe_yaml_is_reachable_as_an_attribute_before_its_import():
    code = ("import sys, trajaudit; before = 'trajaudit.safe_yaml' in sys.modules; m = trajaudit.safe_yaml; "
            "print(before, m.__name__, issubclass(m.YAMLLimitError, __import__('yaml').YAMLError))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.split() == ["False", "trajaudit.safe_yaml", "True"]


def test_run_submodules_load_on_first_use():
    code = ("import sys, trajaudit.engine.run as r; before = [m in sys.modules for m in "
            "('trajaudit.engine.run.parallel', 'trajaudit.engine.run.repair_prefix')]; "
            "from trajaudit.engine.run import parallel, repair_prefix; "
            "print(*before, r.parallel is parallel, r.repair_prefix is repair_prefix, hasattr(r, 'nope'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.split() == ["False", "False", "True", "True", "False"]
