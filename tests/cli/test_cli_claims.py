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
