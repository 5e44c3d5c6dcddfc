"""The fabric over HTTP: one endpoint that runs a task on the fabric and answers with the run
as JSON and the four PEF figures as response headers (CRP-SPEC-022 §7).

``POST /v1/fabric/runs`` takes a JSON object (every field but ``task``/``steps`` optional):

=================  =========================================================================
field              meaning
=================  =========================================================================
``task``           the task: decomposed by the planner, run, composed (plan and execute)
``plan``           with ``task``: force this plan (plan lines or JSON Lines, read strictly)
``steps``          instead of a plan: run this DAG only (no planner, no composer); a list of
                   ``{"id", "prompt", "deps", "criticality", "high_stakes", "max_tokens"}``
``max_tokens``     generation budget per step (the server caps it)
``temperature``    single-pass temperature; ``seed``: base seed
``max_repairs``    re-runs of a rejected step; ``agreement``: the share a vote's winner needs
``naive``          the naive baseline (no layering, batching or speculation)
``mechanisms``     ``{"layering": false, ...}``: switch mechanisms off one by one
``naive_pass``     run the naive single pass of ``task`` for the compute figure (default: when
                   the server knows its model's size)
``baseline_params`` the naive model's parameter count for the compute figure
=================  =========================================================================

The response (200) is :func:`~harness.fabric.document.run_document`'s document plus
``"object": "fabric.run"`` and ``"model"`` (the engine's name), with the headers
``CRP-PEF-Layers`` (``4/14``), ``CRP-PEF-Batch-Efficiency`` (``5.7x``),
``CRP-PEF-Wall-Clock-Ms`` (``18400``) and ``CRP-PEF-Compute-Vs-Naive`` (``0.45``; only when
the server was given its model's parameter count and a naive pass ran). A run whose steps
failed is still a 200 with ``"ok": false``: the failure is data. Bad input is a 400 with an
OpenAI-style error body ``{"error": {"message", "type": "invalid_request_error", "param",
"code"}}``; a dead engine is a 503, a failed engine request a 502 (``type`` ``server_error``).

:func:`fabric_routes` gives the route list to mount in a larger Starlette app;
:func:`fabric_app` a standalone app. Both take an *open* engine that the caller owns. Needs
Starlette (the ``serve`` extra: ``pip install 'agent-harness[serve]'``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.engines.base import Engine
from harness.errors import ConfigError, EngineDeadError, EngineError
from harness.fabric.config import FabricConfig, Mechanisms
from harness.fabric.decompose import measure_baseline, plan_and_execute
from harness.fabric.document import run_document
from harness.fabric.executor import Fabric
from harness.fabric.graph import Node, TaskGraph, llm_node
from harness.fabric.plan import parse_plan

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

__all__ = ("FABRIC_PATH", "FabricRequest", "FabricStep", "fabric_app", "fabric_routes")

#: Where :func:`fabric_routes` serves the endpoint by default.
FABRIC_PATH = "/v1/fabric/runs"

_STRICT = ConfigDict(extra="forbid", strict=True)


class FabricStep(BaseModel):
    """One step of a ``steps`` DAG (the JSON Lines plan's fields, plus ``max_tokens``)."""

    model_config = _STRICT

    id: str = Field(min_length=1)
    prompt: str = Field(min_length=1)
    deps: list[str] = Field(default_factory=list)
    criticality: Literal["trivial", "simple", "moderate", "critical"] = "simple"
    high_stakes: bool | None = None
    max_tokens: int | None = Field(default=None, ge=1)


class MechanismSwitches(BaseModel):
    """Mechanisms to switch on or off (unset ones keep the server's / ``naive``'s choice)."""

    model_config = _STRICT

    layering: bool | None = None
    batching: bool | None = None
    speculation: bool | None = None
    consensus: bool | None = None
    verification: bool | None = None


class FabricRequest(BaseModel):
    """The request body of ``POST /v1/fabric/runs`` (see the module docstring)."""

    model_config = _STRICT

    task: str | None = None
    plan: str | None = None
    steps: list[FabricStep] | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    seed: int | None = None
    max_repairs: int | None = Field(default=None, ge=0, le=8)
    agreement: float | None = Field(default=None, gt=0, le=1)
    naive: bool = False
    mechanisms: MechanismSwitches | None = None
    naive_pass: bool | None = None
    baseline_params: float | None = Field(default=None, gt=0)


class _BadRequest(Exception):
    """Internal control flow: raised while checking a request and caught in this module,
    where it becomes a 400 error body (never seen by a caller, so not a HarnessError)."""

    def __init__(self, message: str, param: str | None = None, code: str = "invalid_value"):
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code


def _error(
    status: int, message: str, *, kind: str, param: str | None, code: str | None
) -> Response:
    from starlette.responses import JSONResponse

    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return JSONResponse(body, status_code=status)


def _parse(raw: bytes) -> FabricRequest:
    try:
        request = FabricRequest.model_validate_json(raw or b"null")
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        if first["type"] == "json_invalid":
            raise _BadRequest(
                f"The body is not valid JSON ({first['msg']}); send a JSON object such as "
                '{"task": "Explain tides."}.',
                code="invalid_json",
            ) from None
        if first["type"] == "model_type":
            raise _BadRequest(
                'The body must be a JSON object such as {"task": "Explain tides."}.',
                code="invalid_type",
            ) from None
        more = f" (+{exc.error_count() - 1} more problem(s))" if exc.error_count() > 1 else ""
        raise _BadRequest(
            f"{where or 'body'}: {first['msg']}{more}.", where or None, first["type"]
        ) from None
    if request.steps is None and not (request.task or "").strip():
        raise _BadRequest(
            'Give a task ({"task": "Explain tides."}) or a DAG of steps ({"steps": [...]}).',
            "task",
            "missing",
        )
    if request.steps is not None and request.plan is not None:
        raise _BadRequest(
            "Give either a plan (with a task) or steps, not both.", "plan", "invalid_value"
        )
    if request.steps is not None and not request.steps:
        raise _BadRequest("steps is empty; give at least one step.", "steps", "invalid_value")
    return request


def _config(base: FabricConfig, request: FabricRequest, max_tokens_cap: int) -> FabricConfig:
    if request.max_tokens is not None and request.max_tokens > max_tokens_cap:
        raise _BadRequest(
            f"max_tokens {request.max_tokens} is above this server's limit of {max_tokens_cap}; "
            f"ask for {max_tokens_cap} or fewer.",
            "max_tokens",
        )
    settings = base.settings
    for name in ("max_tokens", "temperature", "seed"):
        value = getattr(request, name)
        if value is not None:
            settings = replace(settings, **{name: value})
    mechanisms = Mechanisms.naive() if request.naive else base.mechanisms
    if request.mechanisms is not None:
        switched = {k: v for k, v in request.mechanisms.model_dump().items() if v is not None}
        mechanisms = replace(mechanisms, **switched)
    gating = base.gating
    if request.agreement is not None:
        gating = replace(gating, agreement=request.agreement)
    repair = base.repair
    if request.max_repairs is not None:
        repair = replace(repair, max_repairs=request.max_repairs)
    baseline = request.baseline_params or base.baseline_params
    return replace(
        base,
        settings=settings,
        mechanisms=mechanisms,
        gating=gating,
        repair=repair,
        baseline_params=baseline,
    )


def _graph(steps: Sequence[FabricStep], max_tokens_cap: int) -> TaskGraph:
    nodes: list[Node] = []
    for i, step in enumerate(steps):
        if step.max_tokens is not None and step.max_tokens > max_tokens_cap:
            raise _BadRequest(
                f"steps.{i}.max_tokens {step.max_tokens} is above this server's limit of "
                f"{max_tokens_cap}.",
                f"steps.{i}.max_tokens",
            )
        nodes.append(
            llm_node(
                step.id,
                step.prompt,
                step.deps,
                criticality=step.criticality,
                high_stakes=step.high_stakes,
                max_tokens=step.max_tokens,
            )
        )
    try:
        return TaskGraph(nodes)
    except ConfigError as exc:
        raise _BadRequest(str(exc), "steps") from None


async def _run(
    engine: Engine, request: FabricRequest, config: FabricConfig, max_tokens_cap: int
) -> tuple[dict[str, Any], dict[str, str]]:
    wants_naive = request.naive_pass
    if wants_naive is None:
        wants_naive = config.model_params is not None
    task = (request.task or "").strip()
    if request.steps is not None:
        graph = _graph(request.steps, max_tokens_cap)
        result = await Fabric(engine, config=config).run(graph)
        if wants_naive and task:
            baseline, _ = await measure_baseline(engine, task, config)
            result = replace(result, figures=replace(result.figures, baseline=baseline))
        return run_document(result, task=task), result.figures.headers()
    if request.plan is not None:
        try:
            parse_plan(request.plan, strict=True)
        except ConfigError as exc:
            raise _BadRequest(str(exc), "plan") from None
    outcome = await plan_and_execute(
        engine, task, config=config, plan=request.plan, naive_pass=wants_naive
    )
    return run_document(outcome.fabric, outcome), outcome.figures.headers()


def _require_starlette() -> None:
    try:
        import starlette  # noqa: F401
    except ModuleNotFoundError as exc:
        raise ConfigError(
            "The fabric endpoint needs Starlette: pip install 'agent-harness[serve]' "
            "(or pip install starlette)."
        ) from exc


def fabric_routes(
    engine: Engine,
    *,
    config: FabricConfig | None = None,
    path: str = FABRIC_PATH,
    max_tokens_cap: int = 1024,
) -> list[Route]:
    """The fabric endpoint as a Starlette route list, to mount in a larger app.

    ``engine``: an open engine (the caller closes it). ``config``: the server's defaults
    (each request may override its generation budget, temperature, seed, repairs, agreement
    and mechanisms); set ``model_params`` (e.g. 135e6) so responses carry
    ``CRP-PEF-Compute-Vs-Naive``. ``max_tokens_cap``: the largest ``max_tokens`` a request
    may ask for (per step and for the run).
    """
    _require_starlette()
    from starlette.routing import Route

    base = config or FabricConfig(model_params=None)
    if max_tokens_cap < 1:
        raise ConfigError(f"max_tokens_cap is {max_tokens_cap}; use 1 or more.")

    async def runs(request: Request) -> Response:
        from starlette.responses import Response

        try:
            body = _parse(await request.body())
            config = _config(base, body, max_tokens_cap)
            document, headers = await _run(engine, body, config, max_tokens_cap)
        except _BadRequest as bad:
            return _error(
                400, bad.message, kind="invalid_request_error", param=bad.param, code=bad.code
            )
        except ConfigError as exc:
            return _error(400, str(exc), kind="invalid_request_error", param=None, code=None)
        except EngineDeadError as exc:
            return _error(503, str(exc), kind="server_error", param=None, code="engine_dead")
        except EngineError as exc:
            return _error(502, str(exc), kind="server_error", param=None, code="engine_error")
        payload = {"object": "fabric.run", "model": engine.name, **document}
        text = json.dumps(payload, default=str, ensure_ascii=False)
        return Response(text, media_type="application/json", headers=headers)

    return [Route(path, runs, methods=["POST"])]


def fabric_app(
    engine: Engine,
    *,
    config: FabricConfig | None = None,
    path: str = FABRIC_PATH,
    max_tokens_cap: int = 1024,
) -> Starlette:
    """A Starlette app serving only :func:`fabric_routes` (same arguments)."""
    _require_starlette()
    from starlette.applications import Starlette

    return Starlette(
        routes=fabric_routes(engine, config=config, path=path, max_tokens_cap=max_tokens_cap)
    )
