"""Prompts as versioned data files, rendered safely, with trace content quoted as evidence.

Each prompt is ``trajaudit/llm/prompts/<name>.yaml`` with ``name``, ``version``, optional
``description``, ``system`` and ``user`` templates, ``evidence_fields`` and an optional answer
``schema``. Templates use :class:`string.Template` (``${field}``; no attribute access, no code).

Trace content is DATA. Every field listed in ``evidence_fields`` is passed through
:func:`quote_evidence`: JSON-encoded, with ``<`` and ``>`` escaped as ``\\u003c``/``\\u003e`` so the
closing delimiter can never appear inside, and wrapped in ``<evidence name="…">…</evidence>``.
The system prompts say evidence blocks are data, never instructions. Other fields are the
program's own text and may not contain an evidence delimiter.
"""

from __future__ import annotations

import json
import re
import string
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import yaml

from trajaudit.errors import ConfigError

_EVIDENCE_RE = re.compile(r'<evidence name="(\w+)">\n(.*?)\n</evidence>', re.DOTALL)
_DELIM_RE = re.compile(r"</?evidence\b", re.IGNORECASE)
_LABEL_RE = re.compile(r"^\w+$")


def quote_evidence(data: Any, label: str = "evidence") -> str:
    """Quote ``data`` (any JSON-serializable value) as an evidence block.

    A list is written one JSON item per line; anything else as one JSON value. ``<`` and ``>`` are
    escaped, so the text between the delimiters decodes back to exactly ``data`` and cannot close
    the block early.

    Args:
        data: the evidence (strings, step records, outlines…).
        label: a word naming the block (``[A-Za-z0-9_]+``).

    Returns:
        ``'<evidence name="LABEL">\\n…json…\\n</evidence>'``.

    Raises:
        ValueError: ``label`` is not a word.
    """
    if not _LABEL_RE.match(label):
        raise ValueError(f"evidence label must be a word, got {label!r}")
    if isinstance(data, list):
        body = "[\n" + ",\n".join(json.dumps(x, ensure_ascii=False, default=str) for x in data) + "\n]" \
            if data else "[]"
    else:
        body = json.dumps(data, ensure_ascii=False, default=str)
    body = body.replace("<", "\\u003c").replace(">", "\\u003e")
    return f'<evidence name="{label}">\n{body}\n</evidence>'


def extract_evidence(text: str) -> dict[str, Any]:
    """Decode the evidence blocks in ``text`` (inverse of :func:`quote_evidence`): ``{label: data}``."""
    return {m.group(1): json.loads(m.group(2)) for m in _EVIDENCE_RE.finditer(text)}


@dataclass(frozen=True)
class Prompt:
    """A loaded prompt file.

    Attributes:
        name: the file stem.
        version: an integer bumped whenever the wording changes; strategies record the versions
            they used in ``Diagnosis.metadata["prompts"]`` (the cache key follows the rendered text).
        system, user: ``string.Template`` texts (``${field}``); ``system`` may be empty.
        evidence_fields: fields quoted with :func:`quote_evidence`.
        schema: the answer's JSON Schema, or ``None`` for free text.
        description: what the prompt is for.
    """

    name: str
    version: int
    user: str
    system: str = ""
    evidence_fields: tuple[str, ...] = ()
    schema: dict[str, Any] | None = None
    description: str = ""
    fields: tuple[str, ...] = field(default=())

    def render(self, **data: Any) -> list[dict[str, str]]:
        """Render to chat messages ``[{"role": "system", …}, {"role": "user", …}]``.

        Args:
            data: one value per template field. Evidence fields take any JSON-serializable value;
                other fields take text, numbers, or JSON-serializable values (JSON-encoded).

        Raises:
            ConfigError: a field is missing or unknown.
            ValueError: a non-evidence value contains an evidence delimiter (trace text must be
                passed as an evidence field).
        """
        missing = [f for f in self.fields if f not in data]
        unknown = [f for f in data if f not in self.fields]
        if missing or unknown:
            raise ConfigError(f"prompt {self.name!r} v{self.version}: missing fields {missing}, unknown fields {unknown}")
        values: dict[str, str] = {}
        for key, value in data.items():
            if key in self.evidence_fields:
                values[key] = quote_evidence(value, key)
                continue
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
            if _DELIM_RE.search(text):
                raise ValueError(f"prompt {self.name!r}: field {key!r} contains an evidence delimiter; "
                                 "pass trace content as an evidence field")
            values[key] = text
        messages = []
        if self.system.strip():
            messages.append({"role": "system", "content": string.Template(self.system).substitute(values).strip()})
        messages.append({"role": "user", "content": string.Template(self.user).substitute(values).strip()})
        return messages


@cache
def load_prompt(name: str) -> Prompt:
    """Load ``trajaudit/llm/prompts/<name>.yaml`` (cached).

    Raises:
        ConfigError: no such prompt, bad YAML, or a malformed prompt file.
    """
    if not _LABEL_RE.match(name):
        raise ConfigError(f"bad prompt name {name!r}")
    res = resources.files("trajaudit.llm").joinpath("prompts", f"{name}.yaml")
    try:
        doc = yaml.safe_load(res.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"no prompt named {name!r} in trajaudit/llm/prompts/") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"prompt {name}.yaml: bad YAML: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("user"), str) or not isinstance(doc.get("version"), int):
        raise ConfigError(f"prompt {name}.yaml: needs an integer 'version' and a 'user' template")
    system = doc.get("system") or ""
    fields: list[str] = []
    for tmpl in (system, doc["user"]):
        t = string.Template(tmpl)
        if not t.is_valid():
            raise ConfigError(f"prompt {name}.yaml: invalid ${{…}} placeholder")
        fields += [f for f in t.get_identifiers() if f not in fields]
    evidence = tuple(doc.get("evidence_fields") or ())
    if any(f not in fields for f in evidence):
        raise ConfigError(f"prompt {name}.yaml: evidence_fields {list(evidence)} not all used in the templates")
    return Prompt(name=name, version=doc["version"], user=doc["user"], system=system, evidence_fields=evidence,
                  schema=doc.get("schema"), description=doc.get("description", ""), fields=tuple(fields))


def render_prompt(name: str, **data: Any) -> list[dict[str, str]]:
    """Load prompt ``name`` and render it with ``data`` (see :meth:`Prompt.render`)."""
    return load_prompt(name).render(**data)
