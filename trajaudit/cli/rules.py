"""``trajaudit rules …``: lint, test and explain rule packs.

``rules`` is a click group; sibling subcommands (``rules list``, ``rules from-tools``,
``rules synthesize``) live in their own modules and are added to the tuple at the bottom.
"""

from __future__ import annotations

import dataclasses
import json

import click
from rich.markup import escape

from trajaudit.cli.common import EXIT_FINDINGS, console, fail, handle_errors, print_line
from trajaudit.cli.options import io_options
from trajaudit.engine.packs.compile import compile_rule, compile_rules
from trajaudit.engine.packs.lint import lint_pack
from trajaudit.engine.packs.pack import (
    is_pack_text,
    load_pack,
    resolve_pack,
    shipped_rule_specs,
    supersedes_of,
)
from trajaudit.engine.validation.rule_tests import run_examples
from trajaudit.errors import RulePackError


@click.group("rules")
def rules() -> None:
    """Work with rule packs (YAML files or shipped pack names)."""


@rules.command("lint")
@click.argument("pack")
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too.")
@io_options(["table", "json"], "table", help="Output: one line per finding, or a JSON document "
            "({pack, errors, warnings, findings: [{level, code, rule_id, location, message}]}).",
            input_format=False, mapping=False)
@handle_errors
def lint(pack: str, strict: bool, out_format: str) -> None:
    """Report schema and compile errors, unsatisfiable guards, assertions that always or never hold,
    and pairs of rules that contradict (z3). Exit 1 when an error (or, with --strict, a warning) is found,
    2 when PACK cannot be read (no such file or shipped pack, not UTF-8 text)."""
    _readable(pack)
    findings = lint_pack(pack)
    errors = sum(1 for f in findings if f.level == "error")
    warnings = len(findings) - errors
    if out_format == "json":
        click.echo(json.dumps({"pack": pack, "errors": errors, "warnings": warnings,
                               "findings": [dataclasses.asdict(f) for f in findings]}, ensure_ascii=False, indent=1))
        if errors or (strict and warnings):
            raise SystemExit(EXIT_FINDINGS)
        return
    out = console()
    for f in findings:
        style = "bold red" if f.level == "error" else "yellow"
        out.print(f.level, style=style, end=" ", markup=False, highlight=False)
        out.print(f"{f.location} {f.code}" + (f" [{f.rule_id}]" if f.rule_id else "") + f": {f.message}",
                  markup=False, highlight=False, soft_wrap=True)
    print_line(console(err=True), f"{pack}: {errors} error(s), {warnings} warning(s)")
    if errors or (strict and warnings):
        raise SystemExit(EXIT_FINDINGS)


def _readable(pack: str) -> None:
    """Exit 2 (``PACK: cannot read …``) unless ``pack`` is YAML text or a readable pack file/name: the pack
    itself is an input, not a finding (problems inside it, including a missing include, are findings)."""
    if is_pack_text(pack):
        return
    try:
        resolve_pack(pack).read_text(encoding="utf-8")
    except RulePackError as e:
        fail(f"{pack}: cannot read: {e.message}")
    except (OSError, UnicodeDecodeError) as e:
        fail(f"{pack}: cannot read: {getattr(e, 'strerror', None) or e}")


@rules.command("test")
@click.argument("pack")
@click.option("-k", "select", help="Only rules whose id contains this text.")
@io_options(["table", "json"], "table", help="Output: pytest-like lines, or a JSON document ({pack, passed, "
            "failed, without_examples, results: [{rule_id, name, expect, ok, detail, location}]}).",
            input_format=False, mapping=False)
@handle_errors
def test(pack: str, select: str | None, out_format: str) -> None:
    """Run every rule's pass/fail examples (pytest-like output). Exit 1 when an example fails, or when
    -k selects no example (a test run that tests nothing is not a pass)."""
    compiled = compile_rules(load_pack(pack))
    total = len(compiled)
    if select:
        compiled = [r for r in compiled if select in r.id]
    results = run_examples(compiled)
    if out_format == "json":
        failed = sum(1 for r in results if not r.ok)
        click.echo(json.dumps({"pack": pack, "passed": len(results) - failed, "failed": failed,
                               "without_examples": [r.id for r in compiled if not r.spec.examples],
                               "results": [dataclasses.asdict(r) for r in results]}, ensure_ascii=False, indent=1))
        if failed or (select and not results):
            raise SystemExit(EXIT_FINDINGS)
        return
    if select and not results:
        why = f"no rule id contains {select!r} ({total} rule(s))" if not compiled else \
            f"{len(compiled)} rule(s) match but none has examples"
        console().print(f"[bold red]no example matched -k {escape(select)}: {escape(why)}[/]", markup=True,
                        highlight=False, soft_wrap=True)
        raise SystemExit(EXIT_FINDINGS)
    out = console()
    for r in results:
        mark = "[green]PASSED[/]" if r.ok else "[bold red]FAILED[/]"
        out.print(f"{escape(f'{r.rule_id}::{r.name} (expect {r.expect})')} {mark}", markup=True, highlight=False)
        if not r.ok:
            out.print(f"    {r.location}: {r.detail}", markup=False, highlight=False, soft_wrap=True)
    failed = sum(1 for r in results if not r.ok)
    no_examples = [r.id for r in compiled if not r.spec.examples]
    summary = f"{len(results) - failed} passed, {failed} failed"
    if no_examples:
        summary += f"; {len(no_examples)} rule(s) without examples: {', '.join(no_examples)}"
    out.print(("[bold red]" if failed else "[green]") + escape(summary) + "[/]", markup=True, highlight=False,
              soft_wrap=True)
    if failed:
        raise SystemExit(EXIT_FINDINGS)


@rules.command("explain")
@click.argument("pack")
@click.argument("rule_id")
@handle_errors
def explain(pack: str, rule_id: str) -> None:
    """Show one rule: its source location, compiled (normalized) expressions, scope, index and examples."""
    p = load_pack(pack)
    spec = p.rule(rule_id)
    compiled = compile_rule(spec)
    out = console()
    out.print(compiled.explain(), markup=False, highlight=False, soft_wrap=True)
    if spec.disabled:
        out.print("  (disabled in this pack)", highlight=False)
    if spec.description:
        out.print(f"  description: {spec.description}", markup=False, highlight=False, soft_wrap=True)
    for i, ex in enumerate(spec.examples):
        out.print(f"  example {i}: {ex.get('name', '')} expect {ex['expect']}"
                  + (f" at {ex['at']}" if "at" in ex else ""), markup=False, highlight=False)
    if spec.metadata:
        out.print(f"  metadata: {spec.metadata}", markup=False, highlight=False, soft_wrap=True)
    by = _superseded_by(spec.id)
    if by:
        out.print(f"  superseded by: {', '.join(by)} (when that pack applies too, only it reports the policy)",
                  markup=False, highlight=False, soft_wrap=True)


def _superseded_by(rule_id: str) -> list[str]:
    """Ids of shipped rules whose ``metadata.supersedes`` names ``rule_id``."""
    return [r.id for r in shipped_rule_specs() if rule_id in supersedes_of(r)]


# Subcommands of `rules`; siblings add theirs here (one line each).
from trajaudit.cli.rule_packs import from_tools, list_packs  # noqa: E402
from trajaudit.cli.rules_synthesize import synthesize  # noqa: E402

for _cmd in (list_packs, from_tools, synthesize):
    rules.add_command(_cmd)
