"""Reading what an endpoint sent back: the completion's text and usage counts, and the answer as JSON.

Model output and the endpoint's response are DATA: parsed and validated, never evaluated. Everything
here is defensive because "OpenAI-compatible" servers differ: a proxy or a web UI answering HTTP 200
with an HTML page (the ``openai`` package then returns the body as a ``str``), ``content`` given as a
list of parts, ``usage`` counts that are not numbers, ``NaN`` in the JSON, ``2.0`` for an integer.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from trajaudit import safe_json

_FENCE = re.compile(r"^```(?:json)?\s*\n?(.*?)\n?```$", re.DOTALL)


class NotACompletion(ValueError):
    """The endpoint's response is not a chat completion (the message says what it was)."""


def completion_parts(resp: Any) -> tuple[Any, str | None, str | None, tuple[int, int]]:
    """``(choice, content, refusal, (input_tokens, output_tokens))`` of a chat-completion response.

    ``choice``/``content``/``refusal`` are ``None`` when absent (no choices, a ``null`` message).
    ``content`` given as a list of parts (``[{"type": "text", "text": ...}]``) is joined; token counts
    that are not finite non-negative numbers count 0.

    Raises:
        NotACompletion: the response is not a chat completion at all (a text or HTML body, an object
            without ``choices``), or the content is neither text nor a list of text parts.
    """
    if isinstance(resp, (str, bytes)) or not hasattr(resp, "choices"):
        text = resp.decode("utf-8", "replace") if isinstance(resp, bytes) else str(resp)
        raise NotACompletion(f"not a chat completion but {type(resp).__name__} {_clip(text)!r}")
    choices = resp.choices if isinstance(resp.choices, list) else []
    choice = choices[0] if choices else None
    message = getattr(choice, "message", None)
    content = getattr(message, "content", None)
    if isinstance(content, list):
        parts = [p.get("text") if isinstance(p, dict) else getattr(p, "text", None) for p in content]
        if any(not isinstance(p, str) for p in parts):
            raise NotACompletion(f"the answer's content parts are not all text: {_clip(repr(content))}")
        content = "".join(parts)
    elif content is not None and not isinstance(content, str):
        raise NotACompletion(f"the answer's content is {type(content).__name__}, not text: {_clip(repr(content))}")
    refusal = getattr(message, "refusal", None)
    usage = getattr(resp, "usage", None)
    tokens = (_count(getattr(usage, "prompt_tokens", 0)), _count(getattr(usage, "completion_tokens", 0)))
    return (choice if message is not None else None), content, (str(refusal) if refusal else None), tokens


def parse_json_answer(content: str | None, validator: Any) -> tuple[dict[str, Any] | None, str | None]:
    """Parse a model answer as one JSON object and validate it.

    A single surrounding Markdown code fence is tolerated. Nothing in the answer is executed. An
    answer nested more than ``safe_json.MAX_DEPTH`` levels (a model stuck repeating ``[``) is an
    invalid answer like any other, not a ``RecursionError``. ``NaN``/``Infinity`` (not JSON; Python's
    parser accepts them, and a ``NaN`` confidence would pass ``minimum``/``maximum`` and be written
    into diagnoses.jsonl as invalid JSON) make the answer invalid. A float with no fractional part
    where the schema asks for an integer (``"critical_step": 2.0``, which JSON Schema counts as an
    integer) is returned as an ``int``, so strategies read step 2, not "no step number".

    Returns:
        ``(value, None)`` when valid, else ``(None, error text)``.
    """
    text = (content or "").strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    if not text:
        return None, "the answer was empty"
    try:
        value = safe_json.loads(text, allow_nan=False)
    except safe_json.NestedTooDeep as e:
        return None, f"the answer is not usable JSON: {e}"
    except json.JSONDecodeError as e:
        return None, f"the answer is not valid JSON ({e.msg} at line {e.lineno} column {e.colno})"
    except ValueError as e:  # NaN / Infinity
        return None, f"the answer is not valid JSON ({e})"
    if not isinstance(value, dict):
        return None, f"the answer must be a JSON object, got {type(value).__name__}"
    errors = list(validator.iter_errors(value))
    if errors:
        from jsonschema.exceptions import best_match

        e = best_match(errors)
        return None, f"the JSON does not match the schema at {e.json_path}: {e.message}"[:600]
    return _integral_ints(value, validator.schema), None


def clip_for_reask(content: str, limit: int) -> str:
    """``content`` as quoted back in a schema re-ask: whole up to ``limit`` characters, else its head
    and a note of how much was cut (a server ignoring ``max_tokens`` must not make the re-ask huge)."""
    if len(content) <= limit:
        return content
    return f"{content[:limit]}\n[… {len(content) - limit} more characters of this answer cut …]"


def _integral_ints(value: Any, schema: Any) -> Any:
    """``value`` with integral floats turned into ints where ``schema`` allows an integer but no
    other number (``properties``/``items`` followed; other keywords leave the value alone)."""
    if not isinstance(schema, dict):
        return value
    if isinstance(value, float):
        types = schema.get("type")
        types = [types] if isinstance(types, str) else (types or [])
        return int(value) if "integer" in types and "number" not in types and value.is_integer() else value
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        return {k: _integral_ints(v, props.get(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral_ints(v, schema.get("items")) for v in value]
    return value


def _count(v: Any) -> int:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
    return int(v) if ok else 0


def _clip(text: str, width: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
