"""``trajaudit rules synthesize``: global rules from a policy and tool schemas, written by an LLM,
checked by the rule engine, saved as a pack for a person to review (AgentRx §3.1)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import click

from trajaudit.checkers.tool_schemas import load_tools
from trajaudit.cli.common import (
    EXIT_FINDINGS,
    LLMOptions,
    client_from_options,
    console,
    handle_errors,
    llm_options,
    write_text,
)
from trajaudit.engine.packs.synthesis import RuleSynthesizer
from trajaudit.engine.packs.synthesis_check import slug
from trajaudit.errors import TrajauditError


@click.command("synthesize")
@click.option("--policy", type=click.Path(exists=True, dir_okay=False),
              help="Domain policy text (Markdown or plain text).")
@click.option("--tools", type=click.Path(exists=True, dir_okay=False),
              help="Tool schemas (OpenAI function list, JSON).")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Pack file to write (YAML); '-' for stdout.")
@click.option("--pack", "pack_name", help="Pack name (default: synthesized.<policy file stem>).")
@click.option("--taxonomy", default="agentrx", show_default=True, help="Taxonomy of the rules' targets.")
@click.option("--max-rules", type=click.IntRange(1, 40), default=12, show_default=True, help="Rules to ask for.")
@click.option("--reflect", is_flag=True, help="Second pass: review each rule against the policy and drop likely "
                                              "false positives (with the reason).")
@click.option("--no-repair", is_flag=True, help="Skip the repair round for rejected rules.")
@llm_options
@handle_errors
def synthesize(policy: str | None, tools: str | None, output: str, pack_name: str | None, taxonomy: str,
               max_rules: int, reflect: bool, no_repair: bool, llm_opts: LLMOptions) -> None:
    """Ask the LLM for rules in the trajaudit rule language from POLICY and TOOLS, keep the ones that
    parse, lint and compile (one repair round quotes the errors back), and write a reviewable pack:
    a header comment says it was synthesized and by which model, and lists every rejected rule with
    its reason. The model's output is data: nothing it writes is executed.

    Exit 0 when at least one rule was kept, 1 when none was, 2 on usage errors (no endpoint, bad files).
    """
    if not policy and not tools:
        raise TrajauditError("give --policy, --tools, or both")
    try:
        policy_text = Path(policy).read_text(encoding="utf-8") if policy else ""
    except (OSError, UnicodeDecodeError) as e:
        raise TrajauditError(f"{policy}: cannot read the policy: {e}") from None
    tool_list = load_tools(tools) if tools else []
    name = pack_name or "synthesized." + slug(Path(policy or tools or "policy").stem, "policy").replace("-", "_")
    with client_from_options(llm_opts, without_llm="Without an LLM, `trajaudit rules from-tools TOOLS.json` "
                                                   "writes the tool-schema rules deterministically.") as client:
        result = RuleSynthesizer(client, taxonomy=taxonomy, max_rules=max_rules, reflect=reflect,
                                 repair=not no_repair).from_policy(policy_text or "(no policy text given)",
                                                                   tool_list, pack=name)
    header = _header(result, policy, policy_text, tools, len(tool_list), reflect)
    text = result.to_yaml(header, description=f"Rules synthesized from {Path(policy).name if policy else 'tool schemas'}"
                          + (f" and {Path(tools).name}" if tools and policy else ""))
    if output == "-":  # stdout: the summary below goes to stderr (it made a file named '-')
        click.echo(text, nl=False)
    else:
        write_text(output, text)
    out = console(err=True)
    for r in result.rules:
        out.print(f"kept      {name}.{r['id']}: {r.get('title', '')}", markup=False, highlight=False, soft_wrap=True)
    for rej in result.rejected:
        out.print(f"rejected  {rej.rule_id} [{rej.stage}]: {' '.join(rej.reason.split())[:200]}", markup=False,
                  highlight=False, soft_wrap=True)
    out.print(f"{len(result.rules)} rule(s) kept, {len(result.rejected)} rejected → {'stdout' if output == '-' else output}  "
              f"({result.usage.get('calls', 0)} call(s), {result.usage.get('cache_hits', 0)} from the cache)",
              markup=False, highlight=False)
    if not result.rules:
        raise SystemExit(EXIT_FINDINGS)


def _header(result, policy: str | None, policy_text: str, tools: str | None, n_tools: int, reflect: bool) -> list[str]:
    def digest(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]

    prompts = ", ".join(f"{k} v{v}" for k, v in sorted(result.prompts.items()))
    lines = ["SYNTHESIZED by `trajaudit rules synthesize` (AgentRx §3.1 global constraints).",
             "Review and edit before relying on it: an LLM wrote these rules from the policy and tool schemas.",
             f"model: {result.model}",
             f"prompts: {prompts}"]
    if policy:
        lines.append(f"policy: {Path(policy).name} ({len(policy_text)} chars, sha256 {digest(policy_text)})")
    if tools:
        lines.append(f"tools: {Path(tools).name} ({n_tools} tools)")
    dropped = sum(1 for r in result.rejected if r.stage == "reflection")
    lines.append(f"Every rule below was parsed, linted (z3) and compiled by trajaudit: {len(result.rules)} kept "
                 f"({len(result.repaired)} after one repair round), {len(result.rejected)} rejected"
                 + (f" ({dropped} by the reflection pass)" if reflect else "") + ".")
    lines += [f"note: {n}" for n in result.notes]
    return lines
