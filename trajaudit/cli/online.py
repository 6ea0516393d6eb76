"""``trajaudit watch`` (follow a growing JSONL run) and ``trajaudit guard`` (the guardrail proxy)."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from trajaudit.cli.common import (
    EXIT_FINDINGS,
    EXIT_INTERRUPTED,
    check_can_listen,
    console,
    fail,
    handle_errors,
    print_line,
    refuse_dash,
)
from trajaudit.cli.options import FiniteRange, seconds
from trajaudit.cli.signals import EXIT_TERMINATED, Terminated
from trajaudit.engine.run.monitor import DEFAULT_ALARM_THRESHOLD, Monitor
from trajaudit.engine.run.pipeline import AuditSpec, build_context
from trajaudit.engine.validation_log import Record, severity_rank
from trajaudit.online.guard import Guard, GuardError, build_app, check_upstream, rule_horizons, serve
from trajaudit.online.watch import END_MARKER, watch

_SEVERITIES = ["info", "warning", "error", "critical"]


def _spec(packs: tuple[str, ...], tools: str | None) -> AuditSpec:
    return AuditSpec(rules=tuple(packs), tools=tools)


# SIGTERM during a watch (a supervisor, `kill`, `timeout`): ended like Ctrl-C (summary, end event), with reason
# ``terminated`` and exit code EXIT_TERMINATED (143); the handler is set here too, for a watch run in-process


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated()


class _WatchOutput:
    """What `watch` prints as the run goes: violations (stdout, table or JSON lines), skipped lines,
    the alarm, the end-of-run verdicts on a cut run, and the closing summary (stderr; JSON too)."""

    def __init__(self, file: str, out_format: str, fail_on: str) -> None:
        self.file, self.json, self.fail_on = file, out_format == "json", fail_on
        self.floor = severity_rank(fail_on)
        self.out, self.err = console(), console(err=True)
        self.violations = self.bad = self.after_stop = 0
        self.skipped: list[int] = []

    def say(self, text: str) -> None:
        print_line(self.err, text)

    def invalid(self, line: int) -> None:
        self.say(f"warning: {self.file}:{line} is not valid UTF-8; undecodable bytes were replaced")

    def _emit(self, obj: dict[str, Any]) -> None:
        click.echo(json.dumps(obj, ensure_ascii=False, default=str))

    def records(self, records: list[Record]) -> None:
        for r in records:
            if r.verdict != "fail":
                continue
            if severity_rank(r.severity) >= self.floor:
                self.bad += 1
            if self.json:
                self._emit({"event": "violation", **r.to_dict()})
            else:
                self.out.print(f"[bold red]FAIL[/] step {r.step:>4}  {escape(r.rule_id)}  [dim]({escape(r.severity)})[/]  ",
                               end="", soft_wrap=True, markup=True)
                self.out.print(r.message, markup=False, highlight=False, soft_wrap=True)

    def stopped_records(self, records: list[Record]) -> None:
        """End-of-run verdicts on a run the watch cut short: labelled, not counted as violations."""
        fails = [r for r in records if r.verdict == "fail"]
        if fails and not self.json:
            self.out.print("[dim]end-of-run verdicts on the run as stopped (not the agent's violations: the run did "
                           "not reach its end):[/]", soft_wrap=True, markup=True)
        for r in fails:
            self.after_stop += 1
            if self.json:
                self._emit({"event": "after_stop", **r.to_dict()})
            else:
                self.out.print(f"[dim]after stop[/] step {r.step:>4}  {escape(r.rule_id)}  [dim]({escape(r.severity)})[/]  ",
                               end="", soft_wrap=True, markup=True)
                self.out.print(r.message, markup=False, highlight=False, soft_wrap=True, style="dim")

    def skip(self, n: int, why: str) -> None:
        self.skipped.append(n)
        if self.json:
            self._emit({"event": "skipped", "line": n, "error": why})
        self.say(f"skipped: {self.file}:{n}: {why}")

    def alarm(self, m: Monitor) -> None:
        d = m.diagnosis()
        info = {"event": "alarm", "step": m.alarm, "critical_step": d.critical_step if d else None,
                "category": d.category if d else None, "confidence": d.confidence if d else None}
        if self.json:
            self._emit(info)
        else:
            self.out.print(f"[bold magenta]ALARM[/] at step {m.alarm}: critical step {info['critical_step']} "
                           f"({escape(str(info['category']))}, confidence {info['confidence']}); the run is stopped",
                           soft_wrap=True, markup=True)

    def end(self, reason: str, monitor: Monitor, lines: int) -> None:
        steps = len(monitor.steps)
        # the run's log (a rule a domain pack superseded has left it), less the verdicts on a cut run
        self.violations = sum(1 for r in monitor.log.records if r.verdict == "fail") - self.after_stop
        if self.json:
            self._emit({"event": "end", "reason": reason, "steps": steps, "violations": self.violations,
                        "at_or_above": self.bad, "skipped_lines": len(self.skipped), "after_stop": self.after_stop})
        self.say(f"{self.file}: run ended ({reason}) after {steps} step(s): {self.violations} violation(s), "
                  f"{self.bad} at or above {self.fail_on}"
                  + (f"; {len(self.skipped)} line(s) skipped" if self.skipped else "")
                  + (f"; {self.after_stop} end-of-run verdict(s) on the stopped run, not counted" if self.after_stop else ""))
        why = {"missing": f"{self.file} was never created: nothing was checked",
               "interrupted": "interrupted before the run's end: the end-of-run rules were not settled (the violations "
                              "above were settled as the steps arrived)",
               "terminated": "stopped by SIGTERM before the run's end: the end-of-run rules were not settled (the "
                             "violations above were settled as the steps arrived)",
               "truncated": f"{self.file} was truncated after line {lines} (log rotation or a rewrite): the watch stops "
                            "here, the new content may be another run (start a new watch for it)"}.get(reason)
        if why:
            self.say(why)


@click.command("watch")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--rules", "packs", multiple=True, metavar="PACK",
              help="An extra rule pack (YAML file or shipped name; repeatable). The default packs always apply.")
@click.option("--tools", "tools_file", type=click.Path(exists=True, dir_okay=False),
              help="JSON list of OpenAI function schemas (SCHEMA rules).")
@click.option("--format", "out_format", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="table: one console line per violation; json: one JSON object per line (violation, skipped, alarm, "
                   "after_stop, end).")
@click.option("--until-idle", type=seconds(0), metavar="SECONDS",
              help="End the run after this many seconds without a new line, counting the wait for a FILE not "
                   "created yet (default: wait for the end marker or for the file to be removed or renamed).")
@click.option("--fail-on", type=click.Choice(_SEVERITIES), default="error", show_default=True,
              help="Exit 1 when a violation at or above this severity was settled (or a line was skipped).")
@click.option("--stop-on-alarm", is_flag=True,
              help="Stop when the prefix judge raises its alarm (estimate based on a finding, confidence >= threshold); "
                   "the end-of-run verdicts on the stopped run are labelled 'after stop', not counted as violations.")
@click.option("--alarm-threshold", type=FiniteRange(0, 1), default=DEFAULT_ALARM_THRESHOLD, show_default=True,
              help="Confidence of the alarm (0 to 1; the default is chosen by leave-one-dataset-out, docs/monitor.md).")
@click.option("--poll", type=seconds(0.01), default=0.1, show_default=True, help="Seconds between reads at the end of the file.")
@handle_errors
def watch_cmd(file: str, packs: tuple[str, ...], tools_file: str | None, out_format: str, until_idle: float | None,
              fail_on: str, stop_on_alarm: bool, alarm_threshold: float, poll: float) -> None:
    """Follow FILE, a growing JSONL file of one run's messages, and print each violation as it is settled.

    Each line: an OpenAI chat message, {"message": {...}}, or {"step": {...}} (an IR step). The run
    ends at the line {"trajaudit": "end"}, when FILE is removed or renamed, or after --until-idle
    seconds without a new line; the end-of-run rules are then settled. A FILE that does not exist yet
    is waited for (like `tail -F`; --until-idle counts the wait), as long as its directory exists.
    FILE may be a named pipe (FIFO). If FILE is truncated (copy-and-truncate log rotation, a rewrite),
    the watch says so and stops: the new content may be another run. Ctrl-C stops the watch with a
    summary (the end-of-run rules are not settled: the run did not end).
    Exit codes as `check`: 0 no violation at or above --fail-on, 1 one (or a line skipped, the alarm
    stopped the run, FILE was truncated or never created), 2 usage (e.g. FILE's directory does not
    exist), 130 interrupted (Ctrl-C), 143 stopped by SIGTERM (summary as for Ctrl-C).

    \b
    Examples:
      trajaudit watch run.jsonl --until-idle 30
      trajaudit watch run.jsonl --rules examples/rules/guard_policies.yaml --format json --stop-on-alarm
    """
    parent = Path(file).parent
    if not parent.is_dir():
        fail(f"cannot watch {file}: its directory {parent} does not exist")
    show = _WatchOutput(file, out_format, fail_on)
    try:
        ctx = build_context(_spec(packs, tools_file))
        monitor = Monitor(context=ctx, run_id=Path(file).stem, alarm_threshold=alarm_threshold, freeze_gc=True)
    except KeyboardInterrupt as e:  # Ctrl-C while the packs load: nothing was read yet (not click's "Aborted!", exit 1)
        word, code = ("terminated", EXIT_TERMINATED) if isinstance(e, Terminated) else ("interrupted", EXIT_INTERRUPTED)
        show.say(f"{word} before the watch started: nothing of {file} was read")
        raise SystemExit(code) from None

    def waiting() -> None:
        show.say(f"{file} does not exist yet: waiting for it to be created"
                  + (f" (at most {until_idle:g} s, --until-idle)" if until_idle is not None else " (Ctrl-C to stop)"))

    show.say(f"watching {file} ({len(monitor.context.rules)} rule(s); domain packs join when their tools are called)")
    lines = 0
    # SIGTERM (a supervisor, `kill`, `timeout`) ends the watch as Ctrl-C does (only the main thread can set it)
    old_term = signal.signal(signal.SIGTERM, _raise_terminated) if threading.current_thread() is threading.main_thread() \
        else None
    try:
        res = watch(file, monitor, until_idle=until_idle, stop_on_alarm=stop_on_alarm, on_records=show.records,
                    on_skip=show.skip, on_alarm=show.alarm, poll=poll, on_wait=waiting, on_after_stop=show.stopped_records,
                    on_invalid=show.invalid)
        reason, lines = res.reason, res.lines
    except Terminated:
        reason = "terminated"
    except KeyboardInterrupt:  # Ctrl-C: what was settled is printed; say how the run was left, exit 130
        reason = "interrupted"
    finally:
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
        monitor.release()  # the collector sees the run's state again (freeze_gc), even when interrupted
    show.end(reason, monitor, lines)
    if reason in ("interrupted", "terminated"):
        raise SystemExit(EXIT_INTERRUPTED if reason == "interrupted" else EXIT_TERMINATED)
    if show.bad or show.skipped or reason in ("alarm", "missing", "truncated"):
        raise SystemExit(EXIT_FINDINGS)


def horizon_lines(horizons: dict[str, list[str]]) -> list[str]:
    """The start-up lines naming the rules that never block (:func:`~trajaudit.online.guard.rule_horizons`)."""
    out = []
    if horizons["outputs"]:
        out.append(f"{len(horizons['outputs'])} rule(s) are decided when the call's output arrives, after the call "
                   f"ran, and never block: {', '.join(horizons['outputs'])}")
    if horizons["end"]:
        out.append(f"{len(horizons['end'])} rule(s) can only be decided when the run ends and never block: "
                   f"{', '.join(horizons['end'])}")
    return out


@click.command("guard")
@click.option("--upstream", required=True, metavar="URL",
              help="The OpenAI-compatible endpoint to forward to: an http:// or https:// base URL, e.g. "
                   "http://127.0.0.1:8000/v1 (anything else is a usage error, exit 2).")
@click.option("--rules", "packs", multiple=True, metavar="PACK",
              help="An extra rule pack (repeatable), added to the default packs (which always apply, as in `audit`).")
@click.option("--tools", "tools_file", type=click.Path(exists=True, dir_okay=False),
              help="JSON list of OpenAI function schemas: SCHEMA rules; a call to an undeclared tool, or whose "
                   "arguments break its schema, is a violation (guard.unknown-tool, guard.tool-arguments).")
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
@click.option("--alarm-threshold", type=FiniteRange(0, 1), default=DEFAULT_ALARM_THRESHOLD, show_default=True,
              help="Confidence of the alarm (0 to 1; the default is chosen by leave-one-dataset-out, docs/monitor.md).")
@click.option("--timeout", type=seconds(0, min_open=True), default=600.0, show_default=True, help="Seconds to wait for the upstream (then 504).")
@click.option("--cache-size", type=click.IntRange(min=0), default=128, show_default=True,
              help="Conversations whose rule state is kept: a request extending one adds only its new messages "
                   "(0: every request re-reads its whole conversation).")
@click.option("--cache-idle", type=seconds(0, min_open=True), default=600.0, show_default=True,
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

    Only rules decided at the step that makes the call can block it. A rule that reads the call's
    output is decided when the output arrives (after the call ran), and one that reads the rest of
    the run (later steps, the whole run, a checker: the tools.* schema rules, which excuse a
    violation the tool tolerated or a retry corrected) only when the run ends, which a guarded
    conversation never does: neither blocks. The guard lists both at start-up. With --tools, the
    schemas are checked on each proposed call before it runs (guard.tool-arguments).

    \b
    Examples:
      trajaudit guard --upstream http://127.0.0.1:8000/v1
      trajaudit guard --upstream https://llm.internal/v1 --rules examples/rules/guard_policies.yaml --mode annotate
    """
    try:  # before anything starts: a proxy forwarding to "notaurl" would fail every request
        check_upstream(upstream)
    except GuardError as e:
        fail(f"--upstream: {e}")
    if block_status is not None and not 400 <= block_status <= 499:
        fail(f"--block-status must be a 4xx status, got {block_status}")
    refuse_dash(log_path, "--log", "the decisions are appended to a file")  # it made a file named '-'
    check_can_listen(host, port)  # before the rules are built: a port in use is said in words, exit 2
    try:  # a decision log that cannot be written is said now, not as a failed request later
        with open(log_path, "a", encoding="utf-8"):
            pass
    except OSError as e:
        fail(f"cannot write the decision log --log {log_path}: {e.strerror or e}")
    ctx = build_context(_spec(packs, tools_file))
    g = Guard(ctx, mode=mode, block_on=block_on, block_status=block_status, stop_on_alarm=stop_on_alarm,
              alarm_threshold=alarm_threshold, log_path=log_path, cache_size=cache_size, cache_idle=cache_idle)
    err = console(err=True)
    print_line(err, f"trajaudit guard ({mode}) on http://{host}:{port}/v1 -> {upstream}; decisions: {log_path}")
    for line in horizon_lines(rule_horizons(ctx)):
        print_line(err, line)
    serve(build_app(g, upstream, timeout=timeout), host=host, port=port)


__all__ = ["END_MARKER", "EXIT_INTERRUPTED", "guard_cmd", "watch_cmd"]
