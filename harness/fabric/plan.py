"""Plans: the text a planner writes (one step per line) and the incremental parser that reads it.

**Plan lines** (what the planner is asked to write), one step per line, dependencies first::

    T1: List the components.
    T2@trivial: List the requirements.
    T3<T1,T2@moderate!: Write the security section.

``ID[<DEP,DEP][@CRITICALITY][!]: PROMPT``. The id is letters then a number (``T1``,
``step12``); ``<`` lists the ids of *earlier* lines whose output the step needs; ``@``
gives its criticality (trivial / simple / moderate / critical, default simple); ``!`` marks
it high-stakes. The format is compact on purpose: decoding the plan is on the critical path
(a step costs ~13–18 tokens of SmolLM2's tokenizer where the same step as JSON costs ~43).

**JSON Lines** plans are read too, line by line (a line that starts with ``{``)::

    {"id": "T3", "prompt": "Write the security section.", "deps": ["T1", "T2"],
     "criticality": "moderate", "high_stakes": true}

Lines that look like neither (blank lines, code fences, a model's chatter) are ignored. A line
that looks like a step but is not a valid one (bad JSON, a missing prompt, a duplicate id, a
dependency no earlier line declared, a line cut off because the planner hit ``max_tokens``)
is a *lost step*: recorded in ``problems`` and ``lost``, skipped, never fatal for a
model-written plan (:func:`parse_plan` with ``strict=True`` raises
:class:`~harness.errors.ConfigError` instead, for plans a person wrote). A run whose plan
lost steps is not ok (:class:`~harness.fabric.decompose.PlanRun`). Requiring dependencies to
come first makes cycles impossible and lets a step be scheduled the moment its line is
complete (speculative decomposition, :mod:`harness.fabric.decompose`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from harness.errors import ConfigError
from harness.fabric.graph import Criticality, Node, TaskGraph, llm_node

__all__ = ("PLANNER_SYSTEM", "PlanParser", "parse_plan", "plan_to_jsonl", "plan_to_text")

PLANNER_SYSTEM = (
    "You split a task into small steps that can run in parallel. Write one step per line and "
    "nothing else, as ID<DEPS@CRITICALITY!: what to do. Examples: 'T1: List the components.' "
    "'T3<T1,T2@moderate!: Write the security section.' DEPS are the ids of earlier steps whose "
    "output the step needs (leave out '<' when there are none); steps without deps run first, "
    "together. CRITICALITY is trivial, simple, moderate or critical (leave out '@' for "
    "simple); '!' marks a high-stakes step."
)

_FIELDS = {"id", "prompt", "deps", "criticality", "high_stakes"}
#: A line that starts like a step: an id with a number, then one of < @ ! :
_STEPLIKE = re.compile(r"^[A-Za-z_]*\d+[\w.-]*\s*[<@!:]")
_COMPACT = re.compile(
    r"""^(?P<id>[A-Za-z_]*\d+[\w.-]*)\s*
    (?:<\s*(?P<deps>[^@!:]*?))?\s*
    (?:@\s*(?P<crit>[A-Za-z]+))?\s*
    (?P<high>!)?\s*:\s*(?P<prompt>.*)$""",
    re.VERBOSE,
)
_BULLET = re.compile(r"^(?:[-*•]\s+|\d+[.)]\s+(?=[A-Za-z_]*\d))")


class PlanParser:
    """Incremental plan parser: :meth:`feed` text as it arrives, get the nodes whose lines
    completed; :meth:`close` at the end. ``problems`` lists what was skipped or ignored;
    ``lost`` names the steps (or lines) the plan lost."""

    def __init__(self) -> None:
        self._buffer = ""
        self._line = 0
        self.nodes: list[Node] = []
        self.problems: list[str] = []
        self.lost: list[str] = []
        self._ids: set[str] = set()

    def feed(self, text: str) -> list[Node]:
        self._buffer += text
        *complete, self._buffer = self._buffer.split("\n")
        return [n for n in map(self._parse, complete) if n is not None]

    def close(self, *, truncated: bool = False) -> list[Node]:
        """The last line's node, if any. ``truncated``: the planner stopped at its token
        budget, so the unfinished last line and whatever would have followed are lost."""
        rest, self._buffer = self._buffer, ""
        if truncated:
            self._line += 1
            cut = f" (its last line {rest.strip()[:40]!r} was cut off)" if rest.strip() else ""
            self._problem(
                f"the planner stopped at its max_tokens{cut}; the rest of the plan is lost. "
                "Raise the planner's max_tokens."
            )
            self.lost.append("the rest of the plan")
            return []
        node = self._parse(rest) if rest.strip() else None
        return [node] if node is not None else []

    def _problem(self, message: str) -> None:
        self.problems.append(f"plan line {self._line}: {message}")

    def _lose(self, what: str, message: str) -> None:
        self._problem(message)
        self.lost.append(what)

    def _parse(self, line: str) -> Node | None:
        self._line += 1
        line = _BULLET.sub("", line.strip().strip("`").strip())
        if line.startswith("{"):
            return self._parse_json(line)
        if _STEPLIKE.match(line):
            return self._parse_compact(line)
        return None

    def _parse_compact(self, line: str) -> Node | None:
        match = _COMPACT.match(line)
        where = line.split(":", 1)[0].strip()
        if match is None:
            self._lose(where, f"{line[:60]!r} is not ID<DEPS@CRITICALITY!: PROMPT; skipped")
            return None
        deps = [d for d in re.split(r"[,\s]+", match["deps"] or "") if d]
        return self._node(
            match["id"],
            match["prompt"].strip(),
            deps,
            match["crit"],
            True if match["high"] else None,
        )

    def _parse_json(self, line: str) -> Node | None:
        where = f"line {self._line}"
        try:
            raw: Any = json.loads(line)
        except json.JSONDecodeError as exc:
            self._lose(where, f"not valid JSON ({exc.msg} at char {exc.pos}); line skipped")
            return None
        if not isinstance(raw, dict):
            self._lose(where, "not a JSON object; line skipped")
            return None
        node_id, prompt, deps = raw.get("id"), raw.get("prompt"), raw.get("deps", [])
        if not isinstance(node_id, str) or not node_id.strip():
            self._lose(where, '"id" must be a non-empty string; line skipped')
            return None
        if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
            self._lose(node_id, f'step {node_id!r}: "deps" must be a list of ids; skipped')
            return None
        high = raw.get("high_stakes")
        node = self._node(
            node_id,
            prompt if isinstance(prompt, str) else "",
            deps,
            raw.get("criticality"),
            high if isinstance(high, bool) else None,
        )
        extra = sorted(set(raw) - _FIELDS)
        if node is not None and extra:
            self._problem(f"step {node_id!r}: ignored unknown field(s) {', '.join(extra)}")
        return node

    def _node(
        self,
        node_id: str,
        prompt: str,
        deps: Sequence[str],
        criticality: Any,
        high_stakes: bool | None,
    ) -> Node | None:
        if not prompt.strip():
            self._lose(node_id, f"step {node_id!r} has no prompt; skipped")
            return None
        if node_id in self._ids:
            self._lose(node_id, f"step {node_id!r} repeats an earlier id; skipped")
            return None
        unknown = [d for d in deps if d not in self._ids]
        if unknown:
            self._lose(
                node_id,
                f"step {node_id!r} depends on {', '.join(map(repr, unknown))}, which no earlier "
                "line declared (or which were skipped); skipped",
            )
            return None
        try:
            node = llm_node(
                node_id,
                prompt,
                dict.fromkeys(deps),
                criticality=criticality or Criticality.SIMPLE,
                high_stakes=high_stakes,
            )
        except ConfigError as exc:
            self._lose(node_id, f"{exc.message} Line skipped.")
            return None
        self._ids.add(node_id)
        self.nodes.append(node)
        return node


def parse_plan(text: str, *, strict: bool = False) -> tuple[list[Node], list[str]]:
    """All nodes of a plan (plan lines or JSON Lines), and its problems; ``strict`` raises
    ConfigError on any problem instead (for plans written by a person)."""
    parser = PlanParser()
    nodes = parser.feed(text) + parser.close()
    if strict and parser.problems:
        raise ConfigError(
            f"The plan has {len(parser.problems)} problem(s): {'; '.join(parser.problems)}. "
            "Write one step per line: 'T2<T1@moderate!: what to do' (or JSON Lines: "
            '{"id": ..., "prompt": ..., "deps": [...]}).'
        )
    return nodes, parser.problems


def _topological(graph: TaskGraph | Sequence[Node]) -> list[Node]:
    if not isinstance(graph, TaskGraph):
        graph = TaskGraph(graph)
    return [graph[node_id] for layer in graph.layers for node_id in layer]


def plan_to_text(graph: TaskGraph | Sequence[Node]) -> str:
    """The plan lines of a graph of LLM nodes (in topological order); ids must be letters
    then a number, prompts one line."""
    lines = []
    for node in _topological(graph):
        if not _STEPLIKE.match(node.id + ":") or "\n" in node.prompt:
            raise ConfigError(
                f"Node {node.id!r} cannot be written as a plan line (ids are letters then a "
                "number, prompts one line); use plan_to_jsonl."
            )
        head = node.id
        if node.deps:
            head += "<" + ",".join(node.deps)
        if node.criticality is not Criticality.SIMPLE:
            head += "@" + node.criticality.value
        if node.high_stakes:
            head += "!"
        lines.append(f"{head}: {node.prompt}")
    return "\n".join(lines) + "\n"


def plan_to_jsonl(graph: TaskGraph | Sequence[Node]) -> str:
    """The JSON Lines plan of a graph of LLM nodes (in topological order)."""
    lines = []
    for node in _topological(graph):
        entry: dict[str, Any] = {"id": node.id, "prompt": node.prompt, "deps": list(node.deps)}
        if node.criticality is not Criticality.SIMPLE:
            entry["criticality"] = node.criticality.value
        if node.high_stakes is not None:
            entry["high_stakes"] = node.high_stakes
        lines.append(json.dumps(entry, ensure_ascii=False))
    return "\n".join(lines) + "\n"
