"""The parallel execution fabric (CRP-SPEC-022): task graphs run as batches.

- :mod:`~harness.fabric.graph`: nodes (LLM, tool, verify), criticality, validated DAGs, layers;
- :mod:`~harness.fabric.executor`: :class:`Fabric`, which starts each node the moment its own
  inputs are released, batches ready LLM nodes and accounts rounds;
- :mod:`~harness.fabric.attempts`: one node's run: produce, verify off the critical path,
  repair, contain its failures;
- :mod:`~harness.fabric.config`: :class:`FabricConfig`, :class:`Mechanisms` (each mechanism
  on or off alone; the naive baseline), :class:`RepairPolicy`;
- :mod:`~harness.fabric.consensus`: :func:`sample_batch` and a deterministic :func:`vote`;
- :mod:`~harness.fabric.gating`: which nodes get consensus (criticality, stakes), and when a
  vote agrees;
- :mod:`~harness.fabric.verify`: verifiers (schema, pattern, predicate);
- :mod:`~harness.fabric.plan`: the plan format (plan lines, JSON Lines) and its parser;
- :mod:`~harness.fabric.decompose`: speculative decomposition, plan-and-execute and the naive
  pass the compute figure compares with;
- :mod:`~harness.fabric.figures`: the PEF figures and headers.
"""

from __future__ import annotations

from harness.engines.base import StreamingEngine
from harness.fabric.attempts import render_messages
from harness.fabric.config import NODE_SYSTEM, FabricConfig, Mechanisms, RepairPolicy
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
from harness.fabric.decompose import (
    COMPOSER_SYSTEM,
    PlanRun,
    compose_messages,
    measure_baseline,
    naive_pass,
    plan_and_execute,
    plan_messages,
)
from harness.fabric.examples import EXAMPLE_TASK, example_graph, example_plan
from harness.fabric.executor import Fabric, FabricRun, Inference
from harness.fabric.figures import NaiveBaseline, PEFFigures
from harness.fabric.gating import CRITICAL_TEMPERATURES, Gate, GatingPolicy
from harness.fabric.graph import (
    Criticality,
    InputsCheck,
    Node,
    TaskGraph,
    llm_node,
    tool_node,
    verify_node,
)
from harness.fabric.plan import (
    PLANNER_SYSTEM,
    PlanParser,
    parse_plan,
    plan_to_jsonl,
    plan_to_text,
)
from harness.fabric.result import FabricResult, NodeKind, NodeResult, NodeStatus, Wave
from harness.fabric.verify import (
    Checked,
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
    "DEFAULT_TEMPERATURES",
    "EXAMPLE_TASK",
    "NODE_SYSTEM",
    "PLANNER_SYSTEM",
    "Checked",
    "Comparator",
    "Consensus",
    "Criticality",
    "Fabric",
    "FabricConfig",
    "FabricResult",
    "FabricRun",
    "Gate",
    "GatingPolicy",
    "Inference",
    "InputsCheck",
    "Mechanisms",
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
    "equivalent",
    "example_graph",
    "example_plan",
    "json_schema",
    "llm_node",
    "matches",
    "measure_baseline",
    "naive_pass",
    "non_empty",
    "normalise",
    "parse_plan",
    "plan_and_execute",
    "plan_messages",
    "plan_to_jsonl",
    "plan_to_text",
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
