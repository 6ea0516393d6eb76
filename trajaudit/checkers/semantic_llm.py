"""The LLM semantic oracle: a rule's natural-language predicate judged at one step.

Implements :class:`trajaudit.checkers.semantic.SemanticOracle` (AgentRx §3.1: constraints that need
judgement are checked by an LLM). The judge answers pass / fail / unclear with cited evidence
addresses; ``unclear`` becomes ``unknown`` (never a pass), and so does a failed call, with the
reason — the validation log reports it, the audit goes on.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from trajaudit.checkers.semantic import SemanticAnswer
from trajaudit.engine.trace.ir import Step, Trajectory
from trajaudit.errors import LLMError, LLMUnreachableError
from trajaudit.llm.client import LLMClient, messages_chars
from trajaudit.llm.fitting import fit_steps
from trajaudit.llm.prompting import load_prompt

log = logging.getLogger(__name__)

_ADDRESS = re.compile(r"^steps\.(\d+)(?:[.\[].*)?$")


class LLMSemanticOracle:
    """Answers ``semantic:`` predicates with an LLM.

    Args:
        client: the :class:`~trajaudit.llm.client.LLMClient`.
        window: decision steps of context before the checked step (default 3); the step's own tool
            outputs after it are included too. Fitted to ``client.config.context_chars``.
    """

    def __init__(self, client: LLMClient, *, window: int = 3) -> None:
        self.client = client
        self.window = window

    def _indices(self, trajectory: Trajectory, step: Step) -> range:
        before = [s.index for s in trajectory.decision_steps if s.index < step.index][-self.window:]
        start = before[0] if before else 0
        end = step.index + 1
        while end < len(trajectory.steps) and trajectory.steps[end].kind == "tool":
            end += 1
        return range(start, end)

    def judge(self, predicate: str, trajectory: Trajectory, step: Step, bindings: dict[str, Any]) -> SemanticAnswer:
        """Judge ``predicate`` at ``step``.

        Returns:
            ``pass``/``fail`` with the evidence addresses the model cited (only addresses of steps
            it was shown; the checked step's address when it cited none), or ``unknown`` with the
            reason (unclear, or the LLM call failed). Context cuts are stated in the reason.
        """
        prompt = load_prompt("semantic_check")
        data = {"predicate": predicate, "bindings": bindings, "step": str(step.index)}
        overhead = messages_chars(prompt.render(**data, context=[]))
        view = fit_steps(trajectory, self._indices(trajectory, step),
                         max(1000, self.client.config.context_chars - overhead), focus=(step.index,),
                         anchor=step.index)
        messages = prompt.render(**data, context=view.records)
        try:
            answer = self.client.chat_json(messages, prompt.schema or {}, name="semantic-check")
        except LLMUnreachableError:  # the endpoint is down: stop, do not degrade
            raise
        except LLMError as e:
            log.info("semantic check at %s unanswered: %s", step.address, e)
            return SemanticAnswer("unknown", (), f"LLM error: {e}")
        shown = {r["step"] for r in view.records if "step" in r}
        cited = []
        for address in answer["evidence"]:
            m = _ADDRESS.match(str(address).strip())
            if m and int(m.group(1)) in shown:
                cited.append(str(address).strip())
        cut = f" [evidence cut to fit: {view.mode}, steps {[c['step'] for c in view.cuts] + view.omitted}]" \
            if not view.complete else ""
        if answer["verdict"] == "unclear":
            return SemanticAnswer("unknown", tuple(cited), f"unclear: {answer['reason']}{cut}")
        return SemanticAnswer(answer["verdict"], tuple(cited) or (step.address,), f"{answer['reason']}{cut}")
