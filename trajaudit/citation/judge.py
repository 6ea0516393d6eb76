"""The judge interface of the citation audit and its offline (approximate) implementation.

Seed 003 App. A, Algorithm 1 calls three helper routines: EXTRACTSUPPORTINGSPANS, CITATIONSOF and
ENTAILS. CITATIONSOF is structural here (the invocation model carries each span's citations); the other
two — plus the need-citation test of §5 — are a :class:`CitationJudge`. Two implementations:

- :class:`OfflineCitationJudge` — lexical and numeric overlap, no LLM. **Approximate**: it cannot recognise
  paraphrase or logical entailment; numbers must match exactly. Every report it produces says so.
- :class:`trajaudit.citation.llm_judge.LLMJudge` — the paper's LLM prompts with the verbatim-span check.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol, runtime_checkable

from trajaudit.citation.model import InputUnit, Span, unit_spans


@runtime_checkable
class CitationJudge(Protocol):
    """What the local test (seed 003 §4) needs from a judge.

    Attributes:
        name: short name shown in reports (``offline``, ``llm``).
        approximate: ``True`` when verdicts are a heuristic approximation (reports must say so).
        description: one line for reports.

    Methods:
        needs_citation(sentence, task): whether the sentence states something that needs a source.
        supporting_spans(sentence, units): every input span that supports (part of) the sentence —
            exhaustive, redundant or partial evidence included (§4); verbatim ranges of the units.
        entails(premises, hypothesis): whether the premises together fully entail the hypothesis.
        explain(premises, hypothesis) (optional): what the premises lack, for reasons in reports.

    Implementations raise :class:`~trajaudit.errors.LLMError` when they cannot answer.
    """

    name: str
    approximate: bool
    description: str

    def needs_citation(self, sentence: str, task: str) -> bool: ...

    def supporting_spans(self, sentence: str, units: Sequence[InputUnit]) -> list[Span]: ...

    def entails(self, premises: Sequence[str], hypothesis: str) -> bool: ...


# ------------------------------------------------------------------------------------- lexical features

_STOPWORDS = frozenset("""
a about above after again against all also although am among an and any are around as at be because been
before being below between both but by can could did do does doing down during each either etc few for
from further had has have having he her here hers herself him himself his how however i if in into is it
its itself just least less like many may me might more most much must my myself near nearly neither no
nor not now of off on once only or other our ours ourselves out over own per same she should since so
some such than that the their theirs them themselves then there these they this those though through to
too under until up upon us very via was we were what when where whether which while who whom whose why
will with within without would yet you your yours yourself yourselves according reported reports said
says report noted notes approximately roughly around almost over under some another
""".split())

_NUMBER = re.compile(r"(?<![\w.])[-−]?\d[\d,]*(?:\.\d+)?(?:\s*(%|percent\b|per\s+cent\b))?", re.I)
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
_META = re.compile(
    r"^\s*(?:this|the present|our)\s+(?:report|section|summary|document|analysis|overview)\b"
    r"|^\s*(?:in\s+(?:this|the following)\s+(?:report|section))\b"
    r"|^\s*(?:in\s+summary|in\s+conclusion|to\s+summari[sz]e|overall,|below,|next,|finally,|we\s+(?:now|next))\b"
    r"|^\s*(?:let\s+us|let's)\b",
    re.I,
)


def numbers(text: str) -> frozenset[str]:
    """Numbers in ``text``, normalized: thousands separators dropped, ``percent`` → ``%``, ``12.0`` → ``12``.

    >>> sorted(numbers("Sales rose 35 percent to 1,200 units in 2023 (12.50%)."))
    ['12.5%', '1200', '2023', '35%']
    """
    out = set()
    for m in _NUMBER.finditer(text):
        raw = m.group(0)
        pct = m.group(1) is not None
        digits = re.sub(r"[^\d.\-−]", "", raw[: m.start(1) - m.start()] if pct else raw).replace("−", "-")
        digits = digits.rstrip(".")
        if "." in digits:
            digits = digits.rstrip("0").rstrip(".")
        if digits in ("", "-"):
            continue
        out.add(digits + ("%" if pct else ""))
    return frozenset(out)


def _stem(word: str) -> str:
    w = word.lower().strip("'-")
    if w.endswith("'s"):
        w = w[:-2]
    for suffix, repl in (("ies", "y"), ("sses", "ss"), ("es", "e"), ("s", "")):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3 and not w.endswith("ss"):
            return w[: len(w) - len(suffix)] + repl
    return w


def content_words(text: str) -> frozenset[str]:
    """Lower-cased, lightly stemmed words of 3+ letters that are not stopwords.

    >>> sorted(content_words("The batteries of electric cars are cheaper"))
    ['battery', 'car', 'cheaper', 'electric']
    """
    return frozenset(s for w in _WORD.findall(text) if len(w) >= 3 and (s := _stem(w)) not in _STOPWORDS)


@dataclass(frozen=True)
class _Features:
    numbers: frozenset[str]
    words: frozenset[str]

    @property
    def all(self) -> frozenset[str]:
        return self.numbers | {"w:" + w for w in self.words}


@lru_cache(maxsize=65536)
def _features(text: str) -> _Features:
    return _Features(numbers(text), content_words(text))


class OfflineCitationJudge:
    """Approximate judge by lexical and numeric overlap (no LLM; deterministic).

    Policy (docs/citation.md):
      - *needs citation*: not a question, not a heading (no final punctuation and fewer than 8 words),
        not meta-discourse about the report itself ("This report …", "In summary, …"), and at least
        ``min_content_words`` content words or any number.
      - *supporting spans*: input sentences chosen greedily by how many of the sentence's numbers and
        content words they add (ties: cited spans first, then input order), until nothing new is added;
        plus *redundant* spans covering at least ``redundant_share`` of the sentence's features.
      - *entails*: every number of the hypothesis appears in the premises (exact, after normalization)
        and at least ``coverage`` of its content words do.

    Args:
        coverage: share of the hypothesis's content words the premises must contain (0–1).
        redundant_share: share of the sentence's features a non-selected span must cover to be kept.
        min_content_words: content words a number-free sentence needs to count as a factual statement.
    """

    name = "offline"
    approximate = True
    description = "APPROXIMATE offline judge: lexical + exact numeric overlap, no LLM"

    def __init__(self, *, coverage: float = 0.7, redundant_share: float = 0.6, min_content_words: int = 3) -> None:
        if not 0 < coverage <= 1 or not 0 < redundant_share <= 1:
            raise ValueError("coverage and redundant_share must be in (0, 1]")
        self.coverage = coverage
        self.redundant_share = redundant_share
        self.min_content_words = min_content_words

    def needs_citation(self, sentence: str, task: str = "") -> bool:
        """Heuristic need-citation test (see the class policy); ``task`` is unused offline."""
        s = sentence.strip()
        if not s or s.endswith("?"):
            return False
        if s[-1] not in ".!\"”')]" and len(s.split()) < 8:
            return False
        if _META.search(s):
            return False
        f = _features(s)
        return bool(f.numbers) or len(f.words) >= self.min_content_words

    def supporting_spans(self, sentence: str, units: Sequence[InputUnit]) -> list[Span]:
        """Greedy cover of the sentence's numbers and content words by input sentences (class policy)."""
        target = _features(sentence).all
        if not target:
            return []
        cands = [(sp, _features(sp.text).all & target) for u in units for sp in unit_spans(u)]
        cands = [(sp, f) for sp, f in cands if f]
        chosen: list[int] = []
        covered: set[str] = set()
        while True:
            best, best_key = None, None
            for k, (sp, f) in enumerate(cands):
                if k in chosen:
                    continue
                gain = len(f - covered)
                key = (gain, sp.cited, -k)
                if gain and (best_key is None or key > best_key):
                    best, best_key = k, key
            if best is None:
                break
            chosen.append(best)
            covered |= cands[best][1]
        for k, (_, f) in enumerate(cands):
            if k not in chosen and len(f) >= self.redundant_share * len(target):
                chosen.append(k)
        return [cands[k][0] for k in sorted(chosen)]

    def entails(self, premises: Sequence[str], hypothesis: str) -> bool:
        """All hypothesis numbers in the premises, and ≥ ``coverage`` of its content words."""
        h = _features(hypothesis)
        p = _features(" \n".join(premises))
        if not h.numbers <= p.numbers:
            return False
        if not h.words:
            return True
        return len(h.words & p.words) / len(h.words) >= self.coverage

    def explain(self, premises: Sequence[str], hypothesis: str) -> str:
        """What the premises lack: ``"numbers not in support: 18%; words not in support: worldwide"``."""
        h = _features(hypothesis)
        p = _features(" \n".join(premises))
        parts = []
        if h.numbers - p.numbers:
            parts.append("numbers not in support: " + ", ".join(sorted(h.numbers - p.numbers)))
        if h.words - p.words:
            parts.append("words not in support: " + ", ".join(sorted(h.words - p.words)))
        return "; ".join(parts) or "all numbers and words found"
