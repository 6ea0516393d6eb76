"""Support status of a claim against the evidence visible before it (DRIFT §Support Seeker).

Order of checks, each a general policy:

1. Slot claims first, because a slot can *conflict*:
   - a count ("11 available options") against the collections of the latest JSON tool output: a
     modifier naming a boolean member attribute ("available") compares with the members where it is
     true; a word naming a member value ("pending") with the members holding it; the noun naming the
     collection ("orders") with its size. Equal → DIRECT, different → CONFLICTING.
   - an object status ("#W1 … delivered") against the object's latest ``status`` (or a boolean
     attribute of that name) in tool outputs: equal → DIRECT, different → CONFLICTING.
   - a completion ("successfully processed", "saved to x.csv") against the tool outputs since the
     agent's previous message: a successful action → DIRECT, only failed ones → CONFLICTING, none →
     MISSING (completion claimed with no action); only read-only look-ups (``get_…``, ``find_…``,
     ``list…``, ``search…``) succeeded → MISSING too: a look-up shows state, it does not do the work.
2. Values: the normalized value in the value index → DIRECT; a phrase found in one source (quoted
   names, free-text arguments) → DIRECT, all its words in one source → WEAK; a number equal after
   rounding to the claim's precision, as a percentage/fraction, or derivable by one sum/difference of
   nearby evidence numbers (or the sum of the other amounts of the same step) → WEAK; a nearby number
   with two adjacent digits swapped (4+ digits: 12,483 shown, 12,843 stated) → CONFLICTING (misread).
3. Confirmation: a value still MISSING that a later user turn restates → DIRECT (the user confirmed
   it); one the user's next turn affirms with a bare "yes" → WEAK.
"""

from __future__ import annotations

import dataclasses
import math
import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Any

from trajaudit.engine.claims import model as m
from trajaudit.engine.claims.evidence_index import Collection, EvidenceIndex, Hit
from trajaudit.engine.claims.normalize import norm_text, quantity, singular
from trajaudit.engine.claims.patterns import ascii_fold, is_word_char
from trajaudit.engine.dsl.regex.stored import module_pattern
from trajaudit.engine.trace.ir import Trajectory

_AFFIRM = module_pattern(r"^\W*(?:yes|yeah|yep|sure|ok(?:ay)?|correct|confirm(?:ed)?|that'?s (?:right|correct)|"
                     r"please (?:go ahead|proceed)|go ahead|proceed)\b", re.I)
_NUMERIC = module_pattern(r"-?[\d.,]+")
_DECIMAL = module_pattern(r"-?\d+(?:\.\d+)?")
#: An argument written as a standard code ("LIS" for Lisbon, "USD", "NY"): the user says the name, the
#: agent passes the code — world knowledge, not an invented value (claims.md).
_SHORT_CODE = module_pattern(r"[A-Z]{2,4}")
#: Phrases of a failed access (lower case); ``_NOT_FOUND`` finds any of them, ignoring case.
_NOT_FOUND_WORDS = ("no such file", "not found", "404", "does not exist", "cannot find", "can't find", "filenotfound")
_NOT_FOUND = module_pattern("|".join(_NOT_FOUND_WORDS), re.I)
#: Completion verbs that are also object states ("#W1 has been cancelled" is a claim about its status).
_STATUS_VERBS = frozenset(("cancelled", "delivered", "returned", "exchanged", "refunded", "shipped"))
# First words of tool names that only read (look-ups): their success shows state, it does not perform
# an action ("look" as in look_up_user).
_READ_VERBS = frozenset(("get", "find", "list", "search", "read", "lookup", "look", "fetch", "query", "view",
                         "show", "describe", "retrieve"))


def _read_only(name: str | None) -> bool:
    """Whether a tool's name says it only reads: its first word (:func:`~.model.tool_verb`, as
    ``ClaimConfig.is_write_tool`` splits names: ``get_order_details``, ``listFiles``, ``GetOrder``,
    ``fetch-page``) is a read verb."""
    return bool(name) and m.tool_verb(name) in _READ_VERBS
_NEGATED = {"unavailable": ("available", False), "not available": ("available", False)}


@dataclass(frozen=True, slots=True)
class Assessment:
    """The result of assessing one claim: status, evidence address and value, a short note."""

    status: m.Support
    address: str | None = None
    value: Any = None
    note: str = ""


class SupportSeeker:
    """Assesses claims of one run against its :class:`EvidenceIndex` (build once, call per claim)."""

    def __init__(self, trajectory: Trajectory, index: EvidenceIndex, config: m.ClaimConfig) -> None:
        self.t = trajectory
        self.ix = index
        self.config = config

    def assess(self, mention: m.Mention, step_mentions: list[m.Mention]) -> Assessment:
        """Support of ``mention`` (introduced at ``mention.step``); ``step_mentions`` are its step's others."""
        return self.confirm(mention, self.assess_unconfirmed(mention, step_mentions))

    def confirm(self, mention: m.Mention, got: Assessment) -> Assessment:
        """Step 3 of the module docstring: a MISSING or WEAK value (not the final answer) that a later
        user turn restates or affirms. Reads the user turns after the mention (the incremental
        ledger applies it when the run ends)."""
        if got.status in (m.Support.MISSING, m.Support.WEAK) and mention.kind != m.KIND_FINAL:
            return self._confirmed(mention, got)
        return got

    def assess_unconfirmed(self, mention: m.Mention, step_mentions: list[m.Mention]) -> Assessment:
        """Steps 1 and 2 of the module docstring (:meth:`assess` without :meth:`confirm`): reads the
        evidence before the mention, and for a URL or path the tool output of its own step."""
        before = mention.step
        if mention.kind == m.KIND_COUNT:
            got = self._count(mention, before)
        elif mention.kind == m.KIND_STATUS and mention.slot[:1] == ("status",):
            got = self._status(mention, before)
        elif mention.kind == m.KIND_STATUS:
            got = self._completion(mention, before)
        elif mention.kind == m.KIND_FINAL:
            got = Assessment(m.Support.WEAK, note="final answer: judged by the claims it contains")
        else:
            got = self._value(mention, before, step_mentions)
        return got

    def _back(self, before: int) -> Any:
        """The steps before ``before``, latest first (indexes: no copy of the prefix per claim)."""
        steps = self.t.steps
        return (steps[i] for i in range(before - 1, -1, -1))

    # -- slots ------------------------------------------------------------------------------------
    def _count(self, mn: m.Mention, before: int) -> Assessment:
        n = int(mn.value) if mn.value.isdigit() else None
        listed = self._listed_after(mn)
        if n is not None and listed == n:
            return Assessment(m.Support.WEAK, mn.address, n,
                              f"counts the {n} items the step lists right after it (each item is its own claim)")
        if n is not None:
            for col in self.ix.latest_collections(before):
                got = _count_slot(col, n, mn)
                if got is not None:
                    return got
        if n is not None and n <= self.config.small_count:
            hit = self.ix.latest(mn.value, before)
            return Assessment(m.Support.WEAK, hit.address if hit else None, mn.value,
                              "small count not checkable against a collection")
        return self._value(mn, before, [])

    def _listed_after(self, mn: m.Mention) -> int | None:
        """When the count's line ends with a colon and a list follows (numbered or bulleted lines), the
        number of items in that list; else ``None``. "For red there are two available options:" followed
        by two items counts its own enumeration, whatever qualifier the sentence leaves implicit."""
        prefix = f"steps.{mn.step}.content["
        if not mn.address.startswith(prefix):
            return None
        end = _end(mn.address)
        text = self.t.steps[mn.step].content
        nl = text.find("\n", end)
        if nl < 0 or not text[end:nl].rstrip().endswith(":"):
            return None
        items = 0
        for line in text[nl + 1: nl + 1 + 20_000].split("\n"):
            if _LIST_ITEM.match(line):
                items += 1
            elif line.strip() and not line.startswith((" ", "\t")):
                break  # the list ended (blank lines and indented continuation lines stay inside)
            elif not line.strip() and items and _LIST_ITEM.match(line) is None:
                continue
        return items or None

    def _status(self, mn: m.Mention, before: int) -> Assessment:
        subject, word = mn.slot[1], mn.value
        attr, want = _NEGATED.get(word, (word, True))
        f = self.ix.fact(subject, attr, before)
        if f is not None and isinstance(f[2], bool):
            status = m.Support.DIRECT if f[2] == want else m.Support.CONFLICTING
            return Assessment(status, f[1], f[2], f"latest {attr} of {subject} is {str(f[2]).lower()}")
        f = self.ix.fact(subject, "status", before)
        if f is not None:
            have = norm_text(str(f[2]))
            have = "cancelled" if have == "canceled" else have
            if have != word and re.search(r"(?<!\w)" + re.escape(word) + r"(?!\w)", have):
                return Assessment(m.Support.WEAK, f[1], f[2], f"latest status of {subject} is {have!r} (partial)")
            status = m.Support.DIRECT if have == word else m.Support.CONFLICTING
            return Assessment(status, f[1], f[2], f"latest status of {subject} is {have!r}; claim says {word!r}")
        if self.ix.has_object(subject, before):
            return Assessment(m.Support.WEAK, None, None, f"{subject} is known but its {word!r} state is not shown")
        exact, _ = self.ix.phrase(word, before)
        if exact is not None and self.ix.latest(subject, before) is not None:
            return Assessment(m.Support.WEAK, exact.address, word, "state word and subject both seen, not linked")
        return Assessment(m.Support.MISSING, note=f"no evidence about {subject}'s state")

    def _completion(self, mn: m.Mention, before: int) -> Assessment:
        subject = mn.slot[1] if len(mn.slot) > 1 else ""
        if subject and self.ix.fact(subject, "status", before) is not None and mn.value in _STATUS_VERBS:
            return self._status(dataclasses.replace(mn, slot=("status", subject)), before)
        outputs = []
        conversational = bool(self.ix.user_positions) and self.ix.user_positions[0] < before
        for step in self._back(before):
            if step.kind == "user" or (not conversational and step.is_decision and not step.tool_calls):
                break
            if step.kind == "tool":
                outputs.append(step)
        where = "the user's last message" if conversational else "the previous message"
        if not outputs:
            earlier = next((s for s in self._back(before) if s.kind == "tool"
                            and not (s.tool_output and s.tool_output.is_error)), None)
            if earlier is not None:
                return Assessment(m.Support.WEAK, f"steps.{earlier.index}.content", None,
                                  f"no tool output since {where}; an earlier one succeeded (a recap?)")
            return Assessment(m.Support.MISSING, note=f"{mn.value!r} claimed with no successful tool output before it")
        ok = [s for s in outputs if not (s.tool_output and s.tool_output.is_error)]
        acted = [s for s in ok if not _read_only(self.t.output_tool_name(s))]
        if acted:
            name = self.t.output_tool_name(acted[0])
            return Assessment(m.Support.DIRECT, f"steps.{acted[0].index}.content", None,
                              f"a tool output since {where} succeeded ({name or 'tool'})")
        if ok:  # only look-ups succeeded: they show state, they do not do what the claim says was done
            name = self.t.output_tool_name(ok[0])
            return Assessment(m.Support.MISSING, f"steps.{ok[0].index}.content", None,
                              f"{mn.value!r} claimed, but since {where} only read-only tools succeeded ({name})")
        return Assessment(m.Support.CONFLICTING, f"steps.{outputs[0].index}.content", None,
                          f"every tool output since {where} reports an error")

    def access(self, mn: m.Mention, at: int | None = None) -> Assessment | None:
        """A URL or path that step ``at`` (default: the mention's step) used: the tool output that step
        produced confirms it (WEAK: it exists) or refutes it (CONFLICTING: not found); ``None`` when
        the step produced no output."""
        start = mn.step if at is None else at
        steps = self.t.steps
        for step in (steps[i] for i in range(start + 1, len(steps))):  # (no copy of the rest of the run)
            if step.is_decision or step.kind == "user":
                return None
            if step.kind != "tool":
                continue
            if not (step.tool_output and step.tool_output.is_error) and not not_found(step.content[:5000]):
                return Assessment(m.Support.WEAK, f"steps.{step.index}.content", None,
                                  "accessed successfully by the step's own call")
            base = mn.value.rstrip("/").rsplit("/", 1)[-1]
            low = step.content[:20000].casefold()
            if not_found(low) and (base and base in low or mn.value in low):
                return Assessment(m.Support.CONFLICTING, f"steps.{step.index}.content", None,
                                  "the access failed: not found")
        return None

    # -- plain values -----------------------------------------------------------------------------
    def _value(self, mn: m.Mention, before: int, step_mentions: list[m.Mention]) -> Assessment:
        hit = self.ix.latest(mn.value, before)
        if hit is not None:
            return Assessment(m.Support.DIRECT, hit.address, mn.value, "value shown before")
        if mn.kind in (m.KIND_QUOTED, m.KIND_ARGUMENT, m.KIND_DATE, m.KIND_TIME, m.KIND_URL, m.KIND_PATH,
                       m.KIND_EMAIL) or not _DECIMAL.fullmatch(mn.value):
            exact, partial = self.ix.phrase(mn.value, before)
            if exact is not None:
                return Assessment(m.Support.DIRECT, exact.address, mn.value, "phrase shown before")
            if partial is not None and mn.kind in (m.KIND_QUOTED, m.KIND_ARGUMENT, m.KIND_DATE, m.KIND_TIME):
                return Assessment(m.Support.WEAK, partial.address, mn.value, "all words shown, not together")
            if mn.kind in (m.KIND_URL, m.KIND_PATH):
                got = self.access(mn)
                if got is not None:
                    return got
            if mn.kind == m.KIND_ARGUMENT and len(mn.value) >= 4:
                for sid in self.ix.user_sources:  # (ascending positions)
                    src = self.ix.sources[sid]
                    if src.pos >= before:
                        break
                    if mn.value in self.ix.normalized(sid):
                        return Assessment(m.Support.WEAK, src.address, mn.value,
                                          "contained in a value the user gave (e.g. a name inside an email)")
            if mn.kind == m.KIND_ARGUMENT and _SHORT_CODE.fullmatch(mn.text):
                return Assessment(m.Support.WEAK, note="a standard short code (airport, currency, country, state): "
                                  "a convention the run cannot show, not checked")
            return Assessment(m.Support.MISSING, note="not shown before")
        if mn.kind == m.KIND_ID:
            return Assessment(m.Support.MISSING, note="identifier not shown before")
        return self._number(mn, before, step_mentions)

    def _number(self, mn: m.Mention, before: int, step_mentions: list[m.Mention]) -> Assessment:
        x = float(mn.value)
        decimals = len(mn.value.split(".")[1]) if "." in mn.value else 0
        near = self.ix.numbers_near(before, sources=6, limit=120)
        for v, h in near:
            if v == 0:
                continue
            if decimals < 2 and abs(v) >= 10 and round(v, decimals) == x and v != x:
                return Assessment(m.Support.WEAK, h.address, v, f"{v:g} rounded")
            if abs(x) >= 1000 and abs(v - x) / abs(v) < 0.005:
                return Assessment(m.Support.WEAK, h.address, v, f"{v:g} approximately")
            if abs(v * 100 - x) < 1e-6 or abs(v / 100 - x) < 1e-9:
                return Assessment(m.Support.WEAK, h.address, v, f"{v:g} as a percentage/fraction")
        converted = self._in_other_unit(mn, near)
        if converted is not None:
            return converted
        pair = first_pair([v for v, _ in near], x)
        if pair is not None:
            i, j, op = pair
            a, b = near[i][0], near[j][0]
            return Assessment(m.Support.WEAK, near[i][1].address, [a, b], f"derivable: {a:g} {op} {b:g}")
        at = _start(mn.address)
        own = [float(o.value) for o in step_mentions
               if o is not mn and o.kind in (m.KIND_MONEY, m.KIND_NUMBER) and _DECIMAL.fullmatch(o.value)
               and _start(o.address) < at]
        if len(own) >= 2 and abs(sum(own) - x) < 0.005:
            return Assessment(m.Support.WEAK, None, own, "the sum of the step's preceding amounts")
        for v, h in near:
            if transposed(v, x):
                return Assessment(m.Support.CONFLICTING, h.address, v,
                                  f"{v:g} shown, with two adjacent digits swapped: a misreading")
        return Assessment(m.Support.MISSING, note="number not shown or derivable")

    def _in_other_unit(self, mn: m.Mention, near: list[tuple[float, Hit]]) -> Assessment | None:
        """WEAK when the claim is a quantity with a linear unit (:func:`~.normalize.quantity`) and a
        nearby evidence number is the same quantity in another unit of that dimension, equal after
        rounding the conversion to the claim's own precision (or within 0.5%): "12.3 km" for
        "12,345 m", "5 miles" for "8.05 km"."""
        want = quantity(mn.text)
        if want is None:
            return None
        dim, si = want
        digits = mn.value.split(".")[1] if "." in mn.value else ""
        per_unit = si / float(mn.value) if float(mn.value) else 0.0  # the claim's unit in base units
        tol = max(abs(si) * 0.005, 0.5 * 10 ** -len(digits) * abs(per_unit))
        for _, h in near:
            src = self.ix.sources[h.src]
            span = _span(h.address)
            if span is None:
                continue
            got = quantity(src.text[span[0]:span[1]])
            if got is not None and got[0] == dim and got[1] != si and abs(got[1] - si) <= tol:
                return Assessment(m.Support.WEAK, h.address, src.text[span[0]:span[1]],
                                  f"the same {dim} in another unit")
        return None

    def _confirmed(self, mn: m.Mention, got: Assessment) -> Assessment:
        hit = self.ix.after(mn.value, mn.step) if mn.kind not in (m.KIND_COUNT, m.KIND_STATUS) else None
        if hit is not None:
            return Assessment(m.Support.DIRECT, hit.address, mn.value, f"confirmed by the user at steps.{hit.pos}")
        if got.status is m.Support.MISSING and not mn.in_call:
            k = bisect_right(self.ix.user_positions, mn.step)
            nxt = self.ix.user_positions[k] if k < len(self.ix.user_positions) else None
            if nxt is not None and not any(s.is_decision and s.content.strip() for s in self.t.steps[mn.step + 1:nxt]):
                if _AFFIRM.match(self.t.steps[nxt].content or ""):
                    return Assessment(m.Support.WEAK, f"steps.{nxt}.content", None, "affirmed by the user's reply")
        return got


def transposed(shown: float, claimed: float) -> bool:
    """Whether ``claimed`` is ``shown`` with two adjacent, different digits swapped (12,843 for 12,483).

    The signature of a misread figure (AgentRx: Misinterpretation of Tool Output), not a different
    value: both are integers of the same sign with at least 4 digits, and their digit strings differ
    in exactly two neighbouring positions holding each other's digits. With 4+ digits a coincidence
    is rare; shorter numbers (counts, small amounts) are never matched.
    """
    if shown == claimed or not (float(shown).is_integer() and float(claimed).is_integer()) or (shown < 0) != (claimed < 0):
        return False
    a, b = str(abs(int(shown))), str(abs(int(claimed)))
    if len(a) != len(b) or len(a) < 4:
        return False
    diff = [i for i in range(len(a)) if a[i] != b[i]]
    return len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]


def not_found(text: str) -> bool:
    """``_NOT_FOUND.search(text) is not None``: a pattern of plain words ignoring case matches where
    the lower-cased words occur in the :func:`~.patterns.ascii_fold` of the text (substring tests in C
    instead of trying the case-insensitive alternation at every position); a text that cannot be
    folded takes the regex. (Not memoized: these are one-off slices of tool outputs.)"""
    low = ascii_fold.__wrapped__(text)
    if low is None:
        return _NOT_FOUND.search(text) is not None
    return any(w in low for w in _NOT_FOUND_WORDS)


def _span(address: str) -> tuple[int, int] | None:
    """``(start, end)`` of an address ending in ``[start:end]``, else ``None``."""
    if not address.endswith("]") or "[" not in address:
        return None
    a, _, b = address[address.rfind("[") + 1: -1].partition(":")
    return (int(a), int(b)) if a.isdigit() and b.isdigit() else None


_LIST_ITEM = module_pattern(r"^\s{0,3}(?:\d{1,3}[.)]|[-*•])\s+\S")


def _end(address: str) -> int:
    i = address.rfind("[")
    return int(address[address.index(":", i) + 1: address.index("]", i)]) if i >= 0 else -1


def _start(address: str) -> int:
    i = address.rfind("[")
    return int(address[i + 1: address.index(":", i)]) if i >= 0 else -1


def _count_slot(col: Collection, n: int, mn: m.Mention) -> Assessment | None:
    """Compare count ``n`` with the members of ``col`` that match the claim's qualifiers, or ``None``
    when the claim is not about this collection.

    Qualifiers: a modifier naming a boolean member attribute (``available``; ``unavailable`` negates
    it), and attribute values (3+ characters) the claim's sentence names for an attribute that
    distinguishes members (``red`` for ``color``). Without a qualifier the noun must name the collection.
    """
    noun, mods = mn.slot[1], mn.slot[2:]
    if any(noun == singular(k) for mem in col.members[:1] for k in mem):
        return None  # "500 pieces" names an attribute's value, not a number of members
    bools = col.bool_attrs()
    flags = []
    for w in mods:
        attr, want = _NEGATED.get(w, (w, True))
        if attr in bools:
            flags.append((attr, want))
    ctx = norm_text(mn.context)
    values = _named_values(col, ctx) if ctx else {}
    named = bool(col.key) and singular(col.key) == noun
    if not flags and not values and not named:
        return None
    if not col.members and (flags or values):
        return None
    expected = sum(1 for mem in col.members if all(mem.get(a) is w for a, w in flags)
                   and all(mem.get(a) in vs for a, vs in values.items())) if (flags or values) else col.size
    what = ", ".join([f"{a}={str(w).lower()}" for a, w in flags] + [f"{a} in {sorted(vs)}" for a, vs in values.items()])
    what = f"members with {what}" if what else f"{col.key} members"
    status = m.Support.DIRECT if expected == n else m.Support.CONFLICTING
    return Assessment(status, col.address, expected, f"latest tool output has {expected} {what}; claim says {n}")


def names_word(v: str, text: str) -> bool:
    r"""Whether ``text`` holds ``v`` as a whole word: ``re.search(r"(?<!\w)" + re.escape(v) + r"(?!\w)",
    text) is not None`` (the reference, tested against), without compiling a pattern per value (a
    fresh process compiled ~70 of them for the tau runs)."""
    i, n = text.find(v), len(v)
    while i >= 0:
        if (i == 0 or not is_word_char(text[i - 1])) and (i + n >= len(text) or not is_word_char(text[i + n])):
            return True
        i = text.find(v, i + 1)
    return False


def _named_values(col: Collection, ctx: str) -> dict[str, set[str]]:
    """``{attribute: values}`` the sentence ``ctx`` names as whole words, for each member attribute with
    text values (3+ characters, not an id, not a number) that distinguishes members, when the sentence
    names some of its values but not all."""
    seen: dict[str, set[str]] = {}
    for mem in col.members:
        for k, v in mem.items():
            if isinstance(v, str) and len(v) >= 3 and not k.endswith("id") and not _NUMERIC.fullmatch(v):
                seen.setdefault(k, set()).add(v)
    values: dict[str, set[str]] = {}
    for attr, vals in seen.items():
        hit = {v for v in vals if names_word(v, ctx)}
        if hit and len(vals) > 1 and hit != vals:
            values[attr] = hit
    return values


def _pair_op(a: float, b: float, x: float) -> str | None:
    """The exact pair test: ``"+"`` when ``|a + b - x| < 0.005``, else ``"-"`` when ``||a - b| - x| < 0.005``."""
    if abs(a + b - x) < 0.005:
        return "+"
    if abs(abs(a - b) - x) < 0.005:
        return "-"
    return None


def _pairs_brute(vals: list[float], x: float) -> tuple[int, int, str] | None:
    for i, a in enumerate(vals):
        for j in range(i + 1, len(vals)):
            op = _pair_op(a, vals[j], x)
            if op is not None:
                return i, j, op
    return None


def first_pair(vals: list[float], x: float) -> tuple[int, int, str] | None:
    """The first pair ``i < j`` (in list order; for one pair the sum before the difference) with
    ``|a + b - x| < 0.005`` (``"+"``) or ``||a - b| - x| < 0.005`` (``"-"``), as ``(i, j, op)``; ``None``
    when there is none or ``x == 0``. Same answer as trying every pair in order, found through a
    value-sorted index: the candidates for each ``a`` lie within a window (wide enough for float
    rounding) around ``x - a``, ``a - x`` and ``a + x``, and are checked with the exact tests."""
    if x == 0 or len(vals) < 2:
        return None
    if not (math.isfinite(x) and all(math.isfinite(v) for v in vals)):
        return _pairs_brute(vals, x)
    order = sorted(range(len(vals)), key=vals.__getitem__)
    svals = [vals[k] for k in order]
    for i, a in enumerate(vals):
        margin = 0.01 + 1e-9 * (abs(a) + abs(x) + 1)
        cands: set[int] = set()
        for t in (x - a, a - x, a + x):
            cands.update(order[bisect_left(svals, t - margin):bisect_right(svals, t + margin)])
        for j in sorted(c for c in cands if c > i):
            op = _pair_op(a, vals[j], x)
            if op is not None:
                return i, j, op
    return None
