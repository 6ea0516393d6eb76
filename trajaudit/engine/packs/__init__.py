"""Rule packs: YAML loaded with source positions (``pack``, ``positions``), messages, the on-disk
cache (``cache``), compiling a pack's rules (``compile``); this surface is what loading and
compiling a pack needs (``import trajaudit`` loads it).

Imported from their modules: which packs apply to a run (``selection``), rules from tool schemas
(``tool_rules``), and the tools built on evaluation or an LLM — ``lint`` (``rules lint``),
``synthesis`` and ``synthesis_check`` (LLM rule synthesis), which sit above ``validation/``.

``messages`` (the error messages' wording: did-you-mean, schema problems, relocated parameter errors)
is loaded on first use (PEP 562 ``__getattr__``): ``pack`` and ``compile`` refer to it as
``trajaudit.engine.packs.messages`` on their error paths, so loading valid packs does not import it.
"""

from trajaudit.engine.packs.compile import CompiledRule, compile_rule, compile_rules
from trajaudit.engine.packs.pack import RulePack, RuleSpec, load_pack, resolve_pack, shipped_packs
from trajaudit.lazy_names import lazy_names

#: Submodules reachable as attributes before they are imported (see the module docstring).
_SUBMODULES = frozenset({"messages"})


__getattr__, __dir__ = lazy_names(__name__, globals(), {}, _SUBMODULES)


__all__ = ["CompiledRule", "RulePack", "RuleSpec", "compile_rule", "compile_rules", "load_pack", "resolve_pack",
           "shipped_packs"]
