"""The claim-dependency graph (networkx) and the public entry point :func:`build_claim_graph`.

Nodes: ``step:N`` for every step that introduces, reuses, finalizes or supports a claim (attributes
``type="step"``, ``kind``, ``agent``, ``preview``), ``evidence:task`` / ``evidence:system_prompts.X`` for
run-level evidence, and one node per claim id ``cN`` (``type="claim"``, ``kind``, ``value``, ``status``,
``consequential``). Edges carry ``relation`` (also the multigraph key):

- ``introduced-at``  claim → step that introduced it;
- ``supported-by``   claim → evidence step (DIRECT / WEAK);
- ``conflicts-with`` claim → evidence step (CONFLICTING);
- ``reused-in``      claim → later step mentioning it again;
- ``reaches-final``  claim → final-answer / write-call / user-reply step it (or a claim derived from it) reaches;
- ``derived-from``   claim → claim whose value the producing call or code used.

The graph is a :class:`networkx.MultiDiGraph` (a ``DiGraph`` subclass) because one claim can be both
introduced at and finalized by the same step. It is built from the ledger on first access of
``ClaimGraph.graph`` (the audit pipeline reads only the ledger, so it never pays for the graph, nor for
importing networkx).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trajaudit.engine.claims import model as m
from trajaudit.engine.claims.extract import ClaimExtractor
from trajaudit.engine.claims.ledger import Ledger, LedgerBuilder, build_ledger
from trajaudit.engine.claims.propagate import propagate
from trajaudit.engine.claims.records import claim_records
from trajaudit.engine.trace.ir import Step, Trajectory
from trajaudit.engine.validation_log import Record

if TYPE_CHECKING:
    import networkx as nx


@dataclass
class ClaimGraph:
    """A run's claim ledger and dependency graph.

    Attributes:
        trajectory: the run.
        claims: the ledger (:class:`~trajaudit.engine.claims.model.Claim`, in order of introduction).
        graph: the networkx graph (see the module docstring; a property, built on first access).
        final_step: the final-answer step, or ``None``.
        brief_step: the opening hand-off brief step (its claims commit where adopted), or ``None``.
        write_steps: steps with a consequential write call.
        incomplete: limits hit (claim cap per step, text cap), never silent.
        config: the :class:`ClaimConfig` used.
    """

    trajectory: Trajectory
    claims: list[m.Claim]
    final_step: int | None = None
    brief_step: int | None = None
    write_steps: tuple[int, ...] = ()
    incomplete: list[str] = field(default_factory=list)
    config: m.ClaimConfig = field(default_factory=m.ClaimConfig)
    _propagation: m.Propagation | None = None
    _graph: nx.MultiDiGraph | None = field(default=None, repr=False)

    @property
    def graph(self) -> nx.MultiDiGraph:
        """The claim-dependency graph (networkx; see the module docstring), built once on first access."""
        if self._graph is None:
            self._graph = _build_graph(self.trajectory, self.claims)
        return self._graph

    def claim(self, claim_id: str) -> m.Claim:
        """The claim with id ``claim_id``; raises ``KeyError``."""
        for c in self.claims:
            if c.id == claim_id:
                return c
        raise KeyError(claim_id)

    def at(self, step: int) -> list[m.Claim]:
        """Claims introduced at ``step``."""
        return [c for c in self.claims if c.step == step]

    def propagate(self) -> m.Propagation:
        """DRIFT §Dependency Tracer: first error step, error steps and chains (cached)."""
        if self._propagation is None:
            self._propagation = propagate(self.claims, self.brief_step)
        return self._propagation

    def to_records(self) -> list[Record]:
        """Findings as validation-log records (PROVENANCE for MISSING, RELATIONAL_POST for CONFLICTING)."""
        return claim_records(self)

    def to_dict(self) -> dict[str, Any]:
        """JSON form: the ledger, the propagation and the limits hit (the graph: :func:`to_node_link`)."""
        return {
            "trajectory_id": self.trajectory.id,
            "final_step": self.final_step,
            "write_steps": list(self.write_steps),
            "claims": [c.to_dict() for c in self.claims],
            "propagation": self.propagate().to_dict(),
            "incomplete": list(self.incomplete),
        }


def _pos(address: str | None) -> str | None:
    if not address:
        return None
    if address.startswith("steps."):
        return "step:" + address.split(".")[1].split("[")[0]
    return "evidence:" + address.split("[")[0]


def _build_graph(t: Trajectory, claims: list[m.Claim]) -> nx.MultiDiGraph:
    import networkx as nx

    g = nx.MultiDiGraph(trajectory_id=t.id)

    def step_node(i: int) -> str:
        node = f"step:{i}"
        if node not in g:
            s = t.steps[i]
            g.add_node(node, type="step", index=i, kind=s.kind, agent=s.agent or "", preview=s.preview(60))
        return node

    def edge(a: str, b: str, rel: str) -> None:
        g.add_edge(a, b, key=rel, relation=rel)

    for c in claims:
        g.add_node(c.id, type="claim", kind=c.kind, value=c.value[:200], status=c.status.value,
                   step=c.step, consequential=c.consequential, address=c.address)
        edge(c.id, step_node(c.step), "introduced-at")
        ev = _pos(c.evidence_address)
        if ev is not None:
            if ev.startswith("step:"):
                step_node(int(ev[5:]))
            elif ev not in g:
                g.add_node(ev, type="evidence", kind="run", agent="", preview=ev[9:])
            if c.status is m.Support.CONFLICTING:
                edge(c.id, ev, "conflicts-with")
            elif c.status in (m.Support.DIRECT, m.Support.WEAK):
                edge(c.id, ev, "supported-by")
        for s in c.reused_in:
            edge(c.id, step_node(s), "reused-in")
        for s in c.final_steps:
            edge(c.id, step_node(s), "reaches-final")
        for p in c.derived_from:
            edge(c.id, p, "derived-from")
    return g


def build_claim_graph(trajectory: Trajectory, config: m.ClaimConfig | Any | None = None,
                      extractors: list[ClaimExtractor] | None = None) -> ClaimGraph:
    """Build the claim ledger and dependency graph of one run (DRIFT §Claim Keeper, §Support Seeker).

    Args:
        trajectory: the run (IR).
        config: a :class:`ClaimConfig`, an :class:`~trajaudit.engine.config.AuditConfig` (its
            ``max_claims_per_step`` is used) or ``None`` for defaults.
        extractors: claim extractors to run (default: the deterministic :class:`RegexExtractor`).

    Returns:
        a :class:`ClaimGraph`. Never raises on trace content (odd text yields fewer claims); limits
        hit are listed in ``ClaimGraph.incomplete``. Time is linear in the run's size.
    """
    cfg = claim_config(config)
    return graph_of(trajectory, build_ledger(trajectory, cfg, extractors), cfg)


def claim_config(config: m.ClaimConfig | Any | None) -> m.ClaimConfig:
    """A :class:`ClaimConfig` from a ``ClaimConfig``, an ``AuditConfig`` (its ``max_claims_per_step``)
    or ``None`` (defaults)."""
    if config is None:
        return m.ClaimConfig()
    if isinstance(config, m.ClaimConfig):
        return config
    return m.ClaimConfig.from_audit(config)


def graph_of(trajectory: Trajectory, led: Ledger, config: m.ClaimConfig) -> ClaimGraph:
    """The :class:`ClaimGraph` of ``trajectory`` from its ledger ``led``."""
    return ClaimGraph(trajectory=trajectory, claims=led.claims,
                      final_step=led.final_step, brief_step=led.brief_step, write_steps=tuple(sorted(led.write_steps)),
                      incomplete=list(led.incomplete), config=config)


class ClaimGraphBuilder:
    """:func:`build_claim_graph` one step at a time (the incremental ledger,
    :class:`~trajaudit.engine.claims.ledger.LedgerBuilder`): ``add(step)`` per step (cost independent
    of the run's length), ``finish(trajectory)`` the :class:`ClaimGraph` of the run so far — equal to
    ``build_claim_graph(trajectory, config)`` (ledger, propagation, records, ``to_dict``); it leaves
    the builder unchanged, so a monitor can ask for the graph of every prefix and go on.

    Args:
        config, extractors: as :func:`build_claim_graph`.
        task: the run's task (``None``: the first user step's text, as ``Monitor`` takes it).
        system_prompts: the run's per-agent prompts.
    """

    def __init__(self, config: m.ClaimConfig | Any | None = None, extractors: list[ClaimExtractor] | None = None, *,
                 task: str | None = None, system_prompts: dict[str, str] | None = None) -> None:
        self.config = claim_config(config)
        self.ledger = LedgerBuilder(self.config, extractors, task=task, system_prompts=system_prompts)

    def add(self, step: Step) -> None:
        """Take the run's next step (``LedgerBuilder.add``)."""
        self.ledger.add(step)

    def finish(self, trajectory: Trajectory) -> ClaimGraph:
        """The claim graph of the run so far (``trajectory``: its steps are the ones added)."""
        return graph_of(trajectory, self.ledger.finish(trajectory), self.config)
