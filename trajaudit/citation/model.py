"""The invocation model: a multi-agent deep-research run as agent invocations with cited inputs and outputs.

Seed 003 (Hirsch et al., "Who is the Agent to Blame?") §3–§4 and App. I: each *agent invocation*
receives input units (source documents, searcher snippets, researcher notes, the query) — each carrying
the citations that back it — and produces output sentences with citation markers. Outputs are either
*snippets* (verbatim excerpts of one source, App. I.4 "extracted") or *synthesized* sentences.
Parent/child links say which output of which invocation became which input of another, so that an
error in the final report can be followed back to the invocation that introduced it (§6).

Addresses (used as validation-log evidence) are ``invocations.<id>.outputs.<n>`` and
``invocations.<id>.inputs.<n>.text[<start>:<end>]``; character offsets index the *clean* text (citation
markers removed). Everything here is frozen data; :mod:`trajaudit.citation.adapter` builds it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

import networkx as nx

#: The ``format`` value of a citation run document (read by ``adapter``, written by ``mapping``).
FORMAT = "trajaudit.citation-run"

OutputKind = Literal["synthesized", "snippet"]
OUTPUT_KINDS: tuple[str, ...] = ("synthesized", "snippet")
INPUT_KINDS: tuple[str, ...] = ("document", "snippet", "note", "query", "other")

#: Default citation marker: ``[D1]``, ``[1, 2]``, ``[S1; S2]``, ``[https://x.org/a]`` — not a Markdown link.
DEFAULT_CITATION_PATTERN = r"\[((?:[^\[\]\s,;]+)(?:\s*[,;]\s*[^\[\]\s,;]+)*)\](?!\()"

_ABBREVIATIONS = frozenset({"e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "prof", "inc", "ltd", "co",
                            "no", "fig", "approx", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep",
                            "sept", "oct", "nov", "dec", "st", "u.s", "u.k", "al"})


@dataclass(frozen=True)
class OutputRef:
    """A pointer to one output sentence: invocation id and 0-based output index."""

    invocation: str
    output: int

    @property
    def address(self) -> str:
        """``invocations.<id>.outputs.<n>``."""
        return f"invocations.{self.invocation}.outputs.{self.output}"

    def __str__(self) -> str:
        return f"{self.invocation}.outputs.{self.output}"


@dataclass(frozen=True)
class Document:
    """A source document (a leaf of the information flow; assumed faithful, seed 003 §4).

    Attributes:
        id: the citation id used in markers (e.g. ``D1``).
        text: the document text the evaluation reads.
        url: its URL (a citation may use it instead of the id), or ``None``.
        title: a human title, or ``None``.
    """

    id: str
    text: str
    url: str | None = None
    title: str | None = None


@dataclass(frozen=True)
class Sentence:
    """One sentence of a text: clean-text offsets, canonical citations, and the markers as written."""

    start: int
    end: int
    citations: frozenset[str]
    written: tuple[str, ...] = ()


@dataclass(frozen=True)
class InputUnit:
    """One thing an invocation read.

    Attributes:
        invocation: id of the invocation that received it.
        index: 0-based position in that invocation's inputs.
        kind: ``document`` | ``snippet`` | ``note`` | ``query`` | ``other``.
        text: the clean text (citation markers removed).
        citations: canonical citation ids backing the whole unit (structural attribution, App. I.4).
        sentences: the unit's sentences, each with ``citations`` ∪ its own inline markers.
        sources: the upstream outputs this unit came from (parent links); empty for leaves.
        document: the document id when the unit is a source document, else ``None``.
        id: the unit's own id in the trace (a note id), or ``None``.
    """

    invocation: str
    index: int
    kind: str
    text: str
    citations: frozenset[str] = frozenset()
    sentences: tuple[Sentence, ...] = ()
    sources: tuple[OutputRef, ...] = ()
    document: str | None = None
    id: str | None = None

    @property
    def address(self) -> str:
        """``invocations.<id>.inputs.<n>``."""
        return f"invocations.{self.invocation}.inputs.{self.index}"

    def citations_in(self, start: int, end: int) -> frozenset[str]:
        """Citations backing the text ``[start:end)``: the unit's own plus those of overlapping sentences."""
        out = set(self.citations)
        for s in self.sentences:
            if s.start < end and start < s.end:
                out |= s.citations
        return frozenset(out)


@dataclass(frozen=True)
class Span:
    """A supporting span: a verbatim range of one input unit (seed 003 §4 "supporting input spans").

    Attributes:
        unit: the input unit it lies in.
        start, end: clean-text character offsets in ``unit.text``.
        citations: canonical citation ids backing the span (empty = an *uncited* span).
    """

    unit: InputUnit
    start: int
    end: int
    citations: frozenset[str]

    @property
    def text(self) -> str:
        """The span's text."""
        return self.unit.text[self.start:self.end]

    @property
    def address(self) -> str:
        """``invocations.<id>.inputs.<n>.text[<start>:<end>]``."""
        return f"{self.unit.address}.text[{self.start}:{self.end}]"

    @property
    def cited(self) -> bool:
        """True when some citation backs the span."""
        return bool(self.citations)


def unit_spans(unit: InputUnit) -> list[Span]:
    """The unit's sentences as spans (the candidate granularity of the offline judge)."""
    return [Span(unit, s.start, s.end, unit.citations | s.citations) for s in unit.sentences]


@dataclass(frozen=True)
class OutputUnit:
    """One output sentence (or snippet) of an invocation.

    Attributes:
        invocation, index: where it is (``OutputRef(invocation, index)``).
        text: clean text (markers removed).
        citations: canonical citation ids the sentence carries (markers and explicit ones).
        kind: ``synthesized`` or ``snippet`` (a verbatim single-source excerpt, App. I.4).
        needs_citation: ``True``/``False`` when the trace says so, ``None`` to let the judge decide.
        raw_citations: the citations as written, before resolution.
    """

    invocation: str
    index: int
    text: str
    citations: frozenset[str] = frozenset()
    kind: str = "synthesized"
    needs_citation: bool | None = None
    raw_citations: tuple[str, ...] = ()

    @property
    def ref(self) -> OutputRef:
        """This output's :class:`OutputRef`."""
        return OutputRef(self.invocation, self.index)


@dataclass(frozen=True)
class Invocation:
    """One agent invocation: who ran, what it read, what it wrote.

    Attributes:
        id: unique id (no dots or spaces), e.g. ``researcher-1``.
        agent: the agent (grouping key of agent-level statistics), e.g. ``researcher``.
        role: the logical role (searcher / researcher / orchestrator / …); defaults to ``agent``.
        position: 0-based position in the run's invocation list (the ``step`` of validation-log records).
    """

    id: str
    agent: str
    role: str
    position: int
    inputs: tuple[InputUnit, ...] = ()
    outputs: tuple[OutputUnit, ...] = ()


@dataclass(frozen=True)
class CitationRun:
    """A whole multi-agent run in the invocation model.

    Attributes:
        id: the run id.
        task: the research question.
        documents: source documents by id.
        invocations: all invocations, in the order listed in the trace.
        final: id of the invocation whose outputs are the final report.
        aliases: citation alias → canonical id (e.g. ``"1" → "D1"``).
        file: the file it was read from, or ``None``.
        format: the input form (``trajaudit.citation-run`` or a mapping's name).
    """

    id: str
    task: str
    documents: dict[str, Document]
    invocations: tuple[Invocation, ...]
    final: str
    aliases: dict[str, str] = field(default_factory=dict)
    file: str | None = None
    format: str = "trajaudit.citation-run"

    def invocation(self, inv_id: str) -> Invocation:
        """The invocation with this id; raises ``KeyError`` if there is none."""
        for inv in self.invocations:
            if inv.id == inv_id:
                return inv
        raise KeyError(inv_id)

    def output(self, ref: OutputRef) -> OutputUnit:
        """The output a reference points to; raises ``KeyError``/``IndexError`` if it does not exist."""
        return self.invocation(ref.invocation).outputs[ref.output]

    @property
    def final_invocation(self) -> Invocation:
        """The invocation that wrote the final report."""
        return self.invocation(self.final)

    def documents_for(self, citations: Iterable[str]) -> list[Document]:
        """Source documents the (canonical) citations point to, in citation order; unknown ids are skipped."""
        return [self.documents[c] for c in sorted(set(citations)) if c in self.documents]

    def graph(self) -> nx.DiGraph:
        """Information flow: an edge ``upstream-invocation → invocation`` per parent link (a DAG)."""
        g = nx.DiGraph()
        g.add_nodes_from(inv.id for inv in self.invocations)
        for inv in self.invocations:
            for unit in inv.inputs:
                for src in unit.sources:
                    g.add_edge(src.invocation, inv.id)
        return g


# ---------------------------------------------------------------- text utilities (markers, sentences)


def canonical_url(url: str) -> str:
    """A URL normalized for comparison: lower-case scheme/host, no fragment, no trailing slash."""
    u = url.strip().split("#", 1)[0]
    m = re.match(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)([^/?]*)(.*)$", u)
    if m:
        u = m.group(1).lower() + m.group(2).lower() + m.group(3)
    return u.rstrip("/")


class CitationResolver:
    """Maps citation strings as written (``D1``, ``1``, a URL, an alias) to canonical ids.

    A citation resolves to a document id when it equals the id, an alias of it, or its URL
    (compared with :func:`canonical_url`); other citations (note ids, unknown sources) stay as written
    (trimmed), so they still compare equal across agents.
    """

    def __init__(self, documents: dict[str, Document], aliases: dict[str, str] | None = None) -> None:
        self._by_url = {canonical_url(d.url): d.id for d in documents.values() if d.url}
        self._ids = set(documents)
        self._aliases = dict(aliases or {})

    def resolve(self, citation: str) -> str:
        """The canonical id of ``citation``."""
        c = citation.strip()
        c = self._aliases.get(c, c)
        if c in self._ids:
            return c
        if "://" in c:
            return self._by_url.get(canonical_url(c), canonical_url(c))
        return c


def extract_markers(text: str, pattern: re.Pattern[str]) -> tuple[str, list[tuple[int, int, list[str]]]]:
    """Remove citation markers from ``text``.

    Args:
        text: text with inline markers such as ``[D1]`` or ``[1, 3]``.
        pattern: a compiled regex whose group 1 holds one or more ids separated by ``,`` or ``;``.

    Returns:
        ``(clean_text, markers)``; each marker is ``(position_in_clean_text, position_in_clean_text,
        [ids])`` — where the marker stood in the clean text. Whitespace before a removed marker is
        removed with it.
    """
    out: list[str] = []
    markers: list[tuple[int, int, list[str]]] = []
    pos = 0
    clean_len = 0
    for m in pattern.finditer(text):
        chunk = text[pos:m.start()]
        stripped = chunk.rstrip(" \t")
        out.append(stripped)
        clean_len += len(stripped)
        ids = [p.strip() for p in re.split(r"[,;]", m.group(1)) if p.strip()]
        markers.append((clean_len, clean_len, ids))
        pos = m.end()
    out.append(text[pos:])
    return "".join(out), markers


_BOUNDARY = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s)|\n\s*\n|\n(?=\s*(?:[-*•]|\d+[.)])\s)")


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Split text into sentence ``(start, end)`` offsets (whitespace trimmed, empty pieces dropped).

    Boundaries: ``.``/``!``/``?`` followed by whitespace and then an upper-case letter, a digit, a quote
    or a bracket (not after a known abbreviation or a single letter such as an initial); blank lines;
    line breaks before list bullets. Decimal points (``3.5``) are never boundaries.
    """
    cuts = [0]
    for m in _BOUNDARY.finditer(text):
        end = m.end()
        if m.group(0)[0] in ".!?":
            rest = text[end:].lstrip()
            if rest and not re.match(r"[A-Z0-9\"'“‘(\[*#-]", rest):
                continue
            word = re.search(r"([A-Za-z][A-Za-z.]*)\.$", text[max(0, m.start() - 12):m.start() + 1])
            if word and (word.group(1).lower() in _ABBREVIATIONS or len(word.group(1)) == 1):
                continue
        cuts.append(end)
    cuts.append(len(text))
    spans = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if b > a:
            spans.append((a, b))
    return spans


def sentences_with_citations(
    text: str, pattern: re.Pattern[str], resolve: CitationResolver
) -> tuple[str, tuple[Sentence, ...]]:
    """Clean ``text`` and split it into sentences, attaching each marker to the sentence it ends.

    A marker right after a sentence's final period (``… in 2023. [D1]``) belongs to that sentence.

    Returns:
        ``(clean_text, sentences)`` with canonical citation ids per sentence.
    """
    clean, markers = extract_markers(text, pattern)
    bounds = split_sentences(clean)
    written: list[list[str]] = [[] for _ in bounds]
    for pos, _, ids in markers:
        k = next((i for i, (a, b) in enumerate(bounds) if a <= pos <= b), None)
        if k is None:
            k = max((i for i, (a, _) in enumerate(bounds) if a <= pos), default=0)
        if bounds:
            written[k].extend(ids)
    return clean, tuple(Sentence(a, b, frozenset(resolve.resolve(i) for i in w), tuple(w))
                        for (a, b), w in zip(bounds, written, strict=True))
