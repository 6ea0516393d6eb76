"""``trajaudit rules list`` and ``trajaudit rules from-tools``: the shipped packs and tool-schema rules."""

from __future__ import annotations

from pathlib import Path

import click
import yaml
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from trajaudit.cli.common import (
    console,
    fail,
    handle_errors,
    input_roles,
    print_line,
    refuse_overwriting_input,
    write_text,
)
from trajaudit.engine.packs.pack import RulePack, load_pack, shipped_packs
from trajaudit.engine.packs.tool_rules import read_tools_file, synthesize_tool_rules
from trajaudit.errors import RulePackError


def shipped_rule_packs() -> list[tuple[str, RulePack | None, str | None]]:
    """``(name, pack or None, error or None)`` for every shipped pack (taxonomy files are not packs)."""
    out: list[tuple[str, RulePack | None, str | None]] = []
    for name in shipped_packs():
        if name.startswith("taxonomies."):
            continue
        try:
            out.append((name, load_pack(name), None))
        except RulePackError as e:
            out.append((name, None, str(e)))
    return out


_COUNT_COLS = ("enabled", "defined", "included", "disabled")
_COUNTS_CAPTION = ("enabled: rules that run when the pack is used; defined: rules written in the pack's own file; "
                   "included: rules it takes from the packs it includes; disabled: rules present but switched off "
                   "(opt-in). enabled = defined + included - disabled.")


def rule_counts(pack: RulePack) -> dict[str, int]:
    """``{"enabled", "defined", "included", "disabled"}`` rule counts of a loaded pack.

    ``defined`` counts the rules written in the pack's own file, ``included`` those coming from its
    includes, ``disabled`` those switched off (by the pack or an including pack); ``enabled`` =
    ``defined + included - disabled`` is what runs when the pack is used.
    """
    defined = sum(1 for r in pack.rules if r.pack == pack.name)
    disabled = sum(1 for r in pack.rules if r.disabled)
    return {"enabled": len(pack.rules) - disabled, "defined": defined, "included": len(pack.rules) - defined,
            "disabled": disabled}


@click.command("list")
@click.argument("pack", required=False)
@click.option("--rules/--packs", "show_rules", default=None,
              help="List every rule (default when PACK is given) or only the packs.")
@handle_errors
def list_packs(pack: str | None, show_rules: bool | None) -> None:
    """List the shipped rule packs, or the rules of PACK (a shipped name or a YAML file): id, type,
    severity, targets and title. Packs that include others list the included rules too."""
    out = console()
    if pack is None and not show_rules:
        t = Table(title="shipped rule packs (use with --rules NAME)", title_justify="left",
                  caption=_COUNTS_CAPTION, caption_justify="left")
        for col in ("pack", "enabled", "defined", "included", "disabled", "includes", "description"):
            t.add_column(col, overflow="fold", justify="right" if col in _COUNT_COLS else "left")
        for name, p, err in shipped_rule_packs():
            if p is None:
                t.add_row(name, "-", "-", "-", "-", "-", Text(f"does not load: {err}", style="red"))
                continue
            c = rule_counts(p)
            incs = ", ".join(Path(i).stem for i in p.includes) or "-"
            t.add_row(name, *(str(c[k]) for k in _COUNT_COLS), incs, p.description)
        out.print(t)
        return
    if pack:
        try:
            packs = [(pack, load_pack(pack))]
        except RulePackError as e:
            if e.file is None and e.line is None:  # no file to name: the pack itself was not found
                fail(f"rules list {pack}: {e.message}")
            raise
    else:
        packs = [(n, p) for n, p, _ in shipped_rule_packs() if p is not None]
    for name, p in packs:
        c = rule_counts(p)
        t = Table(title=f"{name}: {c['enabled']} rule(s) enabled of {len(p.rules)} "
                        f"({c['defined']} defined in the pack, {c['included']} from includes, {c['disabled']} disabled)",
                  title_justify="left")
        for col in ("rule", "type", "severity", "targets", "title"):
            t.add_column(col, overflow="fold")
        for r in p.rules:
            sev = r.severity + (" (disabled)" if r.disabled else "")
            t.add_row(r.id, r.type, sev, ", ".join(r.targets), r.title)
        out.print(t)


@click.command("from-tools")
@click.argument("tools_file", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the pack here (default, or '-': stdout).")
@click.option("--name", default="tools", show_default=True, help="Pack name (rule ids are NAME.known-tool …).")
@handle_errors
def from_tools(tools_file: str, output: str | None, name: str) -> None:
    """Synthesize SCHEMA rules (invalid invocation: unknown tool, malformed JSON, missing required
    argument, wrong JSON type, value outside an enum, extra argument) from TOOLS_FILE, a JSON list of
    OpenAI function schemas. Schema parts the rules cannot check are listed on stderr."""
    if not name.replace("_", "").replace("-", "").replace(".", "").isalnum():
        fail(f"--name {name!r}: use letters, digits, '_', '-' and '.'")
    output = None if output == "-" else output  # '-': stdout (it made a file named '-')
    refuse_overwriting_input(output, [tools_file], roles=input_roles(tools=[tools_file]))
    tools = read_tools_file(tools_file)
    tr = synthesize_tool_rules(tools, name=name, file=tools_file)
    load_pack(tr.pack)  # the synthesized pack must validate; a failure here is a bug, reported as such
    header = (f"# Synthesized by `trajaudit rules from-tools {Path(tools_file).name}` (deterministic; edit freely).\n"
              f"# Test it with `trajaudit rules test FILE`.\n")
    text = header + yaml.safe_dump(tr.pack, sort_keys=False, allow_unicode=True, width=120)
    if output:
        write_text(output, text)
    else:
        click.echo(text, nl=False)
    err = console(err=True)
    err.print(f"{len(tr.pack['rules'])} rule(s) for {len(tr.tools)} tool(s)"
              + (f" written to {output}" if output else ""), highlight=False)
    for s in tr.skipped:
        print_line(err, f"[yellow]not checked:[/] {escape(str(s))}", markup=True)
