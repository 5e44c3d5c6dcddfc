"""The certification kit: property tests that a toolset's effect annotations are true.

The schema-sound certifier (:mod:`harness.certify`) trusts what tools declare. This kit checks
those declarations against real executions, each on a fresh state, with arguments generated
by hypothesis from each tool's JSON Schema:

``read_only``       a call leaves the state fingerprint unchanged;
``idempotent``      calling twice leaves the same state and returns the same result as once;
``write_targets``   a call changes no resource outside its declared write targets (a
                    declared target *contains* what the store reports changed, by the
                    certifier's own rule, :func:`harness.certify.conflicts.contains`: ``doc:a``
                    contains ``doc:a/status``, ``todos`` contains a minted ``todos:17``);
``targets_canonical`` a call and another spelling of it (a target argument spelled another
                    way by its type: the same instant in another offset, a path form, case,
                    Unicode, a nested leaf; :mod:`harness.certkit._aliases`) that change the
                    same resource declare overlapping write targets;
``identity``        a tool's ``identity=`` function (its store's key) is idempotent where it
                    keeps the type, and gives two spellings of one record one identity;
``commutes``        every window the certifier certifies, run concurrently in random start
                    orders and interleavings, gives the same results and final state as the
                    serial run in emitted order (windows of each fan-out phase of the
                    manifest, and of one synthetic fan-out phase over every tool); most
                    windows are constructed so that calls share argument values, as they are,
                    spelled another way, or taken from another call's result;
``D2``              no certified window holds a call whose argument the manifest marks as a
                    result of another call of that window (batch and online certification).

The kit knows the argument types: for an argument that feeds a target and has no example
values it starts from values of its type (date-times, paths, Unicode-rich names, models),
and it draws every example beside its other spellings, so no claim needs values from the
user. The declared targets are always :meth:`harness.tools.Tool.footprint`'s, and they are
matched hierarchically, as the certifier matches them. A sync tool's call is judged only
after its thread has ended (a call abandoned on timeout may still write).

A false claim is shrunk by hypothesis to a minimal counterexample and reported with the tool,
the claim, the arguments, the two outcomes that differ and what to change.

**The contract.** The kit needs a state factory, the tools bound to a state, and a state
fingerprint — a :class:`CertifiableToolset`, or any module or object with functions of those
names (``harness.toolsets.workspace`` is one)::

    new_state(seed: int) -> State                  # a fresh state, the same for the same seed
    make_toolset(state) -> Toolset                  # the tools, bound to that state
    fingerprint(state) -> Hashable                  # equal iff the states are equal
    resources(state) -> Mapping[str, Hashable]      # optional: one fingerprint per resource,
                                                    # named as write targets name them
    example_values(state) -> Mapping[str, list]     # optional: argument values to favour,
                                                    # keyed "argument" or "tool.argument"
    argument_strategies(state) -> Mapping[str, SearchStrategy]   # optional, same keys

Without ``resources`` the ``write_targets`` claims are *unverified*, never passed. Tools that
reach outside the process (``open_world``), and toolsets with no state factory (an OpenAI or
MCP spec file), cannot be fingerprinted: only idempotence is checked, from results alone, and
the rest is reported unverified. A spec's tools have no implementation to run at all.

Use it as ``harness certify TOOLSET`` or, in a test suite, as
:func:`harness.testing.certify_toolset`. hypothesis is needed at run time (``pip install
'agent-harness[certify]'``); importing this module does not need it.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from harness.certify import Detector
from harness.certkit._contract import CertifiableToolset, as_certifiable, load_certifiable
from harness.certkit._report import (
    CertificationReport,
    ClaimResult,
    ClaimStatus,
    Counterexample,
    Outcome,
)
from harness.errors import ConfigError
from harness.skills.manifest import Manifest, load_manifest

__all__ = (
    "DEFAULT_EXAMPLES",
    "CertifiableToolset",
    "CertificationReport",
    "ClaimResult",
    "ClaimStatus",
    "Counterexample",
    "Outcome",
    "as_certifiable",
    "check_toolset",
    "load_certifiable",
)

#: Examples per claim by default: the honest workspace (16 claims) certifies in about half a
#: minute on two cores, and every broken toolset of the test corpus is caught.
DEFAULT_EXAMPLES = 50


# ------------------------------------------------------------------------------ running the kit


@contextlib.contextmanager
def _private_hypothesis_home() -> Iterator[None]:
    """hypothesis keeps caches in ``.hypothesis/`` under the working directory even with no
    example database; the kit writes nothing outside a temporary folder of its own (removed
    when it ends), unless the caller set hypothesis's home itself."""
    from hypothesis import configuration

    if getattr(configuration, "__hypothesis_home_directory", None) is not None:
        yield
        return
    with tempfile.TemporaryDirectory(prefix="harness-certify-") as home:
        configuration.set_hypothesis_home_dir(home)
        try:
            yield
        finally:
            configuration.set_hypothesis_home_dir(None)


def check_toolset(
    toolset: Any,
    *,
    manifest: Manifest | str | Path | None = None,
    examples: int = DEFAULT_EXAMPLES,
    seed: int = 0,
    deadline: float | None = None,
    database: Any = None,
    max_window: int = 5,
    detector: Detector | None = None,
    on_claim: Callable[[ClaimResult, int, int], None] | None = None,
) -> CertificationReport:
    """Check every claim the toolset's annotations make; never raises for a false claim.

    ``toolset``: anything :func:`as_certifiable` accepts. ``manifest``: a :class:`Manifest`
    or a TOML path; its fan-out phases add windows and D2 checks. ``examples``: hypothesis
    examples per claim. ``seed``: the state seed and the hypothesis seed (same seed, same
    run). ``deadline``: hypothesis's per-example deadline in seconds (``None``: none).
    ``database``: a hypothesis example database (``None``: none). ``max_window``: the largest
    window drawn. ``detector``: the certifier (default: schema-sound). ``on_claim(result,
    done, total)`` is called after each claim (progress).

    Runs its own event loops: call it from synchronous code, not from inside ``async def``.
    """
    if examples < 1:
        raise ConfigError(f"examples must be at least 1, got {examples}.")
    if max_window < 2:
        raise ConfigError(f"max_window must be at least 2, got {max_window}.")
    _refuse_running_loop()
    try:
        from harness.certkit._kit import Kit
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("hypothesis"):
            raise ConfigError(
                "The certification kit needs hypothesis: pip install 'agent-harness[certify]' "
                "(or pip install hypothesis)."
            ) from None
        raise
    started = time.monotonic()
    cert = as_certifiable(toolset)
    loaded = load_manifest(manifest) if isinstance(manifest, str | Path) else manifest
    kit = Kit.start(
        cert,
        seed=seed,
        examples=examples,
        deadline=deadline,
        database=database,
        max_window=max_window,
        detector=detector,
    )
    if loaded is not None:
        loaded.check_tools(kit.toolset)
    jobs = list(kit.plan(loaded))
    results: list[ClaimResult] = []
    with _private_hypothesis_home():
        for job in jobs:
            result = job()
            results.append(result)
            if on_claim is not None:
                on_claim(result, len(results), len(jobs))
    return CertificationReport(
        toolset=cert.name or kit.toolset.name,
        tools=tuple(kit.toolset),
        seed=seed,
        examples=examples,
        manifest=loaded.source if loaded is not None else None,
        claims=tuple(results),
        notes=tuple(kit.notes),
        elapsed_s=time.monotonic() - started,
    )


def _refuse_running_loop() -> None:
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise ConfigError(
        "The certification kit runs its own event loops and was called inside a running "
        "event loop: call it from synchronous code (a plain `def` test, not `async def`)."
    )
