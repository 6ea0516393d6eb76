"""The project's error types.

Every error trajaudit raises on bad input derives from :class:`TrajauditError`; anything else
escaping the library is a bug. Errors carry *where* the problem is (file, record, JSON path,
line/column) so that a person can find it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class TrajauditError(Exception):
    """Base class of all documented trajaudit errors."""


class TraceFormatError(TrajauditError):
    """A trace file or record could not be read as a trajectory.

    Attributes:
        message: what is wrong, in words.
        file: the path of the input file (or ``None`` for in-memory input).
        record: 0-based record number inside a multi-run file (list element or JSONL line), or ``None``.
        json_path: a JSON path inside the record, e.g. ``$.traj[4].tool_calls[0]``, or ``None``.
        adapter: the adapter that raised it, or ``None`` when detection failed.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        record: int | None = None,
        json_path: str | None = None,
        adapter: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.record = record
        self.json_path = json_path
        self.adapter = adapter
        super().__init__(str(self))

    def located(self, *, file: str | None = None, record: int | None = None) -> TraceFormatError:
        """Return a copy with ``file``/``record`` filled in where they were missing."""
        return type(self)(
            self.message,
            file=self.file or file,
            record=self.record if self.record is not None else record,
            json_path=self.json_path,
            adapter=self.adapter,
        )

    def __str__(self) -> str:
        where = []
        if self.file:
            where.append(self.file)
        if self.record is not None:
            where.append(f"record {self.record}")
        if self.json_path:
            where.append(self.json_path)
        prefix = ": ".join([", ".join(where)]) + ": " if where else ""
        via = f" (format: {self.adapter})" if self.adapter else ""
        return f"{prefix}{self.message}{via}"


class TraceFileNotFoundError(TraceFormatError, FileNotFoundError):
    """A trace file that does not exist: a :class:`TraceFormatError` (what a batch reports as a skipped
    input, file named, and what ``trajaudit`` commands catch) and a ``FileNotFoundError`` (what code
    opening a missing file expects; ``errno``, ``strerror`` and ``filename`` are set)."""


def cannot_read(e: OSError, file: str) -> TraceFormatError:
    """The error for a trace file that could not be read (``e``): :class:`TraceFileNotFoundError`
    when it does not exist, else :class:`TraceFormatError`; both say ``cannot read: REASON``."""
    message = f"cannot read: {e.strerror or e}"
    if not isinstance(e, FileNotFoundError):
        return TraceFormatError(message, file=file)
    err = TraceFileNotFoundError(message, file=file)
    err.errno, err.strerror, err.filename = e.errno, e.strerror, file
    return err


class FormatMismatchError(TraceFormatError):
    """A forced input format (``--input-format``, ``format=``) cannot read a document at all: none of
    its runs has that format's shape. The message names the format and what it expected. A run of a
    batch that the format cannot read is a per-run problem instead (the other runs load).

    Attributes:
        reason: the first refused record's reason ("not in the 'tau' format: ...").
        records: how many records (runs of a list, lines of a JSONL file) were all refused; when
            more than one, ``message`` is ``reason`` + " (all N records; the first shown)".
    """

    def __init__(self, message: str, *, records: int = 1, file: str | None = None, record: int | None = None,
                 json_path: str | None = None, adapter: str | None = None) -> None:
        self.reason = message
        self.records = records
        shown = f"{message} (all {records} records; the first shown)" if records > 1 else message
        super().__init__(shown, file=file, record=record, json_path=json_path, adapter=adapter)

    def located(self, *, file: str | None = None, record: int | None = None) -> FormatMismatchError:
        """Return a copy with ``file``/``record`` filled in where they were missing."""
        return FormatMismatchError(self.reason, records=self.records, file=self.file or file,
                                   record=self.record if self.record is not None else record,
                                   json_path=self.json_path, adapter=self.adapter)


class RulePackError(TrajauditError):
    """A rule pack (YAML) or a rule expression is invalid.

    Attributes:
        message: what is wrong.
        file: the pack file, or ``None``.
        line, column: 1-based position in the file (or in the expression), when known.
        rule_id: the rule concerned, when known.
        context: the offending source line with a caret under the column, when known.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
        rule_id: str | None = None,
        context: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        self.rule_id = rule_id
        self.context = context
        super().__init__(str(self))

    def __str__(self) -> str:
        if self.file is None and self.line is None:  # nothing to point at (a pack that was not found)
            rid = f" (rule {self.rule_id})" if self.rule_id else ""
            return f"{self.message}{rid}" + ("\n" + self.context if self.context else "")
        loc = self.file or "<rules>"
        if self.line is not None:
            loc += f":{self.line}"
            if self.column is not None:
                loc += f":{self.column}"
        rid = f" (rule {self.rule_id})" if self.rule_id else ""
        text = f"{loc}{rid}: {self.message}"
        if self.context:
            text += "\n" + self.context
        return text


class ConfigError(TrajauditError):
    """Bad configuration: a missing endpoint, an unknown strategy, an unreadable option file."""


class ArgumentTypeError(TrajauditError, TypeError):
    """A public API function got an argument of the wrong type (``audit(42)``, ``record="1"``,
    ``tools=5``). Derives from :class:`TypeError` too, so code catching the built-in type still works.

    Attributes:
        function: the public function, e.g. ``"audit"``.
        argument: the argument's name, e.g. ``"tools"``.
        expected: what is accepted, in words.
        given: a short description of the value given (its type and a shortened repr).
    """

    def __init__(self, function: str, argument: str, value: object, expected: str) -> None:
        import reprlib

        self.function = function
        self.argument = argument
        self.expected = expected
        self.given = f"{type(value).__name__} {reprlib.repr(value)}"
        super().__init__(f"{function}(): argument {argument!r} must be {expected}; got {self.given}")


class UnknownStrategyError(ConfigError, LookupError):
    """An unknown strategy name; the message suggests close names and lists the known ones.
    Derives from :class:`LookupError` too (what the strategy registry raised before)."""


class DiagnosisFormatError(TrajauditError, KeyError, ValueError):
    """A dict is not a serialized :class:`~trajaudit.engine.diagnosis.Diagnosis` (a missing
    ``trajectory_id``, a field of the wrong type). Derives from :class:`KeyError` (what a missing
    field raised before) and :class:`ValueError` too."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0]) if self.args else ""


class LLMError(TrajauditError):
    """An LLM call failed after its retries, or its answer never matched the required schema."""


class LLMUnreachableError(LLMError):
    """The LLM endpoint cannot be reached at all: no connection could be made (refused, unknown host,
    no route) even after the client's retries. Every further call would fail the same way, so a batch
    stops at the first one (``trajaudit audit``/``eval`` exit 2) instead of failing each run in turn;
    code that degrades on an :class:`LLMError` (a lost semantic check, a template repair) re-raises
    this one. Timeouts, HTTP 429/5xx and bad answers stay plain :class:`LLMError` (per-run)."""


@dataclass(frozen=True)
class Problem:
    """A reported (not raised) problem with one input: it was skipped, the batch went on.

    Attributes:
        file: the input file.
        record: record number in the file, or ``None``.
        message: the error text.
        details: extra facts (``non_utf8``; ``traceback``: the text of an unexpected exception's
            traceback, printed by the CLI only with ``--debug``).
        stage: where it failed: ``read`` (the file), ``load`` (parsing, format, mapping; a run with no
            agent message, nothing to diagnose), ``evidence`` (rules, claims), ``judge`` (the
            strategy), ``repair``, ``check`` (``trajaudit check``), ``worker`` (a worker process died).
    """

    file: str
    record: int | None
    message: str
    details: dict = field(default_factory=dict)
    stage: str = "load"
