"""Draft a skill manifest from recorded serial runs: where a loop called one tool again and
again, one call per turn, it wasted a round trip per call — a fan-out phase to declare.

:func:`mine_fan_outs` reads chats in the OpenAI format (one per line of a JSONL file: a list
of messages, or an object with ``messages``, as ``LoopResult.openai_messages()`` or most
loggers write them) and finds **serial runs**: two or more consecutive assistant turns, each
with exactly one call, to the same tool. For each run it notes the argument whose value
changes from call to call (the slot argument), the arguments that stay the same, and whether
every slot value is written in the chat's first user message (then the proxy can read the
inputs from the prompt, with a pattern drawn from the values' shapes: ``d558``, ``d12`` ->
``\\bd\\d+\\b``). Runs of the same tool and slot argument across chats are one proposal, with
its evidence: how many chats, which turns, how many calls each.

:func:`render_manifest` writes the proposals as a manifest (TOML): a skill per proposal with
one ``fan_out`` phase, ``slots = "input:FIELD"``, the slot argument from ``input:FIELD``, the
others chosen by the model, and, when the values were in the prompt, the ``[inputs]`` rule
the proxy uses. Evidence is written as comments. Nothing is applied; ``harness init``
certifies a manifest it drafts with the kit before writing it (D2 and the phase's windows).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.skills.input_sources import prompt_text

__all__ = ("FanOutProposal", "mine_fan_outs", "read_chats", "render_manifest", "value_pattern")


@dataclass
class FanOutProposal:
    """A fan-out phase seen in serial runs: ``tool`` called once per turn, ``argument``
    changing from call to call."""

    tool: str
    argument: str
    fixed: set[str] = field(default_factory=set)  # arguments the same in every call of a run
    runs: list[tuple[int, int, int]] = field(default_factory=list)  # (chat, first turn, calls)
    prompt_values: list[list[str]] = field(default_factory=list)  # per run, when all in prompt

    @property
    def input_name(self) -> str:
        """The task input that lists the slot values (``key`` -> ``keys``)."""
        return self.argument if self.argument.endswith("s") else self.argument + "s"

    @property
    def from_prompt(self) -> bool:
        """Whether every run's values were written in its prompt."""
        return bool(self.runs) and len(self.prompt_values) == len(self.runs)


def read_chats(path: str | Path) -> list[list[Mapping[str, Any]]]:
    """The chats of a JSONL file: each line a list of messages or ``{"messages": [...]}``."""
    source = Path(path)
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"Cannot read traces {source}: {exc.strerror or exc}.") from None
    chats: list[list[Mapping[str, Any]]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise ConfigError(f"Traces {source}, line {number}: not JSON ({exc}).") from None
        messages = data.get("messages") if isinstance(data, Mapping) else data
        if not isinstance(messages, list) or not all(isinstance(m, Mapping) for m in messages):
            raise ConfigError(
                f"Traces {source}, line {number}: expected a list of OpenAI-format messages "
                'or {"messages": [...]}.'
            )
        chats.append(messages)
    if not chats:
        raise ConfigError(f"Traces {source} hold no chat.")
    return chats


def _single_calls(
    messages: Sequence[Mapping[str, Any]],
) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """(turn index, tool, arguments) of each assistant turn with exactly one call; a turn
    with none or several ends a run (yielded as ``(index, "", {})``)."""
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        calls = message.get("tool_calls") or []
        if len(calls) != 1 or not isinstance(calls[0], Mapping):
            yield index, "", {}
            continue
        function = calls[0].get("function") or {}
        raw = function.get("arguments", "{}")
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else dict(raw)
        except (ValueError, TypeError):
            arguments = {}
        yield index, str(function.get("name", "")), arguments if isinstance(arguments, dict) else {}


def mine_fan_outs(chats: Iterable[Sequence[Mapping[str, Any]]]) -> list[FanOutProposal]:
    """The serial runs of the chats, grouped by (tool, changing argument); most evidence first."""
    proposals: dict[tuple[str, str], FanOutProposal] = {}
    for chat_index, messages in enumerate(chats):
        run: list[tuple[int, str, dict[str, Any]]] = []
        for step in [*_single_calls(messages), (len(messages), "", {})]:
            if run and step[1] == run[0][1] and step[1]:
                run.append(step)
                continue
            if len(run) >= 2:
                _note(proposals, chat_index, run, prompt_text(messages) or "")
            run = [step] if step[1] else []
    return sorted(proposals.values(), key=lambda p: (-len(p.runs), p.tool, p.argument))


def _note(
    proposals: dict[tuple[str, str], FanOutProposal],
    chat: int,
    run: list[tuple[int, str, dict[str, Any]]],
    prompt: str,
) -> None:
    tool = run[0][1]
    names = set().union(*(set(a) for _, _, a in run))
    changing = sorted(
        n for n in names if len({json.dumps(a.get(n), sort_keys=True) for _, _, a in run}) > 1
    )
    if len(changing) != 1:
        return  # no argument or several change: not one slot argument
    argument = changing[0]
    proposal = proposals.setdefault((tool, argument), FanOutProposal(tool, argument))
    fixed = names - {argument}
    proposal.fixed = fixed if not proposal.runs else proposal.fixed & fixed
    proposal.runs.append((chat, run[0][0], len(run)))
    values = [a.get(argument) for _, _, a in run]
    if all(isinstance(v, str) and v and v in prompt for v in values):
        proposal.prompt_values.append([str(v) for v in values])


def value_pattern(values: Sequence[str]) -> str:
    """A regular expression for values of one shape: each value's letters and digits as
    runs (``d558`` -> ``d\\d+`` when every value starts with ``d``, else ``[a-z]+\\d+``), as
    a whole word. The values must all share the shape; else the alternation of the values."""
    shapes = {re.sub(r"[A-Za-z]+", "a", re.sub(r"\d+", "9", v)) for v in values}
    if len(shapes) != 1 or not re.fullmatch(r"[a9._-]+", next(iter(shapes))):
        return r"\b(?:" + "|".join(re.escape(v) for v in sorted(set(values))) + r")\b"
    parts = re.findall(r"[A-Za-z]+|\d+|[._-]", values[0])
    out = []
    for position, part in enumerate(parts):
        pieces = {re.findall(r"[A-Za-z]+|\d+|[._-]", v)[position] for v in values}
        if len(pieces) == 1 and not part.isdigit():
            out.append(re.escape(part))
        elif part.isdigit():
            out.append(r"\d+")
        else:
            out.append("[A-Za-z]+")
    return r"\b" + "".join(out) + r"\b"


def render_manifest(proposals: Sequence[FanOutProposal], *, source: str) -> str:
    """The proposals as a manifest (TOML), each with its evidence as comments."""
    out = [
        f"# Skills drafted by `harness init` from serial runs in {source}.",
        "# Each fan-out phase is a tool the loop called once per turn, one argument changing;",
        "# read the evidence before you serve it: `harness serve --manifest THIS_FILE`.",
        "version = 1",
    ]
    for proposal in proposals:
        skill = f"{proposal.tool}_each_{proposal.argument}"
        field_name = proposal.input_name
        runs = proposal.runs
        evidence = ", ".join(f"chat {c} turn {t} ({n} calls)" for c, t, n in runs[:6])
        more = f" and {len(runs) - 6} more" if len(runs) > 6 else ""
        out += [
            "",
            f"# evidence: {len(runs)} serial run(s) of {proposal.tool}, '{proposal.argument}' "
            f"changing: {evidence}{more}",
            f"[skills.{skill}]",
            f'description = "Call {proposal.tool} once per {proposal.argument} (drafted)."',
            "",
            f"[[skills.{skill}.phases]]",
            'name = "each"',
            'kind = "fan_out"',
            f'tools = ["{proposal.tool}"]',
            f'slots = "input:{field_name}"',
            f"[skills.{skill}.phases.args]",
            f'"{proposal.tool}.{proposal.argument}" = "input:{field_name}"',
        ]
        out += [f'"{proposal.tool}.{name}" = "model"' for name in sorted(proposal.fixed)]
        if proposal.from_prompt:
            values = [v for run in proposal.prompt_values for v in run]
            out += [
                f"# every value was written in the prompt ({len(proposal.prompt_values)} "
                "chat(s)): the proxy reads them from there",
                f"[skills.{skill}.inputs.{field_name}]",
                'from = "prompt"',
                f"pattern = {json.dumps(value_pattern(values))}",
                "all = true",
            ]
        else:
            out.append(
                "# the values were not all in the prompt: send them as the task's inputs "
                f'(X-Harness-Inputs: {{"{field_name}": [...]}}) or add an [inputs] rule'
            )
    return "\n".join(out) + "\n"
