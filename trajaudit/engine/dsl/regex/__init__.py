"""Regexes of rules: the safety check (catastrophic backtracking is refused), ASCII twins, required
characters, the top-level alternation split and the prefilter that skips texts a regex cannot match."""

from trajaudit.engine.dsl.regex.safety import refusal, regex_risk

__all__ = ["refusal", "regex_risk"]
