"""The certification kit: property tests that a toolset's effect annotations are true.

The schema-sound certifier (:mod:`harness.certify`) trusts what tools declare. This kit checks
those declarations against real executions, each on a fresh state, with arguments generated
by hypothesis from each tool's JSON Schema:

``read_only``       a call leaves the state fingerprint unchanged;
``idempotent``      calling twice leaves the same state and returns the same result as once;
``write_targets``   a call changes no resource outside its declared write targets;
``commutes``        every window the certifier certifies, run concurrently in random start
                    orders and interleavings, gives the same results and final state as the
                    serial run in emitted order (windows of each fan-out phase of the
                    manifest, and of one synthetic fan-out phase over every tool);
``D2``              no certified window holds a call whose argument the manifest marks as a
                    result of another call of that window (batch and online certification).

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

import importlib
import json
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from harness.certify import Detector
from harness.errors import ConfigError
from harness.manifest import Manifest, load_manifest
from harness.tools import Toolset

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

ClaimName = Literal["read_only", "idempotent", "write_targets", "commutes", "D2"]
ClaimStatus = Literal["passed", "FALSE", "unverified"]

CLAIMS: Mapping[str, str] = {
    "read_only": "a call leaves the state unchanged",
    "idempotent": "calling twice leaves the same state and result as calling once",
    "write_targets": "a call changes nothing outside its declared write targets",
    "commutes": "certified windows run concurrently in any order equal the serial run",
    "D2": "no certified window holds a call that needs a result of that window",
}


@dataclass(frozen=True)
class CertifiableToolset:
    """What the kit needs from a toolset (see the module docstring for each function).

    ``fingerprint=None`` means the state cannot be fingerprinted (tools that live outside the
    process): only idempotence via results is checked. :meth:`from_toolset` wraps a bare
    :class:`~harness.tools.Toolset` that way.
    """

    new_state: Callable[[int], Any]
    make_toolset: Callable[[Any], Toolset]
    fingerprint: Callable[[Any], Hashable] | None
    resources: Callable[[Any], Mapping[str, Hashable]] | None = None
    example_values: Callable[[Any], Mapping[str, Sequence[Any]]] | None = None
    argument_strategies: Callable[[Any], Mapping[str, Any]] | None = None
    name: str | None = None

    @property
    def stateful(self) -> bool:
        """Whether each example can run on a fresh, fingerprinted state."""
        return self.fingerprint is not None

    @classmethod
    def from_toolset(cls, toolset: Toolset) -> CertifiableToolset:
        """A toolset with no state factory: its state cannot be reset or fingerprinted."""
        return cls(
            new_state=lambda seed: None, make_toolset=lambda state: toolset, fingerprint=None
        )

    @classmethod
    def from_object(cls, obj: Any) -> CertifiableToolset:
        """A module or object with ``new_state``, ``make_toolset`` and ``fingerprint`` (and
        optionally ``resources``, ``example_values``, ``argument_strategies``)."""
        missing = [
            n
            for n in ("new_state", "make_toolset", "fingerprint")
            if not callable(getattr(obj, n, None))
        ]
        if missing:
            raise ConfigError(
                f"{_describe(obj)} is not a certifiable toolset: it lacks {', '.join(missing)}. "
                "Provide new_state(seed), make_toolset(state) and fingerprint(state) "
                "(see harness.certkit), or pass a CertifiableToolset."
            )

        def optional(name: str) -> Any:
            value = getattr(obj, name, None)
            return value if callable(value) else None

        return cls(
            new_state=obj.new_state,
            make_toolset=obj.make_toolset,
            fingerprint=obj.fingerprint,
            resources=optional("resources"),
            example_values=optional("example_values"),
            argument_strategies=optional("argument_strategies"),
            name=getattr(obj, "__name__", None) if isinstance(obj, ModuleType) else None,
        )


def _describe(obj: Any) -> str:
    if isinstance(obj, ModuleType):
        return f"Module {obj.__name__!r}"
    return f"{type(obj).__name__} {obj!r:.60}"


def as_certifiable(obj: Any) -> CertifiableToolset:
    """Accept a :class:`CertifiableToolset`, a :class:`~harness.tools.Toolset` (no state), a
    module or object with the contract's functions, a zero-argument factory of one of those,
    or a TOOLSET string (see :func:`load_certifiable`)."""
    if isinstance(obj, CertifiableToolset):
        return obj
    if isinstance(obj, Toolset):
        return CertifiableToolset.from_toolset(obj)
    if isinstance(obj, str | Path):
        return load_certifiable(str(obj))
    if hasattr(obj, "make_toolset") or isinstance(obj, ModuleType):
        return CertifiableToolset.from_object(obj)
    if callable(obj):
        try:
            made = obj()
        except TypeError as exc:
            raise ConfigError(
                f"{_describe(obj)} is callable but not a zero-argument factory ({exc}); pass a "
                "CertifiableToolset, a Toolset, or a module with new_state/make_toolset/fingerprint."
            ) from None
        if callable(made) and not isinstance(made, Toolset | CertifiableToolset):
            raise ConfigError(f"{_describe(obj)} returned another callable; return a toolset.")
        return as_certifiable(made)
    raise ConfigError(
        f"{_describe(obj)} is not a toolset: pass a CertifiableToolset, a Toolset, or a module "
        "with new_state/make_toolset/fingerprint."
    )


def load_certifiable(spec: str) -> CertifiableToolset:
    """Load ``TOOLSET`` as the command line names it: an importable module
    (``harness.toolsets.workspace``), an object in one (``pkg.mod:obj``), or an OpenAI/MCP-style spec
    file (``tools.json``: a list of function specs, or ``{"tools": [...]}`` as MCP's
    ``tools/list`` returns it)."""
    if spec.endswith(".json") or (("/" in spec or "\\" in spec) and Path(spec).exists()):
        return CertifiableToolset.from_toolset(_load_spec_file(Path(spec)))
    module_name, _, attribute = spec.partition(":")
    if not module_name or (":" in spec and not attribute):
        raise ConfigError(
            f"TOOLSET {spec!r} is malformed: write 'pkg.module' or 'pkg.module:object'."
        )
    module = _import(module_name, spec)
    if not attribute:
        return CertifiableToolset.from_object(module)
    obj: Any = module
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise ConfigError(
                f"TOOLSET {spec!r}: module {module_name!r} has no attribute {attribute!r}."
            )
        obj = getattr(obj, part)
    return as_certifiable(obj)


def _import(module_name: str, spec: str) -> ModuleType:
    hint = (
        "Pass an importable module ('harness.toolsets.workspace'), 'pkg.module:object', or an "
        "OpenAI/MCP spec file ending in .json."
    )
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise ConfigError(f"TOOLSET {spec!r}: no module named {exc.name!r}. {hint}") from None
        raise ConfigError(
            f"TOOLSET {spec!r}: importing {module_name!r} failed because it needs the missing "
            f"module {exc.name!r}; install it."
        ) from None
    except Exception as exc:
        raise ConfigError(
            f"TOOLSET {spec!r}: importing {module_name!r} raised {type(exc).__name__}: {exc}"
        ) from None


def _load_spec_file(path: Path) -> Toolset:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"Spec file {str(path)!r} does not exist.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Spec file {str(path)!r} cannot be read: {exc}.") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"Spec file {str(path)!r} is not JSON: {exc.msg} at line {exc.lineno}."
        ) from None
    raw = data.get("tools") if isinstance(data, dict) else data
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        raise ConfigError(
            f"Spec file {str(path)!r} must hold a list of OpenAI function specs or "
            '{"tools": [...]} as MCP\'s tools/list returns it.'
        )
    specs = []
    for item in raw:
        if "inputSchema" in item and "parameters" not in item:  # MCP's spelling
            item = {**item, "parameters": item["inputSchema"]}
        specs.append(item)
    return Toolset.from_openai(specs, name=path.stem)


# --------------------------------------------------------------------------------- the report


@dataclass(frozen=True)
class Outcome:
    """One side of a counterexample: what a run returned and left behind."""

    label: str
    results: tuple[str, ...] = ()
    state: str | None = None
    details: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "results": list(self.results),
            "state": self.state,
            "details": list(self.details),
        }


@dataclass(frozen=True)
class Counterexample:
    """A minimal (shrunk) example that makes a claim false."""

    calls: tuple[tuple[str, Mapping[str, Any]], ...]
    message: str
    expected: Outcome
    actual: Outcome
    fix: str
    flaky: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": [{"name": n, "arguments": dict(a)} for n, a in self.calls],
            "message": self.message,
            "expected": self.expected.to_json(),
            "actual": self.actual.to_json(),
            "fix": self.fix,
            "flaky": self.flaky,
        }


@dataclass(frozen=True)
class ClaimResult:
    """One claim checked: about a ``tool`` (per-tool claims) or a ``phase``/skill (windows)."""

    claim: ClaimName
    status: ClaimStatus
    examples: int
    tool: str | None = None
    phase: str | None = None
    reason: str = ""
    counterexample: Counterexample | None = None

    @property
    def subject(self) -> str:
        if self.tool is not None:
            return self.tool
        return f"windows of {self.phase}" if self.claim == "commutes" else f"skill {self.phase}"

    def to_json(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "tool": self.tool,
            "phase": self.phase,
            "status": self.status,
            "examples": self.examples,
            "reason": self.reason,
            "counterexample": self.counterexample.to_json() if self.counterexample else None,
        }


@dataclass(frozen=True)
class CertificationReport:
    """Every claim checked, with its result; :attr:`ok` is false when any claim is FALSE."""

    toolset: str
    tools: tuple[str, ...]
    seed: int
    examples: int
    manifest: str | None
    claims: tuple[ClaimResult, ...]
    notes: tuple[str, ...] = ()
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.false

    @property
    def false(self) -> tuple[ClaimResult, ...]:
        return tuple(c for c in self.claims if c.status == "FALSE")

    @property
    def unverified(self) -> tuple[ClaimResult, ...]:
        return tuple(c for c in self.claims if c.status == "unverified")

    @property
    def passed(self) -> tuple[ClaimResult, ...]:
        return tuple(c for c in self.claims if c.status == "passed")

    def to_json(self) -> dict[str, Any]:
        return {
            "toolset": self.toolset,
            "tools": list(self.tools),
            "seed": self.seed,
            "examples": self.examples,
            "manifest": self.manifest,
            "ok": self.ok,
            "summary": {
                "passed": len(self.passed),
                "false": len(self.false),
                "unverified": len(self.unverified),
            },
            "elapsed_s": round(self.elapsed_s, 3),
            "notes": list(self.notes),
            "claims": [c.to_json() for c in self.claims],
        }

    def render(self) -> str:
        """The report as text: a table of claims, then each FALSE claim in full."""
        out = [
            f"Certifying toolset {self.toolset!r}: {len(self.tools)} tools, state seed "
            f"{self.seed}, up to {self.examples} examples per claim",
            f"manifest: {self.manifest or 'none'}",
            *(f"note: {n}" for n in self.notes),
            "",
        ]
        width = max([len("tool / windows"), *(len(c.subject) for c in self.claims)])
        out.append(f"{'tool / windows':<{width}}  {'claim':<13} {'examples':>8}  result")
        previous = None
        for c in self.claims:
            subject = c.subject if c.subject != previous else ""
            previous = c.subject
            result = c.status + (f" ({c.reason})" if c.reason else "")
            out.append(f"{subject:<{width}}  {c.claim:<13} {c.examples:>8}  {result}")
        for c in self.false:
            out.extend(["", *_render_false(c)])
        out.append("")
        out.append(
            f"{len(self.claims)} claims: {len(self.passed)} passed, {len(self.false)} FALSE, "
            f"{len(self.unverified)} unverified ({self.elapsed_s:.1f} s)"
        )
        return "\n".join(out)

    def __str__(self) -> str:
        return self.render()


def _render_false(c: ClaimResult) -> list[str]:
    ce = c.counterexample
    head = f"FALSE  {c.subject}: {c.claim} — {CLAIMS[c.claim]}"
    if ce is None:
        return [head]
    lines = [
        head,
        f"  {ce.message}"
        + (
            " (it did not reproduce on a re-run: the outcome depends on timing or hidden state)"
            if ce.flaky
            else ""
        ),
    ]
    lines.append("  calls:")
    lines.extend(
        f"    #{i} {n}({json.dumps(dict(a), sort_keys=True)})" for i, (n, a) in enumerate(ce.calls)
    )
    for outcome in (ce.expected, ce.actual):
        lines.append(f"  {outcome.label}:")
        lines.extend(f"    result #{i}: {_clip(r)}" for i, r in enumerate(outcome.results))
        if outcome.state is not None:
            lines.append(f"    state: {outcome.state}")
        lines.extend(f"    {d}" for d in outcome.details)
    lines.append(f"  fix: {ce.fix}")
    return lines


def _clip(text: str, width: int = 160) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


# ------------------------------------------------------------------------------ running the kit


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
        from harness import _certkit_checks as checks
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
    kit = checks.Kit.start(
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
