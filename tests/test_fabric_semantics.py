"""Claims about what a fabric run *means*: when a vote is a consensus, how one node's failure
stays with that node and its dependants, timeouts, failed requests, plans that lose steps, and
the compute figure against a naive pass of the same task. All on test doubles."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import pytest

from harness import ConfigError, EngineRequestError, NodeFailed
from harness._commands.cli import main
from harness.engines.base import GenerationSettings
from harness.fabric import (
    COMPOSER_SYSTEM,
    EXAMPLE_TASK,
    Fabric,
    FabricConfig,
    GatingPolicy,
    NodeResult,
    RepairPolicy,
    example_plan,
    llm_node,
    parse_plan,
    plan_and_execute,
)
from harness.fabric.decompose import NAIVE_SYSTEM
from harness.messages import Completion, Message, ToolSpec
from harness.testing import ScriptedEngine
from tests.fabric_doubles import GatedEngine, echo, node_of, step

pytestmark = pytest.mark.anyio


def by_temperature(answers: Mapping[float, str]) -> Any:
    """A script whose answer depends on the request's temperature (scripts do not see
    settings, so :class:`TemperatureEngine` appends it to the last message)."""

    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        node = node_of(messages)
        if node in ("C", "?"):
            return f"out {node}"
        return answers[float(str(messages[-1]["content"]).rsplit("@", 1)[1])]

    return script


class TemperatureEngine(ScriptedEngine):
    """Appends ``@temperature`` to the last message so the script can answer by it."""

    async def generate(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: GenerationSettings
    ) -> Completion:
        last = {**messages[-1], "content": f"{messages[-1]['content']}@{settings.temperature}"}
        return await super().generate([*messages[:-1], last], tools, settings)


# --------------------------------------------------------------------------------------------
# Consensus: an outcome, not always a pass


async def test_a_three_way_split_is_contested_flagged_and_shown_to_its_consumer():
    engine = TemperatureEngine(script=by_temperature({0.3: "Paris", 0.6: "Lyon", 0.9: "Nice"}))
    nodes = [step("M", criticality="moderate", high_stakes=True), step("C", ["M"])]
    result = await Fabric(engine).run(nodes)
    m = result.nodes["M"]
    assert m.status == "contested"
    assert m.text == "Paris"  # the plurality, ties to the lowest temperature
    assert m.agreement == pytest.approx(1 / 3)
    assert "no consensus: 3 samples, 3 different answer(s)" in m.note
    assert "needs a strict majority" in m.note
    assert result.nodes["C"].ok  # the consumer ran...
    consumer_prompt = engine.requests[-1].messages[-1]["content"]
    assert "[M] (unconfirmed, no consensus" in consumer_prompt  # ...and was shown why
    assert not result.ok
    assert result.contested == ("M",)
    assert result.failed == ()
    assert result.figures.contested == 1
    assert result.figures.votes == 1
    assert result.figures.agreement == pytest.approx(1 / 3)


async def test_a_two_two_one_vote_of_five_is_contested():
    answers = {0.3: "a", 0.45: "b", 0.6: "a", 0.75: "b", 0.9: "c"}
    engine = TemperatureEngine(script=by_temperature(answers))
    result = await Fabric(engine).run([step("M", criticality="critical")])
    assert result.nodes["M"].status == "contested"
    assert result.nodes["M"].agreement == pytest.approx(0.4)


async def test_a_strict_majority_agrees():
    engine = TemperatureEngine(script=by_temperature({0.3: "x", 0.6: "y", 0.9: "X "}))
    result = await Fabric(engine).run([step("M", criticality="moderate", high_stakes=True)])
    assert result.ok
    assert result.nodes["M"].agreement == pytest.approx(2 / 3)
    assert result.nodes["M"].note == ""


async def test_a_declared_agreement_threshold_decides_instead_of_the_majority():
    answers = {0.3: "a", 0.45: "a", 0.6: "a", 0.75: "b", 0.9: "c"}
    strict = FabricConfig(gating=GatingPolicy(agreement=0.8))
    loose = FabricConfig(gating=GatingPolicy(agreement=0.6))
    node = step("M", criticality="critical")
    engine = TemperatureEngine(script=by_temperature(answers))
    assert (await Fabric(engine, config=loose).run([node])).ok
    contested = (await Fabric(engine, config=strict).run([node])).nodes["M"]
    assert contested.status == "contested"
    assert "needs an agreement of 0.8" in contested.note


async def test_a_nodes_own_comparator_decides_its_vote_over_the_policys():
    answers = {0.3: "34 years", 0.6: "34.", 0.9: "I think 34"}
    engine = TemperatureEngine(script=by_temperature(answers))
    digits = "".join
    by_number = step(
        "N",
        criticality="moderate",
        high_stakes=True,
        same=lambda a, b: digits(filter(str.isdigit, a)) == digits(filter(str.isdigit, b)),
    )
    by_text = step("T", criticality="moderate", high_stakes=True)
    result = await Fabric(engine).run([by_number, by_text])
    assert result.nodes["N"].status == "ok"
    assert result.nodes["N"].agreement == pytest.approx(1.0)
    assert result.nodes["T"].status == "contested"  # the policy's default: the words differ


def test_an_agreement_threshold_outside_zero_one_is_a_config_error():
    with pytest.raises(ConfigError, match=r"agreement is 1.5; use a share in \(0, 1\]"):
        GatingPolicy(agreement=1.5)


# --------------------------------------------------------------------------------------------
# Failed engine requests: retried, then counted; siblings' tokens counted


class FlakyEngine(ScriptedEngine):
    """Fails the request at temperature ``flaky`` the first ``times`` times it is asked."""

    def __init__(self, flaky: float, times: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.flaky, self.left = flaky, times

    async def generate(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: GenerationSettings
    ) -> Completion:
        if settings.temperature == self.flaky and self.left > 0:
            self.left -= 1
            await anyio.lowlevel.checkpoint()
            raise EngineRequestError("the server said 503")
        return await super().generate(messages, tools, settings)


async def test_a_failed_sample_is_sent_again_as_one_more_round():
    engine = FlakyEngine(0.9, 1, script=echo)
    result = await Fabric(engine).run([step("M", criticality="moderate", high_stakes=True)])
    m = result.nodes["M"]
    assert m.ok
    assert (m.inferences, m.failed_requests, m.round) == (4, 1, 2)
    assert m.agreement == 1.0
    assert result.figures.failed_requests == 1
    assert result.figures.inferences == 4


async def test_a_sample_that_keeps_failing_counts_as_a_dissent_and_its_siblings_tokens_count():
    engine = FlakyEngine(0.9, 99, script=echo)
    config = FabricConfig(request_retries=0)
    result = await Fabric(engine, config=config).run(
        [step("M", criticality="moderate", high_stakes=True)]
    )
    m = result.nodes["M"]
    assert m.ok  # 2 of 3 requested agree: still a strict majority
    assert m.agreement == pytest.approx(2 / 3)
    assert m.failed_requests == 1
    answered = [r.completion for r in engine.requests if r.completion]
    assert len(answered) == 2
    assert m.usage.billed_tokens == sum(c.usage.billed_tokens for c in answered)
    assert result.figures.tokens == m.usage.billed_tokens


async def test_when_every_request_fails_the_node_fails_and_only_its_dependants_are_skipped():
    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        if node_of(messages) == "A":
            raise EngineRequestError("the server said 400: prompt too long")
        return "fine"

    result = await Fabric(ScriptedEngine(script=script)).run(
        [step("A"), step("B", ["A"]), step("Z")]
    )
    assert result.nodes["A"].status == "failed"
    assert result.nodes["A"].inferences == 2  # sent, then sent again once
    assert "all 1 engine request(s) of attempt 1 failed (2 tries each)" in str(
        result.nodes["A"].error
    )
    assert "prompt too long" in str(result.nodes["A"].error)
    assert result.nodes["B"].status == "skipped"
    assert result.nodes["Z"].ok


# --------------------------------------------------------------------------------------------
# One node's failure stays with the node and its dependants


async def test_a_messages_builder_that_raises_fails_only_its_node_and_dependants():
    def broken(inputs: Mapping[str, NodeResult]) -> list[Message]:
        raise KeyError("summary")

    nodes = [llm_node("A", "", messages=broken), step("B", ["A"]), step("Z")]
    engine = ScriptedEngine(script=echo)
    result = await Fabric(engine).run(nodes)
    error = result.nodes["A"].error
    assert isinstance(error, NodeFailed)
    assert "its messages builder raised KeyError: 'summary'; fix messages builder" in str(error)
    assert result.nodes["B"].status == "skipped"
    assert result.nodes["Z"].ok
    assert len(engine.requests) == 1


async def test_garbage_from_the_engine_fails_only_the_node_that_got_it():
    class Garbage(ScriptedEngine):
        async def generate(self, messages, tools, settings):  # type: ignore[no-untyped-def]
            node = node_of(messages)
            if node == "A":
                return {"text": "not a completion"}
            if node == "B":
                raise ValueError("malformed frame")
            return await super().generate(messages, tools, settings)

    config = FabricConfig(request_retries=0)
    result = await Fabric(Garbage(script=echo), config=config).run(
        [step("A"), step("B"), step("Z"), step("Y", ["Z"])]
    )
    assert "the engine returned dict, not a Completion" in str(result.nodes["A"].error)
    assert "the engine raised ValueError: malformed frame" in str(result.nodes["B"].error)
    assert result.nodes["Z"].ok
    assert result.nodes["Y"].ok
    assert result.failed == ("A", "B")


async def test_a_high_stakes_policy_that_raises_fails_only_that_node():
    def policy(node: Any) -> bool:
        raise RuntimeError("no stakes table")

    config = FabricConfig(gating=GatingPolicy(high_stakes=policy))
    result = await Fabric(ScriptedEngine(script=echo), config=config).run(
        [step("A", criticality="moderate"), step("B")]
    )
    assert "its gating policy (high_stakes) raised RuntimeError" in str(result.nodes["A"].error)
    assert result.nodes["B"].ok


async def test_a_node_past_its_timeout_fails_its_request_is_cancelled_and_the_rest_run():
    never = anyio.Event()
    engine = GatedEngine(ScriptedEngine(script=echo), {"A": never})
    cancelled: list[str] = []
    original = engine.generate

    async def generate(messages, tools, settings):  # type: ignore[no-untyped-def]
        try:
            return await original(messages, tools, settings)
        except anyio.get_cancelled_exc_class():
            cancelled.append(node_of(messages))
            raise

    engine.generate = generate  # type: ignore[method-assign]
    nodes = [step("A", timeout_s=0.2), step("B", ["A"]), step("Z")]
    result = await Fabric(engine).run(nodes)
    assert result.nodes["A"].status == "failed"
    assert "timed out after 0.2 s (attempt 1)" in str(result.nodes["A"].error)
    assert cancelled == ["A"]
    assert result.nodes["B"].status == "skipped"
    assert result.nodes["Z"].ok


async def test_the_run_wide_node_timeout_applies_to_nodes_that_set_none():
    engine = GatedEngine(ScriptedEngine(script=echo), {"A": anyio.Event()})
    config = FabricConfig(node_timeout_s=0.1)
    result = await Fabric(engine, config=config).run([step("A"), step("Z")])
    assert "timed out after 0.1 s" in str(result.nodes["A"].error)
    assert result.nodes["Z"].ok


async def test_a_verifier_past_its_timeout_is_a_rejection_whether_sync_or_async():
    release = threading.Event()

    def blocking(result: NodeResult) -> bool:
        release.wait(10)  # a check stuck on I/O; abandoned in its thread on timeout
        return True

    async def hanging(result: NodeResult) -> bool:
        await anyio.sleep_forever()
        return True

    config = FabricConfig(verifier_timeout_s=0.1, repair=RepairPolicy(max_repairs=0))
    try:
        result = await Fabric(ScriptedEngine(script=echo), config=config).run(
            [step("A", verifiers=[blocking]), step("B", verifiers=[hanging]), step("Z")]
        )
    finally:
        release.set()
    for node in ("A", "B"):
        (verdict,) = result.nodes[node].verdicts
        assert not verdict.passed
        assert "gave no verdict within 0.1 s" in verdict.reason
        assert result.nodes[node].status == "failed"
    assert result.nodes["Z"].ok


def test_timeouts_that_are_not_positive_are_config_errors():
    with pytest.raises(ConfigError, match="node_timeout_s is 0"):
        FabricConfig(node_timeout_s=0)
    with pytest.raises(ConfigError, match="timeout_s -1"):
        step("A", timeout_s=-1)


# --------------------------------------------------------------------------------------------
# Plans that lose steps


LOSSY = "T1: Find x.\nT2<T9: Use y.\nT3<T1: Use x.\n"


async def test_a_plan_that_lost_steps_is_not_ok_even_when_every_step_ran():
    outcome = await plan_and_execute(ScriptedEngine(script=echo), "t", plan=LOSSY)
    assert outcome.fabric.ok
    assert list(outcome.fabric.nodes) == ["T1", "T3"]
    assert outcome.lost == ("T2",)
    assert not outcome.ok
    assert "step 'T2' depends on 'T9'" in outcome.problems[0]


async def test_a_plan_cut_off_at_max_tokens_lost_its_tail():
    def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        if "one step per line" in str(messages[0]["content"]):
            return Completion("T1: Find x.\nT2<T1: Use", finish_reason="length")
        return "fine"

    for engine in (ScriptedEngine(script=script), GatedEngine(ScriptedEngine(script=script))):
        outcome = await plan_and_execute(engine, "t")
        assert list(outcome.fabric.nodes) == ["T1"]
        assert outcome.lost == ("the rest of the plan",)
        assert "its last line 'T2<T1: Use' was cut off" in outcome.problems[0]
        assert not outcome.ok


async def test_a_plan_with_no_usable_step_is_not_ok():
    engine = ScriptedEngine(script=lambda m, t: "I cannot plan." if "<" in str(m[0]) else "ok")
    outcome = await plan_and_execute(engine, "say hi")
    assert outcome.fabric.ok
    assert outcome.lost == ("the whole plan",)
    assert not outcome.ok


def test_plan_lines_skip_chatter_and_bullets_and_lose_only_lines_that_look_like_steps():
    text = "\n".join(
        [
            "Here is the plan:",
            "Note: keep it short.",
            "- T1: Find the facts.",
            "2. T2@trivial: List constraints.",
            "T3<T1, T2@moderate!: Draft it.",
            "T4<T3@urgent: Check it.",
            "T5<T3:",
            '{"id": "T6", "prompt": "Polish.", "deps": ["T3"]}',
        ]
    )
    nodes, problems = parse_plan(text)
    assert [n.id for n in nodes] == ["T1", "T2", "T3", "T6"]
    t3 = nodes[2]
    assert (t3.deps, t3.criticality.value, t3.high_stakes) == (("T1", "T2"), "moderate", True)
    assert nodes[1].criticality.value == "trivial"
    assert len(problems) == 2
    assert "Unknown criticality 'urgent'" in problems[0]
    assert "step 'T5' has no prompt" in problems[1]


def test_a_cli_run_whose_plan_lost_steps_exits_non_zero(monkeypatch, capsys):
    def lossy_engine() -> ScriptedEngine:
        def script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
            return LOSSY if "one step per line" in str(messages[0]["content"]) else "fine"

        return ScriptedEngine(script=script)

    monkeypatch.setattr("harness.testing.fabric_demo_engine", lossy_engine)
    assert main(["fabric", "run", "--engine", "scripted-demo", "--prompt", "t"]) == 1
    out = capsys.readouterr().out
    assert "the plan lost: T2" in out


# --------------------------------------------------------------------------------------------
# Compute against a naive pass of the same task


async def test_compute_vs_naive_is_measured_against_a_naive_pass_of_the_same_task():
    engine = ScriptedEngine(script=echo)
    config = FabricConfig(model_params=70e9, baseline_params=70e9)
    outcome = await plan_and_execute(engine, EXAMPLE_TASK, config=config, plan=example_plan())
    naive = engine.requests[-1]
    assert EXAMPLE_TASK in naive.messages[-1]["content"]
    assert naive.completion is not None
    assert outcome.naive == naive.completion
    figures = outcome.figures
    assert figures.inferences == 28  # the naive pass is not the run's
    assert figures.baseline is not None
    assert figures.baseline.tokens == naive.completion.usage.billed_tokens
    # the same model 28 times costs more than once: the ratio is the token ratio, above 1
    assert figures.compute_vs_naive == pytest.approx(figures.tokens / figures.baseline.tokens)
    assert figures.compute_vs_naive > 1
    without = await plan_and_execute(engine, "t", config=FabricConfig(), plan="T1: x.\n")
    assert without.naive is None
    assert "CRP-PEF-Compute-Vs-Naive" not in without.figures.headers()


class _FailsAfterTheSteps(ScriptedEngine):
    """Fails the composer call ``composer_failures`` times and the naive pass always."""

    def __init__(self, composer_failures: int) -> None:
        super().__init__(script=echo)
        self.composer_failures = composer_failures

    async def generate(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: GenerationSettings,
    ) -> Completion:
        system = messages[0]["content"] if messages else ""
        if system == NAIVE_SYSTEM:
            raise EngineRequestError("the naive pass timed out")
        if system == COMPOSER_SYSTEM and self.composer_failures > 0:
            self.composer_failures -= 1
            raise EngineRequestError("the composer request timed out")
        return await super().generate(messages, tools, settings)


async def test_a_composer_that_fails_once_is_retried_like_a_node_request():
    engine = _FailsAfterTheSteps(composer_failures=1)
    config = FabricConfig(model_params=70e9, request_retries=1)
    outcome = await plan_and_execute(engine, EXAMPLE_TASK, config=config, plan=example_plan())
    assert outcome.answer  # composed on its second try
    assert outcome.ok
    assert outcome.naive is None  # the naive pass failed both tries: missing, not a lost run
    assert outcome.missing == (
        "naive pass: the compute baseline is not measured (2 tries failed; last: "
        "EngineRequestError: the naive pass timed out)",
    )
    assert outcome.figures.baseline is None
    assert outcome.fabric.ok  # every finished step kept
    assert len(outcome.fabric.nodes) == 14


async def test_a_composer_that_keeps_failing_keeps_the_finished_steps_and_says_what_is_missing():
    engine = _FailsAfterTheSteps(composer_failures=5)
    outcome = await plan_and_execute(
        engine, EXAMPLE_TASK, config=FabricConfig(request_retries=2), plan=example_plan()
    )
    assert outcome.fabric.ok
    assert not outcome.ok
    assert outcome.answer == ""
    assert outcome.missing[0].startswith("composer: no answer was composed (3 tries failed")
