"""The evidence stage, run once per trajectory by the pipeline before the strategy: the validation
log (the rules of the context and of the domain packs the run's tools select) plus the claim
graph's findings. ``gather(trajectory, context)`` returns an
:class:`~trajaudit.engine.strategies.context.EvidenceBundle`; the pipeline passes it to
``Strategy.diagnose`` and reports its log, so the strategy and the report read the same evidence.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from trajaudit.engine.claims import ClaimGraph, build_claim_graph
from trajaudit.engine.claims import clear_caches as clear_claims
from trajaudit.engine.dsl import parser as rule_parser
from trajaudit.engine.dsl.regex import prefilter as regex_prefilter
from trajaudit.engine.dsl.regex import safety as regex_safety
from trajaudit.engine.packs import cache as pack_cache
from trajaudit.engine.packs import selection
from trajaudit.engine.strategies.context import AuditContext, EvidenceBundle
from trajaudit.engine.trace import observation
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.engine.validation.stepper import evaluate_run
from trajaudit.engine.validation_log import ValidationLog

__all__ = ["clear_caches", "evaluate_rules", "gather", "rules_for", "select_rules"]


def clear_caches(packs: bool = True) -> None:
    """Empty the per-process caches of the audit: loaded and compiled shipped packs, the parse and
    regex-safety memos (unless ``packs`` is false), memoized regex results of rules, embedded-observation
    offsets, the claim package's text analyses and the parsed JSON step texts. Results never depend on them (benchmarks clear them to
    time a batch as a fresh process would run it; the on-disk pack cache is not touched: see
    ``TRAJAUDIT_NO_CACHE``)."""
    if packs:
        selection.clear_caches()
        rule_parser.clear_memo()
        regex_safety.clear_memo()
        pack_cache.code_fingerprint.cache_clear()
        regex_prefilter._INFO.clear()
    regex_prefilter.clear_shared()
    observation.clear_memo()
    clear_claims()


def rules_for(trajectory: Trajectory, context: AuditContext) -> tuple[list[Any], list[str]]:
    """The compiled rules applied to ``trajectory``: the context's rules, then those of the domain
    packs its tools select (compiled on first use). Returns ``(rules, applied domain pack names)``."""
    called = {name for s in trajectory.steps for name in s.tool_names}
    policy = ""
    if any(dp.policy for dp in context.domain_packs):
        policy = "\n".join([trajectory.task, *(p for p in trajectory.system_prompts.values() if isinstance(p, str)),
                            *(s.content for s in trajectory.steps if s.kind == "system")])
    return select_rules(context, called, policy)


def select_rules(context: AuditContext, called: set[str], policy: str = "") -> tuple[list[Any], list[str]]:
    """:func:`rules_for` from what it reads of the run: the tool names it ``called`` and its
    ``policy`` text (task, system prompts, system steps, joined by newlines; read only when a domain
    pack declares ``applies_to_policy``). A runtime monitor keeps both as the run grows."""
    packs = context.domain_packs
    domains = [dp for dp in packs if dp.applies(called, policy)]
    if not domains:
        return list(context.rules), []
    drop = frozenset().union(*(dp.superseded for dp in domains))
    rules = [r for r in context.rules if r.id not in drop] if drop else list(context.rules)
    for dp in domains:
        rules.extend(dp.rules)
    return rules, [dp.name for dp in domains]


def evaluate_rules(trajectory: Trajectory, rules: list[Any], context: AuditContext) -> ValidationLog:
    """:func:`~trajaudit.engine.validation.rule_eval.evaluate` with the context's budget and tools, through
    :func:`~trajaudit.engine.validation.stepper.evaluate_run` (prefix-state quantifiers; the same log)."""
    if not rules:
        return ValidationLog(trajectory.id)
    return evaluate_run(trajectory, rules, config=context.config, tools=context.tools)


def gather(trajectory: Trajectory, context: AuditContext, claims: ClaimGraph | None = None) -> EvidenceBundle:
    """Compute the evidence for ``trajectory`` (the pipeline calls it once per run).

    ``claims``: the run's claim graph when the caller has it already (``Monitor`` builds it step by
    step: ``ClaimGraphBuilder.finish``); by default it is built here (``build_claim_graph``).

    The cyclic garbage collector is paused meanwhile (and restored after): the run's log, claim
    graph and caches grow until it ends, and every collection during it re-traversed them — quadratic
    in run length (issue 22: most of the rule and judge stages on a run 100x a tau run). A run's few
    reference cycles are collected after it."""
    was = gc.isenabled()
    gc.disable()
    try:
        return _gather(trajectory, context, claims)
    finally:
        if was:
            gc.enable()


def _gather(trajectory: Trajectory, context: AuditContext, claims: ClaimGraph | None = None) -> EvidenceBundle:
    t0 = time.process_time()
    rules, applied = rules_for(trajectory, context)
    log = evaluate_rules(trajectory, rules, context)
    t1 = time.process_time()
    cg = claims if claims is not None else build_claim_graph(trajectory, context.config)
    log.extend(cg.to_records())
    log.incomplete.extend(cg.incomplete)
    for s in trajectory.steps:  # cut content: a value past the cut can look unsupported (MISSING)
        if "truncated" in s.flags:
            log.incomplete.append(f"steps.{s.index} content was cut at {len(s.content):,} of "
                                  f"{s.metadata.get('original_length', 0):,} characters (LoadOptions.max_content_chars); "
                                  "claims about the cut part may be reported as unsupported")
    log.sort()
    prop = cg.propagate()
    rows = [
        {"id": c.id, "claim": " ".join(c.text.split())[:80], "kind": c.kind, "step": c.step, "address": c.address,
         "status": c.status.value, "value": c.value[:120], "evidence": c.evidence_address,
         "reused_in": list(c.reused_in), "consequential": c.consequential}
        for c in cg.claims if c.status.unsupported
    ]
    bundle = EvidenceBundle(log=log, claim_rows=rows, error_steps=tuple(prop.error_steps),
                            first_error_step=prop.first_error_step, graph=cg, domain_packs=tuple(applied),
                            timings={"rules": t1 - t0, "claims": time.process_time() - t1})
    return bundle
