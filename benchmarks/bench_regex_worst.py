"""Worst-case time of every regex parameter of the shipped rule packs on adversarial texts.

The pack loader refuses exponential patterns (docs/rules.md "Regex safety"), but a pattern can still
be polynomial: a lookahead that scans to the end of the text, tried at every clause of a long
message, is quadratic (``refusal`` once took 45 s on a 400 KB user turn of "cancel, cancel, ...").
This benchmark runs each regex parameter as the rule functions do (``captures``: every match, with
the engine's literal prefilter, which skips texts lacking a literal every match needs) on texts of two sizes
built from the words the packs look for, repeated with the separators they split on, and prints the
slowest cases and how each grows with size (linear ≈ 4× for 4× the text; quadratic ≈ 16×).

Run: ``python benchmarks/bench_regex_worst.py [--size 40000] [--top 15]`` (output: bench_regex_worst.txt).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trajaudit.engine.dsl.regex.prefilter import captures, clear_shared  # noqa: E402

PACKS = sorted((ROOT / "trajaudit" / "rules").glob("*.yaml"))

#: Repeated units: words and separators the shipped regexes react to (holds, verbs, negations,
#: policy words, numbers and ids, quotes, code fences, JSON, URLs, blanks).
UNITS = [
    "cancel, ", "wait ", "no ", "not ", "don't ", "a ", "x", " ", "\n", "a, ", "the cancel ",
    "explicit confirmation ", "if not ", "confirm with the user before ", "transfer to a human only if ",
    "#W1234567 is ", "12,483 ", "$1.00 ", "2024-05-03 ", "\"a\": ", "{\"status\": ", "http://a.b/",
    "```", "'", "Error: ", "Traceback ", "exitcode: 1 ", "yes ", "go ahead ", "...", "-", "|", "*",
]
#: Each unit is tried plain and as a held reply ending in a question ("wait " + units + "?").
FRAMES = [("", ""), ("wait ", "?")]


def regex_params(pack: Path) -> list[tuple[str, str]]:
    """``(pack:param[#i], pattern)`` for every string parameter that compiles as a regex."""
    doc = yaml.safe_load(pack.read_text(encoding="utf-8")) or {}
    out = []
    for name, value in (doc.get("params") or {}).items():
        values = value if isinstance(value, list) else [value]
        for i, v in enumerate(values):
            if isinstance(v, str):
                try:
                    re.compile(v)
                except re.error:
                    continue
                out.append((f"{pack.stem}:{name}" + (f"#{i}" if len(values) > 1 else ""), v))
    return out


def texts(size: int) -> list[tuple[str, str]]:
    """Adversarial texts of about ``size`` characters: ``(label, text)``."""
    out = []
    for unit in UNITS:
        body = unit * max(1, size // len(unit))
        for pre, suf in FRAMES:
            out.append((f"{pre!r}+{unit!r}*n+{suf!r}", pre + body + suf))
    return out


def worst(pattern: str, size: int) -> tuple[float, str]:
    """The slowest text for ``pattern`` as rules run it: ``regex_prefilter.captures`` (every match;
    skipped when a literal every match needs is absent, as in an audit)."""
    rx = re.compile(pattern)
    slowest, label = 0.0, ""
    for lab, text in texts(size):
        clear_shared()  # no memo hit from an earlier text
        t = time.perf_counter()
        captures(rx, text)
        dt = time.perf_counter() - t
        if dt > slowest:
            slowest, label = dt, lab
    return slowest, label


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=40_000, help="characters of the larger texts (the smaller: 1/4)")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args(argv)
    rows = []
    t0 = time.perf_counter()
    for pack in PACKS:
        for name, pattern in regex_params(pack):
            small, _ = worst(pattern, args.size // 4)
            big, label = worst(pattern, args.size)
            rows.append((big, small, name, label))
            if big > 0.5:  # say it now: the slow ones are what this benchmark is for
                print(f"  slow: {name} {big:.2f} s on {label}", flush=True)
    rows.sort(reverse=True)
    print(f"python {sys.version.split()[0]}; {len(rows)} regex parameters of {len(PACKS)} shipped packs; "
          f"{len(texts(args.size))} texts of ~{args.size:,} and ~{args.size // 4:,} characters (captures, prefiltered)")
    for big, small, name, label in rows[: args.top]:
        growth = big / small if small > 1e-4 else float("nan")
        print(f"  {big * 1000:9.1f} ms  (×{growth:4.1f} for 4× text)  {name}  worst text {label}")
    print(f"(benchmark wall time {time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
