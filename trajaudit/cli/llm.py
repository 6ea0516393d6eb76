"""``trajaudit llm …``: LLM endpoint utilities (``ping``)."""

from __future__ import annotations

import click

from trajaudit.cli.common import LLMOptions, client_from_options, console, handle_errors, llm_options


@click.group("llm")
def llm() -> None:
    """LLM endpoint utilities (any OpenAI-compatible server)."""


@llm.command("ping")
@llm_options
@handle_errors
def ping(llm_opts: LLMOptions) -> None:
    """Check that the endpoint answers: list its models, make one tiny chat call, print the latency.

    Exit code 0 when it answered, 2 when it is not configured or not reachable.
    """
    with client_from_options(llm_opts, use_cache=False,
                             without_llm="`llm ping` checks an endpoint, so it needs one.") as client:
        info = client.ping()
    out = console()
    out.print(f"ok  {info['base_url']}  model {info['model']}  latency {info['latency_s']:.3f} s")
    out.print(f"served models: {', '.join(info['served_models']) or '(none listed)'}")
    out.print(f"reply: {info['reply']!r}")
