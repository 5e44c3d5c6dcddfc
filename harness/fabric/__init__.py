"""The parallel execution fabric (CRP-SPEC-022): task graphs run as batches.

- :mod:`~harness.fabric.graph`: nodes (LLM, tool, verify), criticality, validated DAGs, layers;
- :mod:`~harness.fabric.executor`: :class:`Fabric`, which starts each node the moment its own
  inputs are released, batches ready LLM nodes, verifies off the critical path and repairs;
- :mod:`~harness.fabric.consensus`: :func:`sample_batch` and a deterministic :func:`vote`;
- :mod:`~harness.fabric.gating`: which nodes get consensus (criticality, stakes);
- :mod:`~harness.fabric.verify`: verifiers (schema, pattern, predicate);
- :mod:`~harness.fabric.plan`: plans as JSON Lines, speculative decomposition and the
  plan-and-execute runner;
- :mod:`~harness.fabric.figures`: the PEF figures and headers.
"""

from __future__ import annotations

from harness.fabric.consensus import (
    DEFAULT_TEMPERATURES,
    Comparator,
    Consensus,
    Vote,
    completion_text,
    consensus,
    consensus_settings,
    equivalent,
    normalise,
    sample_batch,
    spread_temperatures,
    vote,
)
from harness.fabric.examples import EXAMPLE_TASK, demo_engine, example_graph, example_plan
from harness.fabric.executor import (
    DEFAULT_SYSTEM,
    Execution,
    Fabric,
    FabricConfig,
    Inference,
    RepairPolicy,
    render_messages,
)
from harness.fabric.figures import NaiveBaseline, PEFFigures
from harness.fabric.gating import CRITICAL_TEMPERATURES, Gate, GatingPolicy
from harness.fabric.graph import (
    Criticality,
    InputsCheck,
    Node,
    NodeKind,
    TaskGraph,
    llm_node,
    tool_node,
    verify_node,
)
from harness.fabric.plan import (
    COMPOSER_SYSTEM,
    PLANNER_SYSTEM,
    PlanParser,
    PlanRun,
    StreamingEngine,
    compose_messages,
    parse_plan,
    plan_and_execute,
    plan_messages,
    plan_to_jsonl,
)
from harness.fabric.result import FabricResult, NodeResult, NodeStatus, Wave
from harness.fabric.verify import (
    Verdict,
    Verifier,
    json_schema,
    matches,
    non_empty,
    predicate,
    run_verifier,
    verifier_name,
)

__all__ = (
    "COMPOSER_SYSTEM",
    "CRITICAL_TEMPERATURES",
    "DEFAULT_SYSTEM",
    "DEFAULT_TEMPERATURES",
    "EXAMPLE_TASK",
    "PLANNER_SYSTEM",
    "Comparator",
    "Consensus",
    "Criticality",
    "Execution",
    "Fabric",
    "FabricConfig",
    "FabricResult",
    "Gate",
    "GatingPolicy",
    "Inference",
    "InputsCheck",
    "NaiveBaseline",
    "Node",
    "NodeKind",
    "NodeResult",
    "NodeStatus",
    "PEFFigures",
    "PlanParser",
    "PlanRun",
    "RepairPolicy",
    "StreamingEngine",
    "TaskGraph",
    "Verdict",
    "Verifier",
    "Vote",
    "Wave",
    "completion_text",
    "compose_messages",
    "consensus",
    "consensus_settings",
    "demo_engine",
    "equivalent",
    "example_graph",
    "example_plan",
    "json_schema",
    "llm_node",
    "matches",
    "non_empty",
    "normalise",
    "parse_plan",
    "plan_and_execute",
    "plan_messages",
    "plan_to_jsonl",
    "predicate",
    "render_messages",
    "run_verifier",
    "sample_batch",
    "spread_temperatures",
    "tool_node",
    "verifier_name",
    "verify_node",
    "vote",
)
