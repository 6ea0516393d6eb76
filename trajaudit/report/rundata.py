"""What the HTML report shows of one run, as JSON-ready data (the page's script renders it).

Two parts per run: a small **summary** (one row of the runs table: id, critical step, category,
agent, confidence, basis, task, violated rules ...) that every report holds for every run, and a
**detail** (the timeline, evidence, violations, candidates) that the page parses only when the run
is opened. Every string is passed through :func:`~trajaudit.report.markdown.visible` (control and
bidi-override characters shown by name), so the browser never receives them raw.

The diagnosis' ``basis`` (``finding`` | ``weak`` | ``fallback``) is read by :func:`basis_of`, the one
place that knows how to derive it for diagnoses written before the field existed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.engine.validation_log import ValidationLog
from trajaudit.report.markdown import evidence_text, visible

#: The values of a diagnosis' ``basis``: backed by a rule or claim finding, by weak evidence only, or
#: a fallback guess (no evidence pointed at a step: first action, last decision, a baseline).
BASES = ("finding", "weak", "fallback")

_FALLBACK = re.compile(r"\bfallback\b|^baseline\b|^no error-level violation\b|^no (rule|claim)? ?evidence\b",
                       re.IGNORECASE)
_WEAK = re.compile(r"^no error-level failure\b|\bweaker finding\b", re.IGNORECASE)
_FALLBACK_NOTES = frozenset({"first action", "last decision", "first decision", "last action"})

#: Characters of one step's text kept in the report (the rest is counted, not shown).
STEP_CHARS = 1500
#: Characters of a task kept in the summary row (searched by the page's search box).
TASK_CHARS = 400


def basis_of(d: Diagnosis | Mapping[str, Any]) -> str:
    """The diagnosis' basis: its ``basis`` field (or ``metadata.basis``) when it has one, else derived:
    ``fallback`` when the rationale or the evidence notes say the step is a fallback or baseline guess,
    ``weak`` when the rationale says only weaker (non-error) findings back it, nothing was found
    (``metadata.findings == 0``) or the confidence is below 0.3, else ``finding``.

    Args:
        d: a :class:`~trajaudit.engine.diagnosis.Diagnosis` or its JSON form.

    Returns:
        One of :data:`BASES`.
    """
    get = d.get if isinstance(d, Mapping) else (lambda k, default=None: getattr(d, k, default))
    metadata = get("metadata") or {}
    given = get("basis") or metadata.get("basis")
    if given in BASES:
        return str(given)
    rationale = str(get("rationale") or "")
    notes = [(e.get("note") if isinstance(e, Mapping) else e.note) for e in (get("evidence") or ())]
    if _FALLBACK.search(rationale) or any(n in _FALLBACK_NOTES for n in notes):
        return "fallback"
    if _WEAK.search(rationale) or metadata.get("findings") == 0 or float(get("confidence") or 0.0) < 0.3:
        return "weak"
    return "finding"


def short_rationale(text: str, limit: int = 180) -> str:
    """The rationale's first sentence, cut at a word near ``limit`` characters (``…`` when cut)."""
    text = " ".join(text.split())
    m = re.match(r"(.{12,}?[.!?])(\s|$)", text)
    first = m.group(1) if m and len(m.group(1)) <= limit else text
    if len(first) <= limit:
        return first
    cut = first[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"


def humanize_rule(rule_id: str) -> str:
    """A readable title from a rule id when its pack gives none: ``claims.missing-support`` ->
    ``Missing support``."""
    last = rule_id.rsplit(".", 1)[-1].replace("-", " ").replace("_", " ").strip()
    return last[:1].upper() + last[1:] if last else rule_id


def clean(x: Any) -> Any:
    """``x`` with every string (keys too) passed through :func:`visible`; other JSON values as they are;
    anything else as its ``str``."""
    if isinstance(x, str):
        return visible(x)
    if isinstance(x, Mapping):
        return {visible(str(k)): clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    if x is None or isinstance(x, (bool, int, float)):
        return x
    return visible(str(x))


def _is_expression(note: str | None) -> bool:
    """An evidence note that quotes a compiled expression (``no match: (exists d in …)``), shown only
    behind a "details" toggle."""
    return note is not None and note != "" and (note.startswith("no match:") or len(note) > 48 or "==" in note or "(" in note)


def _step_of(address: str) -> int | None:
    m = re.match(r"steps\.(\d+)", address)
    return int(m.group(1)) if m else None


def summary(t: Trajectory | None, d: Diagnosis, log: ValidationLog | None = None,
            gold: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The runs-table row of one run (short keys: the page holds one per run).

    Keys: ``id``, ``file``, ``rec``, ``step``, ``cat``, ``agent``, ``conf``, ``basis``, ``strat``,
    ``task`` (first :data:`TASK_CHARS` characters), ``prev`` (the critical step, one line), ``rat``
    (:func:`short_rationale`), ``rules`` (ids of the rules violated anywhere in the run), ``nviol``,
    ``nsteps``; with ``gold`` (``{step, cat, agent}``) also ``gold`` and ``dist`` (|pred - gold|).
    """
    prev = ""
    if t is not None and d.critical_step is not None and 0 <= d.critical_step < len(t.steps):
        prev = t.steps[d.critical_step].preview(140)
    viol = log.violations("info") if log is not None else []
    task = " ".join((t.task or "").split()) if t is not None else ""
    row: dict[str, Any] = {
        "id": t.id if t is not None else d.trajectory_id, "file": (t.source.file if t is not None else d.file) or "",
        "rec": t.source.record if t is not None else d.record, "step": d.critical_step, "cat": d.category,
        "agent": d.agent or "", "conf": round(float(d.confidence), 3), "basis": basis_of(d), "strat": d.strategy,
        "task": task[:TASK_CHARS], "prev": prev, "rat": short_rationale(d.rationale),
        "rules": sorted({r.rule_id for r in viol}), "nviol": len(viol),
        "nsteps": len(t.steps) if t is not None else None,
    }
    if gold is not None:
        row["gold"] = dict(gold)
        g, p = gold.get("step"), d.critical_step
        row["dist"] = abs(p - g) if isinstance(g, int) and isinstance(p, int) else None
    return clean(row)


def _steps(t: Trajectory, step_chars: int) -> list[dict[str, Any]]:
    out = []
    for s in t.steps:
        text = s.content or ""
        more = max(0, len(text) - step_chars)
        item: dict[str, Any] = {"i": s.index, "k": s.kind, "a": s.agent or "", "x": text[:step_chars]}
        if more:
            item["more"] = more
        if s.source_number is not None and s.source_number != s.index:
            item["src"] = s.source_number
        if s.tool_calls:
            item["calls"] = [{"n": c.name, "args": c.raw_arguments if c.arguments_error else c.arguments}
                             for c in s.tool_calls]
        if s.tool_output is not None:
            item["t"] = t.output_tool_name(s) or ""
            if s.tool_output.is_error:
                item["err"] = True
        if s.flags:
            item["flags"] = list(s.flags)
        out.append(item)
    return out


_SEVERITY_ORDER = ("info", "warning", "error", "critical")


def _violations(log: ValidationLog | None, titles: Mapping[str, str]) -> list[dict[str, Any]]:
    """Violations grouped by (step, rule): the rule's title (``exp``: it is the pack's, a statement of
    what the rule expects), the highest severity, a count, up to three distinct messages, up to six
    quoted values, and the expression notes (shown behind a toggle)."""
    if log is None:
        return []
    groups: dict[tuple[int, str], dict[str, Any]] = {}
    for r in log.violations("info"):
        key = (r.step, r.rule_id)
        g = groups.get(key)
        if g is None:
            title = titles.get(r.rule_id)
            # a pack's title states what the rule expects ("exp": the page shows it as not met); a
            # name made from the rule id names the problem ("Missing support") and is shown as it is
            g = groups[key] = {"s": r.step, "r": r.rule_id, "title": title or humanize_rule(r.rule_id),
                               "exp": bool(title), "sev": r.severity, "msgs": [], "vals": [], "expr": [], "n": 0}
        g["n"] += 1
        if _SEVERITY_ORDER.index(r.severity) > _SEVERITY_ORDER.index(g["sev"]) if r.severity in _SEVERITY_ORDER \
                and g["sev"] in _SEVERITY_ORDER else False:
            g["sev"] = r.severity
        msg = r.message or r.reason or ""
        if msg and msg not in g["msgs"] and len(g["msgs"]) < 3:
            g["msgs"].append(msg)
        for e in r.evidence:
            if _is_expression(e.note):
                if e.note not in g["expr"] and len(g["expr"]) < 4:
                    g["expr"].append(e.note)
                continue
            v = evidence_text(e.value, 240)
            if v and v not in g["vals"] and len(g["vals"]) < 6:
                g["vals"].append(v)
    return list(groups.values())


def _evidence(d: Diagnosis) -> list[dict[str, Any]]:
    """The diagnosis' evidence, duplicates (same address and value) merged."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for e in d.evidence:
        v = evidence_text(e.value, 240)
        g = merged.get((e.address, v))
        if g is None:
            g = merged[(e.address, v)] = {"addr": e.address, "s": _step_of(e.address), "v": v, "notes": [],
                                          "expr": [], "n": 0}
        g["n"] += 1
        if e.note:  # a rule's variable name (o, u, call) says nothing to a reader: behind "details" too
            note = f"bound to {e.note}" if len(e.note) <= 4 and e.note.isidentifier() and e.note != "match" else e.note
            bucket = g["expr"] if _is_expression(e.note) or note != e.note else g["notes"]
            if note not in bucket:
                bucket.append(note)
    return list(merged.values())


def detail(t: Trajectory | None, d: Diagnosis, log: ValidationLog | None = None,
           claims: Sequence[Mapping[str, Any]] = (), titles: Mapping[str, str] | None = None,
           gold: Mapping[str, Any] | None = None, *, step_chars: int = STEP_CHARS) -> dict[str, Any]:
    """Everything the run view shows of one run (the page parses it when the run is opened).

    Keys: ``steps`` (``[{i, k, a, x, more?, t?, calls?, err?, src?, flags?}]``: index, kind, agent, text
    cut at ``step_chars`` (default :data:`STEP_CHARS`), tool, calls with their parsed arguments), ``task``, ``rat`` (the whole
    rationale), ``ev`` (diagnosis evidence, merged), ``viol`` (violations grouped by step and rule,
    with the rule's title), ``claims`` (unsupported claims: ``{s, status, v}``), ``cands``,
    ``repair``, ``incomplete``, ``tax``, ``gold``.
    """
    unsupported = [{"s": c.get("step"), "status": str(c.get("status", "")).lower(),
                    "v": evidence_text(c.get("value"), 80)}
                   for c in claims if c.get("status") in ("MISSING", "CONFLICTING") and isinstance(c.get("step"), int)]
    out = {
        "steps": _steps(t, step_chars) if t is not None else [],
        "task": (t.task or "") if t is not None else "",
        "fmt": t.source.format if t is not None else "",
        "rat": d.rationale,
        "ev": _evidence(d),
        "viol": _violations(log, titles or {}),
        "claims": unsupported,
        "cands": [{"s": c.step, "cat": c.category, "score": round(c.score, 3), "why": c.reason}
                  for c in d.candidates[:8]],
        "repair": d.repair,
        "incomplete": list(log.incomplete) if log is not None else [],
        "tax": d.taxonomy,
        "gold": dict(gold) if gold is not None else None,
    }
    return clean(out)


_UNSAFE_IN_SCRIPT = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026",
                     0x2028: "\\u2028", 0x2029: "\\u2029"}


def script_json(data: Any) -> str:
    """``data`` as JSON text safe inside a ``<script type="application/json">`` block: ``<``, ``>``
    and ``&`` written as ``\\u`` escapes (no ``</script>`` or ``<!--`` can end or confuse the block),
    and U+2028/U+2029 escaped (line terminators for older JavaScript parsers). ``JSON.parse`` of the
    block's text gives ``data`` back exactly (a lone surrogate, legal in JSON, is written as its ``\\uXXXX``
    escape, so the text is valid UTF-8)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str).translate(_UNSAFE_IN_SCRIPT)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


__all__ = ["BASES", "STEP_CHARS", "basis_of", "clean", "detail", "humanize_rule", "script_json", "short_rationale",
           "summary"]
