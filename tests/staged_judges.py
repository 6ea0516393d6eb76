"""Scripted "models" for the staged LLM strategies (searchauditor, drift, hybrid), keyed by the run's task.

Each responder plays a consistent judge for a set of runs and checks, as it answers, that the request
has the shape the strategy promises (which evidence blocks it carries). The runs' expected answers are
computed here from the IR only, never from gold labels.
"""

from __future__ import annotations

from typing import Any

from llm_server import evidence_of, schema_name

CATEGORY = "misinterpretation_of_tool_output"
EARLY_CATEGORY = "instruction_adherence_failure"
NOT_VERBATIM = "this text is not in the step"


def target_of(t) -> int:
    """The step the scripted judges blame: the middle decision step."""
    d = t.decision_steps
    return d[len(d) // 2].index


def early_of(t) -> int:
    """The backward audit's (earlier) proposal: two decision steps before the target, or the first."""
    d = [s.index for s in t.decision_steps]
    return d[max(0, d.index(target_of(t)) - 2)]


def searchauditor_judge(runs, *, adjudicated=None, fail: tuple[str, ...] = (), extra_support: tuple[int, ...] = ()):
    """Holistic and forward blame :func:`target_of`, backward blames :func:`early_of`; the adjudicator
    follows the majority (or ``adjudicated(t)`` when given) and also cites ``extra_support``. Branches
    named in ``fail`` answer invalid JSON."""
    by_task = {t.task: t for t in runs}

    def respond(req: dict[str, Any]) -> Any:
        name = schema_name(req) or ""
        ev = evidence_of(req)
        t = by_task[ev["task"]]
        target, early = target_of(t), early_of(t)
        branch = name.removeprefix("searchauditor-")
        if branch in fail:
            return '{"critical_step": '
        if branch == "holistic":
            assert "trajectory" in ev and "reports" not in ev
            return {"critical_step": target, "category": CATEGORY, "confidence": 0.8, "reason": f"step {target}"}
        if branch == "backward":
            return {"constraints": [{"constraint": "the order must be delivered", "status": "unverified",
                                     "step": early}],
                    "critical_step": early, "category": EARLY_CATEGORY, "confidence": 0.6,
                    "reason": f"step {early} committed without checking"}
        if branch == "forward":
            return {"plan": ["authenticate", "look up the order", "act"], "critical_step": target,
                    "category": CATEGORY, "confidence": 0.7, "reason": f"step {target} establishes the path"}
        if branch == "adjudicate":
            assert {"reports", "summary", "outline", "windows", "final_answer"} <= set(ev) and "trajectory" not in ev
            step = adjudicated(t) if adjudicated else target
            return {"critical_step": step, "category": CATEGORY, "confidence": 0.75,
                    "reason": f"rule (iii): step {step} misread the output", "supporting_steps": [step, early, *extra_support],
                    "sources": [r["report"] for r in ev["reports"] if r["report"] != "backward"]}
        if branch == "repair":
            assert set(ev) == {"task", "final_answer", "diagnosis", "windows"}
            return {"directives": [f"Before acting at step {ev['diagnosis']['critical_step']}, re-read the tool "
                                   "output field by field.", "Confirm the item ids with the user."]}
        raise AssertionError(f"unexpected request {name}")

    return respond


def drift_judge(runs, *, support_status: str = "MISSING", keep: bool = True):
    """Keeper: one real claim (the first 40 characters of the first decision step with text) and one
    with a made-up quote; support: every claim gets ``support_status``; backtrace: confirms every
    candidate, or blames :func:`target_of` when there is none."""
    by_task = {t.task: t for t in runs}

    def respond(req: dict[str, Any]) -> Any:
        name = schema_name(req) or ""
        ev = evidence_of(req)
        t = by_task[ev["task"]]
        if name == "drift-keeper":
            recs = [r for r in ev["steps"] if "step" in r]
            assert recs and all(r["kind"] == "agent" for r in recs)  # decisions only
            if not keep:
                return {"claims": []}
            first = next(r for r in recs if len(r.get("content", "")) >= 40)
            last = t.decision_steps[-1].index
            return {"claims": [
                {"step": first["step"], "quote": first["content"][:40], "claim": "the agent's first commitment",
                 "stage": "Decide", "consequential": True, "used_in": [last] if last > first["step"] else []},
                {"step": first["step"], "quote": NOT_VERBATIM, "claim": "made up", "stage": "Plan",
                 "consequential": False, "used_in": []}]}
        if name == "drift-support":
            return {"judgments": [{"id": c["id"], "status": support_status, "evidence_step": None,
                                   "reason": "scripted check"} for c in ev["claims"]]}
        if name == "drift-backtrace":
            steps = [c["step"] for c in ev["candidates"]][:8]
            first = steps[0] if steps else target_of(t)
            return {"error_steps": steps, "first_error_step": first, "category": "invention_of_new_information",
                    "confidence": 0.65, "reason": f"step {first} commits to an unsupported claim"}
        raise AssertionError(f"unexpected request {name}")

    return respond


def hybrid_judge(runs):
    """Keeps the offline judge's step when it had candidates, else blames :func:`target_of`."""
    by_task = {t.task: t for t in runs}

    def respond(req: dict[str, Any]) -> Any:
        ev = evidence_of(req)
        t = by_task[ev["task"]]
        assert {"offline", "violations", "claims", "outline", "windows"} <= set(ev) and "trajectory" not in ev
        off = ev["offline"]
        step = off["critical_step"] if off["candidates"] else target_of(t)
        return {"critical_step": step, "category": CATEGORY, "confidence": 0.7,
                "reason": f"step {step}: checked against the windows", "agrees_with_offline": step == off["critical_step"]}

    return respond


def minimal(schema: dict[str, Any]) -> Any:
    """The smallest value valid against a (simple) JSON schema: first enum, minimum, required keys only."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type", "object")
    kind = next(k for k in kind if k != "null") if isinstance(kind, list) else kind
    if kind == "object":
        props = schema.get("properties", {})
        return {k: minimal(props.get(k, {})) for k in schema.get("required", [])}
    if kind == "array":
        return [minimal(schema.get("items", {}))] * int(schema.get("minItems", 0))
    if kind in ("integer", "number"):
        return schema.get("minimum", 0) if kind == "integer" else 0.5
    if kind == "boolean":
        return False
    return "x" * int(schema.get("minLength", 1))
