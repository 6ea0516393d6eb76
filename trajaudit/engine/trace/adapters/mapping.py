"""Declarative mapping adapter: load a format nobody anticipated from a small YAML file of jmespath
expressions, without writing Python.

Mapping file (all expressions are jmespath, evaluated on the parsed JSON document)::

    name: my-agent-logs           # shown as the source format
    runs: "runs"                  # optional: where the list of runs is (default: the document is one run)
    messages: "events"            # required: the message list inside a run
    id: "run_id"                  # optional: run id
    task: "input.question"        # optional: the task text
    fields:                       # per message (defaults in brackets)
      role: "actor"               # [role]
      content: "text"             # [content]
      name: "agent"               # [name || sender]   agent name
      tool_calls: "calls"         # [tool_calls]  OpenAI or flat {id, name, arguments} calls
      tool_call_id: "reply_to"    # [tool_call_id]
    roles:                        # raw role value -> system | user | assistant | tool
      bot: assistant
      human: user
      function: tool
    named_users: auto             # optional: user messages with a name are other agents' turns in
                                  # a group chat (auto), always (agent) or never (user)

Roles not listed keep their value (system/user/assistant/tool are recognised as is); any other role
is kept as an agent and flagged ``unknown_role``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jmespath
import jmespath.exceptions

import trajaudit
from trajaudit import regular_files
from trajaudit.engine.trace.adapters.base import (
    NAMED_USERS,
    Classified,
    LoadOptions,
    Sniff,
    assemble,
    build_steps,
    classify_openai,
)
from trajaudit.engine.trace.adapters.speakers import speaker_sets
from trajaudit.engine.trace.ir import Source, Trajectory
from trajaudit.errors import TraceFormatError

if TYPE_CHECKING:
    import trajaudit.safe_yaml  # noqa: F401 - the attribute's type for mypy (loaded on first use)

_FIELDS = ("role", "content", "name", "tool_calls", "tool_call_id")
_DEFAULT_FIELDS = {"name": "name || sender"}
_KEYS = {"name", "runs", "messages", "id", "task", "fields", "roles", "description", "named_users"}


class MappingAdapter:
    """A format described by a YAML mapping of jmespath expressions.

    Raises:
        TraceFormatError: the mapping file is unreadable, has unknown keys or bad expressions.
    """

    description = "declarative jmespath mapping from a YAML file (--mapping FILE)"

    def __init__(self, spec: dict[str, Any], *, origin: str = "<mapping>") -> None:
        if not isinstance(spec, dict) or "messages" not in spec:
            raise TraceFormatError("mapping must be an object with at least a 'messages' expression", file=origin)
        unknown = set(spec) - _KEYS
        if unknown:
            raise TraceFormatError(f"unknown mapping keys: {', '.join(sorted(unknown))}", file=origin)
        self.origin = origin
        self.name = str(spec.get("name", "mapping"))
        self.roles = {str(k): str(v) for k, v in (spec.get("roles") or {}).items()}
        bad_roles = {v for v in self.roles.values() if v not in ("system", "user", "assistant", "tool")}
        if bad_roles:
            raise TraceFormatError(f"roles may map only to system/user/assistant/tool, not {sorted(bad_roles)}", file=origin)
        self.named_users = spec.get("named_users")
        if self.named_users is not None and self.named_users not in NAMED_USERS:
            raise TraceFormatError(f"named_users must be one of {', '.join(NAMED_USERS)}, not {self.named_users!r}",
                                   file=origin)
        fields = dict(spec.get("fields") or {})
        unknown_f = set(fields) - set(_FIELDS)
        if unknown_f:
            raise TraceFormatError(f"unknown mapping fields: {', '.join(sorted(unknown_f))}", file=origin)
        self._expr: dict[str, Any] = {}
        self._source: dict[str, str] = {}
        for key in ("runs", "messages", "id", "task"):
            if spec.get(key):
                self._expr[key] = self._compile(spec[key], key)
                self._source[key] = str(spec[key])
        # a message's speaker: ``name``, else Swarm's ``sender`` (as the OpenAI adapter reads it)
        self._fields = {f: self._compile(fields.get(f, _DEFAULT_FIELDS.get(f, f)), f"fields.{f}") for f in _FIELDS}

    def _compile(self, expr: Any, key: str) -> Any:
        text = str(expr)
        try:
            check_expression(text)
            compiled = jmespath.compile(text)
        except jmespath.exceptions.JMESPathError as e:
            raise TraceFormatError(f"bad jmespath for {key!r}: {e}", file=self.origin) from None
        except (ExpressionTooLarge, RecursionError, ValueError) as e:  # ValueError: a literal beyond the limits
            why = str(e) if isinstance(e, ExpressionTooLarge) else \
                "nested too deeply" if isinstance(e, RecursionError) else str(e)
            raise TraceFormatError(f"bad jmespath for {key!r}: {why}", file=self.origin) from None
        depth = _ast_depth(compiled.parsed)
        if depth > MAX_EXPRESSION_DEPTH:
            raise TraceFormatError(f"bad jmespath for {key!r}: {ExpressionTooLarge('depth', depth)}", file=self.origin)
        return _Guarded(compiled, key, text)

    @classmethod
    def from_file(cls, path: str | Path) -> MappingAdapter:
        """Read a mapping YAML file; raises :class:`TraceFormatError` naming the file."""
        import yaml  # only where YAML is parsed (an audit without --mapping imports no PyYAML)

        try:
            spec = trajaudit.safe_yaml.load(regular_files.read_text(path))
        except yaml.YAMLError as e:
            raise TraceFormatError(f"cannot read mapping: {trajaudit.safe_yaml.describe(e)}", file=str(path)) from None
        except (OSError, UnicodeDecodeError) as e:
            raise TraceFormatError(f"cannot read mapping: {e}", file=str(path)) from None
        return cls(spec, origin=str(path))

    def sniff(self, doc: Any) -> Sniff:
        """Match when the document holds at least one run and the ``messages`` expression yields a
        list for the first; else say which expression missed and what it yielded."""
        runs = self.records(doc)
        if not runs:
            got = self._expr["runs"].search(doc) if "runs" in self._expr else doc
            what = "an empty list" if got == [] else _kind(got)
            return Sniff(False, f"the 'runs' expression {self._source.get('runs', '')!r} yields {what}, "
                                "not a list of runs")
        return self._messages_sniff(runs[0])

    def _messages_sniff(self, run: Any) -> Sniff:
        got = self._expr["messages"].search(run)
        if isinstance(got, list):
            return Sniff(True)
        return Sniff(False, f"the 'messages' expression {self._source['messages']!r} yields {_kind(got)}, not a list")

    def records(self, doc: Any) -> list[Any]:
        """The runs of a document (``runs`` expression, else the document itself)."""
        if "runs" in self._expr:
            runs = self._expr["runs"].search(doc)
            return list(runs) if isinstance(runs, list) else []
        return [doc]

    def convert(self, run: Any, *, source: Source, options: LoadOptions) -> Trajectory:
        """Map one run to the IR."""
        sniff = self._messages_sniff(run)
        if not sniff.ok:
            raise TraceFormatError(sniff.reason, adapter=self.name)
        messages = self._expr["messages"].search(run)
        normalized = []
        for m in messages:
            if not isinstance(m, dict):
                normalized.append(m)
                continue
            out = {f: e.search(m) for f, e in self._fields.items()}
            role = out.get("role")
            out["role"] = self.roles.get(str(role), role)
            normalized.append({k: v for k, v in out.items() if v is not None})

        if self.named_users is not None:
            options = dataclasses.replace(options, named_users=self.named_users)
        agent_users, user_speakers = speaker_sets(normalized, options)

        def classify(msg: dict[str, Any], i: int) -> Classified:
            return classify_openai(msg, i, tool_agents=options.tool_agent_pattern, agent_users=agent_users,
                                   user_speakers=user_speakers)

        steps = build_steps(normalized, classify, options=options, path="$.messages")
        rid = self._expr["id"].search(run) if "id" in self._expr else None
        task = self._expr["task"].search(run) if "task" in self._expr else None
        stem = Path(source.file).stem if source.file else self.name
        tid = str(rid) if rid is not None else (f"{stem}#{source.record}" if source.record is not None else stem)
        src = Source(self.name, source.file, source.record, "0-based position in the mapped message list")
        first_user = next((s.content for s in steps if s.kind == "user"), "")
        return assemble(steps, id=tid, source=src, task=task if isinstance(task, str) else first_user)


#: Characters of one mapping expression (real ones are a few dozen).
MAX_EXPRESSION_CHARS = 2000
#: Nesting of one mapping expression: brackets/parentheses/braces in its text, and levels of its
#: parsed tree (jmespath's parser and interpreter recurse once or more per level: thousands of
#: parentheses raised RecursionError while the mapping compiled).
MAX_EXPRESSION_DEPTH = 50


class ExpressionTooLarge(ValueError):
    """A mapping expression longer or more deeply nested than the limits."""

    def __init__(self, what: str, got: int) -> None:
        limit = MAX_EXPRESSION_CHARS if what == "size" else MAX_EXPRESSION_DEPTH
        unit = "characters" if what == "size" else "levels"
        super().__init__(f"expression too {'long' if what == 'size' else 'deeply nested'} ({got} {unit}; "
                         f"the limit is {limit})")


def check_expression(text: str) -> None:
    """Refuse, before it is compiled, an expression longer than :data:`MAX_EXPRESSION_CHARS` or with
    brackets nested deeper than :data:`MAX_EXPRESSION_DEPTH`.

    Raises:
        ExpressionTooLarge: naming the size or depth and the limit.
    """
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ExpressionTooLarge("size", len(text))
    depth = deepest = 0
    for ch in text:
        if ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}":
            depth -= 1
    if deepest > MAX_EXPRESSION_DEPTH:
        raise ExpressionTooLarge("depth", deepest)


def _ast_depth(node: Any) -> int:
    """Levels of a parsed jmespath tree (``{"type", "children"}`` dicts). Iterative."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        n, d = stack.pop()
        deepest = max(deepest, d)
        if isinstance(n, dict):
            stack.extend((c, d + 1) for c in n.get("children") or ())
    return deepest


class _Guarded:
    """A compiled mapping expression whose evaluation errors name the expression: a jmespath type
    error at run time (``abs(goal)`` on a string) raised ``JMESPathTypeError`` out of the loader, and
    the file's good runs were lost. :meth:`search` raises :class:`TraceFormatError` instead, which the
    loader reports for that run (the others load)."""

    __slots__ = ("expr", "key", "text")

    def __init__(self, expr: Any, key: str, text: str) -> None:
        self.expr, self.key, self.text = expr, key, text

    def search(self, value: Any) -> Any:
        """The expression's value on ``value``.

        Raises:
            TraceFormatError: the expression failed on this input (type error, nesting too deep).
        """
        try:
            return self.expr.search(value)
        except jmespath.exceptions.JMESPathTypeError as e:  # its text quotes the whole value: say the types
            raise TraceFormatError(f"the mapping expression {self.key!r} ({self.text!r}) failed: {e.function_name}() "
                                   f"expected {' or '.join(map(str, e.expected_types))}, got {e.actual_type}") from None
        except jmespath.exceptions.JMESPathError as e:
            raise TraceFormatError(f"the mapping expression {self.key!r} ({self.text!r}) failed: "
                                   f"{str(e)[:300]}") from None
        except RecursionError:
            raise TraceFormatError(f"the mapping expression {self.key!r} ({self.text!r}) failed: nested too "
                                   "deeply") from None


def _kind(value: Any) -> str:
    """How a jmespath result is named in messages: ``null``, ``a string``, ``an object``, ..."""
    if value is None:
        return "null"
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", dict: "an object",
             list: "a list"}
    return names.get(type(value), type(value).__name__)
