"""Prefix-affine routing: many engine replicas, one client, each loop on the replica that
holds its prefix.

An agent loop re-sends its whole, growing conversation every turn; the replica that served the
last turn holds that conversation's prefix in its KV cache and prefills only what was appended.
Spread the same turns round-robin and each one lands where its prefix is not, which destroys
exactly what makes the serial arms cheap. :class:`Router` keeps a loop's turns together:

* **Key.** Every request carries a *conversation key*: by default a hash of the conversation's
  opening — the system messages and the first user message (:func:`conversation_key`), which
  every later turn of the same loop repeats verbatim. Give an explicit loop or session id
  instead with ``key=`` on :meth:`Router.call`, or a ``route_key`` function on the engine.
* **Consistent hashing with bounded loads** (Mirrokni, Thorup and Zadimoghaddam, 2018). Each
  replica owns ``vnodes`` points on a hash ring; a key goes to the first replica clockwise
  from its hash whose in-flight count is below ``ceil(load_factor × (in_flight + 1) /
  healthy)``. Below that bound a key always lands on its home replica; a hot replica spills
  the excess to the next replicas on the ring, never more than ``load_factor`` times the mean.
* **Stickiness.** The router remembers where each key was last served (a bounded LRU table)
  and prefers that replica while it is healthy and within the bound: a loop that spilled or
  failed over stays where its prefix now is instead of moving back and paying a second cold
  prefill.
* **Health.** A replica that cannot be reached (:class:`~harness.errors.EngineDeadError`, or a
  transport failure) is marked down for ``retry_after_s`` (doubling per consecutive failure, up
  to ``max_retry_after_s``) and the request moves to the next replica at once; its loops move
  with it and pay one cold prefill there. After the pause the replica is *half-open*: the
  next request routed to it is the probe, and a success marks it up. :meth:`Router.probe`
  checks replicas actively (``GET {base_url}/models``).
* **Round-robin** (``policy="round_robin"``) is the control: healthy replicas in turn, keys
  ignored.

The router is transport-free: :meth:`Router.call` takes ``fn(base_url) -> awaitable`` and runs
it on the chosen replica. :class:`~harness.engines.openai_http.OpenAIHTTPEngine` uses it when
given several base URLs.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import httpx

from harness.errors import ConfigError, EngineDeadError, EngineError
from harness.messages import Message

__all__ = (
    "POLICIES",
    "Policy",
    "Replica",
    "Router",
    "conversation_key",
    "split_base_urls",
)

Policy = Literal["affine", "round_robin"]
POLICIES: tuple[Policy, ...] = ("affine", "round_robin")

T = TypeVar("T")


def split_base_urls(values: str | Sequence[str]) -> list[str]:
    """The base URLs in ``values``: a string or a sequence of strings, each possibly
    comma-separated (``--base-url a,b`` and ``--base-url a --base-url b`` mean the same).
    Order is kept; duplicates are a :class:`ConfigError`."""
    items = [values] if isinstance(values, str) else list(values)
    urls = [part.strip().rstrip("/") for item in items for part in item.split(",")]
    urls = [url for url in urls if url]
    if not urls:
        raise ConfigError("No base URL given; pass one, e.g. http://127.0.0.1:8000/v1.")
    seen: set[str] = set()
    for url in urls:
        if url in seen:
            raise ConfigError(f"Base URL {url} is given twice; list each replica once.")
        seen.add(url)
    return urls


def conversation_key(messages: Sequence[Message]) -> str:
    """A stable key for the loop a request belongs to: a hash of its system messages and its
    first user message (everything up to and including that message). Every later turn of the
    same loop starts with the same messages, so it gets the same key."""
    opening: list[Message] = []
    for message in messages:
        opening.append(message)
        if message.get("role") == "user":
            break
    text = json.dumps(opening, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()


def _point(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


@dataclass
class Replica:
    """One engine replica the router knows: its base URL and what the router measured."""

    url: str
    index: int
    in_flight: int = 0
    served: int = 0
    failures: int = 0
    down_until: float = 0.0
    consecutive_failures: int = 0

    def healthy(self, now: float) -> bool:
        """Up, or half-open (its pause is over: the next request is the probe)."""
        return now >= self.down_until


class Router:
    """Chooses a replica for each request (see the module docstring).

    ``base_urls``: the replicas (at least one). ``policy``: ``"affine"`` (default) or
    ``"round_robin"``. ``load_factor`` (> 1): the bounded-load factor ``c``. ``vnodes``: ring
    points per replica. ``retry_after_s`` / ``max_retry_after_s``: how long a failed replica is
    left alone. ``memory``: how many keys' last replicas are remembered. ``clock``: seconds,
    monotonic (injected by tests).
    """

    def __init__(
        self,
        base_urls: str | Sequence[str],
        *,
        policy: Policy = "affine",
        load_factor: float = 1.25,
        vnodes: int = 64,
        retry_after_s: float = 2.0,
        max_retry_after_s: float = 30.0,
        memory: int = 65536,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if policy not in POLICIES:
            raise ConfigError(
                f"Routing policy must be one of {', '.join(POLICIES)}, not {policy!r}."
            )
        if not load_factor > 1.0 or vnodes < 1 or memory < 0:
            raise ConfigError(
                "load_factor must be > 1, vnodes >= 1 and memory >= 0; "
                f"got {load_factor}, {vnodes}, {memory}."
            )
        if retry_after_s < 0 or max_retry_after_s < retry_after_s:
            raise ConfigError(
                "retry_after_s must be >= 0 and max_retry_after_s >= retry_after_s; "
                f"got {retry_after_s} and {max_retry_after_s}."
            )
        self.replicas = [Replica(url, i) for i, url in enumerate(split_base_urls(base_urls))]
        self.policy: Policy = policy
        self.load_factor = load_factor
        self.retry_after_s = retry_after_s
        self.max_retry_after_s = max_retry_after_s
        self.memory = memory
        self.moves = 0
        self._total = 0
        self._clock = clock
        self._last: OrderedDict[str, int] = OrderedDict()
        self._turn = itertools.count()
        ring = sorted(
            (_point(f"{replica.url}#{v}"), replica.index)
            for replica in self.replicas
            for v in range(vnodes)
        )
        self._ring_points = [point for point, _ in ring]
        self._ring_owners = [owner for _, owner in ring]

    # ------------------------------------------------------------------ choosing

    def _bound(self, healthy: int) -> int:
        return max(1, math.ceil(self.load_factor * (self._total + 1) / max(1, healthy)))

    def _ring_order(self, key: str) -> Iterator[Replica]:
        """Replicas in ring order from the key's point, each once."""
        start = bisect.bisect_left(self._ring_points, _point(key))
        seen: set[int] = set()
        n = len(self._ring_owners)
        for i in range(n):
            owner = self._ring_owners[(start + i) % n]
            if owner not in seen:
                seen.add(owner)
                yield self.replicas[owner]
                if len(seen) == len(self.replicas):
                    return

    def home(self, key: str) -> Replica:
        """The replica a key hashes to when every replica is healthy and idle."""
        return next(self._ring_order(key))

    def choose(self, key: str, *, exclude: frozenset[int] = frozenset()) -> Replica:
        """The replica for the next request of ``key`` (not counted as in flight yet).

        Raises :class:`EngineDeadError` when every replica (less ``exclude``) is down.
        """
        now = self._clock()
        candidates = [r for r in self.replicas if r.index not in exclude and r.healthy(now)]
        if not candidates:
            raise self._all_down(now)
        if self.policy == "round_robin":
            return candidates[next(self._turn) % len(candidates)]
        bound = self._bound(len(candidates))
        allowed = {r.index for r in candidates}
        last = self._last.get(key)
        if last is not None and last in allowed and self.replicas[last].in_flight < bound:
            return self.replicas[last]
        ordered = [r for r in self._ring_order(key) if r.index in allowed]
        for replica in ordered:
            if replica.in_flight < bound:
                return replica
        return min(ordered, key=lambda r: r.in_flight)  # unreachable: the bound admits one

    def _all_down(self, now: float) -> EngineDeadError:
        waits = ", ".join(
            f"{r.url} (retry in {max(0.0, r.down_until - now):.1f} s)" for r in self.replicas
        )
        return EngineDeadError(
            f"All {len(self.replicas)} replica(s) are down: {waits}. Check that the servers "
            "are running and reachable (--base-url)."
        )

    def acquire(self, key: str, *, exclude: frozenset[int] = frozenset()) -> Replica:
        """Choose a replica for ``key`` and count the request as in flight on it; pair with
        :meth:`release`. (:meth:`call` does both around one request.)"""
        replica = self.choose(key, exclude=exclude)
        replica.in_flight += 1
        self._total += 1
        return replica

    def release(self, key: str, replica: Replica, *, reached: bool = True) -> None:
        """The request :meth:`acquire` routed is over. ``reached=False``: the replica could
        not be reached (it is marked down); otherwise it is marked up and remembered as where
        ``key``'s prefix now is."""
        replica.in_flight -= 1
        self._total -= 1
        if not reached:
            self.mark_down(replica)
            return
        self.mark_up(replica)
        replica.served += 1
        if self.policy != "affine" or self.memory == 0:
            return
        previous = self._last.get(key)
        if previous is not None and previous != replica.index:
            self.moves += 1
        self._last[key] = replica.index
        self._last.move_to_end(key)
        if len(self._last) > self.memory:
            self._last.popitem(last=False)

    # ------------------------------------------------------------------ health

    def mark_down(self, replica: Replica) -> None:
        """Leave ``replica`` alone for a while (doubling per consecutive failure)."""
        replica.failures += 1
        replica.consecutive_failures += 1
        pause = self.retry_after_s * 2.0 ** (replica.consecutive_failures - 1)
        replica.down_until = self._clock() + min(self.max_retry_after_s, pause)

    def mark_up(self, replica: Replica) -> None:
        """``replica`` answered: route to it again."""
        replica.consecutive_failures = 0
        replica.down_until = 0.0

    async def probe(self, client: httpx.AsyncClient, *, timeout_s: float = 2.0) -> list[bool]:
        """Check every replica with ``GET {base_url}/models``; mark each up or down. Returns
        which answered (any HTTP status below 500 counts as alive)."""
        alive: list[bool] = []
        for replica in self.replicas:
            try:
                response = await client.get(f"{replica.url}/models", timeout=timeout_s)
            except httpx.HTTPError:
                ok = False
            else:
                ok = response.status_code < 500
            (self.mark_up if ok else self.mark_down)(replica)
            alive.append(ok)
        return alive

    # ------------------------------------------------------------------ calling

    async def call(self, key: str, fn: Callable[[str], Awaitable[T]]) -> T:
        """Run ``fn(base_url)`` on the replica chosen for ``key``; if that replica cannot be
        reached, mark it down and run ``fn`` on the next one, until one answers or none is
        left (then :class:`EngineDeadError`). Other errors propagate unchanged."""
        tried: set[int] = set()
        last_error: EngineError | None = None
        while True:
            try:
                replica = self.acquire(key, exclude=frozenset(tried))
            except EngineDeadError as exc:
                if last_error is not None:
                    raise EngineDeadError(f"{exc.message} Last failure: {last_error}") from (
                        last_error
                    )
                raise
            tried.add(replica.index)
            try:
                result = await fn(replica.url)
            except EngineError as exc:
                if _unreachable(exc):
                    self.release(key, replica, reached=False)
                    last_error = exc
                    continue
                self.release(key, replica)
                raise
            except BaseException:  # cancelled: neither a success nor the replica's fault
                replica.in_flight -= 1
                self._total -= 1
                raise
            self.release(key, replica)
            return result

    def stats(self) -> dict[str, Any]:
        """Per-replica counts (served, failures, in flight) and the number of key moves."""
        now = self._clock()
        return {
            "policy": self.policy,
            "moves": self.moves,
            "replicas": [
                {
                    "url": r.url,
                    "served": r.served,
                    "failures": r.failures,
                    "in_flight": r.in_flight,
                    "healthy": r.healthy(now),
                }
                for r in self.replicas
            ],
        }


def _unreachable(exc: EngineError) -> bool:
    """The replica is gone (refused, reset, dropped mid-answer), as opposed to a request it
    answered with an error."""
    if isinstance(exc, EngineDeadError):
        return True
    cause = exc.__cause__
    return isinstance(cause, httpx.TransportError) and not isinstance(cause, httpx.TimeoutException)
