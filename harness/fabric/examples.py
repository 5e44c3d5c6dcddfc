"""The spec's example: a 14-node task graph of depth 4 (layers 4/5/3/2, CRP-SPEC-022 §2.1).

The task is §8's "technical architecture document with cross-referenced sections". Six of
the nodes are high-stakes MODERATE (consensus N=3 under the default gating, as in §2.4); the
rest are TRIVIAL or SIMPLE. :func:`example_graph` builds it, :func:`example_plan` writes it
as a plan (plan lines). A scripted engine that answers the planner, the steps and the
composer without a model is :func:`harness.testing.fabric_demo_engine` (test doubles stay
out of the core library).
"""

from __future__ import annotations

from harness.fabric.graph import Criticality, TaskGraph, llm_node
from harness.fabric.plan import plan_to_text

__all__ = ("EXAMPLE_TASK", "example_graph", "example_plan")

EXAMPLE_TASK = (
    "Write a short technical architecture document for an online bookshop, with "
    "cross-referenced sections."
)

_T, _S, _M = Criticality.TRIVIAL, Criticality.SIMPLE, Criticality.MODERATE

#: (id, prompt, deps, criticality, high stakes)
_NODES: tuple[tuple[str, str, tuple[str, ...], Criticality, bool], ...] = (
    ("T1", "List the main components of an online bookshop.", (), _S, False),
    ("T2", "List the non-functional requirements of an online bookshop.", (), _S, False),
    ("T3", "Describe the data flows of an online bookshop.", (), _S, False),
    ("T4", "List the external services an online bookshop integrates with.", (), _T, False),
    ("T5", "Write the component overview section.", ("T1",), _S, False),
    ("T6", "Write the security section.", ("T2", "T4"), _M, True),
    ("T7", "Write the data model section.", ("T3",), _S, False),
    ("T8", "Write the deployment section.", ("T1", "T2"), _M, True),
    ("T9", "Write the integrations section.", ("T3", "T4"), _S, False),
    ("T10", "Cross-reference the components with the data model.", ("T5", "T7"), _M, True),
    ("T11", "Write the failure modes section.", ("T6", "T8"), _M, True),
    ("T12", "Write the API section.", ("T7", "T9"), _M, True),
    ("T13", "Write the executive summary.", ("T10", "T11", "T12"), _S, False),
    ("T14", "List contradictions between the sections.", ("T10", "T11", "T12"), _M, True),
)


def example_graph(*, consensus: bool = True, max_tokens: int | None = None) -> TaskGraph:
    """The 14-node, depth-4 graph; ``consensus=False`` marks every node low-stakes."""
    return TaskGraph(
        llm_node(
            nid,
            prompt,
            deps,
            criticality=crit,
            high_stakes=True if high and consensus else None,
            max_tokens=max_tokens,
        )
        for nid, prompt, deps, crit, high in _NODES
    )


def example_plan(*, consensus: bool = True) -> str:
    """The example graph as the plan a planner would write (plan lines)."""
    return plan_to_text(example_graph(consensus=consensus))
