"""Checking rules an LLM wrote (AgentRx §3.1 constraint synthesis): data in, verdict out, nothing run.

A synthesized rule is a JSON object in the trajaudit rule format (docs/rules.md). It is accepted only
if it passes, in order:

1. ``shape``: it is an object (text is never interpreted as a rule, let alone run);
2. ``targets``: its target labels are categories of the taxonomy (spellings normalized);
   ``regex``: no regex in it nests unbounded quantifiers (``(a+)+``: Python's ``re`` has no timeout);
3. ``parse``: :func:`~trajaudit.engine.packs.pack.load_pack` accepts a one-rule pack holding it (YAML
   safe loader + the rule-pack JSON Schema);
4. ``lint``: :func:`~trajaudit.engine.packs.lint.lint_pack` reports no error (every expression parses
   with the rule grammar and compiles: unknown names, Python syntax such as ``__import__('os')``,
   method calls or lambdas are compile errors) and no tautology (a rule that can never fail is
   useless evidence);
5. ``examples``: the examples it carries, if any, give the verdicts they claim.

Across the accepted rules, ``conflict`` rejects the later rule of a pair that cannot both pass on a
step where both apply (lint's z3 check), and ``duplicate`` a rule identical to an earlier one.
Expressions are only ever parsed and compiled into the rule engine's closures; nothing the model
wrote is given to ``eval``/``exec``/``import``.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from trajaudit.engine.dsl.regex.safety import refusal, regex_risk
from trajaudit.engine.packs.compile import compile_rules
from trajaudit.engine.packs.lint import LintFinding, lint_pack
from trajaudit.engine.packs.pack import load_pack
from trajaudit.engine.taxonomy import Taxonomy
from trajaudit.engine.validation.rule_tests import run_examples
from trajaudit.errors import RulePackError

RULE_KEYS = ("id", "title", "description", "type", "severity", "targets", "guard", "let", "assert", "check",
             "message", "examples", "metadata", "disabled")
_OPTIONAL_TEXT = ("title", "description", "guard", "message", "severity")
_LOC = re.compile(r"^\S*:\d+:\d+: (error|warning): ")


@dataclass(frozen=True)
class RejectedRule:
    """A synthesized rule that was not kept.

    Attributes:
        rule: the rule as the model wrote it (data; JSON-ready).
        reason: why (the checker's message, with the expression and a caret where known).
        stage: ``shape``, ``targets``, ``regex``, ``parse``, ``lint``, ``examples``, ``conflict``, ``duplicate``,
            ``reflection`` or ``scope``.
        attempts: 1 = rejected in the first answer and not resubmitted; 2 = rejected again after the
            repair round.
    """

    rule: Any
    reason: str
    stage: str
    attempts: int = 1

    @property
    def rule_id(self) -> str:
        """The rule's id as written, or ``?``."""
        return str(self.rule.get("id", "?")) if isinstance(self.rule, dict) else "?"

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"id": self.rule_id, "stage": self.stage, "reason": self.reason, "attempts": self.attempts,
                "rule": self.rule}


@dataclass
class CheckedRules:
    """The outcome of checking a batch of rules: ``accepted`` clean rule dicts and ``rejected``."""

    accepted: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[RejectedRule] = field(default_factory=list)


def slug(text: Any, fallback: str = "rule") -> str:
    """A rule id from any text: lower-case ``[a-z0-9_]`` words joined by ``-`` (``fallback`` if empty)."""
    s = re.sub(r"[^a-z0-9_]+", "-", str(text or "").lower()).strip("-")
    return s[:60].strip("-") or fallback


def one_rule_pack(rule: dict[str, Any], pack: str, taxonomy: str) -> dict[str, Any]:
    """A pack document holding ``rule`` alone."""
    return {"pack": pack, "version": 1, "taxonomy": taxonomy, "rules": [rule]}


def _clean(raw: dict[str, Any], taxonomy: Taxonomy) -> tuple[dict[str, Any] | None, str | None, str]:
    """Normalize the model's rule; ``(rule, None, "")`` or ``(None, reason, stage)``."""
    rule = copy.deepcopy(raw)
    source = rule.pop("source", None)
    for key in _OPTIONAL_TEXT:
        if isinstance(rule.get(key), str) and not rule[key].strip():
            del rule[key]
    if rule.get("let") in ({}, None):
        rule.pop("let", None)
    if rule.get("check") in ({}, None) or (isinstance(rule.get("check"), dict)
                                           and not any(str(v).strip() for v in rule["check"].values())):
        rule.pop("check", None)
    if "assert" in rule and isinstance(rule["assert"], str) and not rule["assert"].strip():
        del rule["assert"]
    rule["id"] = slug(rule.get("id") or rule.get("title"))
    targets = rule.get("targets")
    if targets is not None:
        if not isinstance(targets, list):
            return None, f"targets must be a list of category ids, got {type(targets).__name__}", "targets"
        ids, unknown = [], []
        for t in targets:
            cid = taxonomy.try_normalize(t)
            if cid is None:
                unknown.append(str(t))
            elif cid not in ids:
                ids.append(cid)
        if unknown:
            return None, (f"unknown target(s) {', '.join(map(repr, unknown))}: targets are category ids of "
                          f"taxonomy {taxonomy.id!r} ({', '.join(taxonomy.ids)})"), "targets"
        rule["targets"] = ids
    meta = {} if rule.get("metadata") is None else rule["metadata"]
    if isinstance(meta, dict) and source:
        meta["source"] = str(source)
        rule["metadata"] = meta
    ordered = {k: rule[k] for k in RULE_KEYS if k in rule}
    ordered.update({k: v for k, v in rule.items() if k not in ordered})  # unknown keys: the schema says so
    return ordered, None, ""


_REGEX_TOKEN = re.compile(r"/((?:\\.|[^/\\\n])+)/[imsx]*")  # the grammar's REGEX token
_STRING_TOKEN = re.compile(r'"((?:\\.|[^"\\\n])*)"' + r"|'((?:\\.|[^'\\\n])*)'")


def risky_regex(rule: dict[str, Any]) -> tuple[str, str] | None:
    """``(pattern, reason)`` of the first regex (``/…/`` literal or string literal) in the rule's
    expressions that :func:`~trajaudit.engine.dsl.regex.safety.regex_risk` refuses, or ``None``."""
    texts = [rule.get("guard"), rule.get("assert"), *((rule.get("let") or {}).values()
                                                      if isinstance(rule.get("let"), dict) else [])]
    for text in texts:
        if not isinstance(text, str):
            continue
        candidates = [m.group(1) for m in _REGEX_TOKEN.finditer(text)]
        candidates += [(m.group(1) or m.group(2) or "").replace("\\\\", "\\")  # "\\w" in a string is \w
                       for m in _STRING_TOKEN.finditer(text)]
        for pat in candidates:
            why = regex_risk(pat)
            if why:
                return pat, why
    return None


def _finding_text(f: LintFinding) -> str:
    text = _LOC.sub("", str(f)) if f.location else str(f)
    return text if text.startswith(f.code) else f"{f.code}: {f.message}"


def check_rule(raw: Any, *, pack: str, taxonomy: Taxonomy) -> tuple[dict[str, Any] | None, RejectedRule | None]:
    """Check one synthesized rule (stages 1-5 of the module doc). Never raises for a bad rule.

    Args:
        raw: the rule as the model wrote it.
        pack: the pack name its id is prefixed with.
        taxonomy: the taxonomy its ``targets`` must come from.

    Returns:
        ``(clean rule dict, None)`` when accepted, else ``(None, RejectedRule)``.
    """
    if not isinstance(raw, dict):
        return None, RejectedRule(raw, f"a rule must be an object with id, type, guard and assert/check, got "
                                       f"{type(raw).__name__}; text is never interpreted as a rule", "shape")
    rule, why, stage = _clean(raw, taxonomy)
    if rule is None:
        return None, RejectedRule(raw, why or "invalid", stage)
    risky = risky_regex(rule)
    if risky is not None:
        return None, RejectedRule(raw, refusal(f"regex {risky[0]!r}", risky[1]), "regex")
    doc = one_rule_pack(rule, pack, taxonomy.id)
    try:
        loaded = load_pack(doc)
    except RulePackError as e:
        where = f"\n{e.context}" if e.context else ""
        return None, RejectedRule(raw, f"{e.message}{where}", "parse")
    findings = lint_pack(loaded)
    bad = [f for f in findings if f.level == "error" or f.code == "tautology"]
    if bad:
        return None, RejectedRule(raw, "; ".join(_finding_text(f) for f in bad), "lint")
    if rule.get("examples"):
        failed = [r for r in run_examples(compile_rules(loaded)) if not r.ok]
        if failed:
            return None, RejectedRule(raw, "; ".join(f"example {r.name!r}: {r.detail}" for r in failed)[:600],
                                      "examples")
    return rule, None


def check_rules(raws: list[Any], *, pack: str, taxonomy: Taxonomy, taken: set[str] | None = None,
                attempts: int = 1) -> CheckedRules:
    """Check a batch: each rule alone (:func:`check_rule`), then duplicates and conflicts among them.

    Args:
        taken: ids already used in the pack (accepted ids get ``-2``, ``-3`` … to stay unique); updated.
        attempts: recorded on the rejections (1 first answer, 2 repair round).
    """
    out = CheckedRules()
    taken = taken if taken is not None else set()
    seen: dict[str, str] = {}
    for raw in raws:
        rule, rej = check_rule(raw, pack=pack, taxonomy=taxonomy)
        if rule is None:
            assert rej is not None
            out.rejected.append(RejectedRule(rej.rule, rej.reason, rej.stage, attempts))
            continue
        sig = repr((rule.get("guard"), rule.get("let"), rule.get("assert"), rule.get("check")))
        if sig in seen:
            out.rejected.append(RejectedRule(raw, f"duplicate of rule {seen[sig]!r} (same guard and assertion)",
                                             "duplicate", attempts))
            continue
        base, n = rule["id"], 2
        while rule["id"] in taken:
            rule["id"], n = f"{base}-{n}", n + 1
        taken.add(rule["id"])
        seen[sig] = rule["id"]
        out.accepted.append(rule)
    return out


def drop_conflicts(rules: list[dict[str, Any]], *, pack: str, taxonomy: str) -> tuple[list[dict[str, Any]],
                                                                                          list[RejectedRule]]:
    """Remove the later rule of each pair lint reports as ``conflicting-rules``.

    Returns:
        ``(kept rules, rejections)``.
    """
    if len(rules) < 2:
        return rules, []
    findings = lint_pack({"pack": pack, "version": 1, "taxonomy": taxonomy, "rules": rules})
    drop: dict[str, str] = {}
    for f in findings:
        if f.code == "conflicting-rules" and f.rule_id:
            drop.setdefault(f.rule_id.split(".", 1)[-1] if f.rule_id.startswith(pack + ".") else f.rule_id,
                            f.message)
    kept = [r for r in rules if r["id"] not in drop]
    rejected = [RejectedRule(r, f"conflict: {drop[r['id']]}", "conflict") for r in rules if r["id"] in drop]
    return kept, rejected


class _PackDumper(yaml.SafeDumper):
    """Block style for multi-line strings, so a reviewer reads expressions as written."""


def _str_presenter(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_PackDumper.add_representer(str, _str_presenter)


def dump_pack(pack: dict[str, Any], header: list[str] | None = None) -> str:
    """YAML text of ``pack`` (loadable by ``load_pack``), preceded by ``header`` as ``#`` comment lines."""
    lines = [("# " + h).rstrip() for text in (header or []) for h in str(text).splitlines() or [""]]
    body = yaml.dump(pack, Dumper=_PackDumper, sort_keys=False, allow_unicode=True, width=110)
    return ("\n".join(lines) + "\n" if lines else "") + body


def commented_yaml(data: Any, indent: str = "    ") -> list[str]:
    """``data`` as YAML lines for a ``#`` comment block (rejected rules shown to the reviewer)."""
    try:
        text = yaml.dump(data, Dumper=_PackDumper, sort_keys=False, allow_unicode=True, width=100)
    except yaml.YAMLError:
        text = repr(data)
    return [indent + ln for ln in text.rstrip().splitlines()]
