"""Shared CLI pieces: options, consoles, error reporting, exit codes.

Exit codes: 0 success; 1 findings at or above the requested level (or runs that failed in a batch);
2 usage or input errors.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any

import click
from rich.console import Console

from trajaudit.errors import Problem, TrajauditError

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


def console(err: bool = False) -> Console:
    """A rich console on click's (test-injectable) stdout or stderr."""
    stream = click.get_text_stream("stderr" if err else "stdout")
    return Console(file=stream, soft_wrap=False, width=None if stream.isatty() else 160, highlight=False)


def fail(message: str) -> None:
    """Print ``error: message`` to stderr and exit with code 2."""
    console(err=True).print(f"[bold red]error:[/] {message}", markup=True, highlight=False)
    sys.exit(EXIT_USAGE)


def report_problems(problems: list[Problem]) -> None:
    """Print skipped runs to stderr, one line each."""
    if not problems:
        return
    c = console(err=True)
    for p in problems:
        c.print(f"[yellow]skipped:[/] {p.message}", markup=True, highlight=False)


def format_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--format``/``--mapping`` input options to a command."""
    f = click.option("--mapping", "mapping", type=click.Path(exists=True, dir_okay=False),
                     help="YAML mapping of jmespath expressions for a custom trace format.")(f)
    f = click.option("--format", "fmt", metavar="NAME",
                     help="Force the input format (openai, tau, who_and_when, magentic); default: auto-detect.")(f)
    return f


def handle_errors(f: Callable[..., Any]) -> Callable[..., Any]:
    """Turn documented trajaudit errors into ``error: …`` + exit code 2 (never a traceback)."""
    import functools

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except (TrajauditError, LookupError) as e:
            fail(str(e.args[0]) if isinstance(e, LookupError) and e.args else str(e))

    return wrapper


# --- LLM endpoint options ----------------------------------------------------------------------------

DEFAULT_LLM_CACHE = "~/.cache/trajaudit/llm-cache.sqlite3"


@dataclasses.dataclass(frozen=True)
class LLMOptions:
    """The raw LLM options of a command (flags, or environment variables through the flags).

    Attributes:
        base_url, model, api_key: endpoint settings (``None`` = not given).
        config_file: a YAML/TOML file of :class:`~trajaudit.llm.config.LLMConfig` settings.
        cache: the sqlite cache path (``None`` = the config file's, else ``DEFAULT_LLM_CACHE``).
        no_cache: disable the cache.
    """

    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    config_file: str | None = None
    cache: str | None = None
    no_cache: bool = False


def llm_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Add the LLM endpoint options to a command; it receives them as one ``llm_opts: LLMOptions``.

    Options: ``--base-url`` (env ``TRAJAUDIT_BASE_URL``), ``--model`` (``TRAJAUDIT_MODEL``),
    ``--api-key`` (``OPENAI_API_KEY``), ``--llm-config FILE`` (``TRAJAUDIT_LLM_CONFIG``),
    ``--cache PATH`` (``TRAJAUDIT_LLM_CACHE``), ``--no-cache``. Flags beat environment variables,
    which beat the config file. Build the client with :func:`client_from_options` only when an LLM
    is needed.
    """
    import functools

    names = ("llm_base_url", "llm_model", "llm_api_key", "llm_config", "llm_cache", "llm_no_cache")

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        vals = [kwargs.pop(n) for n in names]
        kwargs["llm_opts"] = LLMOptions(*vals[:5], no_cache=bool(vals[5]))
        return f(*args, **kwargs)

    wrapper = click.option("--no-cache", "llm_no_cache", is_flag=True,
                           help="Do not read or write the LLM response cache.")(wrapper)
    wrapper = click.option("--cache", "llm_cache", metavar="PATH", envvar="TRAJAUDIT_LLM_CACHE", show_envvar=True,
                           help=f"sqlite file caching LLM answers (default {DEFAULT_LLM_CACHE}).")(wrapper)
    wrapper = click.option("--llm-config", "llm_config", metavar="FILE", envvar="TRAJAUDIT_LLM_CONFIG",
                           show_envvar=True, type=click.Path(dir_okay=False),
                           help="YAML or TOML file of LLM settings (base_url, model, temperature, "
                                "max_tokens, timeout, max_retries, concurrency, context_chars, ...).")(wrapper)
    wrapper = click.option("--api-key", "llm_api_key", metavar="KEY", envvar="OPENAI_API_KEY", show_envvar=True,
                           help="API key for the endpoint (local servers need none).")(wrapper)
    wrapper = click.option("--model", "llm_model", metavar="NAME", envvar="TRAJAUDIT_MODEL", show_envvar=True,
                           help="Model name at the endpoint.")(wrapper)
    wrapper = click.option("--base-url", "llm_base_url", metavar="URL", envvar="TRAJAUDIT_BASE_URL",
                           show_envvar=True,
                           help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1.")(wrapper)
    return wrapper


def llm_config_from_options(opts: LLMOptions, *, use_cache: bool = True) -> Any:
    """The :class:`~trajaudit.llm.config.LLMConfig` for ``opts``.

    Raises:
        ConfigError: no endpoint configured (the message names the flags and variables and suggests
            ``--strategy offline``), or a bad config file.
    """
    import os

    from trajaudit.llm.config import build_config, load_config_file

    file_values = load_config_file(opts.config_file) if opts.config_file else {}
    if opts.no_cache or not use_cache:
        cache = None
    else:
        cache = os.path.expanduser(opts.cache or file_values.get("cache_path") or DEFAULT_LLM_CACHE)
    values = {"base_url": opts.base_url, "model": opts.model, "api_key": opts.api_key}
    config = build_config(values, config_file=opts.config_file)
    return dataclasses.replace(config, cache_path=cache)


def client_from_options(opts: LLMOptions, *, use_cache: bool = True) -> Any:
    """An :class:`~trajaudit.llm.client.LLMClient` built from ``opts`` (see :func:`llm_config_from_options`).

    Raises:
        ConfigError: as :func:`llm_config_from_options`; ``openai`` missing; the cache cannot be opened.
    """
    from trajaudit.llm.client import LLMClient

    return LLMClient(llm_config_from_options(opts, use_cache=use_cache))


def llm_configured(opts: LLMOptions) -> bool:
    """Whether the user gave any endpoint setting (a flag, its environment variable, or a config file)."""
    return bool(opts.base_url or opts.model or opts.config_file)


def llm_config_for(opts: LLMOptions, *, needed: bool, wanted: bool = False, what: str = "this command") -> Any:
    """The LLM configuration a command should use, or ``None``.

    Args:
        needed: an LLM is required (an LLM strategy): a missing endpoint is a ``ConfigError``.
        wanted: an LLM is used when configured (e.g. ``--repair``), else ``None``.
        what: named in the error (``"strategy 'agentrx'"``).

    Raises:
        ConfigError: needed and not configured (the message names the flags and variables and
            suggests ``--strategy offline``), or a bad config file.
    """
    from trajaudit.errors import ConfigError

    if not needed and not (wanted and llm_configured(opts)):
        return None
    try:
        return llm_config_from_options(opts)
    except ConfigError as e:
        raise ConfigError(f"{what} needs an LLM; {e}") from None
