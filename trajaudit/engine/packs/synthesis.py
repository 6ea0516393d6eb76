"""Constraint synthesis (AgentRx §3.1): an LLM writes trajaudit rules, each checked before use.

Two stores, as in the paper:

- **global** rules C^G, once per domain, from the policy text and the tool schemas
  (:meth:`RuleSynthesizer.from_policy`; ``trajaudit rules synthesize`` writes them as a pack for a
  person to review);
- **dynamic** rules C^D_k, per run, from the task and the prefix T≤k, with the rules already applied
  as context (:meth:`RuleSynthesizer.from_run`): ``one-shot`` (one call over the whole run, cheaper)
  or ``step-by-step`` (one call per decision-step prefix; a rule written at prefix k applies from
  step k on — its guard is prefixed with ``step.index >= k``).

The model answers JSON rule objects in the rule format (never code). Every rule goes through
:mod:`trajaudit.engine.packs.synthesis_check` (parse, lint, compile, examples); rejected rules are quoted back with
the checker's error in ONE repair round (``prompts/rule_synthesis_repair.yaml``), then rejected for
good with the reason. An optional reflection pass (``prompts/rule_reflection.yaml``) reviews each
kept rule against the policy and drops likely false positives, with the reviewer's reason.
"""

from __future__ import annotations

import copy
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from trajaudit.engine.packs.compile import compile_rules
from trajaudit.engine.packs.pack import load_pack
from trajaudit.engine.packs.synthesis_check import (
    CheckedRules,
    RejectedRule,
    check_rules,
    commented_yaml,
    drop_conflicts,
    dump_pack,
    slug,
)
from trajaudit.engine.taxonomy import Taxonomy, load_taxonomy
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.errors import LLMError, LLMUnreachableError
from trajaudit.llm.client import LLMClient, messages_chars
from trajaudit.llm.fitting import cut_text
from trajaudit.llm.prompt_run import PromptRun
from trajaudit.llm.prompting import load_prompt
from trajaudit.llm.usage import tracking

log = logging.getLogger(__name__)

MODES = ("one-shot", "step-by-step")


@dataclass
class SynthesisResult:
    """Rules synthesized for one pack.

    Attributes:
        pack_name: the pack name (rule ids are ``pack_name.id``).
        taxonomy: the taxonomy id of the rules' targets.
        rules: the accepted rules, as rule-format dicts (``load_pack``-ready).
        rejected: the rules not kept, each with the stage and the reason.
        repaired: ids of rules accepted only after the repair round.
        notes: cuts of the inputs to fit the context, reflection remarks, prefixes skipped.
        prompts: prompt name -> version used.
        model: the model that wrote the rules.
        usage: LLM counters of the synthesis (``Usage.to_dict()``).
    """

    pack_name: str
    taxonomy: str
    rules: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[RejectedRule] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    prompts: dict[str, int] = field(default_factory=dict)
    model: str = ""
    usage: dict[str, Any] = field(default_factory=dict)

    def pack(self, description: str = "", **metadata: Any) -> dict[str, Any]:
        """The accepted rules as a pack document (``load_pack``/``compile_rules`` accept it)."""
        meta = {"synthesized_by": self.model, "prompts": dict(self.prompts), **metadata}
        doc: dict[str, Any] = {"pack": self.pack_name, "version": 1, "taxonomy": self.taxonomy}
        if description:
            doc["description"] = description
        doc["metadata"] = meta
        doc["rules"] = list(self.rules)
        return doc

    def compiled(self) -> list[Any]:
        """The accepted rules compiled by the rule engine (empty when none were accepted)."""
        if not self.rules:
            return []
        return compile_rules(load_pack(self.pack()))

    def summary(self) -> dict[str, Any]:
        """JSON-ready counts and reasons (for ``Diagnosis.metadata``)."""
        return {"accepted": len(self.rules), "rejected": len(self.rejected), "repaired": list(self.repaired),
                "rejections": [{"id": r.rule_id, "stage": r.stage, "reason": r.reason[:300]} for r in self.rejected],
                "rule_ids": [f"{self.pack_name}.{r['id']}" for r in self.rules], "notes": list(self.notes),
                "prompts": dict(self.prompts)}

    def to_yaml(self, header: list[str], description: str = "", **metadata: Any) -> str:
        """The pack as reviewable YAML: ``header`` comment lines, then every rejected rule (commented
        out, with its reason), then the pack itself."""
        lines = list(header)
        if self.rejected:
            lines.append("")
            lines.append(f"Rejected rules ({len(self.rejected)}), not in the pack below:")
            for r in self.rejected:
                lines.append(f"- {r.rule_id} [{r.stage}, {r.attempts} attempt(s)]:")
                lines.extend("    " + ln for ln in r.reason.splitlines()[:12])
                lines.append("  as written:")
                lines.extend(commented_yaml(r.rule))
        lines.append("")
        return dump_pack(self.pack(description, **metadata), lines)


def compact_tools(tools: list[dict[str, Any]] | None, cap: int = 300) -> list[dict[str, Any]]:
    """Tool schemas reduced to what rules need: name, description, parameters (type, enum,
    description) and the required ones; long descriptions cut to ``cap`` characters."""
    out = []
    for t in tools or []:
        fn = t.get("function", t) if isinstance(t, dict) else {}
        if not isinstance(fn, dict) or not fn.get("name"):
            continue
        params = fn.get("parameters") or {}
        props = {}
        for name, p in (params.get("properties") or {}).items():
            p = p if isinstance(p, dict) else {}
            props[name] = {k: (cut_text(v, cap // 2) if isinstance(v, str) else v)
                           for k, v in p.items() if k in ("type", "enum", "description", "items")}
        out.append({"name": fn["name"], "description": cut_text(str(fn.get("description") or ""), cap),
                    "parameters": props, "required": list(params.get("required") or [])})
    return out


class RuleSynthesizer:
    """Synthesizes rules with an LLM and keeps only those the rule engine accepts.

    Args:
        client: the :class:`~trajaudit.llm.client.LLMClient`.
        taxonomy: taxonomy id (or a loaded :class:`Taxonomy`) of the rules' ``targets``.
        max_rules: rules asked for per call.
        reflect: run the reflection pass that prunes likely false positives.
        repair: run the one repair round for rejected rules (default on).
    """

    def __init__(self, client: LLMClient, *, taxonomy: str | Taxonomy = "agentrx", max_rules: int = 12,
                 reflect: bool = False, repair: bool = True) -> None:
        self.client = client
        self.taxonomy = taxonomy if isinstance(taxonomy, Taxonomy) else load_taxonomy(taxonomy)
        self.max_rules = max_rules
        self.reflect = reflect
        self.repair = repair

    # -- public -------------------------------------------------------------------------------------

    def from_policy(self, policy: str, tools: list[dict[str, Any]] | None = None, *,
                    pack: str = "synthesized.policy") -> SynthesisResult:
        """Global rules C^G from a policy text and tool schemas (AgentRx §3.1), checked and repaired.

        Raises:
            LLMError: a call failed or its answer was not a ``{"rules": [...]}`` object twice.
        """
        res = self._result(pack)
        with tracking() as usage:
            policy_text, tools_data = self._fit_policy(res, "rule_synthesis_global", policy, compact_tools(tools))
            messages = self._render(res, "rule_synthesis_global", policy=policy_text, tools=tools_data,
                                    max_rules=str(self.max_rules))
            self._collect(res, messages, "rule-synthesis-global")
            if self.reflect:
                self._reflect(res, policy_text)
        res.usage = usage.to_dict()
        return res

    def from_run(self, trajectory: Trajectory, *, mode: str = "one-shot", known_rules: list[str] | None = None,
                 pack: str = "synthesized.run", max_prefixes: int = 8) -> SynthesisResult:
        """Dynamic rules C^D_k for one run from its task and prefix (AgentRx §3.1).

        Args:
            mode: ``one-shot`` (the whole run, one call) or ``step-by-step`` (one call per decision
                step prefix, at most ``max_prefixes``, evenly spread with the last one always in; the
                prefixes skipped are noted).
            known_rules: titles of the rules already applied (pack rules), shown so the model does
                not repeat them.

        Raises:
            ValueError: unknown ``mode``.
            LLMError: a call failed or its answer was invalid twice.
        """
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        res = self._result(pack)
        run = PromptRun()
        decisions = [s.index for s in trajectory.decision_steps]
        last = len(trajectory.steps) - 1
        if mode == "one-shot" or not decisions:
            prefixes = [last]
        else:
            prefixes = _spread(decisions, max_prefixes)
            if len(prefixes) < len(decisions):
                res.notes.append(f"step-by-step: {len(prefixes)} of {len(decisions)} decision-step prefixes "
                                 f"used (max_prefixes={max_prefixes}): {prefixes}")
        known = list(known_rules or [])[:40]
        with tracking() as usage:
            for k in prefixes:
                messages, _ = run.fitted(
                    self.client, "rule_synthesis_dynamic", trajectory, "steps", range(k + 1), anchor=k,
                    focus=(k,) if mode == "step-by-step" else (), task=trajectory.task, known_rules=known,
                    first="0", last=str(k), max_rules=str(self.max_rules), dsl=self._dsl(res),
                    categories=self._categories())
                if mode == "one-shot":
                    added = self._collect(res, messages, "rule-synthesis-dynamic")
                else:
                    try:
                        added = self._collect(res, messages, "rule-synthesis-dynamic", scope=k)
                    except LLMUnreachableError:  # the endpoint is down: stop, do not degrade
                        raise
                    except LLMError as e:  # one prefix lost, the others still count
                        res.notes.append(f"prefix {k}: synthesis failed ({e})")
                        continue
                known += [r.get("title") or r["id"] for r in added]
            if self.reflect:
                self._reflect(res, trajectory.task or "(the task is not stated)")
        res.prompts.update(run.versions)
        res.notes.extend(run.notes)
        res.usage = usage.to_dict()
        return res

    # -- internals ----------------------------------------------------------------------------------

    def _result(self, pack: str) -> SynthesisResult:
        return SynthesisResult(pack_name=pack, taxonomy=self.taxonomy.id, model=self.client.config.model)

    def _categories(self) -> str:
        return "\n".join(f"- {c.id}: {' '.join(c.definition.split())}" for c in self.taxonomy.categories)

    def _dsl(self, res: SynthesisResult) -> str:
        p = load_prompt("rule_dsl")
        res.prompts["rule_dsl"] = p.version
        return p.user.strip()

    def _render(self, res: SynthesisResult, prompt: str, **data: Any) -> list[dict[str, str]]:
        p = load_prompt(prompt)
        res.prompts[prompt] = p.version
        if "dsl" in p.fields:
            data["dsl"] = self._dsl(res)
        if "categories" in p.fields:
            data["categories"] = self._categories()
        return p.render(**data)

    def _fit_policy(self, res: SynthesisResult, prompt: str, policy: str,
                    tools: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        """Cut the policy (then the tool descriptions) to the context budget, saying so in the notes."""
        overhead = messages_chars(self._render(res, prompt, policy="", tools=[], max_rules=str(self.max_rules)))
        budget = max(1000, self.client.config.context_chars - overhead)
        tools_size = len(json.dumps(tools, ensure_ascii=False))
        if len(policy) + tools_size <= budget:
            return policy, tools
        if tools_size > budget // 2:
            tools = compact_tools(tools, cap=60)
            res.notes.append(f"tool descriptions cut to 60 chars to fit the {budget}-char budget")
            tools_size = len(json.dumps(tools, ensure_ascii=False))
        room = max(500, budget - tools_size)
        if len(policy) > room:
            res.notes.append(f"policy text cut to {room} of {len(policy)} chars to fit the context budget")
            policy = cut_text(policy, room)
        return policy, tools

    def _ask(self, messages: list[dict[str, str]], name: str, prompt: str, limit: int | None = None) -> list[Any]:
        schema = copy.deepcopy(load_prompt(prompt).schema or {})
        schema["properties"]["rules"]["maxItems"] = limit or self.max_rules  # as many as the prompt asks for
        answer = self.client.chat_json(messages, schema, name=name)
        rules = answer.get("rules")
        return rules if isinstance(rules, list) else []

    def _collect(self, res: SynthesisResult, messages: list[dict[str, str]], name: str, *,
                 scope: int | None = None) -> list[dict[str, Any]]:
        """Ask, check, repair once, scope, drop conflicts; add to ``res``. Returns the rules added."""
        prompt = name.replace("-", "_")
        raws = self._ask(messages, name, prompt)
        taken = {r["id"] for r in res.rules}
        first = check_rules(raws, pack=res.pack_name, taxonomy=self.taxonomy, taken=taken)
        accepted = list(first.accepted)
        final_rejects = [r for r in first.rejected if r.stage == "duplicate"]
        to_fix = [r for r in first.rejected if r.stage != "duplicate"]
        fixed = None
        if to_fix and self.repair:
            try:
                fixed = self._repair(res, to_fix, taken)
            except LLMUnreachableError:  # the endpoint is down: stop, do not degrade
                raise
            except LLMError as e:
                res.notes.append(f"the repair round failed ({e}); its rules stay rejected")
        if fixed is not None:
            accepted += fixed.accepted
            res.repaired += [r["id"] for r in fixed.accepted]
            firsts = {_slug(r.rule_id): r for r in to_fix}
            answered = {_slug(r["id"]) for r in fixed.accepted} | {_slug(r.rule_id) for r in fixed.rejected}
            for r in fixed.rejected:
                before = firsts.get(_slug(r.rule_id))
                why = r.reason if before is None else f"{r.reason}\n(unchanged after one repair round)" \
                    if before.reason == r.reason else f"{r.reason}\n(after one repair round; first error: {before.reason})"
                final_rejects.append(RejectedRule(r.rule, why, r.stage, 2))
            final_rejects += [RejectedRule(r.rule, f"{r.reason}\n(left out in the repair round)", r.stage, 1)
                              for key, r in firsts.items() if key not in answered]
        else:
            final_rejects += to_fix
        if scope is not None:
            accepted = [self._scoped(r, scope) for r in accepted]
        kept, conflicts = drop_conflicts(res.rules + accepted, pack=res.pack_name, taxonomy=self.taxonomy.id)
        added = [r for r in kept if r in accepted]
        res.rules = kept
        res.rejected += final_rejects + conflicts
        log.info("%s: %d rule(s) kept, %d rejected", name, len(added), len(final_rejects) + len(conflicts))
        return added

    def _repair(self, res: SynthesisResult, rejected: list[RejectedRule], taken: set[str]) -> CheckedRules:
        items = [{"rule": r.rule, "error": r.reason} for r in rejected]
        messages = self._render(res, "rule_synthesis_repair", rejected=items)
        raws = self._ask(messages, "rule-synthesis-repair", "rule_synthesis_repair", limit=len(rejected))
        return check_rules(raws, pack=res.pack_name, taxonomy=self.taxonomy, taken=taken, attempts=2)

    @staticmethod
    def _scoped(rule: dict[str, Any], k: int) -> dict[str, Any]:
        guard = rule.get("guard")
        scoped = dict(rule)
        scoped["guard"] = f"step.index >= {k}" + (f" and ({guard})" if guard else "")
        scoped["metadata"] = {**(rule.get("metadata") or {}), "prefix_step": k}
        return scoped

    def _reflect(self, res: SynthesisResult, policy: str) -> None:
        if not res.rules:
            return
        shown = [{k: r[k] for k in ("id", "title", "guard", "let", "assert", "check", "message") if k in r}
                 for r in res.rules]
        budget = max(1000, self.client.config.context_chars // 2)
        if len(policy) > budget:
            res.notes.append(f"reflection: policy text cut to {budget} of {len(policy)} chars")
            policy = cut_text(policy, budget)
        messages = self._render(res, "rule_reflection", policy=policy, rules=shown)
        try:
            answer = self.client.chat_json(messages, load_prompt("rule_reflection").schema or {},
                                           name="rule-reflection")
        except LLMUnreachableError:  # the endpoint is down: stop, do not degrade
            raise
        except LLMError as e:
            res.notes.append(f"the reflection pass failed ({e}); every rule kept")
            return
        drop = {}
        for review in answer["reviews"]:
            if not review["keep"]:
                drop[_slug(review["id"])] = review["reason"]
        reviewed = {_slug(rv["id"]) for rv in answer["reviews"]}
        missing = [r["id"] for r in res.rules if r["id"] not in reviewed]
        if missing:
            res.notes.append(f"reflection did not review {', '.join(missing)}; kept")
        kept = []
        for r in res.rules:
            if r["id"] in drop:
                res.rejected.append(RejectedRule(r, f"reflection: {drop[r['id']]}", "reflection"))
            else:
                kept.append(r)
        res.rules = kept


def _slug(text: Any) -> str:
    """The id a rule written as ``text`` gets (a ``pack.`` prefix ignored)."""
    text = str(text or "")
    return slug(text.rsplit(".", 1)[-1] if "." in text else text)


def _spread(items: list[int], n: int) -> list[int]:
    """At most ``n`` items of ``items``, evenly spread, the last one always included."""
    if len(items) <= n:
        return list(items)
    step = len(items) / n
    picked = {items[min(len(items) - 1, int(round((i + 1) * step)) - 1)] for i in range(n)}
    return sorted(picked | {items[-1]})
