"""Root-cause taxonomies as data: load the shipped YAML taxonomies and normalize category labels.

A taxonomy is YAML (``trajaudit/rules/taxonomies/<id>.yaml``) validated by
``trajaudit/schemas/taxonomy.schema.json``: categories with a stable id (e.g.
``misinterpretation_of_tool_output``), a name, a definition, boundary notes, yes/no checklist
questions and aliases (the spellings datasets use). Shipped: ``agentrx`` (AgentRx §2.2, 9 + Inconclusive),
``searchauditor`` (SearchAuditor appendix A, 6 root causes), ``drift`` (DRIFT fault families and
operation stages), ``citation`` (the four citation/faithfulness error types).

YAML is read with ``yaml.safe_load`` only: a taxonomy is data, nothing in it is executed.

Example:
    >>> tax = load_taxonomy("agentrx")
    >>> tax.normalize("Misinterpretation of Tool Output")
    'misinterpretation_of_tool_output'
    >>> tax.normalize("INTENT_PLAN_MISALIGNMENT")
    'intent_plan_misalignment'
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
from dataclasses import dataclass
from functools import cache, cached_property
from hashlib import sha256
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trajaudit
from trajaudit import regular_files
from trajaudit.disk_cache import cache_dir, read_body, write_body
from trajaudit.engine.packs.cache import code_fingerprint
from trajaudit.engine.schema import fast_accepts, validator
from trajaudit.errors import TrajauditError

if TYPE_CHECKING:
    import trajaudit.safe_yaml  # noqa: F401 - the attribute's type for mypy (loaded on first use)

log = logging.getLogger(__name__)

_TAXONOMY_DIR = ("rules", "taxonomies")


class TaxonomyError(TrajauditError):
    """A taxonomy file is missing or invalid.

    Attributes:
        message: what is wrong.
        file: the taxonomy file (or the name asked for).
        line: 1-based line in the YAML file, when known.
        path: JSON path of the offending element, when known (e.g. ``$.categories[3].aliases``).
    """

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 path: str | None = None) -> None:
        self.message, self.file, self.line, self.path = message, file, line, path
        super().__init__(str(self))

    def __str__(self) -> str:
        loc = (self.file or "<taxonomy>") + (f":{self.line}" if self.line else "")
        return f"{loc}: {self.path + ': ' if self.path else ''}{self.message}"


class UnknownCategoryError(TrajauditError, LookupError):
    """A label that matches no category id, name, number or alias of the taxonomy."""


@dataclass(frozen=True)
class Category:
    """One category of a taxonomy.

    Attributes:
        id: stable snake_case key (what diagnoses and gold store).
        name: display name.
        definition: what the category means.
        boundary: how it differs from the categories it is confused with ("" if none given).
        checklist: yes/no questions; "yes" to all supports the label.
        aliases: other spellings found in datasets and prompts.
        number: the paper's own number for the category (AgentRx numbers 1-10), or ``None``.
    """

    id: str
    name: str
    definition: str
    boundary: str = ""
    checklist: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    number: int | None = None


@dataclass(frozen=True)
class Stage:
    """A DRIFT operation stage: what a span was doing, independent of correctness."""

    id: str
    name: str
    definition: str
    aliases: tuple[str, ...] = ()


def label_key(label: str) -> str:
    """The comparison key of a label: case-, space- and punctuation-insensitive.

    ``"Intent-Plan Misalignment"``, ``"intent plan misalignment"`` and
    ``"FailureCase.INTENT_PLAN_MISALIGNMENT"`` all give ``"intentplanmisalignment"`` (an enum-style
    ``Prefix.NAME`` keeps only ``NAME``; ``&`` reads as "and").
    """
    text = label.strip()
    if re.fullmatch(r"[A-Za-z]\w*\.[A-Za-z_]\w*", text):
        text = text.rsplit(".", 1)[1]
    text = text.casefold().replace("&", " and ")
    return re.sub(r"[^0-9a-z]+", "", text)


@dataclass(frozen=True)
class Taxonomy:
    """A loaded taxonomy.

    Attributes:
        id: the taxonomy id (``agentrx``, ``searchauditor``, ``drift``, ``citation``, or a custom one).
        name, source, description: provenance; ``source`` names the paper and section.
        categories: the categories in file order.
        fallback: the category to use when none applies (``inconclusive`` in the shipped ones), or ``None``.
        labeling_policy, boundary_summary: taxonomy-wide guidance for judges ("" if absent).
        stages: an orthogonal stage dimension (DRIFT), else empty.
        file: the file it was loaded from.
    """

    id: str
    name: str
    source: str
    categories: tuple[Category, ...]
    description: str = ""
    fallback: str | None = None
    labeling_policy: str = ""
    boundary_summary: str = ""
    stages: tuple[Stage, ...] = ()
    file: str | None = None

    @property
    def ids(self) -> tuple[str, ...]:
        """Category ids in file order."""
        return tuple(c.id for c in self.categories)

    def get(self, category_id: str) -> Category:
        """The category with this exact id; raises :class:`UnknownCategoryError`."""
        for c in self.categories:
            if c.id == category_id:
                return c
        raise UnknownCategoryError(f"taxonomy {self.id!r} has no category {category_id!r} (known: {', '.join(self.ids)})")

    def __contains__(self, category_id: object) -> bool:
        return category_id in self.ids

    @cached_property
    def _index(self) -> dict[str, str]:
        index: dict[str, str] = {}
        for c in self.categories:
            for label in (c.id, c.name, *c.aliases, *([str(c.number)] if c.number is not None else [])):
                index.setdefault(label_key(label), c.id)
        return index

    def try_normalize(self, label: Any) -> str | None:
        """Like :meth:`normalize` but returns ``None`` for unknown or empty labels."""
        if label is None or isinstance(label, bool):
            return None
        if isinstance(label, int):
            label = str(label)
        if not isinstance(label, str) or not label.strip():
            return None
        return self._index.get(label_key(label))

    def normalize(self, label: Any) -> str:
        """Map a dataset or model spelling to the category id.

        Matches, ignoring case, spaces and punctuation: the id, the name, any alias, and the
        category's paper number (``"4"`` in AgentRx is ``misinterpretation_of_tool_output``).

        Raises:
            UnknownCategoryError: the label matches nothing (the message lists the known ids).
        """
        cid = self.try_normalize(label)
        if cid is None:
            raise UnknownCategoryError(
                f"{label!r} is not a category of taxonomy {self.id!r} (known: {', '.join(self.ids)})")
        return cid

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the YAML's shape, valid against ``taxonomy.schema.json``)."""
        cats = []
        for c in self.categories:
            d: dict[str, Any] = {"id": c.id, "name": c.name, "definition": c.definition,
                                 "checklist": list(c.checklist)}
            if c.number is not None:
                d["number"] = c.number
            if c.boundary:
                d["boundary"] = c.boundary
            if c.aliases:
                d["aliases"] = list(c.aliases)
            cats.append(d)
        out: dict[str, Any] = {"schema_version": 1, "id": self.id, "name": self.name, "source": self.source,
                               "categories": cats}
        for k in ("description", "fallback", "labeling_policy", "boundary_summary"):
            if getattr(self, k):
                out[k] = getattr(self, k)
        if self.stages:
            out["stages"] = [{"id": s.id, "name": s.name, "definition": s.definition, "aliases": list(s.aliases)}
                             for s in self.stages]
        return out


def _line_of(text: str, path: list[Any]) -> int | None:
    """1-based line of the YAML node at ``path`` (keys and indexes), or of its nearest ancestor."""
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    line = node.start_mark.line + 1 if node is not None else None
    for part in path:
        nxt = None
        if isinstance(node, yaml.MappingNode):
            nxt = next((v for k, v in node.value if getattr(k, "value", None) == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            nxt = node.value[part]
        if nxt is None:
            break
        node, line = nxt, nxt.start_mark.line + 1
    return line


def _json_path(path: list[Any]) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def parse_taxonomy(text: str, file: str | None = None, *, _loader: Any = None) -> Taxonomy:
    """Parse and validate taxonomy YAML text.

    Checks the JSON Schema, unique category ids, that ``fallback`` names a category, and that no
    label (id, name, alias, number) of one category normalizes to a label of another.

    Raises:
        TaxonomyError: with file, line and JSON path of the first problem.
    """
    import yaml  # only where YAML is parsed (an audit reads the shipped taxonomy from the cache)

    try:
        doc = trajaudit.safe_yaml.load(text, yaml.SafeLoader if _loader is None else _loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise TaxonomyError(f"invalid YAML: {getattr(e, 'problem', None) or e}", file=file,
                            line=mark.line + 1 if mark else None) from None
    errors = [] if fast_accepts("taxonomy", doc) else list(validator("taxonomy").iter_errors(doc))
    if errors:
        from jsonschema.exceptions import best_match  # only for an invalid taxonomy (start-up, issue 22)

        err = best_match(errors)
        where = list(err.absolute_path)
        raise TaxonomyError(err.message, file=file, line=_line_of(text, where), path=_json_path(where))
    cats: list[Category] = []
    owner: dict[str, tuple[str, int]] = {}
    for i, c in enumerate(doc["categories"]):
        if any(c["id"] == o.id for o in cats):
            raise TaxonomyError(f"duplicate category id {c['id']!r}", file=file,
                                line=_line_of(text, ["categories", i, "id"]), path=f"$.categories[{i}].id")
        labels = [c["id"], c["name"], *c.get("aliases", []), *([str(c["number"])] if "number" in c else [])]
        for label in labels:
            key = label_key(label)
            if key in owner and owner[key][0] != c["id"]:
                raise TaxonomyError(f"label {label!r} of {c['id']!r} clashes with category {owner[key][0]!r}",
                                    file=file, line=_line_of(text, ["categories", i]), path=f"$.categories[{i}]")
            owner[key] = (c["id"], i)
        cats.append(Category(id=c["id"], name=c["name"], definition=" ".join(c["definition"].split()),
                             boundary=" ".join(c.get("boundary", "").split()),
                             checklist=tuple(c.get("checklist", [])), aliases=tuple(c.get("aliases", [])),
                             number=c.get("number")))
    fallback = doc.get("fallback")
    if fallback is not None and fallback not in {c.id for c in cats}:
        raise TaxonomyError(f"fallback {fallback!r} is not a category id", file=file,
                            line=_line_of(text, ["fallback"]), path="$.fallback")
    stages = tuple(Stage(id=s["id"], name=s["name"], definition=s["definition"], aliases=tuple(s.get("aliases", [])))
                   for s in doc.get("stages", []))
    return Taxonomy(id=doc["id"], name=doc["name"], source=doc["source"], categories=tuple(cats),
                    description=" ".join(doc.get("description", "").split()), fallback=fallback,
                    labeling_policy=" ".join(doc.get("labeling_policy", "").split()),
                    boundary_summary=" ".join(doc.get("boundary_summary", "").split()), stages=stages, file=file)


def _shipped_dir():
    return resources.files("trajaudit").joinpath(*_TAXONOMY_DIR)


def list_taxonomies() -> list[str]:
    """Ids of the shipped taxonomies, sorted (``['agentrx', 'citation', 'drift', 'searchauditor']``)."""
    return sorted(e.name[: -len(".yaml")] for e in _shipped_dir().iterdir() if e.name.endswith(".yaml"))


@cache
def _load_shipped(name: str) -> Taxonomy:
    entry = _shipped_dir().joinpath(f"{name}.yaml")
    text = entry.read_text(encoding="utf-8")
    p = _entry_path(name, text)
    tax = _read_entry(p) if p is not None else None
    if tax is None:
        # shipped files are valid and tested: libyaml's parser (same constructors, ~10x faster) when present
        import yaml

        tax = parse_taxonomy(text, file=f"trajaudit/rules/taxonomies/{name}.yaml",
                             _loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        if p is not None:
            _write_entry(p, tax)
    return tax


# ---- the parsed shipped taxonomies in the on-disk cache ------------------------------------------
# A fresh audit parsed and validated the shipped taxonomy's YAML in every process (≈ 10 ms with the
# validator's build). The result is kept as plain data in the pack cache's folder, in an entry keyed
# by the code fingerprint (the package's files, the taxonomies and schemas among them, and PyYAML's
# version) and the file's name and text; an entry is written only when the data rebuilds a taxonomy
# equal to the parsed one (same fields, same types: their ``repr`` is compared).

def _entry_path(name: str, text: str) -> Path | None:
    d = cache_dir()
    if d is None:
        return None
    try:
        key = sha256(json.dumps(["taxonomy", code_fingerprint(), name, text]).encode("utf-8", "surrogatepass"))
    except (OSError, ValueError) as e:
        log.debug("taxonomy cache: no key for %s: %s", name, e)
        return None
    return d / f"{key.hexdigest()}.json"


def _from_data(d: dict[str, Any]) -> Taxonomy:
    """A taxonomy from :func:`dataclasses.asdict` data read back from JSON (lists to tuples).

    Raises:
        KeyError, TypeError, AttributeError: ``d`` is not such data.
    """
    cats = tuple(Category(**{**c, "checklist": tuple(c["checklist"]), "aliases": tuple(c["aliases"])})
                 for c in d["categories"])
    stages = tuple(Stage(**{**s, "aliases": tuple(s["aliases"])}) for s in d["stages"])
    return Taxonomy(**{**d, "categories": cats, "stages": stages})


def _read_entry(p: Path) -> Taxonomy | None:
    body = read_body(p)
    if body is None:
        return None
    try:
        return _from_data(json.loads(body))
    except Exception as e:  # noqa: BLE001 - an entry that does not decode: parse the YAML
        log.debug("taxonomy cache: ignoring %s: %s", p, e)
        return None


def _write_entry(p: Path, tax: Taxonomy) -> None:
    try:
        text = json.dumps(dataclasses.asdict(tax), ensure_ascii=False, allow_nan=False)
        if repr(_from_data(json.loads(text))) != repr(tax):
            log.debug("taxonomy cache: %s does not round-trip through JSON; not cached", tax.id)
            return
        write_body(p, text.encode("utf-8", "surrogatepass"))
    except Exception as e:  # noqa: BLE001 - a cache that cannot be written is simply not used
        log.debug("taxonomy cache: cannot write an entry for %s: %s", tax.id, e)


def load_taxonomy(name_or_path: str | os.PathLike[str]) -> Taxonomy:
    """Load a shipped taxonomy by id, or a taxonomy YAML file by path.

    Args:
        name_or_path: ``"agentrx"``, ``"searchauditor"``, ``"drift"``, ``"citation"``, or a path to a
            ``.yaml``/``.yml`` file following ``taxonomy.schema.json``. Shipped ones are cached.

    Raises:
        TaxonomyError: unknown name (the message lists the shipped ones), unreadable or invalid file.
    """
    text = str(name_or_path)
    if text in list_taxonomies():
        return _load_shipped(text)
    p = Path(text)
    if p.suffix.lower() in (".yaml", ".yml") or p.exists():
        try:
            return parse_taxonomy(regular_files.read_text(p), file=text)
        except OSError as e:
            raise TaxonomyError(f"cannot read: {e.strerror or e}", file=text) from None
    raise TaxonomyError(f"unknown taxonomy (shipped: {', '.join(list_taxonomies())}; or give a .yaml path)", file=text)


__all__ = ["Category", "Stage", "Taxonomy", "TaxonomyError", "UnknownCategoryError", "label_key",
           "list_taxonomies", "load_taxonomy", "parse_taxonomy"]
