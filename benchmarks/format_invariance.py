"""Does the offline judge depend on the input format? The same runs, rewritten as plain OpenAI chat
messages, audited and compared with the audit of the original files.

Accuracy is measured on data from other agent systems, which arrive in other formats: a diagnosis
that changes when the same run is written another way is a diagnosis that depends on an adapter,
not on the run. Variants (built in a temporary folder, never written next to the data):

- ``tau as openai``: each tau run's ``traj`` messages (role/content/tool_calls/tool_call_id/name)
  as ``{"id", "messages"}`` — the same step numbering.
- ``Who&When as openai, executor as tool``: the question as a first user message, agents as
  ``assistant`` messages with their ``name``, ``Computer_terminal`` output as ``tool`` messages.
- ``Who&When as openai, executor as user``: the same, but the executor's output as ``user``
  messages with ``name`` (how AutoGen-style group chats log it).
- ``Who&When as openai, roles as logged``: every message keeps the role Who&When logged (other
  agents appear as named ``user`` messages; the adapter's group-chat detection reads them as agent
  turns, docs/judge.md).

Who&When variants have one more message (the question), so their steps are compared shifted by one.
Gold labels are read only here, to score (``mistake_step``); the audit never sees them.

A second table compares one scripted agent run (tests/data/traces, made by the real libraries with
``scripts/make_trace_fixtures.py``) as each trace format captured it with the same run written as
OpenAI chat messages (``chat.json``): same steps (kind and text), same tool calls (name, arguments,
id), same critical step and category.

Run: ``python benchmarks/format_invariance.py [--data ../shared/data]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's trajaudit, not an installed copy

from trajaudit import load_many  # noqa: E402
from trajaudit.engine.run.batch import audit_trajectories  # noqa: E402
from trajaudit.engine.run.pipeline import AuditSpec  # noqa: E402

KEEP = ("role", "content", "tool_calls", "tool_call_id", "name")
TRACES = ROOT / "tests" / "data" / "traces"
CAPTURES = (("OpenTelemetry GenAI, content on spans", "otel_genai.jsonl"),
            ("OpenTelemetry GenAI, content as log events", "otel_genai_events.jsonl"),
            ("OpenInference", "openinference.jsonl"), ("LangSmith run tree", "langsmith_run_tree.json"),
            ("Langfuse trace (API JSON)", "langfuse_trace.json"),
            ("Langfuse SDK spans (no server)", "langfuse_sdk.jsonl"), ("Inspect AI .eval", "inspect_log.eval"),
            ("Inspect AI .json", "inspect_log.json"))


def captured_rows() -> list[tuple[str, str, str, str, str]]:
    """``(capture, format, same steps, same tool calls, critical step and category vs chat)`` per capture."""
    from trajaudit import load

    def audit_one(t):
        d = audit_trajectories([t], AuditSpec()).results[0].diagnosis
        return d.critical_step, d.category

    chat = load(TRACES / "chat.json")
    base = audit_one(chat)
    rows = []
    for label, name in CAPTURES:
        t = load(TRACES / name)
        same_steps = [(s.kind, s.content) for s in t.steps] == [(s.kind, s.content) for s in chat.steps]
        calls = [[(c.name, c.arguments, c.id) for c in s.tool_calls] for s in t.steps]
        same_calls = calls == [[(c.name, c.arguments, c.id) for c in s.tool_calls] for s in chat.steps]
        got = audit_one(t)
        rows.append((label, t.source.format, f"{'yes' if same_steps else 'NO'} ({len(t.steps)})",
                     "yes" if same_calls else "NO", f"{got[0]} {got[1]}" + ("" if got == base else f" (chat: {base})")))
    return rows


def steps(paths: list[Path], tools: str | None, key) -> dict[str, int | None]:
    """``{key(diagnosis): critical step}`` of the offline audit of ``paths`` (default packs)."""
    res = audit_trajectories(load_many(paths).trajectories, AuditSpec(tools=tools))
    return {key(r.diagnosis): r.diagnosis.critical_step for r in res.results}


def ww_variant(src: Path, out: Path, executor_role: str) -> None:
    """Who&When files as OpenAI messages; ``executor_role`` "logged" keeps every logged role."""
    out.mkdir()
    for f in sorted(src.glob("*.json")):
        w = json.loads(f.read_text(encoding="utf-8"))
        msgs = [{"role": "user", "content": w["question"]}]
        for m in w["history"]:
            name = m.get("name")
            role = (m.get("role") if executor_role == "logged"
                    else executor_role if name == "Computer_terminal" else "assistant")
            msgs.append({"role": role, "name": name, "content": m.get("content")})
        (out / f.name).write_text(json.dumps({"messages": msgs}), encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    args = ap.parse_args()
    tau, ww = args.data / "tau_retail", args.data / "who_and_when" / "algorithm_generated"
    tools = str(tau / "tools.json")
    rows = []
    with tempfile.TemporaryDirectory(prefix="trajaudit-formats-") as tmp:
        t = Path(tmp)
        runs = json.loads((tau / "trajectories.json").read_text(encoding="utf-8"))
        (t / "tau.json").write_text(json.dumps([{"id": str(r["task_id"]), "messages": [
            {k: v for k, v in m.items() if k in KEEP} for m in r["traj"]]} for r in runs]), encoding="utf-8")
        base = steps([tau / "trajectories.json"], tools, lambda d: d.trajectory_id)
        other = steps([t / "tau.json"], tools, lambda d: d.trajectory_id)
        rows.append(("tau as openai", len(base), sum(other.get(k) == v for k, v in base.items()), None, None))
        gold = {f.name: int(json.loads(f.read_text(encoding="utf-8"))["mistake_step"]) for f in ww.glob("*.json")}
        base = steps([ww], None, lambda d: Path(d.file).name)
        base_acc = sum(base.get(k) == v for k, v in gold.items())
        for label, role in (("Who&When as openai, executor as tool", "tool"),
                            ("Who&When as openai, executor as user", "user"),
                            ("Who&When as openai, roles as logged", "logged")):
            ww_variant(ww, t / role, role)
            other = {k: (v - 1 if v is not None else None)
                     for k, v in steps([t / role], None, lambda d: Path(d.file).name).items()}
            rows.append((label, len(base), sum(other.get(k) == v for k, v in base.items()),
                         sum(other.get(k) == v for k, v in gold.items()), base_acc))
    print("| variant | runs | same critical step as the original format | exact accuracy (original format) |")
    print("|---|---|---|---|")
    for label, n, same, acc, base_acc in rows:
        score = f"{acc}/{n} ({base_acc}/{n})" if acc is not None else "same steps, same score"
        print(f"| {label} | {n} | {same}/{n} | {score} |")
    print()
    print("One scripted agent run captured by each tracing library vs the same run as OpenAI chat "
          "(tests/data/traces/chat.json):")
    print()
    print("| capture | format | same steps as chat | same tool calls | critical step, category |")
    print("|---|---|---|---|---|")
    for row in captured_rows():
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
