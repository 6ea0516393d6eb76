"""The compiled form every part of the rule compiler shares: :class:`C` (closure, static type,
constant), the top-level names and their types, the trajectory-info value of ``traj``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from trajaudit.engine.dsl.runtime import Env, type_name

Fn = Callable[[Env], Any]
_NO = object()
NO = _NO

# name -> static type. ``step``/``call``/``output`` are views; ranges are ``steps``.
TOP_NAMES: dict[str, str] = {"step": "step", "call": "call", "output": "step", "content": "str",
                             "earlier": "steps", "later": "steps", "steps": "steps", "traj": "any",
                             "params": "any"}


@dataclass
class C:
    """A compiled sub-expression: closure, static type, constant value (``_NO`` if not constant)."""

    fn: Fn
    type: str = "any"
    const: Any = _NO
    loc: Callable[[Env], tuple[Any, str | None]] | None = None


def _const(v: Any, t: str | None = None) -> C:
    return C(lambda env: v, t or _type_of(v), v)


const_ = _const


def _type_of(v: Any) -> str:
    return {"null": "null", "boolean": "bool", "number": "num", "string": "str", "list": "list"}.get(type_name(v), "any")



def traj_info(env: Env) -> dict[str, Any]:
    """The value of ``traj``: id, task, final answer, agents, length, source format, and
    ``instructions`` — the text of every system prompt of the run: its system steps' content, then
    the per-agent prompts a format gives outside the messages (``Trajectory.system_prompts``: Who&When's
    ``system_prompt``), joined by blank lines (once per run)."""
    t = env.tc.traj
    info = env.tc.cache.get("traj_info")
    if info is None:
        prompts = [s.content for s in t.steps if s.kind == "system" and s.content]
        prompts += [p for p in t.system_prompts.values() if isinstance(p, str) and p]
        info = {"id": t.id, "task": t.task, "final_answer": t.final_answer, "agents": list(t.agents),
                "length": len(t.steps), "source": t.source.format, "instructions": "\n\n".join(prompts)}
        env.tc.cache["traj_info"] = info
    return info
