"""Token streaming for pass-through replies: ``stream: true`` answered as the upstream decodes.

A flattened window cannot stream before it closes (the proxy only knows it is a window, and
which calls it holds, after its last generation), so a window, and any reply to a request
with tools, is sent as chunks once it is complete (:func:`~harness.proxy.protocol.
stream_chunks`). A pass-through request without tools is a plain text turn: when the upstream
streams (:class:`~harness.engines.base.StreamingEngine`: the embedded vLLM engine, the HTTP
engine, the scripted engine) its reply goes to the client delta by delta, in OpenAI's chunk
format, as the upstream produces it.

With tools the upstream's deltas are its raw reply text (the embedded engine's JSON reply
format), which is a call or an answer only once it is parsed, so those replies are held
until complete rather than streamed wrong.

An upstream failure before the first delta is an ordinary error response (502, naming the
upstream); after it the status is sent, so the failure arrives as an error event (OpenAI's
error body, which the SDK raises as an ``APIError``) and the stream ends.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable

from harness.engines.base import StreamingEngine, engine_name
from harness.errors import EngineError, HarnessError
from harness.loop.state import RunState
from harness.messages import Completion
from harness.proxy.conversation import Meter
from harness.proxy.protocol import ChunkWriter, usage_body

__all__ = ("stream_pass_through",)


async def stream_pass_through(
    state: RunState,
    engine: StreamingEngine,
    meter: Meter,
    model: str,
    *,
    include_usage: bool,
    upstream: str = "the upstream",
    hide: Callable[[str], str] = str,
) -> AsyncIterator[str]:
    """One pass-through generation of ``state`` streamed from ``engine`` (its time awaiting
    the upstream and the proxy's own counted on ``meter``): returns the chunks once the first
    delta (or the whole reply) has arrived, so a failure to start raises here (an
    :class:`~harness.errors.EngineError`) and becomes an error response."""
    state.budgets.check_turns()
    began = time.monotonic()
    stream = engine.stream(state.messages, state.specs, state.config.generation)
    try:
        first = await _next(engine, meter, stream)
    except BaseException:
        await stream.aclose()
        raise
    writer = ChunkWriter(
        f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time()), model, include_usage=include_usage
    )
    return _chunks(state, engine, meter, stream, first, writer, began, upstream, hide)


async def _next(
    engine: StreamingEngine, meter: Meter, stream: AsyncGenerator[str | Completion, None]
) -> str | Completion:
    """The stream's next item, its wait counted as upstream time, failures typed."""
    name = engine_name(engine)
    started, cpu = time.perf_counter(), time.thread_time()
    try:
        item = await stream.__anext__()
    except StopAsyncIteration:
        raise EngineError(
            f"Engine {name!r} ended its stream without a Completion; fix the engine's stream()."
        ) from None
    except HarnessError:
        raise
    except Exception as exc:
        raise EngineError(f"Engine {name!r} raised {type(exc).__name__}: {exc}") from exc
    finally:
        meter.upstream_s += time.perf_counter() - started
        meter.upstream_cpu_s += time.thread_time() - cpu
    if not isinstance(item, str | Completion):
        raise EngineError(
            f"Engine {name!r} streamed a {type(item).__name__}; a stream yields str deltas "
            "and then one Completion."
        )
    return item


async def _chunks(
    state: RunState,
    engine: StreamingEngine,
    meter: Meter,
    stream: AsyncGenerator[str | Completion, None],
    item: str | Completion,
    writer: ChunkWriter,
    began: float,
    upstream: str,
    hide: Callable[[str], str],
) -> AsyncIterator[str]:
    try:
        yield writer.delta({"role": "assistant", "content": ""})
        while not isinstance(item, Completion):
            if item:
                own, cpu = time.perf_counter(), time.thread_time()
                chunk = writer.delta({"content": item})
                meter.proxy_s += time.perf_counter() - own
                meter.proxy_cpu_s += time.thread_time() - cpu
                yield chunk
            item = await _next(engine, meter, stream)
        own, cpu = time.perf_counter(), time.thread_time()
        meter.generations += 1
        meter.usage = meter.usage + item.usage
        completion = state.took_turn(item, "call", began)
        end = list(writer.end(completion.finish_reason, usage_body(completion.usage)))
        meter.proxy_s += time.perf_counter() - own
        meter.proxy_cpu_s += time.thread_time() - cpu
        for chunk in end:
            yield chunk
    except EngineError as exc:
        yield writer.error(hide(f"The upstream ({upstream}) failed: {exc}"), "upstream_error")
    finally:
        await stream.aclose()
