"""The evidence stage shared by every strategy: validation log (rules) + claim graph findings.

``gather(trajectory, context)`` computes the evidence once per trajectory and caches it on the
context, so a strategy and the report read the same log.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from trajaudit.engine import regular_files, safe_json
from trajaudit.engine.ir import Trajectory
from trajaudit.engine.strategy import AuditContext
from trajaudit.engine.validation_log import ValidationLog
from trajaudit.errors import RulePackError, TrajauditError


@dataclass
class EvidenceBundle:
    """Evidence about one trajectory.

    Attributes:
        log: the merged validation log (rule records + claim-graph records).
        claim_rows: a JSON-ready ledger summary for reports.
        error_steps: steps the claim graph marks as error spans (DRIFT propagation).
        first_error_step: the first such step, or ``None``.
        graph: the claim graph object, when built.
        domain_packs: names of the shipped domain packs the run's tools selected.
        timings: CPU seconds (``time.process_time``) spent on ``rules`` (rule evaluation) and ``claims``
            (claim graph, its records and propagation), for benchmarks and profiling.
    """

    log: ValidationLog
    claim_rows: list[dict[str, Any]] = field(default_factory=list)
    error_steps: tuple[int, ...] = ()
    first_error_step: int | None = None
    graph: Any = None
    domain_packs: tuple[str, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)


def load_tools(path: str | Path) -> list[dict[str, Any]]:
    """Read an OpenAI function-schema list (``[{"type": "function", "function": {...}}]`` or bare functions).

    Each function's ``parameters`` (when present) must be a JSON Schema for an object: it is checked
    against the JSON Schema metaschema (the draft its ``$schema`` names, else 2020-12) with
    jsonschema's ``check_schema``, and a ``type`` other than ``"object"`` is refused (OpenAI
    function parameters describe an arguments object). See :func:`check_tool_parameters`.

    Raises:
        TrajauditError: unreadable file, invalid JSON, or not a list of function schemas.
        ToolSchemaError: a tool's ``parameters`` is not a valid object JSON Schema (names the file,
            the element, the tool and the problem).
    """
    return tool_schemas(_tools_json(path), str(path))


def read_tool_list(path: str | Path) -> list[dict[str, Any]]:
    """The file's schema list as written (wrapped ``{"type": "function", …}`` or bare functions),
    after the checks of :func:`load_tools`; the file is read once.

    Raises:
        TrajauditError, ToolSchemaError: as :func:`load_tools`.
    """
    data = _tools_json(path)
    tool_schemas(data, str(path))
    return data


def _tools_json(path: str | Path) -> Any:
    try:
        return safe_json.loads(regular_files.read_text(path))
    except (OSError, ValueError) as e:
        raise TrajauditError(f"{path}: cannot read tool schemas: {e}") from None


def tool_schemas(data: Any, origin: str = "tools") -> list[dict[str, Any]]:
    """The function objects of an in-memory OpenAI function-schema list, checked as :func:`load_tools`
    checks a file's (``origin`` names the source in messages).

    Raises:
        TrajauditError: not a list of function schemas. ToolSchemaError: a bad ``parameters``.
    """
    if not isinstance(data, list) or not all(isinstance(x, dict) for x in data):
        raise TrajauditError(f"{origin}: tool schemas must be a JSON list of function objects")
    out = []
    for i, x in enumerate(data):
        fn = x.get("function", x)
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise TrajauditError(f"{origin}: element {i} is not a function schema (no 'name')")
        check_tool_parameters(fn, file=origin, index=i)
        out.append(fn)
    return out


def check_tool_parameters(fn: dict[str, Any], *, file: str | None = None, index: int | None = None) -> None:
    """Check one function schema's ``parameters`` against the JSON Schema metaschema.

    Args:
        fn: a function object (``{"name", "parameters"?}``); a missing ``parameters`` is accepted
            (a tool without arguments).
        file, index: where it came from, for the message.

    Raises:
        ToolSchemaError: ``parameters`` is not an object, declares a ``type`` other than
            ``"object"``, or breaks the metaschema (the best-matching error, with its JSON path).
    """
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import Draft202012Validator, validator_for

    from trajaudit.engine.tool_rules import ToolSchemaError

    if "parameters" not in fn:
        return
    params = fn["parameters"]
    name = fn.get("name")
    if not isinstance(params, dict):
        raise ToolSchemaError(f"tool {name!r}: parameters must be a JSON Schema object, got "
                              f"{type(params).__name__} {json.dumps(params)[:80]}", file=file, index=index)
    if "type" in params and params["type"] != "object":
        raise ToolSchemaError(f"tool {name!r}: parameters must describe an object (\"type\": \"object\"), got "
                              f"\"type\": {json.dumps(params['type'])[:80]}", file=file, index=index)
    try:
        validator_for(params, default=Draft202012Validator).check_schema(params)
    except SchemaError as e:
        where = e.json_path.replace("$", "parameters", 1)
        raise ToolSchemaError(f"tool {name!r}: invalid JSON Schema at {where}: {e.message}",
                              file=file, index=index) from None


def load_rules(packs: tuple[Any, ...] | list[Any], tools: list[dict[str, Any]] | None, *,
               defaults: tuple[str, ...] | list[str] = (), domains: tuple[Any, ...] | list[Any] = ()) -> list[Any]:
    """Compile the rule packs (plus tool-schema rules when ``tools`` is given — issue 4).

    A rule id defined by two of ``packs`` is an error (:func:`unique_rules`, the check ``trajaudit
    check`` makes too): keeping one silently would make the diagnosis depend on the packs' order. A
    tool-schema rule whose id a pack already defines is left out (the pack's version is kept).

    Args:
        packs: pack paths or shipped names (``str``; a file named twice is read once), or loaded
            ``RulePack`` objects (named by their ``name`` in errors), in order.
        tools: function schemas for SCHEMA rules, or ``None``.
        defaults: which of ``packs`` were added as default packs (named so in the error).
        domains: the default domain packs (:func:`default_packs`); an id of theirs that ``packs``
            define is an error too (both would apply to the runs calling the domain's tools).

    Raises:
        RulePackError: a pack is missing, invalid, a rule does not compile, or two packs define the
            same rule id.
    """
    from trajaudit.engine.compiled_rule import compile_rules

    groups = [(p, _compiled(p)[1]) if isinstance(p, str) else (f"pack {p.name}", tuple(compile_rules(p)))
              for p in distinct_packs(packs)]
    hint = ("; {} is a default pack: turn the default packs off (--no-default-packs, AuditSpec.default_packs="
            "False) to use only your version")
    rules, owner = unique_rules(groups, hint={p: hint.format(p) for p in defaults})
    drop = superseded_ids(rules)
    if drop:
        rules = [r for r in rules if r.id not in drop]
    for dp in domains:
        for spec in _loaded_shipped(dp.path).pack.enabled_rules:
            if spec.id in owner:
                raise RulePackError(f"rule id {spec.id} is defined by both {owner[spec.id]} and {dp.name}"
                                    + hint.format(f"{dp.name} (applied to runs calling its tools)"))
    if tools:
        from trajaudit.engine.tool_rules import rules_from_tools

        rules += [r for r in compile_rules(rules_from_tools(tools)) if r.id not in owner]
    return rules


def unique_rules(groups: list[tuple[str, Any]], *, hint: dict[str, str] | None = None) -> tuple[list[Any], dict[str, str]]:
    """Concatenate the compiled rules of several packs, refusing a rule id two packs define.

    Args:
        groups: ``[(pack name as given, compiled rules)]`` in order.
        hint: text appended to the error when the first definer is the named pack.

    Returns:
        ``(rules, {rule id: pack name})``.

    Raises:
        RulePackError: ``rule id X is defined by both A and B`` (the first two packs defining it).
    """
    rules: list[Any] = []
    owner: dict[str, str] = {}
    for name, group in groups:
        for r in group:
            if r.id in owner:
                first = owner[r.id]
                raise RulePackError(f"rule id {r.id} is defined by both {first} and {name}"
                                    + (hint or {}).get(first, ""))
            owner[r.id] = name
            rules.append(r)
    return rules, owner


def distinct_packs(packs: tuple[Any, ...] | list[Any]) -> list[Any]:
    """``packs`` without refs naming a pack file already listed (the same pack given twice); loaded
    ``RulePack`` objects are kept as given."""
    from trajaudit.engine.rule_pack import resolve_pack

    out: list[Any] = []
    seen: set[Path] = set()
    for p in packs:
        if not isinstance(p, str):
            out.append(p)
            continue
        path = resolve_pack(p).resolve()
        if path not in seen:
            seen.add(path)
            out.append(p)
    return out


def _compiled(ref: str) -> tuple[Any, tuple[Any, ...]]:
    """``(RulePack, compiled rules)`` of pack ``ref``. Shipped packs (package data, fixed while the
    process runs) are compiled once per process (:func:`_compiled_shipped`); a user's pack file is
    read and compiled on every call, so edits between audits are picked up. Both go through the
    on-disk pack cache (:mod:`trajaudit.engine.pack_cache`, keyed by the files' text).

    Raises:
        RulePackError: the pack is missing or invalid.
    """
    from trajaudit.engine import pack_cache
    from trajaudit.engine.rule_pack import is_shipped_file, resolve_pack

    path = resolve_pack(ref)
    if is_shipped_file(path):
        return _compiled_shipped(str(path))
    loaded = pack_cache.load(path)
    return loaded.pack, pack_cache.compile_loaded(loaded)


@lru_cache(maxsize=64)
def _loaded_shipped(path: str) -> Any:
    """Bounded per-process cache of loaded (not yet compiled) shipped packs, keyed by their path."""
    from trajaudit.engine import pack_cache

    return pack_cache.load(Path(path))


@lru_cache(maxsize=64)
def _compiled_shipped(path: str) -> tuple[Any, tuple[Any, ...]]:
    """Bounded per-process cache of compiled shipped packs, keyed by their path. Compiled rules are
    immutable closures, already shared by every run of a batch."""
    from trajaudit.engine import pack_cache

    loaded = _loaded_shipped(path)
    return loaded.pack, pack_cache.compile_loaded(loaded)


def clear_caches(packs: bool = True) -> None:
    """Empty the per-process caches of the audit: loaded and compiled shipped packs, the parse and
    regex-safety memos (unless ``packs`` is false), memoized regex results of rules, embedded-observation
    offsets, the claim package's text analyses. Results never depend on them (benchmarks clear them to
    time a batch as a fresh process would run it; the on-disk pack cache is not touched: see
    ``TRAJAUDIT_NO_CACHE``)."""
    from trajaudit.engine import observation, regex_prefilter
    from trajaudit.engine.claims import clear_caches as clear_claims

    if packs:
        from trajaudit.engine import pack_cache, regex_safety, rule_parser

        _compiled_shipped.cache_clear()
        _superseded_in.cache_clear()
        _loaded_shipped.cache_clear()
        rule_parser.clear_memo()
        regex_safety.clear_memo()
        pack_cache.code_fingerprint.cache_clear()
        regex_prefilter._INFO.clear()
    regex_prefilter.clear_shared()
    observation.clear_memo()
    clear_claims()


GENERIC_PACK = "generic"
DOMAIN_KEY = "applies_to_tools"


@dataclass(frozen=True)
class DomainPack:
    """A shipped domain policy pack, applied to a run only when the run uses the domain's tools.

    Attributes:
        name: the pack name.
        tools: the domain's tool names (the pack's ``metadata.applies_to_tools``).
        path: the pack file; its rules are compiled when first read (:attr:`rules`), so a batch whose
            runs never select the domain does not compile it.
        min_overlap: share of the run's distinct called tools that must be domain tools (0..1).
    """

    name: str
    tools: frozenset[str]
    path: str
    min_overlap: float = 0.5

    @property
    def rules(self) -> tuple[Any, ...]:
        """The compiled rules (compiled once per process, on first use).

        Raises:
            RulePackError: a rule of the shipped pack does not compile (a packaging bug).
        """
        return _compiled_shipped(self.path)[1]

    @property
    def superseded(self) -> frozenset[str]:
        """The rule ids this pack's rules supersede (:func:`superseded_ids`; computed once per process)."""
        return _superseded_in(self.path)

    def applies(self, called: set[str]) -> bool:
        """Whether a run calling the tools ``called`` belongs to this domain."""
        if not called:
            return False
        return len(called & self.tools) / len(called) >= self.min_overlap


def included_files(packs: tuple[Any, ...] | list[Any]) -> list[str]:
    """The files the given packs include directly (``RulePack.includes``): a shipped pack a user's
    pack includes — e.g. ``include: [{pack: generic, params: …}]`` with ``overrides:`` — is applied
    through that pack (with the user's parameters and overrides), not again as a default pack.

    Raises:
        RulePackError: a pack is missing or invalid.
    """
    from trajaudit.engine import pack_cache
    from trajaudit.engine.rule_pack import is_shipped_file, resolve_pack

    out: list[str] = []
    for p in packs:
        if isinstance(p, str):  # loaded only (the includes are all it needs): load_rules compiles it
            path = resolve_pack(p)
            p = (_loaded_shipped(str(path)) if is_shipped_file(path) else pack_cache.load(path)).pack
        out.extend(p.includes)
    return out


def default_packs(explicit: tuple[str, ...] | list[str]) -> tuple[list[str], list[DomainPack]]:
    """The shipped packs applied by default: the always-on generic pack, and the domain packs
    (those declaring ``metadata.applies_to_tools``) that the run's tools select. Packs named in
    ``explicit`` — by name or by the resolved path of their file — are left out (they are applied
    unconditionally by :func:`load_rules`, or a user's pack includes them: see :func:`included_files`).

    Returns:
        ``(always_on_pack_names, domain_packs)``.

    Raises:
        RulePackError: a shipped pack is invalid (a packaging bug, reported clearly).
    """
    from trajaudit.engine.rule_pack import resolve_pack, shipped_packs

    names = shipped_packs()
    given = set(explicit)
    skip = {n for n in names if n in given or str(resolve_pack(n)) in given}
    always = [GENERIC_PACK] if GENERIC_PACK in names and GENERIC_PACK not in skip else []
    domains = []
    for n in names:
        if n in skip or n == GENERIC_PACK or n.startswith(GENERIC_PACK + "."):
            continue
        path = str(resolve_pack(n))
        pack = _loaded_shipped(path).pack
        tools = pack.metadata.get(DOMAIN_KEY)
        if isinstance(tools, list) and tools:
            domains.append(DomainPack(n, frozenset(map(str, tools)), path,
                                      float(pack.metadata.get("min_tool_overlap", 0.5))))
    return always, domains


def rules_for(trajectory: Trajectory, context: AuditContext) -> tuple[list[Any], list[str]]:
    """The compiled rules applied to ``trajectory``: the context's rules, then those of the domain
    packs its tools select (compiled on first use). Returns ``(rules, applied domain pack names)``."""
    called = {name for s in trajectory.steps for name in s.tool_names}
    domains = [dp for dp in context.extra.get("domain_packs", ()) if dp.applies(called)]
    if not domains:
        return list(context.rules), []
    drop = frozenset().union(*(dp.superseded for dp in domains))
    rules = [r for r in context.rules if r.id not in drop] if drop else list(context.rules)
    for dp in domains:
        rules.extend(dp.rules)
    return rules, [dp.name for dp in domains]


def superseded_ids(rules: list[Any] | tuple[Any, ...]) -> frozenset[str]:
    """Rule ids that a rule among ``rules`` replaces (its ``metadata.supersedes``: a list of full rule
    ids): a domain pack that states a generic policy more precisely — e.g. the tau_retail pack's
    ``explicit-yes-before-write`` with the domain's write tools by name, for the generic
    ``confirmation-before-write`` that recognizes writes by their verb — keeps one record per
    violation, not two. Applied wherever packs are combined (:func:`load_rules`, :func:`rules_for`);
    a rule never supersedes itself.

    Args:
        rules: compiled rules (each with ``spec.metadata``).

    Returns:
        The ids to leave out (empty when no rule declares any).
    """
    from trajaudit.engine.rule_pack import supersedes_of

    return frozenset(n for r in rules for n in supersedes_of(r.spec))


@lru_cache(maxsize=64)
def _superseded_in(path: str) -> frozenset[str]:
    return superseded_ids(_compiled_shipped(path)[1])


def evaluate_rules(trajectory: Trajectory, rules: list[Any], context: AuditContext) -> ValidationLog:
    """:func:`~trajaudit.engine.rule_eval.evaluate` with the context's oracle, budget and tools."""
    if not rules:
        return ValidationLog(trajectory.id)
    from trajaudit.engine.rule_eval import evaluate

    return evaluate(trajectory, rules, oracle=context.extra.get("oracle"), config=context.config,
                    tools=context.tools)


def gather(trajectory: Trajectory, context: AuditContext) -> EvidenceBundle:
    """Compute (or fetch from the context's cache) the evidence for ``trajectory``."""
    cached = context.extra.get("_evidence")
    if cached is not None and cached[0] is trajectory:
        return cached[1]
    t0 = time.process_time()
    rules, applied = rules_for(trajectory, context)
    log = evaluate_rules(trajectory, rules, context)
    from trajaudit.engine.claims import build_claim_graph

    t1 = time.process_time()
    cg = build_claim_graph(trajectory, context.config)
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
    # one entry only: memory stays bounded in long batches; identity (not id()) avoids stale hits
    context.extra["_evidence"] = (trajectory, bundle)
    return bundle
