"""How the proxy certifies and what it accepts: :class:`ProxyConfig` (``harness serve``'s
options as the app takes them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from harness.certify import DEFAULT_MAX_WINDOW, WindowRules
from harness.errors import ConfigError
from harness.proxy.conversation import DEFAULT_MAX_BYTES
from harness.proxy.limits import Limits
from harness.skills.manifest import Manifest
from harness.tools.effects import Effect

__all__ = ("ProxyConfig",)


@dataclass
class ProxyConfig:
    """How the proxy certifies and what it accepts.

    ``effects``: tool name -> :class:`~harness.tools.effects.Effect` (see
    :mod:`harness.proxy.effects_file`); ``manifest``: the skills (one skill: the default).
    ``api_key``: required as ``Authorization: Bearer KEY`` when set. ``max_body_bytes``,
    ``max_messages``: request limits. ``store_capacity``: windows the bounded store keeps.
    ``positions_capacity``: replayed phase positions kept (:mod:`harness.proxy.positions`;
    0: replay every request's whole history).
    ``max_depth``: how deeply a request's JSON (its body, ``X-Harness-Inputs``, a call's
    arguments) may nest (:mod:`harness.proxy.limits`).
    ``max_generations``: upstream generations one request may fold in. ``secret``: the key of
    the minted call ids (default: random per server). ``secrets_to_hide``: strings never
    echoed in an error (the upstream's key). ``model``: the name ``/v1/models`` lists.
    ``upstream_model``: the model name every request asks a server upstream for (``harness
    serve --upstream URL --model NAME``); ``None``: the client's own ``model``, forwarded.
    ``conversations_capacity``: conversations kept waiting for their clients' results, each
    for at most ``idle_s`` seconds and holding at most ``conversations_bytes`` of history
    together, the oldest dropped first (:mod:`harness.proxy.conversation`; one dropped costs
    its next request a cold start, never a wrong answer).
    """

    effects: Mapping[str, Effect] = field(default_factory=dict)
    manifest: Manifest | None = None
    detector: str = "schema_sound"
    max_window: int = DEFAULT_MAX_WINDOW
    api_key: str | None = None
    max_body_bytes: int = 4 * 1024 * 1024
    max_messages: int = 2048
    store_capacity: int = 4096
    positions_capacity: int = 1024
    max_generations: int = 40
    secret: bytes | None = None
    secrets_to_hide: tuple[str, ...] = ()
    model: str = "harness"
    upstream: str = "the embedded engine"
    upstream_model: str | None = None
    conversations_capacity: int = 1024
    idle_s: float = 900.0
    conversations_bytes: int = DEFAULT_MAX_BYTES
    max_depth: int = 64

    @property
    def limits(self) -> Limits:
        """What the edge accepts of a client's JSON (:mod:`harness.proxy.limits`)."""
        return Limits(max_depth=self.max_depth)

    @property
    def window_rules(self) -> WindowRules:
        """The window's rules every conversation of this proxy certifies under (the default
        marker, ``max_window``): the detector's and the loop's one object."""
        return WindowRules(max_window=self.max_window)

    def check(self) -> None:
        """Refuse, with one sentence, a configuration that cannot certify what it was given
        (``harness serve`` exits 2 on it): effects without a manifest under the schema-sound
        detector (D3 needs the manifest's phases: every request would pass through), or a
        manifest naming a tool the effects do not declare (it could never join a window)."""
        if self.effects and self.manifest is None and self.detector == "schema_sound":
            raise ConfigError(
                f"--effects declares {len(self.effects)} tool(s) but there is no --manifest, "
                "so the schema_sound detector certifies no window and every request would pass "
                "through; add --manifest FILE, or --detector phase_heuristic (it guesses phases "
                "and can false-fill)."
            )
        if self.manifest is None:
            return
        named = {
            t for skill in self.manifest.skills.values() for p in skill.phases for t in p.tools
        }
        unknown = sorted(named - set(self.effects))
        if unknown:
            raise ConfigError(
                f"The manifest {self.manifest.source} names {len(unknown)} tool(s) the effects "
                f"do not declare: {', '.join(unknown)}; they could never join a window. Declare "
                "each in --effects FILE (an empty [tools.NAME] table keeps the worst case) or "
                "fix the manifest."
            )
