"""Test support for the citation LLM path: a scripted responder (the "model") and a JSON chat client.

``Oracle(script)`` answers the three citation prompts from a fact table (tests/data/citation_oracle.yaml)
by reading the prompt's tag and its quoted evidence blocks — the way a model reads the prompt, but
deterministic. ``OpenAIJSONClient`` implements ``chat_json`` over the real ``openai`` package talking HTTP
to the scripted server (a stand-in until the project's ``trajaudit.llm`` client lands).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from trajaudit.errors import LLMError

ORACLE_FILE = Path(__file__).parent / "data" / "citation_oracle.yaml"
_TAG = re.compile(r"\[trajaudit prompt (citation\.[\w-]+) v\d+\]")
_BLOCK = re.compile(r'<evidence name="(\w+)">\n(.*?)\n</evidence>', re.S)


def blocks(text: str) -> dict[str, Any]:
    """The evidence blocks of a prompt, decoded: label -> JSON value."""
    return {m.group(1): json.loads(m.group(2)) for m in _BLOCK.finditer(text)}


class Oracle:
    """Answers need-citation / extract-spans / entails requests from a fact table."""

    def __init__(self, script: dict[str, Any] | None = None) -> None:
        script = script or yaml.safe_load(ORACLE_FILE.read_text(encoding="utf-8"))
        self.facts: dict[str, list[str]] = script["facts"]
        self.claims: dict[str, list[str]] = script["claims"]
        self.no_citation = set(script.get("no_citation_needed", []))
        self.unknown_claims: list[str] = []

    def _facts_of(self, claim: str) -> list[list[str]]:
        if claim not in self.claims:
            self.unknown_claims.append(claim)
            return [[]]  # an unknown claim is supported by nothing
        return [self.facts[f] for f in self.claims[claim]]

    @staticmethod
    def _find(alts: list[str], text: str) -> str | None:
        for alt in alts:
            k = text.lower().find(alt.lower())
            if k >= 0:
                return text[k:k + len(alt)]
        return None

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        system = request["messages"][0]["content"]
        user = request["messages"][1]["content"]
        kind = _TAG.search(system).group(1)
        b = blocks(user)
        if kind == "citation.need-citation":
            s = b["sentence"]
            return {"needs_citation": s not in self.no_citation, "reason": "scripted"}
        if kind == "citation.entails":
            texts = [p["text"] for p in b["premises"]]
            facts = self._facts_of(b["hypothesis"])
            ok = all(any(self._find(alts, t) for t in texts) for alts in facts)
            return {"entailed": ok, "reason": "scripted"}
        if kind == "citation.extract-spans":
            facts = self._facts_of(b["sentence"])
            spans, found = [], []
            for alts in facts:
                hits = [(e["id"], q) for e in b["inputs"] if (q := self._find(alts, e["text"]))]
                spans += [{"id": i, "quote": q} for i, q in hits]
                found.append(bool(hits))
            return {"spans": spans, "fully_supported": all(found)}
        raise ValueError(f"unscripted prompt {kind}")


class OpenAIJSONClient:
    """``chat_json`` over the real ``openai`` client (HTTP to ``base_url``), validating the JSON answer."""

    def __init__(self, base_url: str, *, attempts: int = 2) -> None:
        import openai

        self._openai = openai
        self._client = openai.OpenAI(base_url=base_url, api_key="test-key-not-secret", max_retries=0, timeout=10)
        self.attempts = attempts
        self.calls = 0

    def chat_json(self, messages: list[dict[str, Any]], schema: dict[str, Any], *, name: str) -> dict[str, Any]:
        msgs = list(messages)
        last = ""
        for _ in range(self.attempts):
            self.calls += 1
            try:
                r = self._client.chat.completions.create(
                    model="scripted", messages=msgs, temperature=0,
                    response_format={"type": "json_schema",
                                     "json_schema": {"name": re.sub(r"[^\w-]", "_", name), "schema": schema}})
            except self._openai.OpenAIError as e:
                raise LLMError(f"{name}: {e}") from None
            content = r.choices[0].message.content or ""
            try:
                obj = json.loads(content)
                jsonschema.validate(obj, schema)
                return obj
            except (ValueError, jsonschema.ValidationError) as e:
                last = str(e).splitlines()[0]
                msgs = [*msgs, {"role": "assistant", "content": content},
                        {"role": "user", "content": f"Invalid answer ({last}); answer with JSON matching the schema."}]
        raise LLMError(f"{name}: no valid JSON answer after {self.attempts} attempts: {last}")


@contextmanager
def llm_session(respond: Callable[[dict[str, Any]], Any]) -> Iterator[tuple[Any, OpenAIJSONClient]]:
    """A scripted OpenAI-protocol server on 127.0.0.1 answering with ``respond`` and a client for it.

    Yields ``(server, client)``; ``server.requests`` holds every request. The one place to switch to the
    LLM layer's server and ``trajaudit.llm.LLMClient`` when they land in main.
    """
    from llm_server import ScriptedLLMServer

    with ScriptedLLMServer(respond) as server:
        yield server, OpenAIJSONClient(server.base_url)
