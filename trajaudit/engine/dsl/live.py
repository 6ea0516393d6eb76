"""A rule context that grows with the run (issue 20): :class:`LiveContext`, a
:class:`~trajaudit.engine.dsl.runtime.TrajContext` whose steps are appended one at a time.

The batch builds a :class:`TrajContext` once from a finished trajectory (views, call views, the
indexes by kind, call name and output tool, the answer index, the trajectory's call index). A runtime
monitor receives the run one step at a time; rebuilding that context per step would cost the whole
prefix per step. :meth:`LiveContext.append` extends every index in place with the new step (O(calls
of the step)), so that after ``append`` of steps ``0..k`` the context holds the same values as
``TrajContext(Trajectory(steps 0..k))`` — compared attribute by attribute in
``tests/engine/run/test_live_context.py`` — with the same list objects throughout (the quantifiers'
prefix state is cached per universe, by the list's identity: :mod:`trajaudit.engine.dsl.columnar`).

What a context built from the prefix cannot know: the name of a tool output whose call comes *after*
it (the batch resolves it through the whole run's call index). :meth:`LiveContext.same_as` tells
whether the finished run reads the same; :meth:`LiveContext.finalize` then puts the finished
:class:`Trajectory` in place for the rules that read the whole run (``traj``, ``outputs_of``,
checkers), evaluated at the end.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from trajaudit.engine.dsl import ast as A
from trajaudit.engine.dsl.columnar import warm_quant
from trajaudit.engine.dsl.incremental import prefill
from trajaudit.engine.dsl.runtime import CallView, Env, StepView, TrajContext
from trajaudit.engine.trace.ir import Step, Trajectory

__all__ = ["LiveContext", "LiveRun"]


class LiveRun:
    """The run so far, as a growing rule context reads it: ``id``, ``steps`` (a list that grows),
    ``call_index`` (``{call id: (step, position)}``, first occurrence) and the two look-ups of
    :class:`Trajectory` that the per-step rules use (``call_for``, ``output_tool_name``, the same
    functions). Anything else of a trajectory (its task, final answer, code authors…) is read by rules
    that look past the current step, evaluated on the finished :class:`Trajectory` (:meth:`LiveContext.finalize`)."""

    __slots__ = ("id", "steps", "call_index")

    def __init__(self, run_id: str) -> None:
        self.id = run_id
        self.steps: list[Step] = []
        self.call_index: dict[str, tuple[int, int]] = {}

    call_for = Trajectory.call_for
    output_tool_name = Trajectory.output_tool_name

    def __len__(self) -> int:
        return len(self.steps)


class LiveContext(TrajContext):
    """A :class:`TrajContext` built step by step (see the module docstring).

    Args:
        run_id: the run's id (``traj.id`` until :meth:`finalize`).
        budget, oracle, tools, checkers: as :class:`TrajContext`.

    Attributes:
        traj: a :class:`LiveRun` while the run grows; the finished :class:`Trajectory` after :meth:`finalize`.
    """

    def __init__(self, run_id: str, *, budget: int = 200_000, oracle: Any = None, tools: Any = None,
                 checkers: Any = None) -> None:
        super().__init__(LiveRun(run_id), budget=budget, oracle=oracle, tools=tools,  # type: ignore[arg-type]
                         checkers=checkers)
        self.final = False
        #: call id -> step, of the calls not answered yet, in step order (:meth:`answered_until`)
        self._unanswered: dict[str, int] = {}

    def answered_until(self) -> int:
        """The step of the earliest call (with an id) not answered yet, else the number of steps: every
        call before it has its output, which no later step changes (a call's output is its first answer)."""
        if self._unanswered:
            return next(iter(self._unanswered.values()))
        return len(self.views)

    def append(self, step: Step) -> None:
        """Add the run's next step to every index (O(its calls)).

        Raises:
            ValueError: ``step.index`` is not the next position, or the context was finalized.
        """
        i = len(self.views)
        if step.index != i or self.final:
            raise ValueError(f"append: expected step {i}, got step {step.index}"
                             f"{' (the run is finalized)' if self.final else ''}")
        run: LiveRun = self.traj  # type: ignore[assignment]
        run.steps.append(step)
        self.views.append(StepView(self, step))
        self.by_kind[step.kind].append(i)
        calls = step.tool_calls
        if calls:
            cvs = [CallView(self, step, j) for j in range(len(calls))]
            self.call_views.append(cvs)
            self.all_calls.extend(cvs)
            self.call_steps.extend([i] * len(cvs))
            index = run.call_index
            for j, c in enumerate(calls):
                self.by_call_name[c.name].append((i, j))
                if c.id is not None and c.id not in index:
                    index[c.id] = (i, j)
                if c.id is not None and c.id not in self._answer and c.id not in self._unanswered:
                    self._unanswered[c.id] = i
        else:
            self.call_views.append([])
        if step.tool_output is not None:
            name = run.output_tool_name(step)  # type: ignore[misc]  # Trajectory's function, on the duck-typed run
            self._out_name[i] = name
            if name is not None:
                self.by_output_name[name].append(i)
            cid = step.tool_output.call_id
            if cid is not None:
                self._answer.setdefault(cid, i)
                self._unanswered.pop(cid, None)
            if step.kind == "tool" and name is not None:  # tool_positions(name) lists handed out grow in place
                pos = self.cache.get(("tool-positions", name))
                if pos is not None:
                    pos.append(i)
        if step.kind == "tool":
            pos = self.cache.get(("tool-positions", None))
            if pos is not None:
                pos.append(i)
        self._outputs_by_caller = None  # outputs_of(): built on use from the run as it is then
        prefill(self)  # the queries' prefix state takes the new step now, not all at the next query

    def warm(self, exprs: Iterable[A.Expr]) -> int:
        """Create the prefix state of the quantifiers and comprehensions in ``exprs`` (compiled rule
        expressions, e.g. ``CompiledRule.asts``) that their first query would create
        (``dsl.columnar.warm_quant``: a filter's :class:`~trajaudit.engine.dsl.columnar.PrefixFilter`,
        a join's key index, a prefix comprehension's element series) and fill
        it over the steps appended so far; :meth:`append` extends it from then on. A rule whose
        first query comes at step k then no longer files the k earlier steps in that step's
        evaluation (a monitor's per-step latency). Charges nothing: a query charges the elements it
        covers for the first time, as before. Only quantifiers whose sequence reads no query are
        warmed (reading it must not build or charge other state). Returns how many were warmed.
        """
        if not self.views or self.final:
            return 0
        env = Env(self, len(self.views) - 1)
        ops = self.ops
        n = 0
        try:
            for expr in exprs:
                for node in expr.walk():
                    if isinstance(node, (A.Quant, A.Comprehension)):
                        pure = not any(isinstance(x, (A.Quant, A.Comprehension)) for x in node.seq.walk())
                        n += warm_quant(id(node), A.unparse(node), env, pure)
        finally:
            self.ops = ops
        if n:
            prefill(self)
        return n

    def same_as(self, traj: Trajectory) -> bool:
        """Whether ``traj`` (the finished run) has the steps appended, the same objects, and every tool
        output names the tool it named when it was appended (an output answering a call made after it
        is named only by the whole run's call index) — i.e. a batch :class:`TrajContext` of ``traj``
        holds the same views and indexes."""
        steps = self.traj.steps
        if len(traj.steps) != len(steps) or any(a is not b for a, b in zip(traj.steps, steps, strict=True)):
            return False
        return all(traj.output_tool_name(steps[i]) == name for i, name in self._out_name.items())

    def finalize(self, traj: Trajectory) -> None:
        """The run is complete: ``traj`` (:meth:`same_as` this context) replaces the growing run, for
        the rules evaluated at its end (they read ``traj``'s task, final answer, code authors…).

        Raises:
            ValueError: ``traj`` is not the run appended (:meth:`same_as`).
        """
        if not self.same_as(traj):
            raise ValueError(f"finalize: {traj.id} is not the run appended to this context")
        self.traj = traj
        self.final = True
        self._outputs_by_caller = None
