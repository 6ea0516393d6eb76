"""The audit engine, one sub-package per stage (docs/architecture.md has the map):

- ``trace/``: the IR (Trajectory, Step, ToolCall), text decoding, loading and format detection, adapters
- ``dsl/``: the rule language (grammar, AST, parser, compiler, runtime, builtins, ``regex/``)
- ``packs/``: rule packs (load with positions, cache, messages, compile, selection, lint, synthesis)
- ``validation/``: evaluating compiled rules per step; rule examples (``rules test``)
- ``claims/``: claim extraction, ledger, support, dependency graph, propagation
- ``strategies/``: the Strategy protocol, typed context, registry, baselines, offline judge, LLM strategies
- ``run/``: evidence (once per run) → strategy → diagnosis → repair; batches, parallel runs

and the vocabulary they share: ``config`` (AuditConfig), ``taxonomy``, ``validation_log`` (Evidence,
Record, ValidationLog), ``diagnosis``, ``schema``. This file imports nothing: a module of one stage
loads only the stages below it.
"""

__all__: list[str] = []
