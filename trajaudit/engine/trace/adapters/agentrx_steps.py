"""AgentRx trajectories as published on Hugging Face (``microsoft/AgentRx``): step records.

One record per run (a JSONL line, or an element of a JSON list, or one object)::

    {"trajectory_id": str, "instruction": str,
     "steps": [{"index": 1, "substeps": [{"sub_index": 0, "role": str, "content": str}, ...]}, ...]}

``magentic_dataset.jsonl`` holds Magentic-One runs (roles are Magentic-One speaker labels:
``"Orchestrator (thought)"``, ``"Orchestrator (-> WebSurfer)"``, ``"WebSurfer"``, ``"human"``), read
with the Who&When/``magentic`` speaker classification (:func:`who_and_when.classify_speaker`);
``tau_retail_dataset.jsonl`` holds tau-bench runs (OpenAI roles ``system``/``user``/``assistant``/
``tool``), read as OpenAI messages (:func:`openai_chat.convert_chat`). A run is read the OpenAI way
when every substep's role is an OpenAI role, as the ``openai``/``magentic`` detection decides. A
substep's ``tool_calls``, ``tool_call_id`` and ``name``, when present, are read as in OpenAI messages.

Some records give ``substeps`` as a string: JSON, or the Python ``repr`` of a list (single quotes,
``None``/``True``). It is parsed as JSON first, else with :func:`ast.literal_eval` — a parser of
literals only (it never evaluates names, calls or operators) — bounded by :data:`MAX_LITERAL_CHARS`
and :data:`MAX_LITERAL_TOKENS`, its nesting by the parser's own limit and then ``safe_json.MAX_DEPTH``;
its errors are a :class:`TraceFormatError` naming the step (docs/input.md).

Step numbering: one IR step per substep (``Step.index`` = its position in the run's substeps, all
steps flattened). Every step carries ``source_number`` = the 0-based position of its step (group)
in ``steps``, so AgentRx's 1-based ``step_number`` n is the group whose ``source_number`` is n - 1;
the later substeps of a group are flagged ``split_message`` and a diagnosis of such a run carries
``metadata.source_message`` (as for a split Anthropic message). A step without substeps produces no
IR step and flags the run ``dropped_message``. ``Step.metadata.step_index`` keeps a step's own
``index`` where it is not its position + 1.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import tokenize
from io import StringIO
from pathlib import Path
from typing import Any

from trajaudit import safe_json
from trajaudit.engine.trace.adapters.base import (
    OPENAI_ROLES,
    LoadOptions,
    Sniff,
    assemble,
    build_steps,
    sniff_runs,
    split_runs,
)
from trajaudit.engine.trace.adapters.openai_chat import MessageNote, convert_chat, with_notes
from trajaudit.engine.trace.adapters.who_and_when import classify_speaker
from trajaudit.engine.trace.ir import FLAG_DROPPED_MESSAGE, FLAG_SPLIT_MESSAGE, Source, Trajectory
from trajaudit.errors import TraceFormatError

NUMBERING = ("AgentRx steps: one step per substep; source_number = 0-based position of its step in 'steps' "
             "(AgentRx step_number - 1)")
MAX_LITERAL_CHARS = 10_000_000  # a substeps string read as a Python literal (real ones: tens of KB)
MAX_LITERAL_TOKENS = 200_000  # operator tokens ([ ] { } , :) in it: bounds the syntax tree literal_eval builds
_STRUCTURAL = "[]{}(),:"
#: ``literal_eval`` names a refused node by its repr, memory address included ("<ast.Call object at
#: 0x7f…>"): the message would differ from run to run (reports of one batch were not reproducible).
_AST_REPR = re.compile(r"<ast\.(\w+) object at 0x[0-9a-fA-F]+>")


def _reason(run: Any) -> str:
    """Why ``run`` is not an AgentRx step record ("" when it is one)."""
    if not isinstance(run, dict):
        return f"not an object (got {type(run).__name__})"
    steps = run.get("steps")
    if "trajectory_id" in run and "steps" in run:
        return ""  # the record's own keys: a broken 'steps' is reported by convert, not by detection
    if isinstance(steps, list) and any(isinstance(s, dict) and "substeps" in s for s in steps):
        return ""
    return "not a record with 'steps' of {index, substeps} (and a 'trajectory_id')"


def _is_record(run: Any) -> bool:
    return not _reason(run)


def _token_count_exceeds(text: str, limit: int) -> bool:
    """Whether ``text`` holds more than ``limit`` structural operator tokens: first an upper bound
    (the characters, quoted ones included), then, only when that is over, the tokenizer's count."""
    if sum(text.count(c) for c in _STRUCTURAL) <= limit:
        return False
    n = 0
    try:
        for tok in tokenize.generate_tokens(StringIO(text).readline):
            if tok.type == tokenize.OP:
                n += 1
                if n > limit:
                    return True
    except (tokenize.TokenError, SyntaxError):  # literal_eval reports the bad syntax itself
        return False
    return False


def _plain(value: Any) -> Any:
    """A Python literal as JSON data: tuples become lists; sets, bytes, complex numbers and non-string
    keys are refused (``ValueError``). Iterative."""
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while stack:
        v, parent, key = stack.pop()
        if v is None or isinstance(v, (str, bool, int, float)):
            parent[key] = v
        elif isinstance(v, (list, tuple)):
            out: list[Any] = [None] * len(v)
            parent[key] = out
            stack.extend((x, out, i) for i, x in enumerate(v))
        elif isinstance(v, dict):
            obj: dict[str, Any] = {}
            parent[key] = obj
            for k, x in v.items():
                if not isinstance(k, str):
                    raise ValueError(f"a key is not a string ({k!r})")
                obj[k] = None
                stack.append((x, obj, k))
        else:
            raise ValueError(f"{type(v).__name__} is not JSON data")
    return root[0]


def parse_substeps(value: Any, path: str) -> list[Any]:
    """The substeps of one step: a list as is, or a string holding one (JSON, else a Python literal).

    Args:
        value: the step's ``substeps`` field.
        path: its JSON path, for errors (``$.steps[3].substeps``).

    Returns:
        The list (its elements unchecked).

    Raises:
        TraceFormatError: not a list, or a string that is neither a JSON nor a Python-literal list,
            longer than :data:`MAX_LITERAL_CHARS`, with more than :data:`MAX_LITERAL_TOKENS` operator
            tokens, or nested more than ``safe_json.MAX_DEPTH`` levels.
    """
    if isinstance(value, list):
        return value
    if not isinstance(value, str):
        raise TraceFormatError(f"'substeps' must be a list (or a string holding one), got {type(value).__name__}",
                               json_path=path)
    text = value.strip()
    try:
        doc = safe_json.loads(text)
    except safe_json.NestedTooDeep as e:
        raise TraceFormatError(f"'substeps' string: {e}", json_path=path) from None
    except ValueError:
        doc = _literal(text, path)
    if not isinstance(doc, list):
        raise TraceFormatError(f"'substeps' string holds a {type(doc).__name__}, not a list", json_path=path)
    return doc


def _literal(text: str, path: str) -> Any:
    """``text`` read with :func:`ast.literal_eval` within the bounds (see :func:`parse_substeps`)."""
    if len(text) > MAX_LITERAL_CHARS:
        raise TraceFormatError(f"'substeps' string is not JSON and too long to read as a Python literal "
                               f"({len(text)} characters; at most {MAX_LITERAL_CHARS})", json_path=path)
    if _token_count_exceeds(text, MAX_LITERAL_TOKENS):
        raise TraceFormatError(f"'substeps' string is not JSON and has too many elements to read as a Python "
                               f"literal (more than {MAX_LITERAL_TOKENS} brackets, commas and colons)", json_path=path)
    try:
        doc = _plain(ast.literal_eval(text))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as e:
        why = "nested too deeply" if isinstance(e, RecursionError) else \
            f"{type(e).__name__}: {_AST_REPR.sub(lambda m: f'{m[1]} expression', str(e))}"
        raise TraceFormatError(f"'substeps' string is neither a JSON nor a Python-literal list ({why})",
                               json_path=path) from None
    if safe_json.too_deep(doc):
        raise TraceFormatError(f"'substeps' string: {safe_json.NestedTooDeep()}", json_path=path)
    return doc


def flatten(run: dict[str, Any]) -> tuple[list[dict[str, Any]], list[MessageNote], bool]:
    """The run's substeps in order, each with its note (group position, split flag, metadata), and
    whether some step had no substeps.

    Raises:
        TraceFormatError: ``steps`` is not a non-empty list, a step is not an object with
            ``substeps``, a substep is not an object with a ``role`` string (with the JSON path).
    """
    steps = run.get("steps")
    if not isinstance(steps, list):
        raise TraceFormatError(f"'steps' must be a list, got {type(steps).__name__}", json_path="$.steps")
    messages: list[dict[str, Any]] = []
    notes: list[MessageNote] = []
    dropped = False
    for g, step in enumerate(steps):
        spath = f"$.steps[{g}]"
        if not isinstance(step, dict) or "substeps" not in step:
            raise TraceFormatError("step is not an object with 'substeps'", json_path=spath)
        subs = parse_substeps(step["substeps"], f"{spath}.substeps")
        dropped |= not subs
        meta: dict[str, Any] = {}
        index = step.get("index")
        if index != g + 1:
            meta["step_index"] = index
        for j, sub in enumerate(subs):
            if not isinstance(sub, dict) or not isinstance(sub.get("role"), str) or not sub["role"].strip():
                raise TraceFormatError("substep is not an object with a 'role' string",
                                       json_path=f"{spath}.substeps[{j}]")
            messages.append(sub)
            notes.append(MessageNote((FLAG_SPLIT_MESSAGE,) if j else (), {**meta, "substep": j} if len(subs) > 1 else meta, g))
    return messages, notes, dropped


def _default_id(source: Source) -> str:
    stem = Path(source.file).stem if source.file else "agentrx"
    return f"{stem}#{source.record}" if source.record is not None else stem


class AgentRxStepsAdapter:
    """AgentRx step records (Hugging Face ``microsoft/AgentRx``): ``{trajectory_id, instruction, steps}``."""

    name = "agentrx_steps"
    description = ("AgentRx step records {trajectory_id, instruction, steps: [{index, substeps}]} "
                   "(Hugging Face microsoft/AgentRx)")

    def sniff(self, doc: Any) -> Sniff:
        """Match a record (``trajectory_id`` and ``steps``, or ``steps`` holding ``substeps``), or a
        list of records of which at least one matches."""
        runs = self.records(doc)
        return sniff_runs(runs, _reason) if runs else Sniff(False, "empty list")

    def records(self, doc: Any) -> list[Any]:
        """A list of records (:func:`~trajaudit.engine.trace.adapters.base.is_run_list`) is one run per element
        (a broken element is reported alone); anything else is one run."""
        return split_runs(doc, _is_record)

    def convert(self, run: Any, *, source: Source, options: LoadOptions) -> Trajectory:
        """Convert one record: one step per substep (see the module docstring).

        Raises:
            TraceFormatError: the record is not an object, or its steps/substeps are malformed (with
                the JSON path); the loader reports it with file and record and skips it.
        """
        if not isinstance(run, dict):
            raise TraceFormatError(f"record is not an object (got {type(run).__name__})", json_path="$",
                                   adapter=self.name)
        messages, notes, dropped = flatten(run)
        if not messages:
            raise TraceFormatError("record has no substeps", json_path="$.steps", adapter=self.name)
        rid = run.get("trajectory_id")
        tid = str(rid) if rid is not None and str(rid).strip() else _default_id(source)
        instruction = run.get("instruction")
        task = instruction if isinstance(instruction, str) and instruction.strip() else None
        src = Source(source.format, source.file, source.record, NUMBERING)
        if all(m["role"] in OPENAI_ROLES for m in messages):
            t = convert_chat(messages, source=src, options=options, path="$.steps[*].substeps",
                             run={"id": tid, **({"task": task} if task else {})}, exclude=("id", "task"),
                             notes=notes)
        else:
            classify = with_notes(lambda msg, i: classify_speaker(msg["role"], options), notes)
            steps = build_steps(messages, classify, options=options, path="$.steps[*].substeps",
                                source_number=lambda msg, i: notes[i].source_number)
            first_user = next((s.content for s in steps if s.kind == "user"), "")
            t = assemble(steps, id=tid, source=src, task=task if task is not None else first_user)
        if dropped:
            t = dataclasses.replace(t, flags=t.flags + (FLAG_DROPPED_MESSAGE,))
        return t
