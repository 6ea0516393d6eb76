"""Map any JSON trace of a deep-research system to the citation-run form with a YAML file of jmespath
expressions (like :mod:`trajaudit.engine.trace.adapters.mapping` does for trajectories).

Seed 003 App. I: every system needs its own trace adapter, but the evaluation runs identically once the
adapter exposes each agent's inputs and outputs. A mapping is that adapter, written as data::

    name: aiq-like                      # shown as the run's format
    id: "trace_id"                      # run id
    task: "question"                    # research question
    final: "spans[?is_report].span_id | [0]"   # id of the report-writing invocation (optional)
    citation_pattern: '\\[(\\d+(?:,\\s*\\d+)*)\\]'   # a regex (not jmespath), group 1 = ids (optional)
    final_citations: documents          # drop final-report markers naming no document (optional)
    aliases: "citation_aliases"         # object: citation as written -> canonical id (optional)
    documents: "citation_registry"      # list of source documents
    document:   {id: ref, url: url, title: title, text: content}
    invocations: "spans[?kind=='AGENT']"
    invocation: {id: span_id, agent: name, role: role, inputs: inputs, outputs: outputs,
                 output_text: report, output_kind: mode}
    input:      {id: id, kind: type, document: doc, from: parent, text: text, citations: refs}
    output:     {text: content, citations: refs, kind: mode, needs_citation: needs_citation}
    kinds:                              # raw kind value -> model kind
      input:  {search_result: document, user: query}
      output: {extracted: snippet, generated: synthesized}

Every field expression is evaluated on its item (document, invocation, input or output object); fields
left out default to the field's own name; a ``null`` result leaves the field unset. Outputs that are
plain strings stay sentences with inline markers. The mapped document is validated like a native one;
errors name the trace file and the path in the *mapped* document. Expressions are data: jmespath only,
nothing is executed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jmespath
import jmespath.exceptions
import yaml

from trajaudit import regular_files, safe_yaml
from trajaudit.citation.model import FORMAT
from trajaudit.errors import TraceFormatError

_TOP = ("id", "task", "final", "aliases", "documents", "invocations")
_FIELDS = {
    "document": ("id", "url", "title", "text"),
    "invocation": ("id", "agent", "role", "inputs", "outputs", "output_text", "output_kind"),
    "input": ("id", "kind", "document", "from", "text", "citations"),
    "output": ("text", "citations", "kind", "needs_citation"),
}
_KEYS = {"name", "description", "citation_pattern", "final_citations", "kinds", *_TOP, *_FIELDS}
_KIND_VALUES = {"input": ("document", "snippet", "note", "query", "other"), "output": ("synthesized", "snippet")}


class CitationMapping:
    """A YAML mapping from a system's own trace JSON to the citation-run form.

    Raises:
        TraceFormatError: the mapping is not an object, has unknown keys or fields, a bad jmespath
            expression, or a kind mapped to an unknown kind (``file`` = the mapping file).
    """

    def __init__(self, spec: Any, *, origin: str = "<mapping>") -> None:
        self.origin = origin
        if not isinstance(spec, dict) or "invocations" not in spec:
            raise self._err("a citation mapping must be an object with at least an 'invocations' expression")
        unknown = set(spec) - _KEYS
        if unknown:
            raise self._err(f"unknown mapping keys: {', '.join(sorted(unknown))}")
        self.name = str(spec.get("name", "citation-mapping"))
        self.pattern = spec.get("citation_pattern")
        self.final_citations = spec.get("final_citations")
        self._top = {k: self._compile(spec[k], k) for k in _TOP if spec.get(k) is not None}
        self._fields: dict[str, dict[str, Any]] = {}
        for item, names in _FIELDS.items():
            given = spec.get(item) or {}
            if not isinstance(given, dict):
                raise self._err(f"'{item}' must be an object of field expressions")
            bad = set(given) - set(names)
            if bad:
                raise self._err(f"unknown {item} fields: {', '.join(sorted(bad))} (known: {', '.join(names)})")
            self._fields[item] = {f: self._compile(given.get(f, f'"{f}"'), f"{item}.{f}") for f in names}
        kinds = spec.get("kinds") or {}
        if not isinstance(kinds, dict) or set(kinds) - set(_KIND_VALUES):
            raise self._err("'kinds' must be an object with 'input' and/or 'output' value maps")
        self.kinds: dict[str, dict[str, str]] = {}
        for side, allowed in _KIND_VALUES.items():
            m = {str(k): str(v) for k, v in (kinds.get(side) or {}).items()}
            bad_v = sorted(set(m.values()) - set(allowed))
            if bad_v:
                raise self._err(f"kinds.{side} maps to unknown kinds {bad_v} (allowed: {', '.join(allowed)})")
            self.kinds[side] = m

    def _err(self, message: str) -> TraceFormatError:
        return TraceFormatError(message, file=self.origin, adapter="citation-mapping")

    def _compile(self, expr: Any, key: str) -> Any:
        try:
            return jmespath.compile(str(expr))
        except jmespath.exceptions.JMESPathError as e:
            raise self._err(f"bad jmespath for {key!r}: {e}") from None

    @classmethod
    def from_file(cls, path: str | Path) -> CitationMapping:
        """Read a mapping YAML file; raises :class:`TraceFormatError` naming the file."""
        try:
            spec = safe_yaml.load(regular_files.read_text(path))
        except (OSError, yaml.YAMLError, UnicodeDecodeError) as e:
            why = safe_yaml.describe(e) if isinstance(e, yaml.YAMLError) else e
            raise TraceFormatError(f"cannot read mapping: {why}", file=str(path), adapter="citation-mapping") from None
        return cls(spec, origin=str(path))

    def _item(self, item: str, raw: Any) -> Any:
        if not isinstance(raw, dict):
            return raw
        out = {}
        for f, expr in self._fields[item].items():
            v = expr.search(raw)
            if v is not None:
                out[f] = v
        side = "output" if item == "output" else "input" if item == "input" else None
        if side and isinstance(out.get("kind"), str):
            out["kind"] = self.kinds[side].get(out["kind"], out["kind"])
        if item == "invocation" and isinstance(out.get("output_kind"), str):
            out["output_kind"] = self.kinds["output"].get(out["output_kind"], out["output_kind"])
        return out

    def apply(self, doc: Any, *, file: str | None = None) -> dict[str, Any]:
        """Produce the native citation-run document from a parsed trace.

        Raises:
            TraceFormatError: the ``invocations`` expression yields no list (naming ``file``).
        """
        invs = self._top["invocations"].search(doc)
        if not isinstance(invs, list):
            raise TraceFormatError(f"mapping {self.name!r}: 'invocations' does not yield a list", file=file,
                                   adapter="citation-mapping")
        out: dict[str, Any] = {"format": FORMAT, "version": 1}
        for key in ("id", "task", "final", "aliases"):
            if key in self._top:
                v = self._top[key].search(doc)
                if v is not None:
                    out[key] = str(v) if key in ("id", "final") and isinstance(v, int | float) else v
        if self.pattern:
            out["citation_pattern"] = self.pattern
        if self.final_citations:
            out["final_citations"] = self.final_citations
        if "documents" in self._top:
            docs = self._top["documents"].search(doc)
            out["documents"] = [self._item("document", d) for d in docs] if isinstance(docs, list) else docs
        mapped = []
        for raw in invs:
            inv = self._item("invocation", raw)
            if isinstance(inv, dict):
                for key, item in (("inputs", "input"), ("outputs", "output")):
                    if isinstance(inv.get(key), list):
                        inv[key] = [self._item(item, x) for x in inv[key]]
            mapped.append(inv)
        out["invocations"] = mapped
        return out
