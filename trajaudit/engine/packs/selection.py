"""Pack selection: which rule packs apply to a run, compiled once per process.

The always-on generic pack, the shipped domain packs a run's tools select (:class:`DomainPack`,
:func:`default_packs`), packs a user's pack includes (:func:`included_files`), rule ids two packs
define (:func:`unique_rules`) and rules that supersede others (:func:`superseded_ids`), and
:func:`load_rules`, which compiles the chosen packs plus the tool-schema rules.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from trajaudit.engine.dsl.regex import stored as regex_stored
from trajaudit.engine.packs import cache as pack_cache
from trajaudit.engine.packs.compile import compile_rules
from trajaudit.engine.packs.pack import is_shipped_file, resolve_pack, shipped_packs, supersedes_of
from trajaudit.engine.packs.tool_rules import synthesize_tool_rules
from trajaudit.errors import RulePackError

__all__ = ["DOMAIN_KEY", "GENERIC_PACK", "DomainPack", "clear_caches", "default_packs", "distinct_packs",
           "included_files", "load_rules", "superseded_ids", "unique_rules"]


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
        rules += [r for r in _compiled_tool_rules(json.dumps(tools, ensure_ascii=False, default=repr), tools)
                  if r.id not in owner]
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
    on-disk pack cache (:mod:`trajaudit.engine.packs.cache`, keyed by the files' text).

    Raises:
        RulePackError: the pack is missing or invalid.
    """
    path = resolve_pack(ref)
    if is_shipped_file(path):
        return _compiled_shipped(str(path))
    loaded = pack_cache.load(path)
    return loaded.pack, pack_cache.compile_loaded(loaded)


@lru_cache(maxsize=64)
def _loaded_shipped(path: str) -> Any:
    """Bounded per-process cache of loaded (not yet compiled) shipped packs, keyed by their path."""
    return pack_cache.load(Path(path))


@lru_cache(maxsize=64)
def _compiled_shipped(path: str) -> tuple[Any, tuple[Any, ...]]:
    """Bounded per-process cache of compiled shipped packs, keyed by their path. Compiled rules are
    immutable closures, already shared by every run of a batch."""
    loaded = _loaded_shipped(path)
    return loaded.pack, pack_cache.compile_loaded(loaded)


GENERIC_PACK = "generic"
DOMAIN_KEY = "applies_to_tools"
DISTINCTIVE_KEY = "distinctive_tools"
POLICY_KEY = "applies_to_policy"


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
    distinctive: frozenset[str] = frozenset()
    policy: str | None = None

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

    def applies(self, called: set[str], policy_text: str = "") -> bool:
        """Whether a run calling the tools ``called`` (and showing ``policy_text``: its system prompts
        and task) belongs to this domain.

        A pack that declares ``distinctive_tools`` (tools no other domain has) applies when the run
        calls at least one of them and the domain's tools make up ``min_overlap`` of the run's tools
        *not shared with other domains* (the pack's tools that are not distinctive: ``think``,
        ``calculate``, ``get_user_details``, ``transfer_to_human_agents`` in tau-bench count neither
        way, so they never select a pack). A pack that declares ``applies_to_policy`` (a regular
        expression) also applies when ``policy_text`` matches it. A pack declaring neither keeps the
        older test: ``min_overlap`` of the run's distinct tools are domain tools.
        """
        if self.policy and policy_text and _policy_re(self.policy).search(policy_text):
            return True
        if not called:
            return False
        if self.distinctive:
            if not called & self.distinctive:
                return False
            shared = self.tools - self.distinctive
            own = called - shared
            return bool(own) and len(own & self.tools) / len(own) >= self.min_overlap
        return len(called & self.tools) / len(called) >= self.min_overlap


@lru_cache(maxsize=64)
def _policy_re(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def included_files(packs: tuple[Any, ...] | list[Any]) -> list[str]:
    """The files the given packs include directly (``RulePack.includes``): a shipped pack a user's
    pack includes — e.g. ``include: [{pack: generic, params: …}]`` with ``overrides:`` — is applied
    through that pack (with the user's parameters and overrides), not again as a default pack.

    Raises:
        RulePackError: a pack is missing or invalid.
    """
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
        policy = pack.metadata.get(POLICY_KEY)
        if (isinstance(tools, list) and tools) or isinstance(policy, str):
            distinctive = pack.metadata.get(DISTINCTIVE_KEY) or []
            domains.append(DomainPack(n, frozenset(map(str, tools or [])), path,
                                      float(pack.metadata.get("min_tool_overlap", 0.5)),
                                      frozenset(map(str, distinctive)), policy if isinstance(policy, str) else None))
    return always, domains


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
    return frozenset(n for r in rules for n in supersedes_of(r.spec))


@lru_cache(maxsize=64)
def _superseded_in(path: str) -> frozenset[str]:
    return superseded_ids(_compiled_shipped(path)[1])


def _compiled_tool_rules(text: str, tools: list[dict[str, Any]]) -> tuple[Any, ...]:
    """The compiled SCHEMA rules of ``tools`` (:func:`~trajaudit.engine.packs.tool_rules.synthesize_tool_rules`),
    loaded through the on-disk pack cache (keyed by the derived pack's content, so a ``--tools`` file
    is not re-read as YAML in every process) and compiled once per process per distinct ``text``
    (``tools`` as JSON: the memo key).

    Raises:
        ToolSchemaError: ``tools`` is not a list of function schemas.
    """
    hit = _TOOL_RULES.get(text)
    if hit is None:
        loaded = pack_cache.load_data(synthesize_tool_rules(tools).pack)
        hit = pack_cache.compile_loaded(loaded)
        if len(_TOOL_RULES) >= 8:
            _TOOL_RULES.pop(next(iter(_TOOL_RULES)))
        _TOOL_RULES[text] = hit
    return hit


#: per-process memo of :func:`_compiled_tool_rules` (compiled rules are immutable closures)
_TOOL_RULES: dict[str, tuple[Any, ...]] = {}


def clear_caches() -> None:
    """Empty the per-process caches of loaded and compiled shipped packs, and the regex decisions the
    pack cache's entries seeded (:mod:`~trajaudit.engine.dsl.regex.stored`)."""
    regex_stored.clear_memo()
    _compiled_shipped.cache_clear()
    _TOOL_RULES.clear()
    _superseded_in.cache_clear()
    _loaded_shipped.cache_clear()
