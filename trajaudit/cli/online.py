"""``trajaudit watch`` (follow a growing JSONL run) and ``trajaudit guard`` (the guardrail proxy)."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.markup import escape

from trajaudit.cli.common import EXIT_FINDINGS, check_can_listen, console, fail, handle_errors
from trajaudit.engine.run.monitor import Monitor
from trajaudit.engine.run.pipeline import AuditSpec, build_context
from trajaudit.engine.validation_log import Record, severity_rank
from trajaudit.online.guard import Guard, build_app, serve
from trajaudit.online.watch import END_MARKER, watch

_SEVERITIES = ["info", "warning", "error", "critical"]


def _spec(packs: tuple[str, ...], tools: str | None) -> AuditSpec:
    return AuditSpec(rules=tuple(packs), tools=tools)


@click.command("watch")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--rules", "packs", multiple=True, metavar="PACK",
              help="An extra rule pack (YAML file or shipped name; repeatable). The default packs always apply.")
@click.option("--tools", "tools_file", type=click.Path(exists=True, dir_okay=False),
              help="JSON list of OpenAI function schemas (SCHEMA rules).")
@click.option("--format", "out_format", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="table: one console line per violation; json: one JSON object per line (violations, alarm, end).")
@click.option("--until-idle", type=click.FloatRange(min=0), metavar="SECONDS",
              help="End the run after this many seconds without a new line, counting the wait for a FILE not "
                   "created yet (default: wait for the end marker or for the file to be removed or renamed).")
@click.option("--fail-on", type=click.Choice(_SEVERITIES), default="error", show_default=True,
              help="Exit 1 when a violation at or above this severity was settled (or a line was skipped).")
@click.option("--stop-on-alarm", is_flag=True,
              help="Stop when the prefix judge raises its alarm (estimate based on a finding, confidence >= threshold).")
@click.option("--alarm-threshold", type=click.FloatRange(0, 1), default=0.6, show_default=True,
              help="Confidence of the alarm (0 to 1).")
@click.option("--poll", type=click.FloatRange(min=0.01), default=0.1, show_default=True, help="Seconds between reads at the end of the file.")
@handle_errors
def watch_cmd(file: str, packs: tuple[str, ...], tools_file: str | None, out_format: str, until_idle: float | None,
              fail_on: str, stop_on_alarm: bool, alarm_threshold: float, poll: float) -> None:
    """Follow FILE, a growing JSONL file of one run's messages, and print each violation as it is settled.

    Each line: an OpenAI chat message, {"message": {...}}, or {"step": {...}} (an IR step). The run
    ends at the line {"trajaudit": "end"}, when FILE is removed or renamed, or after --until-idle
    seconds without a new line; the end-of-run rules are then settled. A FILE that does not exist yet
    is waited for (like `tail -F`; --until-idle counts the wait), as long as its directory exists.
    Exit codes as `check`: 0 no violation at or above --fail-on, 1 one (or a line skipped, the alarm
    stopped the run, or FILE was never created), 2 usage (e.g. FILE's directory does not exist).

    \b
    Examples:
      trajaudit watch run.jsonl --until-idle 30
      trajaudit watch run.jsonl --rules examples/rules/guard_policies.yaml --format json --stop-on-alarm
    """
    parent = Path(file).parent
    if not parent.is_dir():
        fail(f"cannot watch {file}: its directory {parent} does not exist")
    ctx = build_context(_spec(packs, tools_file))
    monitor = Monitor(context=ctx, run_id=Path(file).stem, alarm_threshold=alarm_threshold, freeze_gc=True)
    out, err = console(), console(err=True)
    floor = severity_rank(fail_on)
    bad = 0

    def show(records: list[Record]) -> None:
        nonlocal bad
        for r in records:
            if r.verdict != "fail":
                continue
            if severity_rank(r.severity) >= floor:
                bad += 1
            if out_format == "json":
                click.echo(json.dumps({"event": "violation", **r.to_dict()}, ensure_ascii=False, default=str))
            else:
                out.print(f"[bold red]FAIL[/] step {r.step:>4}  {escape(r.rule_id)}  [dim]({escape(r.severity)})[/]  ",
                          end="", soft_wrap=True, markup=True)
                out.print(r.message, markup=False, highlight=False, soft_wrap=True)

    def skipped(n: int, why: str) -> None:
        if out_format == "json":
            click.echo(json.dumps({"event": "skipped", "line": n, "error": why}, ensure_ascii=False))
        err.print(f"skipped: {file}:{n}: {why}", markup=False, highlight=False, soft_wrap=True)

    def alarm(m: Monitor) -> None:
        d = m.diagnosis()
        info = {"event": "alarm", "step": m.alarm, "critical_step": d.critical_step if d else None,
                "category": d.category if d else None, "confidence": d.confidence if d else None}
        if out_format == "json":
            click.echo(json.dumps(info, ensure_ascii=False))
        else:
            out.print(f"[bold magenta]ALARM[/] at step {m.alarm}: critical step {info['critical_step']} "
                      f"({escape(str(info['category']))}, confidence {info['confidence']}); the run is stopped",
                      soft_wrap=True, markup=True)

    def waiting() -> None:
        err.print(f"{file} does not exist yet: waiting for it to be created"
                  + (f" (at most {until_idle:g} s, --until-idle)" if until_idle is not None else " (Ctrl-C to stop)"),
                  markup=False, highlight=False, soft_wrap=True)

    err.print(f"watching {file} ({len(monitor.context.rules)} rule(s); domain packs join when their tools are called)",
              markup=False, highlight=False, soft_wrap=True)
    try:
        res = watch(file, monitor, until_idle=until_idle, stop_on_alarm=stop_on_alarm, on_records=show,
                    on_skip=skipped, on_alarm=alarm, poll=poll, on_wait=waiting)
    finally:
        monitor.release()  # the collector sees the run's state again (freeze_gc), even when interrupted
    total = sum(1 for r in monitor.log.records if r.verdict == "fail")
    summary = {"event": "end", "reason": res.reason, "steps": len(monitor.steps), "violations": total,
               "at_or_above": bad, "skipped_lines": len(res.skipped)}
    if out_format == "json":
        click.echo(json.dumps(summary))
    err.print(f"{file}: run ended ({res.reason}) after {len(monitor.steps)} step(s): {total} violation(s), "
              f"{bad} at or above {fail_on}" + (f"; {len(res.skipped)} line(s) skipped" if res.skipped else ""),
              markup=False, highlight=False, soft_wrap=True)
    if res.reason == "missing":
        err.print(f"{file} was never created: nothing was checked", markup=False, highlight=False, soft_wrap=True)
    if bad or res.skipped or res.reason in ("alarm", "missing"):
        raise SystemExit(EXIT_FINDINGS)


@click.command("guard")
@click.option("--upstream", required=True, metavar="URL",
              help="The OpenAI-compatible endpoint to forward to (base URL, e.g. http://127.0.0.1:8000/v1).")
@click.option("--rules", "packs", multiple=True, metavar="PACK",
              help="An extra rule pack (repeatable), added to the default packs (which always apply, as in `audit`).")
@click.option("--tools", "tools_file", type=click.Path(exists=True, dir_okay=False),
              help="JSON list of OpenAI function schemas: SCHEMA rules, and a call to an undeclared tool is a violation.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(1, 65535), default=8787, show_default=True,
              help="Port to listen on (a port in use is a usage error, exit 2).")
@click.option("--mode", type=click.Choice(["block", "annotate"]), default="block", show_default=True,
              help="block: replace a violating answer by a message naming the rule; annotate: pass it with headers.")
@click.option("--block-status", type=int, metavar="4XX",
              help="In block mode, answer this HTTP status with a JSON violation body instead of a message.")
@click.option("--block-on", type=click.Choice(_SEVERITIES), default="error", show_default=True,
              help="Lowest severity of a failure that blocks.")
@click.option("--log", "log_path", type=click.Path(dir_okay=False), default="trajaudit-guard.jsonl", show_default=True,
              help="Append every decision here (JSONL: run_key, step, rule, verdict, evidence, decision).")
@click.option("--stop-on-alarm", is_flag=True, help="Block every answer once the prefix judge raises its alarm.")
@click.option("--alarm-threshold", type=click.FloatRange(0, 1), default=0.6, show_default=True,
              help="Confidence of the alarm (0 to 1).")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds to wait for the upstream (then 504).")
@click.option("--cache-size", type=click.IntRange(min=0), default=128, show_default=True,
              help="Conversations whose rule state is kept: a request extending one adds only its new messages "
                   "(0: every request re-reads its whole conversation).")
@click.option("--cache-idle", type=click.FloatRange(min=0, min_open=True), default=600.0, show_default=True,
              metavar="SECONDS", help="A kept conversation unused this long is dropped.")
@handle_errors
def guard_cmd(upstream: str, packs: tuple[str, ...], tools_file: str | None, host: str, port: int, mode: str,
              block_status: int | None, block_on: str, log_path: str, stop_on_alarm: bool, alarm_threshold: float,
              timeout: float, cache_size: int, cache_idle: float) -> None:
    """Serve an OpenAI-compatible proxy that checks each answer's tool calls before the agent gets them.

    Point the agent's client at http://HOST:PORT/v1. Each chat-completions request is forwarded to
    --upstream; the conversation is rebuilt from the request's messages and the answer is checked
    by the rules. Streaming is supported (the stream is read to the end before the decision).
    Needs the extra: pip install 'trajaudit[guard]'.

    \b
    Examples:
      trajaudit guard --upstream http://127.0.0.1:8000/v1
      trajaudit guard --upstream https://llm.internal/v1 --rules examples/rules/guard_policies.yaml --mode annotate
    """
    if block_status is not None and not 400 <= block_status <= 499:
        fail(f"--block-status must be a 4xx status, got {block_status}")
    check_can_listen(host, port)  # before the rules are built: a port in use is said in words, exit 2
    try:  # a decision log that cannot be written is said now, not as a failed request later
        with open(log_path, "a", encoding="utf-8"):
            pass
    except OSError as e:
        fail(f"cannot write the decision log --log {log_path}: {e.strerror or e}")
    ctx = build_context(_spec(packs, tools_file))
    g = Guard(ctx, mode=mode, block_on=block_on, block_status=block_status, stop_on_alarm=stop_on_alarm,
              alarm_threshold=alarm_threshold, log_path=log_path, cache_size=cache_size, cache_idle=cache_idle)
    console(err=True).print(f"trajaudit guard ({mode}) on http://{host}:{port}/v1 -> {upstream}; decisions: {log_path}",
                            markup=False, highlight=False, soft_wrap=True)
    serve(build_app(g, upstream, timeout=timeout), host=host, port=port)


__all__ = ["END_MARKER", "guard_cmd", "watch_cmd"]
