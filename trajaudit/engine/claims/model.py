"""Data model of the claim ledger: mentions, claims, support statuses and the configuration.

DRIFT §Claim Keeper: a *claim* is an atomic value an agent commits to (an id, a number, a count, a
date, a URL, a quoted name, a status), recorded with the step that introduced it, the steps that
reuse it and whether it becomes consequential. DRIFT §Support Seeker assigns each claim one of
DIRECT / WEAK / MISSING / CONFLICTING against the evidence visible before it was introduced.

Addresses follow the validation-log convention: ``steps.6.content[26:28]`` (a character range of a
step's text), ``steps.7.tool_calls.0.arguments.order_id`` (a tool-call argument; list items add
``.N``), ``steps.5.content.variants`` (a path inside a tool output parsed as JSON), and
``task`` / ``system_prompts.<agent>`` for run-level evidence.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum
from functools import lru_cache
from typing import Any

from trajaudit.engine.dsl.regex.stored import module_pattern

# Claim kinds (``Claim.kind``). A value keeps its first kind; later mentions of the same value with
# another kind are still reuses of the same claim.
KIND_ID = "id"  # order/product/item/user ids, payment-method ids, long digit strings, tracking numbers
KIND_EMAIL = "email"
KIND_URL = "url"
KIND_PATH = "path"
KIND_MONEY = "money"
KIND_NUMBER = "number"  # a number with a unit, a percentage, a decimal, or an integer >= 10
KIND_COUNT = "count"  # "11 available T-shirt options": a number counting a plural noun
KIND_DATE = "date"
KIND_TIME = "time"
KIND_QUOTED = "quoted"  # a quoted name or title in prose
KIND_ARGUMENT = "argument"  # a scalar tool-call argument not classified as any kind above
KIND_STATUS = "status"  # "order #W1 is delivered", "successfully cancelled", "saved to out.csv"
KIND_FINAL = "final"  # the run's final answer
CLAIM_KINDS: tuple[str, ...] = (
    KIND_ID, KIND_EMAIL, KIND_URL, KIND_PATH, KIND_MONEY, KIND_NUMBER, KIND_COUNT, KIND_DATE,
    KIND_TIME, KIND_QUOTED, KIND_ARGUMENT, KIND_STATUS, KIND_FINAL,
)


class Support(str, Enum):
    """Support status of a claim (DRIFT §Support Seeker).

    DIRECT: the normalized value appears in evidence visible before the claim (or a later user turn
    restates it). WEAK: a fuzzy or partial match (rounding, a near-identical string, a value derivable
    by one arithmetic step, a user's bare "yes" to the message stating it). MISSING: found nowhere.
    CONFLICTING: the same slot (object + attribute) holds a different value in the latest evidence.
    """

    DIRECT = "DIRECT"
    WEAK = "WEAK"
    MISSING = "MISSING"
    CONFLICTING = "CONFLICTING"

    @property
    def unsupported(self) -> bool:
        """True for MISSING and CONFLICTING (the statuses that can make an error span)."""
        return self in (Support.MISSING, Support.CONFLICTING)


#: Verbs that make a tool a consequential write when they are the first word of its name.
DEFAULT_WRITE_VERBS: tuple[str, ...] = (
    "cancel", "modify", "update", "exchange", "return", "book", "send", "delete", "remove", "create",
    "transfer", "place", "submit", "purchase", "pay", "refund", "write", "save", "post", "upload",
    "insert", "set", "edit", "reserve", "add", "change", "apply", "publish", "commit", "deploy",
)


_NAME_PART = module_pattern(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


@lru_cache(maxsize=1024)
def tool_verb(name: str) -> str:
    """The first word of a tool name, lower-cased (``return_delivered_order_items`` → ``return``,
    ``createIssue`` → ``create``). Memoized (a pure function of the name; asked per call argument)."""
    parts = _NAME_PART.findall(name or "")
    return parts[0].casefold() if parts else ""


@dataclass(frozen=True)
class ClaimConfig:
    """Limits and policy of claim extraction, support and propagation (explicit; no hidden settings).

    Attributes:
        max_claims_per_step: cap on mentions extracted from one step; hitting it is reported in
            ``ClaimGraph.incomplete`` (and as an ``unknown`` record), never silent.
        write_verbs: a tool whose name starts with one of these verbs is a consequential write call
            (``cancel_pending_order``, ``transfer_to_human_agents``); claims in its arguments are
            consequential. Read tools (``get_…``, ``find_…``, ``list_…``) are not.
        replies_are_final: in conversations with a user (user turns after the first decision step),
            an agent's text reply to the user finalizes the claims in it (each reply answers a request).
        small_count: unslotted counts up to this value are WEAK rather than MISSING (an agent counting
            items it lists itself is not checked against a collection).
        max_text_chars: text beyond this many characters of one step is not scanned for claims
            (reported in ``incomplete``); evidence is always indexed in full.
        termination_tokens: bare messages that end a run and carry no answer (skipped when the
            final-answer step is chosen).
        brief_is_handoff: a run that opens with a decision step quoting the task (a manager's brief)
            hands its unsupported claims to the team: the first step adopting one commits to it.
            (Only used when ``brief_is_input`` is off.)
        brief_is_input: that opening brief is the run's input, not a claim of the run: nothing
            precedes it, so no decision of this run can have produced it. Its text is evidence (a
            source, like the task it restates), visible from the brief on, and no claims are
            extracted from it: a value the team takes from it is supported (issue 17: 27 of 126
            Who&When runs were blamed at the brief for values the run was handed).
    """

    max_claims_per_step: int = 200
    write_verbs: tuple[str, ...] = DEFAULT_WRITE_VERBS
    replies_are_final: bool = True
    small_count: int = 10
    max_text_chars: int = 200_000
    termination_tokens: tuple[str, ...] = ("terminate", "###stop###", "exit", "stop")
    brief_is_handoff: bool = True
    brief_is_input: bool = True

    @classmethod
    def from_audit(cls, audit: Any) -> ClaimConfig:
        """Build from an :class:`~trajaudit.engine.config.AuditConfig` (uses its ``max_claims_per_step``)."""
        return cls(max_claims_per_step=int(getattr(audit, "max_claims_per_step", cls.max_claims_per_step)))

    def is_write_tool(self, name: str) -> bool:
        """True when the first word of tool ``name`` is one of :attr:`write_verbs`."""
        return tool_verb(name) in self.write_verbs


@dataclass(frozen=True, slots=True)
class Mention:
    """One occurrence of a claim value in a decision step, as an extractor found it.

    Attributes:
        step: the step index (0-based).
        address: where exactly, e.g. ``steps.6.content[26:28]``.
        kind: one of :data:`CLAIM_KINDS`.
        value: the normalized value (the ledger key together with ``slot``).
        text: the raw text matched.
        slot: for slot claims, what the value is about: ``("count", noun words…)`` for counts,
            ``("status", subject id)`` for statuses; ``()`` for plain values.
        in_code: the mention is inside a fenced code block or a code/expression argument.
        in_call: the mention is a tool-call argument (``tool`` names the tool).
        tool: the called tool's name for argument mentions, else ``None``.
        context: the sentence or line around the mention (for slot checks and display).
    """

    step: int
    address: str
    kind: str
    value: str
    text: str
    slot: tuple[str, ...] = ()
    in_code: bool = False
    in_call: bool = False
    tool: str | None = None
    context: str = ""

    @property
    def key(self) -> tuple[str, ...]:
        """Ledger key: the normalized value plus its slot (so "11 options" and id "11" differ)."""
        return (self.value, *self.slot)


#: The generated ``__init__`` of :class:`Mention` (the definition; tests compare the fast one with it).
_mention_init_reference = Mention.__init__
(_set_step, _set_address, _set_kind, _set_value, _set_text, _set_slot, _set_in_code, _set_in_call, _set_tool,
 _set_context) = (getattr(Mention, f.name).__set__ for f in dataclasses.fields(Mention))


def _mention_init(self: Mention, step: int, address: str, kind: str, value: str, text: str,
                  slot: tuple[str, ...] = (), in_code: bool = False, in_call: bool = False, tool: str | None = None,
                  context: str = "") -> None:
    """The generated ``__init__`` of the frozen dataclass (same parameters and defaults), storing each
    field with its slot's descriptor where the generated one calls ``object.__setattr__`` per field
    (its way round the frozen ``__setattr__``): ~40% less per construction, and extraction makes one
    per claim mention. Instances stay frozen: assignment still raises ``FrozenInstanceError``."""
    _set_step(self, step)
    _set_address(self, address)
    _set_kind(self, kind)
    _set_value(self, value)
    _set_text(self, text)
    _set_slot(self, slot)
    _set_in_code(self, in_code)
    _set_in_call(self, in_call)
    _set_tool(self, tool)
    _set_context(self, context)


Mention.__init__ = _mention_init  # type: ignore[method-assign]


@dataclass(slots=True)
class Claim:
    """One ledger entry (DRIFT §Claim Keeper): a value, where it entered, its support and its uses.

    Attributes:
        id: ``c<N>`` in order of introduction.
        kind, value, text, address, step, agent: from the introducing mention.
        mention: the introducing :class:`Mention`.
        status: the :class:`Support` status (against evidence before ``step``).
        evidence_address, evidence_value, note: the supporting or conflicting evidence (``None`` for
            MISSING) and a short explanation.
        reused_in: later decision steps that mention the value again (including tool arguments).
        derived_from: ids of claims this one was derived from (its support is a tool output that a
            call or code using those claims produced).
        final_steps: steps where the claim (or a claim derived from it) is finalized: the final
            answer, a write call, or (``replies_are_final``) a reply to the user.
        consequential: ``final_steps`` is non-empty.
    """

    id: str
    kind: str
    value: str
    text: str
    address: str
    step: int
    agent: str | None
    mention: Mention
    status: Support = Support.MISSING
    evidence_address: str | None = None
    evidence_value: Any = None
    note: str = ""
    reused_in: list[int] = field(default_factory=list)
    derived_from: list[str] = field(default_factory=list)
    final_steps: list[int] = field(default_factory=list)

    @property
    def consequential(self) -> bool:
        """True when the claim reaches the final answer, a write call or a user-facing reply."""
        return bool(self.final_steps)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (one ledger row)."""
        return {
            "id": self.id, "kind": self.kind, "value": self.value, "text": self.text,
            "address": self.address, "step": self.step, "agent": self.agent,
            "status": self.status.value, "evidence_address": self.evidence_address,
            "evidence_value": self.evidence_value, "note": self.note,
            "reused_in": list(self.reused_in), "derived_from": list(self.derived_from),
            "final_steps": list(self.final_steps), "consequential": self.consequential,
        }


@dataclass(frozen=True)
class Propagation:
    """DRIFT §Dependency Tracer output.

    Attributes:
        first_error_step: the earliest error step, or ``None`` when there is none.
        error_steps: all error steps, ascending.
        chains: ``{step: [claim ids…]}``: for each error step, the chain from the unsupported root
            claim to the claim that makes the step an error (root first).
        roles: ``{step: "commit" | "reuse" | "amplify" | "finalize"}``, the strongest role per step.
    """

    first_error_step: int | None
    error_steps: tuple[int, ...]
    chains: dict[int, list[str]]
    roles: dict[int, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "first_error_step": self.first_error_step,
            "error_steps": list(self.error_steps),
            "chains": {str(k): v for k, v in sorted(self.chains.items())},
            "roles": {str(k): v for k, v in sorted(self.roles.items())},
        }
