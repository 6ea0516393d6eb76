"""Reading trace files into trajectories: decoding, JSON/JSONL parsing, format detection, validation.

One broken run in a multi-run file is reported as a :class:`~trajaudit.errors.Problem` and skipped;
the other runs still load — also with a forced format, whose shape check is per run. Whole-file
failures (unreadable, empty, not JSON, no format matches, not in the forced format at all) raise
:class:`~trajaudit.errors.TraceFormatError` naming the file.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trajaudit import regular_files
from trajaudit.api_args import SOURCE, check_path, check_paths, check_record
from trajaudit.boundary import load_problem
from trajaudit.engine.schema import schema_errors
from trajaudit.engine.trace.adapters import Adapter, LoadOptions, MappingAdapter, default_adapters, files
from trajaudit.engine.trace.forced_format import MisfitTally, mapping_for, misfits
from trajaudit.engine.trace.ir import Source, Trajectory
from trajaudit.engine.trace.own_output import output_hint
from trajaudit.engine.trace.text import lossy_note
from trajaudit.errors import ArgumentTypeError, Problem, TraceFormatError, cannot_read
from trajaudit.registry import Registry
from trajaudit.regular_files import TRACE_SUFFIXES, expand_paths  # noqa: F401 - re-exported (the loader's API)

FLAG_NON_UTF8 = "non_utf8"


@dataclass
class LoadResult:
    """What loading produced: the trajectories and the problems (runs reported and skipped)."""

    trajectories: list[Trajectory] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    def __repr__(self) -> str:
        ids = ", ".join(t.id for t in self.trajectories[:5]) + (", …" if len(self.trajectories) > 5 else "")
        return f"LoadResult({len(self.trajectories)} trajectories [{ids}], {len(self.problems)} problems)"

    def extend(self, other: LoadResult) -> None:
        """Append another result's trajectories and problems."""
        self.trajectories.extend(other.trajectories)
        self.problems.extend(other.problems)


def check_source(function: str, argument: str, value: Any) -> Any:
    """A run to load: a Trajectory, a path (returned as ``str``) or a parsed dict/list document;
    anything else (``None``, a number, ``bytes`` …) raises ``ArgumentTypeError``."""
    if isinstance(value, (Trajectory, dict, list, str)):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise ArgumentTypeError(function, argument, value, SOURCE)


def problem_details(flags: tuple[str, ...]) -> dict[str, Any]:
    """``Problem.details`` for a run of a file loaded with ``flags``: ``{"non_utf8": True}`` when
    its bytes were not valid UTF-8 (so the CLI warns about the file even though the run was skipped)."""
    return {FLAG_NON_UTF8: True} if FLAG_NON_UTF8 in flags else {}


def detect(doc: Any, adapters: Registry[Adapter]) -> Adapter:
    """Pick the first adapter whose ``sniff`` matches.

    Raises:
        TraceFormatError: none matched; the message lists every format tried and why it did not match,
            or says that the document is trajaudit's own output (a diagnosis, a validation log).
    """
    reasons = []
    for name in adapters:  # built one by one (lazy entries): the formats after the match are not imported
        if (s := (a := adapters.get(name)).sniff(doc)).ok:
            return a
        reasons.append(f"{name}: {s.reason}")
    single = (isinstance(doc, dict) and isinstance(doc.get("role"), str) and "content" in doc
              and "messages" not in doc)
    if ours := output_hint(doc):  # the list of every format tried says nothing more
        raise TraceFormatError(ours)
    hint = ("the document is one message (a saved API response?), not a run: give the conversation as a "
            "list of messages or {'messages': [...]}; " if single else "")
    raise TraceFormatError(hint + "no known trace format matches; tried " + "; ".join(reasons)
                           + " (use --input-format or --mapping)")


def _builtin_hint(doc: Any, adapters: Registry[Adapter]) -> str:
    """``"; it looks like the built-in 'tau' format: …"`` when a built-in format matches ``doc``, else ``""``."""
    try:
        name = detect(doc, adapters).name
    except TraceFormatError:
        return ""
    return f"; it looks like the built-in {name!r} format: read it without --mapping"


def load_document(doc: Any, *, file: str | None = None, format: str | None = None,
                  mapping: MappingAdapter | None = None, record: int | None = None, options: LoadOptions | None = None,
                  line: int | None = None, adapters: Registry[Adapter] | None = None,
                  flags: tuple[str, ...] = ()) -> LoadResult:
    """Convert one parsed JSON document (which may hold several runs).

    Args:
        doc: the parsed JSON.
        file: the file it came from, for messages and ``Source``.
        format: force an adapter by name (skips detection; its shape check runs per run: a run it
            refuses is a problem, the others load).
        mapping: a mapping adapter to use instead of the registry.
        record: keep only this 0-based record.
        line: the JSONL line this document came from (used as the record number).

    Raises:
        TraceFormatError: the format cannot be determined, or ``record`` is out of range.
        FormatMismatchError: (a ``TraceFormatError``) the forced ``format`` fits none of its runs.
    """
    options = options or LoadOptions()
    adapters = adapters or default_adapters()
    adapter, runs = _adapter_and_runs(doc, file=file, format=format, mapping=mapping, line=line, adapters=adapters)
    indexed = _numbered_runs(doc, runs, adapter, file=file, record=record, line=line)
    misfit = misfits(adapter, indexed, file=file, line=line) if format and mapping is None else {}
    result = LoadResult()
    for i, (rec, run) in enumerate(indexed):
        try:
            if i in misfit:
                raise misfit[i]
            result.trajectories.append(_convert_run(adapter, run, Source(adapter.name, file, rec), options, flags))
        except TraceFormatError as e:
            err = e if e.adapter else TraceFormatError(e.message, json_path=e.json_path, adapter=adapter.name)
            located = err.located(file=file, record=rec)
            result.problems.append(Problem(file or "<input>", rec, str(located), problem_details(flags)))
        except Exception as e:  # noqa: BLE001 - the per-run boundary: this run is reported, the others load
            result.problems.append(_unexpected(e, file, rec, flags))
    return result


def _adapter_and_runs(doc: Any, *, file: str | None, format: str | None, mapping: MappingAdapter | None,
                      line: int | None, adapters: Registry[Adapter]) -> tuple[Adapter, list[Any]]:
    """The reader of ``doc`` (the mapping, else the forced ``format``, else the detected one) and the
    runs it finds there. Raises TraceFormatError (at ``file``, JSONL ``line``): ``format`` is unknown,
    no format matches, the document holds no run, or a mapping does not match it (one run at most)."""
    try:
        adapter: Adapter = mapping if mapping is not None else (adapters.get(format) if format else detect(doc, adapters))
    except LookupError as e:
        raise TraceFormatError(str(e.args[0]), file=file) from None
    except TraceFormatError as e:
        raise e.located(file=file, record=line) from None
    runs = adapter.records(doc)
    if mapping is not None and len(runs) <= 1:
        sniff = mapping.sniff(doc)
        if not sniff.ok:  # a file the mapping cannot read is reported, never silently dropped
            raise TraceFormatError(f"does not match the mapping {mapping.origin}: {sniff.reason}{_builtin_hint(doc, adapters)}",
                                   file=file, record=line, adapter=mapping.name)
    if not runs:
        raise TraceFormatError("the document holds no runs", file=file, record=line, adapter=adapter.name)
    return adapter, runs


def _numbered_runs(doc: Any, runs: list[Any], adapter: Adapter, *, file: str | None, record: int | None,
                   line: int | None) -> list[tuple[int | None, Any]]:
    """``(record number, run)`` per run to convert: the JSONL ``line``; else only ``record`` if given
    (TraceFormatError when out of range); else the 0-based position when the document holds several
    runs (or is a ``tau`` list), ``None`` for a lone run."""
    if line is not None:
        return [(line, r) for r in runs]
    if record is not None:
        if not 0 <= record < len(runs):
            raise TraceFormatError(f"record {record} out of range: the file holds {len(runs)} run(s)", file=file)
        return [(record, runs[record])]
    numbered = len(runs) > 1 or isinstance(doc, list) and adapter.name == "tau"
    return [(i if numbered else None, r) for i, r in enumerate(runs)]


def _convert_run(adapter: Adapter, run: Any, source: Source, options: LoadOptions,
                 flags: tuple[str, ...]) -> Trajectory:
    """One run → its :class:`Trajectory` with the file's ``flags``, checked against the trajectory
    schema (``options.validate``). Raises TraceFormatError: the adapter refuses it, or the schema does."""
    traj = adapter.convert(run, source=source, options=options)
    if flags:
        traj = dataclasses.replace(traj, flags=traj.flags + flags)
    if options.validate:
        errs = schema_errors("trajectory", traj.to_dict(), limit=3)
        if errs:
            raise TraceFormatError("IR fails the trajectory schema: " + "; ".join(errs), adapter=adapter.name)
    return traj


def _unexpected(e: Exception, file: str | None, record: int | None, flags: tuple[str, ...] = ()) -> Problem:
    """The per-run boundary's :class:`Problem` for an unexpected exception while loading a run."""
    return load_problem(e, file, record, problem_details(flags))


def load_path(
    path: str | os.PathLike[str],
    *,
    format: str | None = None,
    mapping: str | os.PathLike[str] | MappingAdapter | None = None,
    record: int | None = None,
    options: LoadOptions | None = None,
) -> LoadResult:
    """Load every run of one trace file.

    Args:
        path: a ``.json`` (one document: one run or a list of runs) or ``.jsonl``/``.ndjson`` file.
        format: force a format by name (``openai``, ``tau``, ``who_and_when``, ``magentic``).
        mapping: a mapping YAML file (or adapter) for custom formats.
        record: keep only this 0-based record (list element, or JSONL line).
        options: :class:`LoadOptions` (content cap, validation).

    Returns:
        :class:`LoadResult`; runs that failed are in ``problems`` with file and record.

    Raises:
        TraceFormatError: the file is unreadable, empty, not JSON, or matches no format;
            :class:`~trajaudit.errors.FormatMismatchError` when the forced ``format`` fits none of its
            records (one error for the file, not one per record: docs/input.md).
        ArgumentTypeError: ``path`` is not a ``str``/``os.PathLike``, or ``record`` is not an int.
        ConfigError: both ``format`` and ``mapping`` are given.
    """
    check_path("load_path", "path", path)
    check_record("load_path", record)
    mapping = mapping_for(format, mapping)
    result = LoadResult()
    try:
        for part in load_parts(path, format, mapping, options, record=record, chunk=None):
            result.extend(part)
    except TraceFormatError:
        raise
    except Exception as e:  # noqa: BLE001 - the per-file boundary: reported as the file's problem
        result.problems.append(_unexpected(e, str(path), record))
    if record is not None and not result.trajectories and not result.problems:
        raise TraceFormatError(f"record {record} not found (records are 0-based JSONL line numbers)", file=str(path))
    return result


def load_parts(path: str | os.PathLike[str], format: str | None, mapping: Any, options: LoadOptions | None, *,
               record: int | None = None, chunk: int | None = None, data: bytes | None = None,
               first_line: int = 0) -> Iterator[LoadResult]:
    """:func:`load_path`'s reading, as parts: the whole file in one part (``chunk=None``), or for a
    multi-run file (JSONL) parts of up to ``chunk`` runs, each JSONL line parsed and converted only
    when its part is asked for — so a batch holds one part's runs at a time, not the file's. ``data``:
    bytes already read (``path`` names them), a whole file or its JSONL lines from line ``first_line``
    on, records keeping their line numbers (:mod:`~trajaudit.engine.trace.shards`). Raises
    TraceFormatError as :func:`load_path` (a run's file unreadable, empty or not JSON) when met."""
    file = str(path)
    try:
        data = regular_files.read_bytes(path) if data is None else data
    except OSError as e:
        raise cannot_read(e, file) from None
    text, lossy, archive = files.read_text(data, file, mapping is None)  # an Inspect .eval zip: read whole
    del data
    flags = (FLAG_NON_UTF8,) if lossy else ()
    jsonl = file.endswith((".jsonl", ".ndjson")) or first_line > 0
    part = LoadResult()
    refused = MisfitTally()  # the lines the forced format refused whole
    loaded = False
    for line, doc, err in files.trace_documents(text, file, jsonl, lossy, archive, mapping is None, first_line):
        multi = jsonl or line is not None  # a .json file of several JSON lines reads as JSONL
        if record is not None and line is not None and line != record:
            continue
        if err:
            part.problems.append(Problem(file, line, str(TraceFormatError(err, file=file, record=line)),
                                         problem_details(flags)))
            continue
        try:
            part.extend(
                load_document(doc, file=file, format=format, mapping=mapping,
                              record=record if line is None else None, options=options,
                              line=line if multi else None, flags=flags)
            )
        except TraceFormatError as e:
            if not multi:
                raise (lossy_note(e) if lossy else e) from None
            refused.add(e)
            part.problems.append(Problem(file, line, str(e.located(file=file, record=line)), problem_details(flags)))
        except Exception as e:  # noqa: BLE001 - the per-run boundary (a bug in an adapter): reported, batch goes on
            part.problems.append(_unexpected(e, file, line if multi else record, flags))
        loaded = loaded or bool(part.trajectories)
        if chunk is not None and len(part.trajectories) >= chunk:
            yield part
            part = LoadResult()
    whole = refused.file_error(file, len(part.problems), loaded)
    if whole is not None:  # not in the forced format at all: one error for the file, not one copy per line
        raise (lossy_note(whole) if lossy else whole)
    yield part


def load_many(
    paths: Iterable[str | os.PathLike[str]],
    *,
    format: str | None = None,
    mapping: str | os.PathLike[str] | MappingAdapter | None = None,
    options: LoadOptions | None = None,
) -> LoadResult:
    """Load every run of every file under ``paths``; whole-file failures become problems too.

    Args:
        paths: files, folders (searched recursively) and glob patterns; a single ``str`` or
            ``os.PathLike`` is one path.

    Raises:
        ArgumentTypeError: ``paths`` is neither a path nor an iterable of paths.
        ConfigError: both ``format`` and ``mapping`` are given.
    """
    result = LoadResult()
    for _, got in iter_load(paths, format=format, mapping=mapping, options=options):
        result.extend(got)
    return result


def iter_load(
    paths: Iterable[str | os.PathLike[str]],
    *,
    format: str | None = None,
    mapping: str | os.PathLike[str] | MappingAdapter | None = None,
    options: LoadOptions | None = None,
) -> Iterator[tuple[Path, LoadResult]]:
    """:func:`load_many` a part at a time: ``(file, LoadResult)`` for each file under ``paths`` — a
    multi-run (JSONL) file in parts of up to :data:`ITER_CHUNK` runs, each line read when its part is
    asked for; a file that cannot be read at all is a part with one problem — so a batch can audit
    a part's runs and let them go before reading on. The arguments are checked before the first
    file is read.

    Raises:
        ArgumentTypeError: ``paths`` is neither a path nor an iterable of paths.
        ConfigError: both ``format`` and ``mapping`` are given.
    """
    paths = check_paths("load_many", "paths", paths)
    mapping = mapping_for(format, mapping)
    return _iter_files(paths, format, mapping, options)


def _iter_files(paths: list[Any], format: str | None, mapping: Any, options: LoadOptions | None
                ) -> Iterator[tuple[Path, LoadResult]]:
    for p in expand_paths(paths):
        try:
            yield from ((p, part) for part in load_parts(p, format, mapping, options, chunk=ITER_CHUNK))
        except TraceFormatError as e:
            yield p, LoadResult(problems=[Problem(str(p), e.record, str(e))])
        except Exception as e:  # noqa: BLE001 - the per-file boundary: the file is reported, the batch goes on
            yield p, LoadResult(problems=[_unexpected(e, str(p), None)])


#: Runs per part that :func:`iter_load` reads at a time from a multi-run (JSONL) file.
ITER_CHUNK = 64


def load(
    source: str | os.PathLike[str] | Trajectory | dict | list,
    *,
    format: str | None = None,
    record: int | None = None,
    mapping: str | os.PathLike[str] | MappingAdapter | None = None,
    options: LoadOptions | None = None,
) -> Trajectory:
    """Load exactly one trajectory from a path, a parsed document, or pass a Trajectory through.

    Args:
        source: a :class:`Trajectory` (returned as is), a trace path (``str``/``os.PathLike``), or a
            parsed trace document (``dict`` or ``list``, e.g. ``json.loads(text)``).
        format: force a format by name.
        record: which run (0-based) of a multi-run input.
        mapping: a mapping YAML file (or adapter) for a custom format (instead of ``format``).
        options: :class:`LoadOptions` (content cap, validation, code-runner names, how named
            ``user`` messages are read: ``LoadOptions(named_users="user")``).

    Raises:
        TraceFormatError: nothing loadable, or the input holds several runs and ``record`` is not
            given, or ``source`` is a string of JSON text rather than a path.
        ArgumentTypeError: ``source`` or ``record`` has a type not listed above.
        ConfigError: both ``format`` and ``mapping`` are given.
    """
    return load_checked(source, format=format, record=record, function="load", argument="source",
                        mapping=mapping, options=options)


def load_checked(source: Any, *, format: str | None, record: Any, function: str, argument: str,
                 mapping: str | os.PathLike[str] | MappingAdapter | None = None,
                 options: LoadOptions | None = None) -> Trajectory:
    """:func:`load`, with argument errors naming ``function`` and ``argument`` (``audit``'s own names)."""
    source = check_source(function, argument, source)
    record = check_record(function, record)
    mapping = mapping_for(format, mapping)
    text = source.strip() if isinstance(source, str) else ""
    if text[:1] + text[-1:] in ("{}", "[]") and not os.path.exists(source):
        raise TraceFormatError(f"{function}(): argument {argument!r} looks like JSON text, not a file path; "
                               "pass the parsed document instead (json.loads(text))")
    if isinstance(source, Trajectory):
        return source
    if isinstance(source, (dict, list)):
        res = load_document(source, format=format, record=record, mapping=mapping, options=options)
    else:
        res = load_path(source, format=format, record=record, mapping=mapping, options=options)
    if res.problems and not res.trajectories:
        raise TraceFormatError(res.problems[0].message)
    if len(res.trajectories) != 1:
        raise TraceFormatError(f"input holds {len(res.trajectories)} runs; pass record=N (0-based) to pick one",
                               file=None if isinstance(source, (dict, list)) else str(source))
    return res.trajectories[0]
