"""Test support for the citation LLM path: a scripted responder (the "model") and a session with the
project's LLM client.

``Oracle(script)`` answers the three citation prompts from a fact table (tests/data/citation_oracle.yaml)
by reading the prompt's tag and its quoted evidence blocks — the way a model reads the prompt, but
deterministic. :func:`llm_session` starts the scripted OpenAI-protocol server (tests/llm_server.py) and
yields the real :class:`trajaudit.llm.LLMClient` pointed at it (HTTP through the ``openai`` package).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

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


@contextmanager
def llm_session(respond: Callable[[dict[str, Any]], Any], *, cache_path: str | None = None,
                max_retries: int = 0) -> Iterator[tuple[Any, Any]]:
    """A scripted OpenAI-protocol server on 127.0.0.1 answering with ``respond`` and an ``LLMClient`` for it.

    Yields ``(server, client)``; ``server.requests`` holds every request, ``client.usage`` counts them.
    No response cache unless ``cache_path`` is given; no transport retries unless ``max_retries``.
    """
    from llm_server import ScriptedLLMServer

    from trajaudit.llm import LLMClient, LLMConfig

    with ScriptedLLMServer(respond) as server:
        config = LLMConfig(base_url=server.base_url, model="scripted-model", api_key="test-key-not-secret",
                           timeout=10.0, max_retries=max_retries, cache_path=cache_path)
        with LLMClient(config) as client:
            yield server, client
