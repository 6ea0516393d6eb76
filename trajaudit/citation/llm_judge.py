"""The LLM judge of the citation audit: need-citation, span extraction with the verbatim check, entailment.

Seed 003 App. A/B: EXTRACTSUPPORTINGSPANS asks the model for verbatim supporting spans; each quote is
checked to occur in the input it names, and the union of the quotes must entail the sentence when the
model says it does. A failed check is sent back as feedback and the request retried, up to
``max_attempts`` (5 in the paper) before a hard failure (:class:`~trajaudit.errors.LLMError`, which the
local test turns into an ``unknown`` verdict). ENTAILS and the need-citation test are single calls.

Prompts are versioned YAML data files in ``trajaudit/citation/prompts/``. Trace text is never spliced
into instructions: it is JSON-encoded inside ``<evidence name="…">`` blocks with ``<``/``>`` escaped
(so text inside cannot close its block), and the system prompts say block content is data. The client is anything with ``chat_json(messages, schema, *, name) -> dict``
(the ``trajaudit.llm`` client); this module never imports ``openai``.
"""

from __future__ import annotations

import json
import logging
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Protocol, runtime_checkable

import jsonschema
import yaml

from trajaudit.citation.model import InputUnit, Span
from trajaudit.errors import ConfigError, LLMError

log = logging.getLogger(__name__)

PROMPT_NAMES = ("need_citation", "extract_spans", "entails")


@runtime_checkable
class ChatJSONClient(Protocol):
    """The one method the citation judge needs from an LLM client.

    ``chat_json(messages, schema, *, name)`` sends OpenAI-style chat ``messages`` and returns the
    answer parsed as JSON and valid against ``schema``; it raises :class:`~trajaudit.errors.LLMError`
    when no valid answer could be obtained. ``name`` labels the call (logs, usage, caching).
    """

    def chat_json(self, messages: list[dict[str, Any]], schema: dict[str, Any], *, name: str) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Prompt:
    """A versioned prompt: ``system`` and ``user`` templates with ``${name}`` slots and the answer schema."""

    id: str
    version: int
    description: str
    system: str
    user: str
    schema: dict[str, Any]

    def render(self, **blocks: str) -> list[dict[str, str]]:
        """Fill the ``${name}`` slots of the user template (:class:`string.Template`: one pass, filled text
        is never re-scanned, no attribute access).

        Raises:
            ConfigError: a slot has no value, or the template is malformed.
        """
        try:
            user = string.Template(self.user).substitute(blocks)
        except KeyError as e:
            raise ConfigError(f"prompt {self.id}: no value for {e.args[0]}") from None
        except ValueError as e:
            raise ConfigError(f"prompt {self.id}: bad template: {e}") from None
        return [{"role": "system", "content": self.system.strip()}, {"role": "user", "content": user.strip()}]


def load_prompt(name: str, text: str | None = None) -> Prompt:
    """Load ``trajaudit/citation/prompts/<name>.yaml`` (or parse ``text``) and check its shape.

    Raises:
        ConfigError: unreadable YAML, missing keys, or an invalid answer schema.
    """
    origin = f"citation/prompts/{name}.yaml"
    try:
        if text is None:
            text = resources.files("trajaudit.citation").joinpath("prompts").joinpath(f"{name}.yaml").read_text("utf-8")
        spec = yaml.safe_load(text)
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"{origin}: cannot read prompt: {e}") from None
    need = {"id", "version", "system", "user", "schema"}
    if not isinstance(spec, dict) or need - set(spec):
        raise ConfigError(f"{origin}: a prompt needs the keys {', '.join(sorted(need))}")
    try:
        jsonschema.validators.validator_for(spec["schema"]).check_schema(spec["schema"])
    except jsonschema.SchemaError as e:
        raise ConfigError(f"{origin}: invalid answer schema: {e.message}") from None
    return Prompt(str(spec["id"]), int(spec["version"]), str(spec.get("description", "")), str(spec["system"]),
                  str(spec["user"]), spec["schema"])


def quote_block(label: str, data: Any) -> str:
    """Quote trace text as data in an evidence block: ``<evidence name="LABEL">\n…json…\n</evidence>``.

    A list is written one JSON item per line, anything else as one JSON value; ``<`` and ``>`` are
    escaped (``\\u003c``/``\\u003e``), so the body decodes back to exactly ``data`` and can never
    contain the closing delimiter. Same format as ``trajaudit.llm.prompts.quote_evidence`` (the LLM
    layer's convention), so the same test tooling reads both.

    Raises:
        ValueError: ``label`` is not a word.
    """
    if not re.fullmatch(r"\w+", label):
        raise ValueError(f"evidence label must be a word, got {label!r}")
    if isinstance(data, list):
        body = "[\n" + ",\n".join(json.dumps(x, ensure_ascii=False) for x in data) + "\n]" if data else "[]"
    else:
        body = json.dumps(data, ensure_ascii=False)
    body = body.replace("<", "\\u003c").replace(">", "\\u003e")
    return f'<evidence name="{label}">\n{body}\n</evidence>'


def locate_quote(quote: str, text: str) -> tuple[int, int] | None:
    """Where ``quote`` occurs verbatim in ``text`` (whitespace runs may differ), else ``None``."""
    q = quote.strip()
    if not q:
        return None
    k = text.find(q)
    if k >= 0:
        return k, k + len(q)
    m = re.search(r"\s+".join(re.escape(t) for t in q.split()), text)
    return (m.start(), m.end()) if m else None


class LLMJudge:
    """Seed 003's LLM-as-a-judge routines over a :class:`ChatJSONClient`.

    Args:
        client: the LLM client (``chat_json``).
        max_attempts: span-extraction attempts before a hard failure (seed 003 App. B: 5).
        prompts: override prompts by name (``need_citation``, ``extract_spans``, ``entails``).

    Raises (from the methods):
        LLMError: the client failed, or span extraction never passed the verbatim/entailment check.
    """

    name = "llm"
    approximate = False

    def __init__(self, client: ChatJSONClient, *, max_attempts: int = 5, prompts: dict[str, Prompt] | None = None,
                 model: str | None = None) -> None:
        if max_attempts < 1:
            raise ConfigError("max_attempts must be at least 1")
        self.client = client
        self.max_attempts = max_attempts
        self.prompts = {n: load_prompt(n) for n in PROMPT_NAMES}
        self.prompts.update(prompts or {})
        versions = ", ".join(f"{p.id} v{p.version}" for p in self.prompts.values())
        self.description = f"LLM judge{' (' + model + ')' if model else ''}; prompts: {versions}"
        self._entails = lru_cache(maxsize=8192)(self._entails_uncached)
        self._needs = lru_cache(maxsize=8192)(self._needs_uncached)

    def _ask(self, prompt: Prompt, messages: list[dict[str, Any]]) -> dict[str, Any]:
        return self.client.chat_json(messages, prompt.schema, name=prompt.id)

    # -- need-citation ------------------------------------------------------------------------------
    def needs_citation(self, sentence: str, task: str = "") -> bool:
        """The need-citation test (one call, cached per sentence and task)."""
        return self._needs(sentence, task)

    def _needs_uncached(self, sentence: str, task: str) -> bool:
        p = self.prompts["need_citation"]
        ans = self._ask(p, p.render(task=quote_block("task", task), sentence=quote_block("sentence", sentence)))
        return bool(ans["needs_citation"])

    # -- entailment ---------------------------------------------------------------------------------
    def entails(self, premises: Sequence[str], hypothesis: str) -> bool:
        """ENTAILS: do the premises together entail the hypothesis? (cached; no premises → ``False``)."""
        if not premises:
            return False
        return self._entails(tuple(premises), hypothesis)

    def _entails_uncached(self, premises: tuple[str, ...], hypothesis: str) -> bool:
        p = self.prompts["entails"]
        items = [{"id": f"P{k + 1}", "text": t} for k, t in enumerate(premises)]
        ans = self._ask(p, p.render(premises=quote_block("premises", items),
                                    hypothesis=quote_block("hypothesis", hypothesis)))
        return bool(ans["entailed"])

    # -- span extraction ----------------------------------------------------------------------------
    def supporting_spans(self, sentence: str, units: Sequence[InputUnit]) -> list[Span]:
        """EXTRACTSUPPORTINGSPANS with the verbatim check and feedback retries (seed 003 App. A/B).

        Returns:
            Spans (deduplicated, in input order) located verbatim in the units, with their citations.

        Raises:
            LLMError: ``max_attempts`` answers failed the checks (the last problems are in the message).
        """
        if not units:
            return []
        p = self.prompts["extract_spans"]
        by_id = {f"E{k + 1}": u for k, u in enumerate(units)}
        items = [{"id": i, "text": u.text} for i, u in by_id.items()]
        messages: list[dict[str, Any]] = p.render(inputs=quote_block("inputs", items),
                                                  sentence=quote_block("sentence", sentence))
        problems: list[str] = []
        for attempt in range(1, self.max_attempts + 1):
            ans = self._ask(p, messages)
            spans, problems = self._check(ans, by_id)
            if not problems and ans.get("fully_supported") and not (spans and self.entails([s.text for s in spans],
                                                                                           sentence)):
                problems = ["you said the spans fully support the sentence, but together they do not entail it: "
                            "quote every supporting span, or answer fully_supported false"]
            if not problems:
                return spans
            log.info("span extraction attempt %d/%d rejected: %s", attempt, self.max_attempts, "; ".join(problems))
            feedback = ("Your answer was rejected:\n- " + "\n- ".join(problems)
                        + "\nAnswer again with the same JSON format. Quotes must be copied exactly from one input.")
            messages = [*messages, {"role": "assistant", "content": json.dumps(ans, ensure_ascii=False)},
                        {"role": "user", "content": feedback}]
        raise LLMError(f"span extraction failed after {self.max_attempts} attempts: {'; '.join(problems)}")

    @staticmethod
    def _check(ans: dict[str, Any], by_id: dict[str, InputUnit]) -> tuple[list[Span], list[str]]:
        spans: dict[tuple[int, int, int], Span] = {}
        problems = []
        for sp in ans.get("spans", []):
            unit = by_id.get(str(sp.get("id")))
            quote = str(sp.get("quote", ""))
            if unit is None:
                problems.append(f"unknown input id {sp.get('id')!r} (known: {', '.join(by_id)})")
                continue
            loc = locate_quote(quote, unit.text)
            if loc is None:
                problems.append(f"quote is not verbatim in input {sp.get('id')}: {quote[:120]!r}")
                continue
            spans[(unit.index, *loc)] = Span(unit, loc[0], loc[1], unit.citations_in(*loc))
        return [spans[k] for k in sorted(spans)], problems
