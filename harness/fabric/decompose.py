"""Speculative decomposition (CRP-SPEC-022 §5) and the plan-and-execute runner.

**Plan and execute** (:func:`plan_and_execute`): decompose (one planner call writing a plan,
:mod:`harness.fabric.plan`) → execute the plan's DAG on the fabric → compose (one call over
the task and every step's output). If the plan has no usable step, the task runs as a single
step, so a weak planner degrades to one naive pass; the run is then not ``ok``.

**Speculative decomposition.** With a streaming engine
(:class:`~harness.engines.base.StreamingEngine`: the in-process vLLM engine, the HTTP engine,
the scripted engine) and the ``speculation`` mechanism on, each step is added to the running
fabric as soon as its line is complete, so layer-0 steps start while the planner is still
decoding the deeper layers. Their inferences that finish before the plan does share the
planner's round; the others come after it (no round is credited that was not saved). Without
streaming the plan is parsed whole after the planner call.

**The compute baseline.** ``CRP-PEF-Compute-Vs-Naive`` compares the run with a naive single
pass of the *same task*: :func:`naive_pass` asks the engine for the whole answer in one
generation (with the composer's settings) and its measured prompt + completion tokens,
times ``FabricConfig.baseline_params`` (the large model, default the run's own), are the
baseline. :func:`plan_and_execute` runs it after the run (its time and tokens are not the
run's) whenever ``FabricConfig.model_params`` is set, unless ``naive_pass=False``.

**Finished work is kept.** The composer call and the naive pass are retried like node
requests (``FabricConfig.request_retries`` more tries after an
:class:`~harness.errors.EngineRequestError`). One that still fails does not throw the run
away: its steps' results and figures are returned, and :attr:`PlanRun.missing` says what is
missing and why (no answer: the run is not ``ok``; no baseline: the compute figure is
absent). Only :class:`~harness.errors.EngineDeadError` ends the run.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace

from harness._logging import get_logger
from harness.engines.base import Engine, GenerationSettings, StreamingEngine
from harness.errors import EngineDeadError, EngineRequestError
from harness.fabric.config import FabricConfig
from harness.fabric.executor import Fabric, FabricRun
from harness.fabric.figures import NaiveBaseline, PEFFigures
from harness.fabric.graph import llm_node
from harness.fabric.plan import PLANNER_SYSTEM, PlanParser
from harness.fabric.result import FabricResult, NodeResult
from harness.messages import Completion, Message
from harness.tools.toolset import Toolset

__all__ = (
    "COMPOSER_SYSTEM",
    "NAIVE_SYSTEM",
    "PlanRun",
    "compose_messages",
    "measure_baseline",
    "naive_pass",
    "plan_and_execute",
    "plan_messages",
)

_log = get_logger("harness.fabric")

COMPOSER_SYSTEM = (
    "You combine the outputs of the steps of a task into one final answer. Use only what the "
    "steps found; say so if a step failed or its output is unconfirmed."
)

NAIVE_SYSTEM = "Answer the task in full, in one reply."


def plan_messages(task: str) -> list[Message]:
    return [
        {"role": "system", "content": PLANNER_SYSTEM},
        {"role": "user", "content": f"Task: {task}"},
    ]


def compose_messages(task: str, results: Mapping[str, NodeResult]) -> list[Message]:
    shown = []
    for node_id, result in results.items():
        if result.ok:
            shown.append(f"[{node_id}] {result.text.strip()}")
        elif result.status == "contested":
            shown.append(f"[{node_id}] (unconfirmed, {result.note}) {result.text.strip()}")
        else:
            shown.append(f"[{node_id}] ({result.status}: {result.error})")
    body = f"Task: {task}\n\nStep outputs:\n" + "\n".join(shown) + "\n\nWrite the final answer."
    return [{"role": "system", "content": COMPOSER_SYSTEM}, {"role": "user", "content": body}]


def _naive_messages(task: str) -> list[Message]:
    return [
        {"role": "system", "content": NAIVE_SYSTEM},
        {"role": "user", "content": f"Task: {task}"},
    ]


async def naive_pass(engine: Engine, task: str, settings: GenerationSettings) -> Completion:
    """One naive pass of ``task``: the whole answer in one generation (the baseline of
    ``CRP-PEF-Compute-Vs-Naive``)."""
    return await engine.generate(_naive_messages(task), [], settings)


def _baseline_of(naive: Completion, engine: Engine, config: FabricConfig) -> NaiveBaseline | None:
    """The compute baseline a naive pass measured (``None`` when ``config.model_params`` is
    unknown or the engine reported no tokens)."""
    params = config.baseline_params or config.model_params
    tokens = naive.usage.billed_tokens
    if params is None or config.model_params is None or tokens <= 0:
        return None
    return NaiveBaseline(params, tokens, engine.name)


async def measure_baseline(
    engine: Engine, task: str, config: FabricConfig, settings: GenerationSettings | None = None
) -> tuple[NaiveBaseline | None, Completion]:
    """Run :func:`naive_pass` and turn it into the compute baseline (``None`` when
    ``config.model_params`` is unknown or the engine reported no tokens)."""
    naive = await naive_pass(engine, task, settings or config.settings)
    return _baseline_of(naive, engine, config), naive


@dataclass(frozen=True)
class PlanRun:
    """A plan-and-execute run: the plan (text, ``problems``, the steps it ``lost``),
    ``speculative``: the steps that started before the plan had finished, the fabric's
    result, the planner, composer and naive-pass completions, the run's figures (planner and
    composer included in inferences, rounds and wall time) and when the plan's first token
    and last token arrived (seconds from the start)."""

    task: str
    plan_text: str
    problems: tuple[str, ...]
    lost: tuple[str, ...]
    speculative: tuple[str, ...]
    fabric: FabricResult
    planner: Completion
    composer: Completion
    figures: PEFFigures
    naive: Completion | None = None
    plan_first_token_s: float | None = None
    plan_done_s: float = 0.0
    #: What the run could not measure after its steps finished (``"composer: ..."``,
    #: ``"naive pass: ..."``), each with the error of its last try.
    missing: tuple[str, ...] = ()

    @property
    def answer(self) -> str:
        return self.composer.content or ""

    @property
    def ok(self) -> bool:
        """Every step ran and is ``ok``, the plan lost none and the answer was composed."""
        composed = not any(m.startswith("composer:") for m in self.missing)
        return self.fabric.ok and not self.lost and composed


async def _retrying(
    engine: Engine, messages: list[Message], settings: GenerationSettings, retries: int
) -> tuple[Completion | None, str | None]:
    """``engine.generate`` tried ``1 + retries`` times, as a node request is: the completion,
    or ``None`` and what the last try's failure was (an :class:`EngineDeadError` raises)."""
    last: EngineRequestError | None = None
    for _ in range(1 + retries):
        try:
            return await engine.generate(messages, [], settings), None
        except EngineDeadError:
            raise
        except EngineRequestError as exc:
            last = exc
    return None, f"{1 + retries} tries failed; last: {type(last).__name__}: {last}"


async def _decompose(
    run: FabricRun, parser: PlanParser, task: str, settings: GenerationSettings, started: float
) -> tuple[Completion, float | None]:
    """The planner call; with speculation, steps join ``run`` as their lines complete.
    Returns the planner's completion and when its first text arrived."""
    messages = plan_messages(task)
    config = run.fabric.config
    first: float | None = None
    if config.mechanisms.speculation and isinstance(run.fabric.engine, StreamingEngine):
        chunks: list[str] = []
        final: Completion | None = None
        with run.streaming_plan():
            async with contextlib.aclosing(run.engine.stream(messages, [], settings)) as deltas:
                async for delta in deltas:
                    if isinstance(delta, Completion):
                        final = delta
                        continue
                    if first is None and delta:
                        first = time.monotonic() - started
                    chunks.append(delta)
                    for node in parser.feed(delta):
                        run.add(node, after_round=1, speculative=True)
        planner = final or Completion("".join(chunks))
    else:
        planner = await run.engine.generate(messages, [], settings)
        parser.feed(planner.content or "")
    return planner, first


def _add_remaining_steps(run: FabricRun, parser: PlanParser, task: str) -> None:
    """The plan's steps not yet started once the planner is done (all of them without
    speculation; the last line's with it), or, for a plan without a usable step, the whole
    task as one step (said in the parser's problems and lost steps)."""
    for node in parser.nodes:
        if node.id not in run:
            run.add(node, after_round=1)
    if not parser.nodes:
        parser.problems.append("the plan had no usable step; the task ran as one step")
        parser.lost.append("the whole plan")
        run.add(llm_node("T1", task), after_round=1)


async def plan_and_execute(
    engine: Engine,
    task: str,
    *,
    toolset: Toolset | None = None,
    config: FabricConfig | None = None,
    plan: str | None = None,
    planner_settings: GenerationSettings | None = None,
    composer_settings: GenerationSettings | None = None,
    naive_pass: bool | None = None,
) -> PlanRun:
    """Decompose ``task``, run the plan on the fabric, compose the answer (module docstring).

    ``plan`` forces the planner's output to that text (the gold-plan policy: the engine still
    prefills and decodes every token of it, as with the loop's gold calls). ``naive_pass``:
    measure the compute baseline (default: when ``config.model_params`` is set).
    """
    fabric = Fabric(engine, toolset=toolset, config=config)
    base = fabric.config.settings
    settings = planner_settings or replace(base, max_tokens=max(base.max_tokens, 512))
    if plan is not None:
        settings = replace(settings, forced=(), forced_answer=plan)
    parser = PlanParser()
    started = time.monotonic()
    async with fabric.open() as run:
        planner, first = await _decompose(run, parser, task, settings, started)
        plan_done = time.monotonic()
        parser.close(truncated=planner.finish_reason == "length")
        run.record("planner", 1, planner.usage)
        _add_remaining_steps(run, parser, task)
    result = run.result
    assert result is not None
    retries = fabric.config.request_retries
    missing: list[str] = []
    composed, failed = await _retrying(
        engine, compose_messages(task, result.nodes), composer_settings or base, retries
    )
    if composed is None:
        missing.append(f"composer: no answer was composed ({failed}); the steps' outputs are kept")
    composer = composed or Completion(None)
    run.record("composer", 1 + run.max_round, composer.usage)
    wall_ms = (time.monotonic() - started) * 1000
    naive: Completion | None = None
    if naive_pass if naive_pass is not None else fabric.config.model_params is not None:
        naive, failed = await _retrying(
            engine, _naive_messages(task), composer_settings or base, retries
        )
        if naive is None:
            missing.append(f"naive pass: the compute baseline is not measured ({failed})")
        else:
            run.baseline = _baseline_of(naive, engine, fabric.config)
    figures = run.figures(wall_clock_ms=wall_ms)
    early = tuple(n for n, r in result.nodes.items() if 0 < r.started < plan_done)
    _log.info(
        "fabric.plan_run",
        nodes=len(result.nodes),
        failed=list(result.failed),
        contested=list(result.contested),
        lost=list(parser.lost),
        problems=len(parser.problems),
        speculative=list(early),
        inferences=figures.inferences,
        rounds=figures.rounds,
        **figures.headers(),
    )
    return PlanRun(
        task,
        planner.content or "",
        tuple(parser.problems),
        tuple(parser.lost),
        early,
        result,
        planner,
        composer,
        figures,
        naive,
        first,
        plan_done - started,
        tuple(missing),
    )
