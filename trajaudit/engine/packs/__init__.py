"""Rule packs: YAML loaded with source positions (``pack``, ``positions``), messages, the on-disk
cache (``cache``), compiling a pack's rules (``compile``); this surface is what loading and
compiling a pack needs (``import trajaudit`` loads it).

Imported from their modules: which packs apply to a run (``selection``), rules from tool schemas
(``tool_rules``), and the tools built on evaluation or an LLM — ``lint`` (``rules lint``),
``synthesis`` and ``synthesis_check`` (LLM rule synthesis), which sit above ``validation/``.
"""

from trajaudit.engine.packs.compile import CompiledRule, compile_rule, compile_rules
from trajaudit.engine.packs.pack import RulePack, RuleSpec, load_pack, resolve_pack, shipped_packs

__all__ = ["CompiledRule", "RulePack", "RuleSpec", "compile_rule", "compile_rules", "load_pack", "resolve_pack",
           "shipped_packs"]
