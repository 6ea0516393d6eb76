"""LLM endpoint configuration: one frozen :class:`LLMConfig`, built explicitly.

The library never reads environment variables: the CLI gathers flags and environment (click's
``envvar=``) and an optional config file, then calls :func:`build_config`. Precedence, highest
first: explicit values (flags, or environment through the flags) > the config file > defaults.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import trajaudit
from trajaudit import regular_files
from trajaudit.errors import ArgumentTypeError, ConfigError

if TYPE_CHECKING:
    import trajaudit.safe_yaml  # noqa: F401 - the attribute's type for mypy (loaded on first use)

StructuredMode = Literal["auto", "json_schema", "json_object"]

#: The last sentence of :data:`NO_ENDPOINT_HELP` (the CLI replaces it with per-command advice).
OFFLINE_ADVICE = 'Without an LLM, use the offline strategy (--strategy offline; strategy="offline" in the Python API).'
NO_ENDPOINT_HELP = (
    "no LLM endpoint configured: pass --base-url URL and --model NAME (or set TRAJAUDIT_BASE_URL and "
    "TRAJAUDIT_MODEL, or give --llm-config FILE with base_url and model); the API key comes from "
    "--api-key or OPENAI_API_KEY. " + OFFLINE_ADVICE
)


@dataclass(frozen=True)
class LLMConfig:
    """Everything the LLM client needs; explicit, frozen, no hidden defaults read from the environment.

    Attributes:
        base_url: OpenAI-compatible endpoint, e.g. ``http://127.0.0.1:8080/v1`` or
            ``https://api.openai.com/v1``.
        model: model name sent with each request (also part of the cache key).
        api_key: bearer token; local servers accept any non-empty string.
        temperature: sampling temperature (0 for reproducible audits).
        max_tokens: maximum output tokens per call.
        timeout: seconds per HTTP request before it is abandoned (and retried).
        max_retries: retries of one request on 408/409/429/5xx/connection errors/timeouts, done by the
            ``openai`` client with exponential backoff honouring ``Retry-After``.
        concurrency: maximum simultaneous requests from one client (batches use a thread pool of
            this size and every request takes a semaphore slot).
        cache_path: sqlite file of the response cache, or ``None`` for no cache.
        context_chars: prompt budget in characters (tokenizer-free; ~3-4 characters per token).
            Evidence longer than this is cut and the cut is reported, never silent.
        structured: ``json_schema`` (structured outputs), ``json_object`` (JSON mode + the schema in
            the prompt), or ``auto`` (json_schema, falling back to json_object when the server
            rejects it with HTTP 400/422).
        seed: sampling seed sent to the server, or ``None``.
    """

    base_url: str
    model: str
    api_key: str = "not-needed"
    temperature: float = 0.0
    max_tokens: int = 1024
    timeout: float = 120.0
    max_retries: int = 3
    concurrency: int = 4
    cache_path: str | None = None
    context_chars: int = 100_000
    structured: StructuredMode = "auto"
    seed: int | None = None

    def __post_init__(self) -> None:
        problems = []
        if not self.base_url or not self.base_url.startswith(("http://", "https://")):
            problems.append(f"base_url must be an http(s) URL, got {self.base_url!r}")
        if not self.model:
            problems.append("model must be non-empty")
        problems.extend(out_of_bounds(self))
        if self.structured not in ("auto", "json_schema", "json_object"):
            problems.append(f"structured must be auto, json_schema or json_object, got {self.structured!r}")
        if problems:
            raise ConfigError("invalid LLM configuration: " + "; ".join(problems))

    def public(self) -> dict[str, Any]:
        """The configuration as a dict with the API key masked (for logs and reports)."""
        d = dataclasses.asdict(self)
        d["api_key"] = "***" if self.api_key else ""
        return d


#: The bounds of every numeric setting, ``name: (lowest, highest, unit)`` (both included; ``timeout``
#: must also be > 0). A setting outside them is a ConfigError naming the setting, the value and the
#: bounds: ``max_retries: 1000000000`` against an endpoint answering 429 kept a batch on its first run
#: forever.
BOUNDS: dict[str, tuple[float, float, str]] = {
    "temperature": (0.0, 2.0, ""),
    "max_tokens": (1, 1_000_000, " tokens"),
    "timeout": (0.0, 3600.0, " s"),
    "max_retries": (0, 20, ""),
    "concurrency": (1, 64, ""),
    "context_chars": (1000, 100_000_000, " characters"),
    "seed": (-(2**63), 2**63 - 1, ""),
}


def out_of_bounds(config: LLMConfig) -> list[str]:
    """The messages for the numeric settings of ``config`` outside :data:`BOUNDS` (empty when all fit)."""
    import math

    problems = []
    for name, (low, high, unit) in BOUNDS.items():
        value = getattr(config, name)
        if value is None and name == "seed":
            continue
        bad = not isinstance(value, (int, float)) or isinstance(value, bool) or \
            (isinstance(value, float) and not math.isfinite(value)) or not low <= value <= high or \
            (name == "timeout" and value <= 0)
        if bad:
            lo = "more than 0" if name == "timeout" else f"{low:g}"
            problems.append(f"{name} must be between {lo} and {high:g}{unit}, got {value!r}")
    return problems


_FIELDS = {f.name: f for f in dataclasses.fields(LLMConfig)}
_TYPES: dict[str, type | tuple[type, ...]] = {
    "base_url": str, "model": str, "api_key": str, "temperature": (int, float), "max_tokens": int,
    "timeout": (int, float), "max_retries": int, "concurrency": int, "cache_path": str,
    "context_chars": int, "structured": str, "seed": int,
}


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read LLM settings from a YAML (``.yaml``/``.yml``) or TOML (``.toml``) file.

    The file is a mapping of :class:`LLMConfig` field names, optionally nested under an ``llm`` key.

    Returns:
        The settings dict (keys checked against the fields, types checked).

    Raises:
        ConfigError: unreadable file, bad syntax, unknown keys (close matches suggested), bad types.
    """
    import tomllib  # only where a config file is read (tomllib compiles its regexes at import, ~2 ms)

    import yaml  # likewise (an audit without a config file imports no PyYAML)

    p = Path(path)
    try:
        text = regular_files.read_text(p)
    except OSError as e:
        raise ConfigError(f"{p}: cannot read the LLM config file: {e.strerror or e}") from None
    try:
        data = tomllib.loads(text) if p.suffix.lower() == ".toml" else trajaudit.safe_yaml.load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: {trajaudit.safe_yaml.describe(e)}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: not valid TOML: {e}") from None
    except RecursionError:  # tomllib recurses per level of nesting (YAML is guarded by safe_yaml)
        raise ConfigError(f"{p}: not valid TOML: nested too deeply") from None
    except ValueError as e:  # tomllib: an integer beyond Python's int-conversion limit (YAML: safe_yaml)
        raise ConfigError(f"{p}: not valid TOML: {e}") from None
    if data is None:
        data = {}
    if isinstance(data, dict) and isinstance(data.get("llm"), dict):
        data = data["llm"]
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: the LLM config must be a mapping of settings")
    import difflib

    for key, value in data.items():
        if key not in _FIELDS:
            near = difflib.get_close_matches(str(key), list(_FIELDS), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else f" (known: {', '.join(_FIELDS)})"
            raise ConfigError(f"{p}: unknown LLM setting {key!r}{hint}")
        if value is not None and (isinstance(value, bool) or not isinstance(value, _TYPES[key])):
            raise ConfigError(f"{p}: setting {key!r} has the wrong type ({type(value).__name__})")
    return dict(data)


def build_config(values: dict[str, Any] | None = None, *, config_file: str | Path | None = None) -> LLMConfig:
    """Build an :class:`LLMConfig` from explicit values over an optional config file.

    Args:
        values: field name -> value; ``None`` values mean "not given" and do not override the file.
        config_file: optional YAML/TOML file (see :func:`load_config_file`).

    Raises:
        ConfigError: no endpoint (``base_url``/``model`` missing) — the message names the flags and
            environment variables and suggests ``--strategy offline`` — or invalid settings.
    """
    merged: dict[str, Any] = load_config_file(config_file) if config_file else {}
    for key, value in (values or {}).items():
        if key not in _FIELDS:
            raise ConfigError(f"unknown LLM setting {key!r}")
        if value is not None:
            merged[key] = value
    merged = {k: v for k, v in merged.items() if v is not None}
    if not merged.get("base_url") or not merged.get("model"):
        missing = [k for k in ("base_url", "model") if not merged.get(k)]
        raise ConfigError(f"{NO_ENDPOINT_HELP} (missing: {', '.join(missing)})")
    try:
        return LLMConfig(**merged)
    except ConfigError as e:
        raise ConfigError(f"{config_file}: {e}" if config_file else str(e)) from None


def check_llm(function: str, value: Any) -> Any:
    """``llm``: ``None`` or a :class:`trajaudit.llm.LLMConfig`.

    Raises:
        ArgumentTypeError: anything else (e.g. a URL string).
    """
    if value is None:
        return None
    if not isinstance(value, LLMConfig):
        raise ArgumentTypeError(function, "llm", value, "None or a trajaudit.llm.LLMConfig "
                                "(e.g. trajaudit.llm.build_config({'base_url': URL, 'model': NAME}))")
    return value
