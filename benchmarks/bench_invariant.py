"""trajaudit against the Invariant analyzer (invariant-ai), same three policies on the same runs (issue 22).

The peer is installed in its own virtual environment (``--venv``, default a folder in the system's
temporary directory, created with ``python -m venv`` and ``pip install invariant-ai`` on first use);
when that fails (no network, no wheel for this Python), the script says so and exits 0 without
measuring. Invariant's ``LocalPolicy`` is used (``Policy.from_string`` contacts Invariant's service),
with ``INVARIANT_MAX_ITERATIONS`` raised (its default of 100 checking cycles stops pair rules on a
30-step run).

The three policies, written in both languages (``POLICIES``: Invariant's rule text, and a trajaudit
rule pack), over the tau-retail tool calls:

1. ``transfer-after-write``: a transfer to a human agent after the agent already made a write call;
2. ``order-written-twice``: a write call on an order that an earlier write call already touched (an
   equality join on ``order_id``; the order writes, whose arguments all name an order — Invariant
   stops with an error on a missing key);
3. ``cancel-reason``: ``cancel_pending_order`` with a reason other than the two the policy allows.

A *finding* is ``(run, the flagged call's address)`` (``K.tool_calls.J``: message K, call J — for tau
a step index is the message index). The script checks that both engines report the same set of
findings, then times each engine warm, in its own process (policy compiled once, the runs converted to
each engine's input once, CPU time of ``--repeat`` passes over the runs), and as a fresh process
(interpreter, imports, policy, runs; CPU time of the child). It prints both and the ratios.

Run: ``python benchmarks/bench_invariant.py [--repeat 3] [--venv DIR]``; output in
``benchmarks/bench_invariant.txt``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
TAU = DATA / "tau_retail" / "trajectories.json"

WRITES = ["cancel_pending_order", "modify_pending_order_items", "modify_pending_order_address",
          "modify_pending_order_payment", "modify_user_address", "return_delivered_order_items",
          "exchange_delivered_order_items"]
ORDER_WRITES = [w for w in WRITES if w != "modify_user_address"]  # the writes whose arguments hold an order_id
REASONS = ["no longer needed", "ordered by mistake"]

INVARIANT_POLICY = f"""
raise PolicyViolation("transfer-after-write", call=c2) if:
    (c1: ToolCall) -> (c2: ToolCall)
    c1.function.name in {json.dumps(WRITES)}
    c2.function.name == "transfer_to_human_agents"

raise PolicyViolation("order-written-twice", call=c2) if:
    (c1: ToolCall) -> (c2: ToolCall)
    c1.function.name in {json.dumps(ORDER_WRITES)}
    c2.function.name in {json.dumps(ORDER_WRITES)}
    c1.function.arguments.order_id == c2.function.arguments.order_id

raise PolicyViolation("cancel-reason", call=c) if:
    (c: ToolCall)
    c.function.name == "cancel_pending_order"
    not (c.function.arguments.reason in {json.dumps(REASONS)})
"""

TRAJAUDIT_PACK = {
    "pack": "peer", "version": 1,
    "params": {"writes": WRITES, "order_writes": ORDER_WRITES, "reasons": REASONS},
    "rules": [
        {"id": "transfer-after-write", "title": "t", "type": "PROTOCOL", "severity": "error",
         "guard": 'call.name == "transfer_to_human_agents"',
         "assert": "not exists c in calls(earlier) where c.name in params.writes"},
        {"id": "order-written-twice", "title": "t", "type": "PROTOCOL", "severity": "error",
         "guard": "call.name in params.order_writes",
         "assert": "not exists c in calls(earlier) where c.name in params.order_writes and c.args.order_id == call.args.order_id"},
        {"id": "cancel-reason", "title": "t", "type": "SCHEMA", "severity": "error",
         "guard": 'call.name == "cancel_pending_order"',
         "assert": "call.args.reason in params.reasons"},
    ],
}

# Each worker prints {"findings": [[run, policy, address], ...], "warm_cpu": seconds per pass}.
INVARIANT_WORKER = r"""
import json, sys, time
from invariant.analyzer import LocalPolicy
policy_text, path, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = json.load(open(path))

def conv(msgs):
    out = []
    for m in msgs:
        m = {k: v for k, v in m.items() if k in ("role", "content", "tool_calls", "tool_call_id", "name")}
        if m.get("tool_calls"):
            m["tool_calls"] = [{"id": c.get("id"), "type": "function", "function": {
                "name": c["function"]["name"],
                "arguments": json.loads(c["function"]["arguments"]) if isinstance(c["function"]["arguments"], str)
                else c["function"]["arguments"]}} for c in m["tool_calls"]]
        out.append(m)
    return out

policy = LocalPolicy.from_string(policy_text)
runs = [(str(d["task_id"]) + "/" + str(i), conv(d["traj"])) for i, d in enumerate(data)]
found = set()
for rid, msgs in runs:
    for e in policy.analyze(msgs).errors:
        name = e.args[0] if e.args else str(e)
        call = [r.json_path for r in e.ranges if str(r.json_path).count(".") == 2]
        found.add((rid, str(name), call[-1] if call else None))
t0 = time.process_time()
for _ in range(repeat):
    for rid, msgs in runs:
        policy.analyze(msgs)
print(json.dumps({"findings": sorted(found), "warm_cpu": (time.process_time() - t0) / max(repeat, 1)}))
"""

TRAJAUDIT_WORKER = r"""
import json, sys, time
sys.path.insert(0, sys.argv[4])
from trajaudit import load_path
from trajaudit.engine.packs.compile import compile_rules
from trajaudit.engine.packs.pack import load_pack
from trajaudit.engine.validation.stepper import evaluate_run
pack, path, repeat = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
rules = compile_rules(load_pack(pack))
runs = load_path(path).trajectories
data = json.load(open(path))
ids = [str(d["task_id"]) + "/" + str(i) for i, d in enumerate(data)]
found = set()
for rid, t in zip(ids, runs):
    for r in evaluate_run(t, rules).violations():
        addr = next((e.address for e in r.evidence if e.note == "call"), None)
        found.add((rid, r.rule_id.split(".", 1)[1], addr.replace("steps.", "", 1) if addr else None))
t0 = time.process_time()
for _ in range(repeat):
    for t in runs:
        evaluate_run(t, rules)
print(json.dumps({"findings": sorted(found), "warm_cpu": (time.process_time() - t0) / max(repeat, 1)}))
"""


def peer_python(venv: Path) -> Path | None:
    """The venv's python with invariant-ai importable (installed on first use), or ``None`` with a message."""
    py = venv / "bin" / "python"
    if py.exists() and subprocess.run([str(py), "-c", "import invariant.analyzer"], capture_output=True).returncode == 0:
        return py
    print(f"installing invariant-ai into {venv} (its own virtual environment) ...", flush=True)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
        res = subprocess.run([str(py), "-m", "pip", "install", "-q", "invariant-ai"], capture_output=True, text=True,
                             timeout=900)
    except (subprocess.SubprocessError, OSError) as e:
        print(f"SKIPPED: cannot create the peer's virtual environment: {e}")
        return None
    if res.returncode or subprocess.run([str(py), "-c", "import invariant.analyzer"], capture_output=True).returncode:
        print("SKIPPED: invariant-ai cannot be installed here (pip said: "
              + (res.stderr.strip().splitlines() or ["nothing"])[-1][:300] + ")")
        return None
    return py


def child(cmd: list[str], env: dict[str, str]) -> tuple[dict, float]:
    """Run a worker; ``(its JSON answer, CPU seconds of the child)``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode:
        raise SystemExit(f"worker failed: {' '.join(cmd[:2])}\n{res.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(res.stdout.strip().splitlines()[-1]), cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="warm passes over the runs per engine (default 3)")
    ap.add_argument("--venv", default=str(Path(tempfile.gettempdir()) / "trajaudit-invariant-venv"),
                    help="the peer's virtual environment (created when missing)")
    args = ap.parse_args(argv)
    if not TAU.exists():
        print(f"tau-retail data not found at {TAU}; nothing measured")
        return 0
    py = peer_python(Path(args.venv))
    if py is None:
        return 0
    version = subprocess.run([str(py), "-m", "pip", "show", "invariant-ai"], capture_output=True, text=True).stdout
    version = next((ln.split(":", 1)[1].strip() for ln in version.splitlines() if ln.startswith("Version")), "?")
    env = {**os.environ, "INVARIANT_MAX_ITERATIONS": "100000000"}
    inv_cmd = [str(py), "-c", INVARIANT_WORKER, INVARIANT_POLICY, str(TAU)]
    ta_cmd = [sys.executable, "-c", TRAJAUDIT_WORKER, json.dumps(TRAJAUDIT_PACK), str(TAU)]
    inv, _ = child([*inv_cmd, str(args.repeat)], env)
    ta, _ = child([*ta_cmd, str(args.repeat), str(ROOT)], env)
    _, inv_fresh = child([*inv_cmd, "0"], env)
    _, ta_fresh = child([*ta_cmd, "0", str(ROOT)], env)
    a = {tuple(x) for x in inv["findings"]}
    b = {tuple(x) for x in ta["findings"]}
    n = len(json.loads(TAU.read_text()))
    print(f"invariant-ai {version} (LocalPolicy) vs trajaudit, 3 policies, {n} tau-retail runs; CPU time, one core; "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"findings: invariant {len(a)}, trajaudit {len(b)}: "
          + ("the same" if a == b else f"DIFFERENT (only invariant: {sorted(a - b)[:5]}, only trajaudit: {sorted(b - a)[:5]})"))
    for p in ("transfer-after-write", "order-written-twice", "cancel-reason"):
        print(f"  {p}: {sum(1 for x in b if x[1] == p)}")
    print(f"warm (policy compiled, runs converted; {args.repeat} passes): invariant {inv['warm_cpu'] * 1000:.1f} ms, "
          f"trajaudit {ta['warm_cpu'] * 1000:.2f} ms per pass over the {n} runs -> trajaudit "
          f"{inv['warm_cpu'] / ta['warm_cpu']:.0f}x faster")
    print(f"fresh process (interpreter, imports, policy, runs): invariant {inv_fresh:.2f} s, trajaudit {ta_fresh:.2f} s "
          f"CPU -> trajaudit {inv_fresh / ta_fresh:.1f}x faster")
    return 0 if a == b else 1


if __name__ == "__main__":
    raise SystemExit(main())
