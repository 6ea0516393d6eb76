"""`trajaudit claims` on the shared annotated data: its text and table output."""

from __future__ import annotations

from click.testing import CliRunner

from trajaudit.cli import main


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_claims_prints_none_in_words(tau_file):
    r = cli("claims", tau_file, "--record", "3")  # run 12: no claim is unsupported
    assert r.exit_code == 0, r.output
    assert "first error step: none" in r.stdout and "None" not in r.stdout
    t = cli("claims", tau_file, "--record", "3", "--format", "text")
    assert "first error step: none" in t.stdout and "None" not in t.stdout


def _hostile_run(tmp_path):
    import json

    p = tmp_path / "c.json"
    p.write_text(json.dumps({"id": "run\x1b]0;pwn\x07\u202e", "messages": [
        {"role": "user", "content": "Order \x1b[1m#W1234567\x1b[0m costs 40 dollars"},
        {"role": "assistant", "content": "The order \x1b[31m#W1234567\x1b[0m costs $55.50 \uffff"}]}))
    return p


def test_claims_text_shows_control_characters_as_the_terminal_does(tmp_path):
    """``claims --format text`` echoed the run id raw: an OSC sequence retitled the terminal, a
    right-to-left override reordered the line. It is shown as by the other commands (``\\x1b``)."""
    t = cli("claims", _hostile_run(tmp_path), "--format", "text")
    assert t.exit_code == 0, t.output
    assert "\x1b" not in t.stdout and "\x07" not in t.stdout and "\u202e" not in t.stdout
    assert t.stdout.startswith("trajectory run\\x1b]0;pwn\\x07\\u202e: ")


def test_claims_graphml_with_control_characters_parses(tmp_path):
    """GraphML is XML 1.0, which cannot hold ESC nor U+FFFF: networkx wrote them raw from the previews,
    values and run id, and the document did not parse. They are written by name (⟨U+001B⟩)."""
    import networkx as nx

    t = cli("claims", _hostile_run(tmp_path), "--format", "graphml")
    assert t.exit_code == 0, t.output
    out = tmp_path / "g.graphml"
    out.write_text(t.stdout, encoding="utf-8")
    g = nx.read_graphml(out)
    assert g.graph["trajectory_id"] == "run⟨U+001B⟩]0;pwn⟨U+0007⟩\u202e"  # (U+202E is valid XML: kept)
    assert g.nodes["step:1"]["preview"] == "The order ⟨U+001B⟩[31m#W1234567⟨U+001B⟩[0m costs $55.50 ⟨U+FFFF⟩"
