"""Reading the documented JSON form of a citation run (docs/citation.md) into the invocation model.

The document is validated against ``trajaudit/schemas/citation_run.schema.json`` first, then its
references are checked (unknown documents, unknown ``from`` links, duplicate ids, cycles, the final
invocation). Every problem raises :class:`~trajaudit.errors.TraceFormatError` with the file and the
JSON path of the offending value (adapter ``citation-run``).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import networkx as nx
from jsonschema.exceptions import best_match

from trajaudit import safe_json
from trajaudit.citation.mapping import CitationMapping
from trajaudit.citation.model import (
    DEFAULT_CITATION_PATTERN,
    FORMAT,
    CitationResolver,
    CitationRun,
    Document,
    InputUnit,
    Invocation,
    OutputRef,
    OutputUnit,
    extract_markers,
    sentences_with_citations,
)
from trajaudit.engine.dsl.regex.safety import refusal, regex_risk
from trajaudit.engine.schema import validator
from trajaudit.engine.trace import text as trace_text
from trajaudit.errors import TraceFormatError

log = logging.getLogger(__name__)

ADAPTER = "citation-run"


def _err(message: str, path: str, file: str | None) -> TraceFormatError:
    return TraceFormatError(message, file=file, json_path=path, adapter=ADAPTER)


def read_json(path: str | Path) -> Any:
    """Parse a JSON file; raises :class:`TraceFormatError` naming the file (and line/column)."""
    p = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise TraceFormatError(f"cannot read: {e}", file=p, adapter=ADAPTER) from None
    text, _lossy = trace_text.decode(data, p)  # as trace files: empty and UTF-16/32 files named (iconv hint)
    try:
        return safe_json.loads(text)
    except safe_json.NestedTooDeep as e:
        raise TraceFormatError(str(e), file=p, adapter=ADAPTER) from None
    except json.JSONDecodeError as e:
        raise TraceFormatError(f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}", file=p,
                               adapter=ADAPTER) from None


def load_run(path: str | Path, *, mapping: str | Path | None = None) -> CitationRun:
    """Load a citation run from a file: the native JSON form, or any JSON through a YAML ``mapping``.

    Args:
        path: the trace file.
        mapping: a citation mapping YAML (:mod:`trajaudit.citation.mapping`), or ``None`` for the native form.

    Raises:
        TraceFormatError: unreadable file, invalid JSON, a mapping or schema violation, a bad reference.
    """
    doc = read_json(path)
    if mapping is None:
        if not isinstance(doc, dict) or (doc.get("format") != FORMAT and "invocations" not in doc):
            raise _err(f'not a citation run: expected a JSON object with "format": "{FORMAT}" and "invocations" '
                       f"(docs/citation.md), found {describe_document(doc)}. For another trace format, pass "
                       "--mapping M.yaml (Python: mapping=), a jmespath mapping onto the citation-run form",
                       "$", str(path))
        return run_from_dict(doc, file=str(path))

    m = CitationMapping.from_file(mapping)
    mapped = m.apply(doc, file=str(path))
    try:
        return run_from_dict(mapped, file=str(path), format=m.name)
    except TraceFormatError as e:
        raise TraceFormatError(f"{e.message} (path in the document produced by mapping {mapping})", file=e.file,
                               json_path=e.json_path, adapter=m.name) from None


def describe_document(doc: Any) -> str:
    """The shape of a parsed JSON document in a few words (its top-level keys, never its content):
    ``a JSON list of 6 items (objects with keys task_id, reward, traj)``,
    ``a JSON object with keys history, question (no "format")``."""
    def keys(d: dict[str, Any]) -> str:
        names = [str(k)[:40] for k in list(d)[:8]]
        return ", ".join(names) + (f", … ({len(d)} keys)" if len(d) > 8 else "") if names else "no keys"

    if isinstance(doc, dict):
        fmt = doc.get("format")
        what = f'"format": {json.dumps(fmt)[:60]}' if fmt is not None else 'no "format"'
        return f"a JSON object with keys {keys(doc)} ({what})" if doc else "an empty JSON object"
    if isinstance(doc, list):
        first = doc[0] if doc else None
        inner = f" (the first an object with keys {keys(first)})" if isinstance(first, dict) else ""
        return f"a JSON list of {len(doc)} item(s){inner}"
    return f"a JSON {type(doc).__name__.replace('str', 'string').replace('NoneType', 'null')}"


def run_from_dict(doc: Any, *, file: str | None = None, format: str = FORMAT) -> CitationRun:
    """Build a :class:`CitationRun` from the native JSON form (already parsed).

    Raises:
        TraceFormatError: schema violation or bad reference, with ``file`` and the JSON path.
    """
    errors = list(validator("citation_run").iter_errors(doc))
    if errors:
        e = best_match(errors)
        message = e.message
        if len(message) > 300:  # jsonschema quotes the whole offending value (a document can be MBs)
            message = (f"{describe_document(e.instance)} fails the schema's {e.validator!r} constraint "
                       f"{json.dumps(e.validator_value, default=str)[:120]}")
        raise _err(message, e.json_path, file)
    pattern = _compile_pattern(doc.get("citation_pattern"), file)
    docs: dict[str, Document] = {}
    for i, d in enumerate(doc.get("documents", [])):
        if d["id"] in docs:
            raise _err(f"duplicate document id {d['id']!r}", f"$.documents[{i}].id", file)
        docs[d["id"]] = Document(d["id"], d["text"], d.get("url"), d.get("title"))
    resolver = CitationResolver(docs, doc.get("aliases"))
    raw_invs = doc["invocations"]
    ids: dict[str, int] = {}
    for i, inv in enumerate(raw_invs):
        if inv["id"] in ids:
            raise _err(f"duplicate invocation id {inv['id']!r}", f"$.invocations[{i}].id", file)
        ids[inv["id"]] = i
    outputs = {inv["id"]: _outputs(inv, i, pattern, resolver, file) for i, inv in enumerate(raw_invs)}
    invocations = []
    for i, inv in enumerate(raw_invs):
        inputs = _inputs(inv, i, docs, outputs, pattern, resolver, file)
        invocations.append(Invocation(inv["id"], inv["agent"], inv.get("role") or inv["agent"], i,
                                      tuple(inputs), outputs[inv["id"]]))
    run_id = doc.get("id") or (Path(file).stem if file else "citation-run")
    run = CitationRun(run_id, doc.get("task", ""), docs, tuple(invocations), "", dict(doc.get("aliases", {})),
                      file, format)
    graph = run.graph()
    try:
        cycle = nx.find_cycle(graph)
    except nx.NetworkXNoCycle:
        cycle = None
    if cycle:
        chain = " -> ".join([cycle[0][0]] + [v for _, v in cycle])
        raise _err(f"parent links form a cycle: {chain}", "$.invocations", file)
    final = doc.get("final")
    if final is not None:
        if final not in ids:
            raise _err(f"final invocation {final!r} does not exist", "$.final", file)
    else:
        sinks = [inv.id for inv in invocations if graph.out_degree(inv.id) == 0 and inv.outputs]
        if len(sinks) != 1:
            raise _err(f"cannot infer the final invocation (candidates: {', '.join(sinks) or 'none'}); "
                       "set 'final'", "$.final", file)
        final = sinks[0]
    if not run.invocation(final).outputs:
        raise _err(f"final invocation {final!r} has no outputs", "$.final", file)
    invocations = run.invocations
    if doc.get("final_citations") == "documents":
        invocations = tuple(_drop_non_documents(inv, docs) if inv.id == final else inv for inv in invocations)
    return CitationRun(run.id, run.task, docs, invocations, final, run.aliases, file, format)


def _drop_non_documents(inv: Invocation, docs: dict[str, Document]) -> Invocation:
    """Seed 003 App. I.5: final-report markers that name no source document (note ids) mean nothing to
    a reader and are dropped before evaluation."""
    outs = tuple(replace(o, citations=frozenset(c for c in o.citations if c in docs)) for o in inv.outputs)
    return replace(inv, outputs=outs)


def _compile_pattern(src: str | None, file: str | None) -> re.Pattern[str]:
    try:
        pat = re.compile(src or DEFAULT_CITATION_PATTERN)
    except re.error as e:
        raise _err(f"invalid citation_pattern: {e}", "$.citation_pattern", file) from None
    risk = regex_risk(pat.pattern)
    if risk:
        raise _err(refusal("citation_pattern", risk), "$.citation_pattern", file)
    if pat.groups < 1:
        raise _err("citation_pattern needs a capturing group holding the ids", "$.citation_pattern", file)
    return pat


def _outputs(inv: dict[str, Any], i: int, pattern: re.Pattern[str], resolver: CitationResolver,
             file: str | None) -> tuple[OutputUnit, ...]:
    inv_id = inv["id"]
    default_kind = inv.get("output_kind", "synthesized")
    raw: list[Any] = list(inv.get("outputs", []))
    if "output_text" in inv:
        if raw:
            raise _err("give either 'outputs' or 'output_text', not both", f"$.invocations[{i}].output_text", file)
        clean, sentences = sentences_with_citations(inv["output_text"], pattern, resolver)
        return tuple(OutputUnit(inv_id, k, clean[s.start:s.end], s.citations, default_kind, None, s.written)
                     for k, s in enumerate(sentences))
    out = []
    for k, o in enumerate(raw):
        item = {"text": o} if isinstance(o, str) else o
        text, markers = extract_markers(item["text"], pattern)
        written = [c for _, _, ids in markers for c in ids] + list(item.get("citations", []))
        text = text.strip()
        if not text:
            raise _err("output is only citation markers", f"$.invocations[{i}].outputs[{k}].text", file)
        out.append(OutputUnit(inv_id, k, text, frozenset(resolver.resolve(c) for c in written),
                              item.get("kind", default_kind), item.get("needs_citation"), tuple(written)))
    return tuple(out)


def _parse_ref(ref: str, outputs: dict[str, tuple[OutputUnit, ...]], path: str,
               file: str | None) -> list[OutputRef]:
    m = re.fullmatch(r"([^.\s]+)(?:\.outputs\.(\d+))?", ref.strip())
    if not m or m.group(1) not in outputs:
        known = ", ".join(outputs)
        raise _err(f"'from' refers to unknown invocation or output {ref!r} (invocations: {known})", path, file)
    inv_id, n = m.group(1), m.group(2)
    if n is None:
        if not outputs[inv_id]:
            raise _err(f"'from' refers to {inv_id!r}, which has no outputs", path, file)
        return [o.ref for o in outputs[inv_id]]
    if int(n) >= len(outputs[inv_id]):
        raise _err(f"'from' refers to output {n} of {inv_id!r}, which has {len(outputs[inv_id])}", path, file)
    return [OutputRef(inv_id, int(n))]


def _inputs(inv: dict[str, Any], i: int, docs: dict[str, Document], outputs: dict[str, tuple[OutputUnit, ...]],
            pattern: re.Pattern[str], resolver: CitationResolver, file: str | None) -> list[InputUnit]:
    inv_id = inv["id"]
    units: list[InputUnit] = []

    def add(kind: str, text: str, cits: frozenset[str], sources: tuple[OutputRef, ...], document: str | None,
            uid: str | None) -> None:
        clean, sentences = sentences_with_citations(text, pattern, resolver)
        units.append(InputUnit(inv_id, len(units), kind, clean, cits, sentences, sources, document, uid))

    for k, u in enumerate(inv.get("inputs", [])):
        path = f"$.invocations[{i}].inputs[{k}]"
        explicit = frozenset(resolver.resolve(c) for c in u.get("citations", []))
        if "document" in u:
            d = docs.get(resolver.resolve(u["document"]))
            if d is None:
                raise _err(f"unknown document {u['document']!r}", f"{path}.document", file)
            add(u.get("kind", "document"), u.get("text", d.text), frozenset({d.id}) | explicit, (), d.id, u.get("id"))
            continue
        if "from" in u:
            refs_raw = u["from"] if isinstance(u["from"], list) else [u["from"]]
            refs = [r for j, raw in enumerate(refs_raw)
                    for r in _parse_ref(raw, outputs, f"{path}.from" + (f"[{j}]" if isinstance(u["from"], list) else ""),
                                        file)]
            if any(r.invocation == inv_id for r in refs):
                raise _err("an invocation cannot read its own output", f"{path}.from", file)
            ups = [outputs[r.invocation][r.output] for r in refs]
            if "text" in u:
                cits = explicit if "citations" in u else frozenset().union(*(o.citations for o in ups))
                add(u.get("kind", "note"), u["text"], cits, tuple(refs), None, u.get("id"))
            else:
                for o in ups:
                    kind = u.get("kind", "snippet" if o.kind == "snippet" else "note")
                    add(kind, o.text, o.citations | explicit, (o.ref,), None, u.get("id"))
            continue
        add(u.get("kind", "note"), u["text"], explicit, (), None, u.get("id"))
    return units
