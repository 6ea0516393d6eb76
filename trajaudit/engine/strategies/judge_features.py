"""Features of candidate decision steps for the offline judge's ranker (issue 17).

The offline judge ranks the candidate steps of a run with a linear model whose weights are data
(:mod:`trajaudit.engine.strategies.judge_weights`). This module turns a run and its evidence (validation log +
claim ledger, :class:`~trajaudit.engine.strategies.context.EvidenceBundle`) into one feature vector per
candidate step. Every feature states a *general* property of a step — how severe and how
recovered the findings blamed on it are, what kind of rule or claim produced them, where the step
sits in the run, what role its producer plays, what follows from it — and never names a dataset, a
framework, an agent or a tool. Roles are derived from structure: an agent whose turns address
other agents of the run by name (or carry an explicit hand-off target) *instructs*; an agent whose
turns call tools or carry code to execute is a *tool caller*.

Candidates: every decision step, plus a user turn that a finding blames (a rule whose target says the
user caused the failure). Cost: one pass over the steps, the records and the claims of the run,
plus a name scan per step over the run's agent names — linear in run length.

AgentRx (arXiv 2602.02475) defines the critical step as the first unrecoverable failure; the
``first_*`` features encode "earliest", the ``*_recovered`` ones "recovered"; how much each counts
is the fitted model's business, not a hand-set threshold.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from trajaudit.engine.claims.origin import RunMemo, origin_features
from trajaudit.engine.dsl.regex.prefilter import folds_like_ascii
from trajaudit.engine.trace.ir import FENCE_RE, Step, Trajectory
from trajaudit.engine.validation_log import RULE_TYPES, Record, severity_rank

#: Candidates with findings whose origin is traced (a constant: the judge stays linear in run length).
MAX_TRACED = 16
#: The rule that propagates an unsupported claim (a consequence, counted at its root step).
PROPAGATION_RULE = "claims.propagates-unsupported"
#: Targets that make a finding on a user turn the user's own fault.
USER_CAUSED = frozenset({"underspecified_user_intent"})

_WRITE_VERB = re.compile(
    r"^(cancel|modify|update|exchange|return|book|send|delete|remove|create|transfer|pay|refund|submit|"
    r"write|post|put|place|purchase|buy|order|set|add|edit|change|reserve|schedule|execute|run)", re.I)
# Code to execute: a Markdown fence opening a line (an inline ``` in prose is not code) or a code-like line.
_CODE = re.compile(FENCE_RE.pattern + r"|^\s*(import |def |SELECT |curl |pip install)", re.M)
#: A literal every match of :data:`_CODE` contains, one per branch (the fence, then each keyword).
_CODE_LITERALS = ("```", "import ", "def ", "SELECT ", "curl ", "pip install")
_SPACE = re.compile(r"\s+")
_NAME_SEP = re.compile(r"[\s_\-]+")

#: Feature names, in the order of :attr:`FeatureTable.rows`. Documented in docs/judge.md.
FEATURES: tuple[str, ...] = (
    # findings blamed on the step (distinct rules, log1p)
    "error_unrecovered", "error_recovered", "warning_unrecovered", "warning_recovered", "info_findings",
    *(f"type_{t.lower()}" for t in RULE_TYPES),
    "family_claims", "family_generic_rules", "family_other_rules",
    # claims introduced at the step (the claim ledger)
    "claims_missing", "claims_conflicting", "claims_weak", "claims_introduced", "claims_reused_later",
    "claims_reach_final", "propagation_root", "error_span", "first_error_span",
    # order of the evidence
    "first_error_step", "first_finding_step", "errors_before", "errors_after", "findings_after",
    # position
    "position", "decision_rank", "first_decision", "last_decision", "user_turn",
    # the producer's role
    "calls_tools", "writes_code", "consequential_action", "first_consequential_action",
    "producer_instructs", "producer_calls_tools", "producer_share", "producer_first", "multi_agent",
    "addresses_agent",
    # what follows from the step
    "own_output_error", "errors_following", "next_output_error", "dependents",
    # loops and repeats
    "repeats_earlier", "repeated_later", "loop_start",
    # origin tracing (trajaudit.engine.claims.origin): late symptoms and the decisions they lead back to
    "late_symptom", "origin_of_late_symptom", "dependency_depth", "origin_dependents",
    # no evidence anywhere in the run: positions that stand in for it
    "no_error_in_run", "no_finding_in_run", "last_decision_no_error", "first_action_no_error",
    "first_decision_no_error",
)
FEATURE_INDEX = {name: i for i, name in enumerate(FEATURES)}


def is_consequential_action(step: Step) -> bool:
    """A decision step that acts irreversibly or executes: a write-like tool call, or code to run."""
    if not step.is_decision:
        return False
    if any(_WRITE_VERB.match(c.name) for c in step.tool_calls):
        return True
    return has_code(step.content)


def has_code(text: str) -> bool:
    """``bool(_CODE.search(text))``: code to execute in ``text``. The regex runs only when one of
    :data:`_CODE_LITERALS` occurs in the text (every match holds one: a text without any has none)."""
    for lit in _CODE_LITERALS:
        if lit in text:
            return _CODE.search(text) is not None
    return False


_NEIGHBOURS: list[tuple[Trajectory, list[int | None], list[int | None]]] = []


def decision_neighbours(t: Trajectory) -> tuple[list[int | None], list[int | None]]:
    """``(previous, following)``: for every step index, the latest decision step before it and the
    first decision step after it (``None`` when there is none). One pass each; the last run's lists
    are kept, so blaming every record of a run costs O(steps + records), not O(steps × records)."""
    if _NEIGHBOURS and _NEIGHBOURS[0][0] is t:
        return _NEIGHBOURS[0][1], _NEIGHBOURS[0][2]
    n = len(t.steps)
    prev: list[int | None] = [None] * n
    nxt: list[int | None] = [None] * n
    last: int | None = None
    for s in t.steps:
        prev[s.index] = last
        if s.is_decision:
            last = s.index
    last = None
    for s in reversed(t.steps):
        nxt[s.index] = last
        if s.is_decision:
            last = s.index
    _NEIGHBOURS[:] = [(t, prev, nxt)]
    return prev, nxt


def blame(t: Trajectory, rec: Record) -> int | None:
    """The decision step (or, for user-caused targets, the user step) a record is attributed to.

    A finding on a tool output goes to the decision step that issued the call
    (``Trajectory.call_for``) or wrote the code it ran (``Trajectory.code_authors``), else to the
    nearest earlier decision step; a finding on a user turn goes to the next decision step unless its
    targets say the user caused it or no agent step follows. ``None`` when nothing can be blamed.
    """
    k = rec.step
    if not 0 <= k < len(t.steps):
        return None
    s = t.steps[k]
    if s.is_decision:
        return k
    if s.kind == "tool":
        hit = t.call_for(s)
        if hit is not None:
            return hit[0].index
        if k in t.code_authors:  # a code runner's output: the step whose code it ran
            return t.code_authors[k]
        return decision_neighbours(t)[0][k]
    if s.kind == "user" and USER_CAUSED & set(rec.targets):
        return k
    later = decision_neighbours(t)[1][k]
    if later is not None:
        return later
    return k if s.kind == "user" else None  # a run that ends on this user turn: nothing later to blame


def last_success(t: Trajectory) -> dict[tuple[str | None, str], int]:
    """``{(agent, tool name): index of the last step where that agent's call of that tool, with a call
    id, got an output that is not an error}`` — what :func:`recovered` asks of every later step."""
    last: dict[tuple[str | None, str], int] = {}
    for s in t.steps:
        for c in s.tool_calls:
            if c.id is None:
                continue
            res = t.output_after(c.id, s.index)
            if res is not None and res.tool_output is not None and not res.tool_output.is_error:
                last[(s.agent, c.name)] = s.index
    return last


def recovered(t: Trajectory, step: int, rec: Record, successes: dict[tuple[str | None, str], int]) -> bool:
    """A finding is recovered when its rule says so (binding ``recovered``) or when a call of the step
    failed and the same agent later called the same tool successfully (AgentRx: a failed call retried
    successfully is not the critical failure). ``successes`` is :func:`last_success` of ``t``."""
    if rec.bindings.get("recovered") is True:
        return True
    s = t.steps[step]
    for call in s.tool_calls:
        out = t.output_after(call.id, step)
        if (out is not None and out.tool_output is not None and out.tool_output.is_error
                and successes.get((s.agent, call.name), -1) > out.index):
            return True
    return False


@dataclass
class Finding:
    """One failing record blamed on a candidate step.

    Attributes:
        record: the validation-log record.
        recovered: the run repaired it (:func:`recovered`).
    """

    record: Record
    recovered: bool

    @property
    def level(self) -> int:
        """Severity rank (0 info … 3 critical)."""
        return severity_rank(self.record.severity)


@dataclass
class Candidate:
    """A candidate step with its findings and feature vector.

    Attributes:
        step: the step index.
        findings: the failing records blamed on it (one per rule: its strongest hit), in log order.
        features: values in :data:`FEATURES` order.
    """

    step: int
    findings: list[Finding] = field(default_factory=list)
    features: list[float] = field(default_factory=list)

    @property
    def has_error(self) -> bool:
        """An unrecovered error-level (or critical) finding is blamed on this step."""
        return any(f.level >= 2 and not f.recovered for f in self.findings)

    @property
    def has_finding(self) -> bool:
        """A finding at warning level or above (recovered or not) is blamed on this step."""
        return any(f.level >= 1 for f in self.findings)

    @property
    def basis(self) -> str:
        """``finding`` (an unrecovered error-level finding), ``weak`` (weaker findings only) or
        ``fallback`` (no finding at warning level or above: the step was chosen by position/role)."""
        if self.has_error:
            return "finding"
        return "weak" if self.has_finding else "fallback"


@dataclass
class FeatureTable:
    """The candidates of one run, in step order.

    Attributes:
        trajectory: the run.
        candidates: one :class:`Candidate` per candidate step.
        origin_memo: what the origin walks of the features found about the run's steps
            (:class:`~trajaudit.engine.claims.origin.RunMemo`), for further walks of the same run and graph.
    """

    trajectory: Trajectory
    candidates: list[Candidate]
    origin_memo: RunMemo | None = field(default=None, repr=False, compare=False)

    @property
    def rows(self) -> list[list[float]]:
        """The feature vectors, one per candidate, in :data:`FEATURES` order."""
        return [c.features for c in self.candidates]

    def index_of(self, step: int) -> int | None:
        """Position of candidate ``step`` in :attr:`candidates`, or ``None``."""
        for i, c in enumerate(self.candidates):
            if c.step == step:
                return i
        return None


def _norm_name(name: str) -> str:
    return _NAME_SEP.sub(" ", name.casefold()).strip()


@functools.lru_cache(maxsize=1024)
def _address_pattern(agent: str) -> re.Pattern[str] | None:
    """The pattern of a mention of ``agent`` in a text (case and ``_``/``-``/space folded, whole
    words); ``None`` when the folded name is shorter than 3 characters. Cached: a batch names the
    same agents run after run."""
    folded = _norm_name(agent)
    if len(folded) < 3:
        return None
    return re.compile(r"(?<![\w])" + re.escape(folded).replace(r"\ ", r"[\s_\-]+") + r"(?![\w])", re.I)


@functools.lru_cache(maxsize=1024)
def _address(agent: str) -> tuple[re.Pattern[str], tuple[str, ...]] | None:
    """:func:`_address_pattern` of ``agent`` with the ASCII words of its folded name (a match of the
    pattern holds each of them, case folded): ``None`` when there is no pattern."""
    p = _address_pattern(agent)
    if p is None:
        return None
    return p, tuple(w for w in _norm_name(agent).split(" ") if w and w.isascii())


def _addresses(text: str, low: str | None, address: tuple[re.Pattern[str], tuple[str, ...]]) -> bool:
    """``bool(pattern.search(text))`` for ``address = (pattern, words)`` (:func:`_address`); ``low`` is
    ``text.lower()`` when it shows where ASCII letters can match case-insensitively
    (:func:`~trajaudit.engine.dsl.regex.prefilter.folds_like_ascii`), else ``None``. The regex runs only
    when ``low`` is ``None`` or holds every word: a match spans each word in some case, and in such a
    text that is the word itself in ``low``."""
    pattern, words = address
    if low is not None:
        for w in words:
            if w not in low:
                return False
    return pattern.search(text) is not None


def _text_key(step: Step) -> str | None:
    """A repeat key of a decision step's text: case and whitespace folded; ``None`` for short text.

    ``" ".join(text.split())`` is ``re.sub(r"\\s+", " ", text).strip()`` (both split at the same
    Unicode whitespace), at less than half the cost on long texts."""
    text = " ".join(step.content.casefold().split())
    if len(text) < 20:
        return None
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=12).hexdigest()


#: ``json.dumps(x, sort_keys=True, ensure_ascii=False, default=str)`` is this encoder's ``encode(x)``
#: (``dumps`` builds the same encoder per call; an encoder keeps no state between calls).
_ARGS_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str)


#: The ASCII characters ``str.split()`` splits at (``str.isspace``), as bytes to delete.
_ASCII_SPACE = bytes(c for c in range(128) if chr(c).isspace())


def _text_shape(text: str) -> bytes:
    """The characters of ``text.casefold()`` but whitespace, in order (UTF-8, errors replaced): a
    function of the text :func:`_text_key` hashes (that text without its spaces), so two steps whose
    shapes differ have different text keys. Cheaper than the key: no split into words, no hash."""
    y = text.casefold()
    if y.isascii():
        return y.encode("ascii").translate(None, _ASCII_SPACE)
    return "".join(y.split()).encode("utf-8", "replace")


def _call_keys(step: Step, skip: set[str] | None = None) -> list[str]:
    """The repeat keys of ``step``'s calls (name, NUL, arguments as JSON with sorted keys), but of the
    calls named in ``skip``."""
    keys = []
    for c in step.tool_calls:
        if skip and c.name in skip:
            continue
        try:
            args = _ARGS_ENCODER.encode(c.arguments)
        except (TypeError, ValueError):
            args = str(c.arguments)
        keys.append(f"{c.name}\x00{args}")
    return keys


@dataclass
class _Roles:
    """What :func:`_roles` found: per producer (``agent or ""``) its decision ``turns``, the share of
    them that address another agent (``instructs``) and the share that call tools or carry code
    (``calls``); per decision step whether it addresses another agent (``addresses``)."""

    instructs: dict[str, float]
    calls: dict[str, float]
    addresses: dict[int, bool]
    turns: dict[str, int]


def _roles(decisions: Sequence[Step], code: dict[int, bool]) -> _Roles:
    """The producers' roles (:class:`_Roles`); ``code``: per decision step, whether it carries code.

    Addressing: the text names another agent of the run (case, ``_``/``-``/space folded; names shorter
    than 3 characters are ignored), or the adapter recorded a hand-off target (``metadata.target``).
    """
    names = {a for a in (s.agent for s in decisions) if a}
    patterns = {a: p for a in names if (p := _address(a)) is not None}
    turns: dict[str, int] = defaultdict(int)
    instr: dict[str, int] = defaultdict(int)
    calls: dict[str, int] = defaultdict(int)
    addresses: dict[int, bool] = {}
    for s in decisions:
        a = s.agent or ""
        turns[a] += 1
        hit = bool(s.metadata.get("target")) if isinstance(s.metadata, dict) else False
        if not hit and len(patterns) > 1:
            text = s.content
            low: str | None = text.lower()
            if not folds_like_ascii(text, low):  # type: ignore[arg-type]
                low = None
            hit = any(_addresses(text, low, p) for other, p in patterns.items() if other != s.agent)
        addresses[s.index] = hit
        instr[a] += hit
        calls[a] += bool(s.tool_calls) or code[s.index]
    return _Roles({a: instr[a] / n for a, n in turns.items()}, {a: calls[a] / n for a, n in turns.items()},
                  addresses, turns)


def _findings(t: Trajectory, records: Sequence[Record], min_level: int) -> tuple[
        dict[int, dict[str, Finding]], dict[int, int]]:
    """Findings per blamed step (one per rule: the strongest, unrecovered preferred) and propagation
    records per root step."""
    per_step: dict[int, dict[str, Finding]] = defaultdict(dict)
    prop: dict[int, int] = defaultdict(int)
    successes: dict[tuple[str | None, str], int] | None = None
    for rec in [r for r in records if r.verdict == "fail"]:  # one tight filter: a log is mostly passes
        if rec.rule_id == PROPAGATION_RULE:
            root = rec.bindings.get("root_step")
            if isinstance(root, int):
                prop[root] += 1
            continue
        if severity_rank(rec.severity) < min_level:
            continue
        step = blame(t, rec)
        if step is None:
            continue
        if successes is None:
            successes = last_success(t)
        f = Finding(rec, recovered(t, step, rec, successes))
        old = per_step[step].get(rec.rule_id)
        if old is None or (f.level, not f.recovered) > (old.level, not old.recovered):
            per_step[step][rec.rule_id] = f
    return per_step, prop


def features(t: Trajectory, records: Sequence[Record], graph: Any = None, *,
             min_severity: str = "info") -> FeatureTable:
    """The candidate steps of run ``t`` and their feature vectors (:data:`FEATURES`).

    Args:
        t: the run.
        records: its validation log records (rules and claim findings), in log order.
        graph: its :class:`~trajaudit.engine.claims.graph.ClaimGraph` (claims, error spans), or
            ``None`` (claim features are 0).
        min_severity: findings below this severity are ignored (``info`` keeps them all: info-level
            claim findings are a feature of their own).

    Returns:
        A :class:`FeatureTable`; no candidates when the run has no decision step.
    """
    steps = t.steps
    decisions = [s for s in steps if s.is_decision]
    per_step, prop = _findings(t, records, severity_rank(min_severity))
    cand_steps = sorted({s.index for s in decisions} | {k for k in per_step if steps[k].kind == "user"})
    if not cand_steps:
        return FeatureTable(t, [])
    rows = _Rows(t, decisions, per_step, prop, graph)
    return FeatureTable(t, [Candidate(k, list(per_step.get(k, {}).values()), rows.row(k)) for k in cand_steps],
                        rows.memo)


_NO_CLAIMS = (0, 0, 0, 0, 0, 0)
_NO_VALUE = object()
#: :meth:`_Rows._origin` of a candidate without origin quantities.
_NO_ORIGIN = (0.0, 0.0, math.log1p(0.0), math.log1p(0.0))


@dataclass
class _ClaimFacts:
    """What the claim graph says per step: ``stats[k]``, the claims step ``k`` introduced (missing and
    consequential, conflicting, weak, all, reused later, consequential); ``dependents[k]``, the later
    steps reusing them; ``error_span``/``first_span``, the steps its propagation marks and the first."""

    stats: dict[int, list[int]] = field(default_factory=dict)
    dependents: dict[int, set[int]] = field(default_factory=dict)
    error_span: set[int] = field(default_factory=set)
    first_span: int | None = None


def _claim_facts(graph: Any) -> _ClaimFacts:
    """:class:`_ClaimFacts` of a claim graph (empty for ``None``)."""
    if graph is None:
        return _ClaimFacts()
    stats: dict[int, list[int]] = {}
    dependents: dict[int, set[int]] = {}
    for c in getattr(graph, "claims", ()):
        step = c.step
        st = stats.get(step)
        if st is None:
            st = stats[step] = [0, 0, 0, 0, 0, 0]
            dependents[step] = set()
        status = getattr(c.status, "value", _NO_VALUE)
        if status is _NO_VALUE:  # str() only when there is no value (getattr's default is evaluated first)
            status = str(c.status)
        st[0] += status == "MISSING" and c.consequential
        st[1] += status == "CONFLICTING"
        st[2] += status == "WEAK"
        st[3] += 1
        st[4] += bool(c.reused_in)
        st[5] += c.consequential
        if c.reused_in:
            dependents[step].update(r for r in c.reused_in if r > step)
    prop_res = graph.propagate()
    return _ClaimFacts(stats, dependents, set(prop_res.error_steps), prop_res.first_error_step)


def _evidence_steps(per_step: dict[int, dict[str, Finding]]) -> tuple[list[int], list[int]]:
    """``(error steps, finding steps)``, sorted: the steps blamed for an unrecovered error-level
    finding, and those blamed for any finding at warning level or above."""
    err_steps = sorted(k for k, fs in per_step.items() if any(f.level >= 2 and not f.recovered for f in fs.values()))
    any_steps = sorted(k for k, fs in per_step.items() if any(f.level >= 1 for f in fs.values()))
    return err_steps, any_steps


def _output_errors(t: Trajectory) -> tuple[dict[int, bool], list[int]]:
    """``(issuers, errored)``: the steps that issued a call (or wrote the code, else the latest decision
    before) whose tool output is an error, and the indexes of the errored tool outputs in order."""
    out_error: dict[int, bool] = {}
    error_outputs: list[int] = []
    for s in t.steps:
        if s.kind != "tool" or s.tool_output is None or not s.tool_output.is_error:
            continue
        error_outputs.append(s.index)
        hit = t.call_for(s)
        issuer = hit[0].index if hit is not None else t.code_authors.get(s.index)
        if issuer is None:
            issuer = decision_neighbours(t)[0][s.index]
        if issuer is not None:
            out_error[issuer] = True
    return out_error, error_outputs


def _next_output_errors(steps: Sequence[Step]) -> dict[int, bool]:
    """Per decision step: the tool output right after it (the next step is a tool output) is an error
    (the first tool output after the step, read backwards)."""
    n = len(steps)
    next_output: dict[int, bool] = {}
    nxt: bool | None = None
    for s in reversed(steps):
        if s.kind == "tool" and s.tool_output is not None:
            nxt = bool(s.tool_output.is_error)
        elif s.is_decision:
            next_output[s.index] = bool(nxt) if nxt is not None and s.index + 1 < n and steps[s.index + 1].kind == "tool" else False
    return next_output


def _repeat_keys(decisions: Sequence[Step]) -> tuple[dict[int, list[str]], dict[str, int]]:
    """Repeats: per decision step its keys (each call's name + arguments; its text, per agent), and
    how many decision steps of the run carry each key.

    A text key is computed only for a step whose agent and :func:`_text_shape` another decision step
    shares: any other step's text key is carried by that step alone, and a key carried once changes
    no feature (:meth:`_Rows._repeats`: not seen before it, not repeated after it), so it is left out;
    so is the text key of a step without text (an empty shape: the folded text is ``""``, shorter than
    the 20 characters a text key needs). Likewise a call key (name, NUL, arguments) is computed only
    for a call whose name another call of the run carries: when no name holds a NUL, the first NUL of a
    key ends its name, so calls with different names have different keys and a call with a name of its
    own has a key carried once (a run with a name holding a NUL computes every call key).
    :func:`_repeat_keys_reference` keeps every key; the features are the same."""
    shape = {s.index: (f"{s.agent}", _text_shape(s.content)) for s in decisions}
    shared: dict[tuple[str, bytes], int] = {}
    for sh in shape.values():
        shared[sh] = shared.get(sh, 0) + 1
    names: dict[str, int] = {}
    for s in decisions:
        for c in s.tool_calls:
            names[c.name] = names.get(c.name, 0) + 1
    # a call whose name no other call carries has a key of its own (the docstring says why)
    unique = None if any("\x00" in n for n in names) else {n for n, k in names.items() if k == 1}
    total: dict[str, int] = defaultdict(int)
    keys_of: dict[int, list[str]] = {}
    for s in decisions:
        keys = [f"c\x00{k}" for k in _call_keys(s, unique)] if s.tool_calls else []
        sh = shape[s.index]
        tk = _text_key(s) if sh[1] and shared[sh] > 1 else None
        if tk is not None:
            keys.append(f"t\x00{s.agent}\x00{tk}")
        keys_of[s.index] = keys
        for k in keys:
            total[k] += 1
    return keys_of, total


def _repeat_keys_reference(decisions: Sequence[Step]) -> tuple[dict[int, list[str]], dict[str, int]]:
    """The definition of :func:`_repeat_keys`: every step's text key."""
    total: dict[str, int] = defaultdict(int)
    keys_of: dict[int, list[str]] = {}
    for s in decisions:
        keys = [f"c\x00{k}" for k in _call_keys(s)]
        tk = _text_key(s)
        if tk is not None:
            keys.append(f"t\x00{s.agent}\x00{tk}")
        keys_of[s.index] = keys
        for k in keys:
            total[k] += 1
    return keys_of, total


def _finding_counts(fs: Iterable[Finding]) -> list[float]:
    """The first features of a candidate (log1p counts of the findings blamed on it): by severity and
    recovery; then, of the unrecovered ones at warning level and above, by rule type and by family
    (claims, generic rules, other rules)."""
    by_level = [0, 0, 0, 0, 0]  # error unrec, error rec, warning unrec, warning rec, info
    by_type = dict.fromkeys(RULE_TYPES, 0)
    fam = [0, 0, 0]
    for f in fs:
        lv = f.level
        if lv >= 2:
            by_level[1 if f.recovered else 0] += 1
        elif lv == 1:
            by_level[3 if f.recovered else 2] += 1
        else:
            by_level[4] += 1
        if lv >= 1 and not f.recovered:
            if f.record.rule_type in by_type:
                by_type[f.record.rule_type] += 1
            if f.record.origin == "claims" or f.record.rule_id.startswith("claims."):
                fam[0] += 1
            elif f.record.rule_id.startswith("generic."):
                fam[1] += 1
            else:
                fam[2] += 1
    return [*map(math.log1p, by_level), *map(math.log1p, by_type.values()), *map(math.log1p, fam)]


#: :func:`_finding_counts` of no finding.
_NO_FINDINGS = tuple(_finding_counts(()))


class _Rows:
    """:func:`features`' feature rows: the run's facts, found once (one pass each over the steps,
    the records and the claims), and the counts that run along the candidates, taken in step order
    (errors and findings before the candidate, errored tool outputs after it, repeat keys seen)."""

    def __init__(self, t: Trajectory, decisions: list[Step], per_step: dict[int, dict[str, Finding]],
                 prop: dict[int, int], graph: Any) -> None:
        self.t, self.per_step, self.prop, self.n = t, per_step, prop, len(t.steps)
        self.dec_pos = {s.index: i for i, s in enumerate(decisions)}
        self.n_dec = len(decisions)
        self.claims = _claim_facts(graph)
        self.err_steps, self.any_steps = _evidence_steps(per_step)
        self.first_err = self.err_steps[0] if self.err_steps else None
        self.first_any = self.any_steps[0] if self.any_steps else None
        self.code = {s.index: has_code(s.content) for s in decisions}  # one search per step
        self.roles = _roles(decisions, self.code)
        self.first_agent = decisions[0].agent if decisions else None
        self.out_error, self.error_outputs = _output_errors(t)
        self.next_output = _next_output_errors(t.steps)
        self.keys_of, self.key_total = _repeat_keys(decisions)
        self.consequential = {s.index: any(_WRITE_VERB.match(c.name) for c in s.tool_calls) or self.code[s.index]
                              for s in decisions}  # is_consequential_action of each decision step
        self.first_consequential = next((s.index for s in decisions if self.consequential[s.index]), None)
        # origin tracing of the candidates with findings (the earliest MAX_TRACED)
        traced = [(k, [f.record for f in per_step[k].values() if f.level >= 1]) for k in self.any_steps[:MAX_TRACED]]
        self.memo = RunMemo(t, graph)
        self.origins = origin_features(t, traced, graph, memo=self.memo) if traced else {}
        # the running counts
        self.err_set, self.finding_set = set(self.err_steps), set(self.any_steps)
        self.errs_before = self.findings_seen = self.err_out_ptr = 0
        self.seen: dict[str, int] = {}
        # per producer, its role features (what _role computes for each of its decision steps)
        roles, n_dec = self.roles, self.n_dec
        self.agent_role = {a: (roles.instructs.get(a, 0.0), roles.calls.get(a, 0.0),
                               roles.turns.get(a, 0) / n_dec if n_dec else 0.0) for a in roles.turns}
        self.multi_agent = float(len(roles.turns) > 1)

    def row(self, k: int) -> list[float]:
        """The feature vector of candidate ``k`` (:data:`FEATURES` order); candidates must come in step order.

        :meth:`row_reference` (the definition, feature group by feature group) in one list display:
        the same values, each computed by the same expression (``float(b)`` of a ``bool`` ``b`` written
        ``1.0 if b else 0.0``: no call); tested equal on the dev runs and on generated runs."""
        s = self.t.steps[k]
        rank = self.dec_pos.get(k)
        is_dec = s.is_decision
        is_last = is_dec and rank == self.n_dec - 1
        is_first = is_dec and rank == 0
        is_first_act = k == self.first_consequential
        no_err = self.first_err is None
        fs = self.per_step.get(k)
        n, n_dec = self.n, self.n_dec
        return [*(_finding_counts(fs.values()) if fs else _NO_FINDINGS), *self._order(k),
                # _position
                k / (n - 1) if n > 1 else 0.0,
                (rank / (n_dec - 1) if n_dec > 1 else 0.0) if rank is not None else 0.0,
                1.0 if is_first else 0.0, 1.0 if is_last else 0.0, 1.0 if s.kind == "user" else 0.0,
                *(self._decision_role(k, s, is_first_act) if is_dec else self._role(k, s, is_first_act)),
                *self._after(k), *self._repeats(k), *self._traced(k),
                1.0 if no_err else 0.0, 1.0 if self.first_any is None else 0.0, 1.0 if is_last and no_err else 0.0,
                1.0 if is_first_act and no_err else 0.0, 1.0 if is_first and no_err else 0.0]

    def _order(self, k: int) -> tuple[float, ...]:
        """:meth:`_claims_and_order` of candidate ``k``, then the running counts taken past it (what
        :meth:`row_reference` does after the row)."""
        log1p = math.log1p
        claims = self.claims
        cs = claims.stats.get(k, _NO_CLAIMS)
        in_err, in_any = k in self.err_set, k in self.finding_set
        errs_before = self.errs_before
        got = (log1p(cs[0]), log1p(cs[1]), log1p(cs[2]), log1p(cs[3]), log1p(cs[4]), log1p(cs[5]),
               log1p(self.prop.get(k, 0)), 1.0 if k in claims.error_span else 0.0,
               1.0 if k == claims.first_span else 0.0, 1.0 if k == self.first_err else 0.0,
               1.0 if k == self.first_any else 0.0, log1p(errs_before),
               log1p(len(self.err_steps) - errs_before - (1 if in_err else 0)),
               log1p(len(self.any_steps) - self.findings_seen - (1 if in_any else 0)))
        if in_err:
            self.errs_before += 1
        if in_any:
            self.findings_seen += 1
        return got

    def _after(self, k: int) -> tuple[float, float, float, float]:
        """:meth:`_consequences` of candidate ``k`` (truth values without ``float()``)."""
        outs = self.error_outputs
        ptr = self.err_out_ptr
        while ptr < len(outs) and outs[ptr] <= k:
            ptr += 1
        self.err_out_ptr = ptr
        return (1.0 if self.out_error.get(k, False) else 0.0, math.log1p(len(outs) - ptr),
                1.0 if self.next_output.get(k, False) else 0.0, math.log1p(len(self.claims.dependents.get(k, ()))))

    def _traced(self, k: int) -> tuple[float, ...]:
        """:meth:`_origin` of candidate ``k`` (a constant for the candidates without origin quantities)."""
        o = self.origins.get(k)
        if o is None:
            return _NO_ORIGIN
        return (o.get("is_late_symptom", 0.0), o.get("is_origin_of_late_symptom", 0.0),
                math.log1p(o.get("dependency_depth", 0.0)), math.log1p(o.get("dependents", 0.0)))

    def _decision_role(self, k: int, s: Step, is_first_act: bool) -> tuple[float, ...]:
        """:meth:`_role` of a decision step, from the per-producer values found once."""
        instructs, calls, share = self.agent_role[s.agent or ""]
        return (1.0 if s.tool_calls else 0.0, 1.0 if self.code[k] else 0.0, 1.0 if self.consequential[k] else 0.0,
                1.0 if is_first_act else 0.0, instructs, calls, share, 1.0 if s.agent == self.first_agent else 0.0,
                self.multi_agent, 1.0 if self.roles.addresses.get(k, False) else 0.0)

    def row_reference(self, k: int) -> list[float]:
        """The definition of :meth:`row` (one feature group per helper)."""
        s = self.t.steps[k]
        rank = self.dec_pos.get(k)
        is_dec = s.is_decision
        is_last = is_dec and rank == self.n_dec - 1
        is_first = is_dec and rank == 0
        is_first_act = k == self.first_consequential
        no_err = self.first_err is None
        row = _finding_counts(self.per_step.get(k, {}).values())
        row += self._claims_and_order(k)
        row += self._position(k, s, rank, is_first, is_last)
        row += self._role(k, s, is_first_act)
        row += self._consequences(k)
        row += self._repeats_reference(k)
        row += self._origin(k)
        row += [float(no_err), float(self.first_any is None), float(is_last and no_err),
                float(is_first_act and no_err), float(is_first and no_err)]
        if k in self.err_set:
            self.errs_before += 1
        if k in self.finding_set:
            self.findings_seen += 1
        return row

    def _claims_and_order(self, k: int) -> list[float]:
        """The claims step ``k`` introduced, its propagation roots and error span, and its place among
        the run's findings (first error, first finding; errors before and after, findings after)."""
        log1p = math.log1p
        cs = self.claims.stats.get(k, _NO_CLAIMS)
        errors_after = len(self.err_steps) - self.errs_before - (1 if k in self.err_set else 0)
        findings_after = len(self.any_steps) - self.findings_seen - (1 if k in self.finding_set else 0)
        return [log1p(cs[0]), log1p(cs[1]), log1p(cs[2]), log1p(cs[3]), log1p(cs[4]), log1p(cs[5]),
                log1p(self.prop.get(k, 0)), float(k in self.claims.error_span), float(k == self.claims.first_span),
                float(k == self.first_err), float(k == self.first_any), log1p(self.errs_before), log1p(errors_after),
                log1p(findings_after)]

    def _position(self, k: int, s: Step, rank: int | None, is_first: bool, is_last: bool) -> list[float]:
        """Where the step sits: relative position in the run and among the decisions, first/last
        decision, a user turn."""
        n, n_dec = self.n, self.n_dec
        return [k / (n - 1) if n > 1 else 0.0,
                (rank / (n_dec - 1) if n_dec > 1 else 0.0) if rank is not None else 0.0,
                float(is_first), float(is_last), float(s.kind == "user")]

    def _role(self, k: int, s: Step, is_first_act: bool) -> list[float]:
        """The step and its producer's role: calls tools, writes code, acts consequentially (the first
        such action), how the producer speaks across the run, addresses another agent."""
        if not s.is_decision:
            return [float(bool(s.tool_calls)), 0.0, float(is_consequential_action(s)), float(is_first_act),
                    0.0, 0.0, 0.0, 0.0, float(len(self.roles.turns) > 1), float(self.roles.addresses.get(k, False))]
        agent = s.agent or ""
        roles = self.roles
        return [float(bool(s.tool_calls)), float(self.code[k]), float(self.consequential[k]), float(is_first_act),
                roles.instructs.get(agent, 0.0), roles.calls.get(agent, 0.0),
                roles.turns.get(agent, 0) / self.n_dec if self.n_dec else 0.0,
                float(s.agent == self.first_agent), float(len(roles.turns) > 1), float(roles.addresses.get(k, False))]

    def _consequences(self, k: int) -> list[float]:
        """What follows from the step: an errored output of its own, errored outputs after it, the
        next output an error, later steps reusing its claims."""
        outs = self.error_outputs
        while self.err_out_ptr < len(outs) and outs[self.err_out_ptr] <= k:
            self.err_out_ptr += 1
        return [float(self.out_error.get(k, False)), math.log1p(len(outs) - self.err_out_ptr),
                float(self.next_output.get(k, False)), math.log1p(len(self.claims.dependents.get(k, ())))]

    def _repeats(self, k: int) -> list[float]:
        """:meth:`_repeats_reference`; a candidate without repeat keys (most, since :func:`_repeat_keys`
        leaves out the keys carried once) repeats nothing and changes no count: three zeros."""
        if not self.keys_of.get(k):
            return [0.0, 0.0, 0.0]
        return self._repeats_reference(k)

    def _repeats_reference(self, k: int) -> list[float]:
        """Loops: the step repeats an earlier call or text of its agent, is repeated later, starts a loop."""
        keys = self.keys_of.get(k, [])
        seen = self.seen
        seen_before = any(seen.get(key, 0) > 0 for key in keys)
        for key in keys:
            seen[key] = seen.get(key, 0) + 1
        repeated_later = any(self.key_total[key] > seen[key] for key in keys)
        return [float(seen_before), float(repeated_later), float(repeated_later and not seen_before)]

    def _origin(self, k: int) -> list[float]:
        """Origin tracing (:func:`~trajaudit.engine.claims.origin.origin_features`): late symptom,
        origin of one, dependency depth, dependents."""
        o = self.origins.get(k, {})
        return [o.get("is_late_symptom", 0.0), o.get("is_origin_of_late_symptom", 0.0),
                math.log1p(o.get("dependency_depth", 0.0)), math.log1p(o.get("dependents", 0.0))]
