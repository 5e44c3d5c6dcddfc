"""The default engine: one in-process vLLM ``AsyncLLM`` shared by every loop.

:class:`VLLMEngine` implements :class:`~harness.engines.base.Engine` over ``vllm.v1``'s
``AsyncLLM`` with automatic prefix caching. Any number of loops may call :meth:`generate`
concurrently: requests go straight into vLLM's scheduler, which batches them (continuous
batching); nothing here serialises them.

The chat is rendered with the model's own chat template; the tools and the reply format go
into the system prompt (see :mod:`harness.engines._format`), and the harness parses the reply
(vLLM's tool parsers are not used). With ``settings.constrain`` decoding is constrained to a
strict grammar (xgrammar) so every reply parses; the gold policy (``settings.forced``)
constrains decoding to the exact serialized reply, so every token is still prefilled and
decoded by the model.

vLLM is imported lazily: ``import harness`` works without it, and :meth:`VLLMEngine.start`
raises :class:`~harness.errors.ConfigError` with the install command if it is missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib.util
import itertools
import json
import logging
import multiprocessing
import os
import signal
import time
import uuid
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import InitVar, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import anyio

from harness.engines import _format
from harness.engines._pdeathsig import die_with_parent
from harness.engines._spawn import spawn_without_main
from harness.engines._threads import ThreadPlan, bind_this_process, plan_threads
from harness.engines.base import ClosingContext, GenerationSettings
from harness.engines.kv_cache import check_fits
from harness.engines.window_drafts import (
    CHANNEL_ENV,
    MAX_BATCH_ENV,
    PROMPT_TAIL,
    DraftChannel,
    reply_openings,
)
from harness.errors import ConfigError, ContextWindowExceeded, EngineDeadError, EngineRequestError
from harness.messages import Completion, Message, Timings, ToolSpec, Usage, token_digest

__all__ = (
    "DRAFTING",
    "SPECULATE",
    "START_METHODS",
    "CacheStats",
    "DraftStats",
    "VLLMEngine",
    "VLLMSettings",
    "describe_start_method",
    "open_default_engine",
    "speculative_config",
)

_INSTALL_HINT = (
    "install the cpu extra: `pip install 'agent-harness[cpu]'` then "
    "`pip uninstall -y torchvision torchaudio torchcodec` (on a GPU machine use the gpu extra; "
    "see README, Engines)"
)


#: The default of ``VLLMSettings.draft_max_batch`` (0: the window proposer drafts at any
#: load; see there).
DRAFT_MAX_BATCH = 0


@dataclass(frozen=True)
class VLLMSettings:
    """Engine-level settings, chosen for a small CPU machine; every field can be overridden.

    The defaults and why:

    - ``threads_bind``: the CPUs the model's threads run on, one thread each (``"0-2"``,
      ``"0,2"``), ``"auto"`` or ``"nobind"``. ``None`` (the default): the environment's
      ``VLLM_CPU_OMP_THREADS_BIND`` if set, else ``"auto"``, vLLM's own rule: one thread per
      physical core, one core kept for the front end and the engine core (on 2 cores: one
      model thread). A model thread that shares its core with anything else (the front end,
      another job) stalls every barrier of every operation: two threads on 2 cores decoded
      at half vLLM's rate or less whenever the machine was busy (issue 43;
      :mod:`harness.engines._threads`, ``benchmarks/decode_bench.py``).
    - ``start_method``: how vLLM's engine core and worker start. ``None``: the environment's
      ``VLLM_WORKER_MULTIPROC_METHOD`` if set, else ``"fork"``: they inherit this process's
      imports (ready in about half the time of ``"spawn"``, which starts a fresh interpreter
      for each); the thread binding is applied in the forked worker
      (:func:`~harness.engines._threads.bind_this_process`).
    - ``kv_cache_gib`` 2: plenty for 8 concurrent loops of 4k context with a 135M model
      (~93k tokens of SmolLM2-135M at 23,040 bytes each). It bounds the running requests *and*
      the prefix cache, which keeps what they leave; see :mod:`harness.engines.kv_cache`.
    - ``block_size`` 32: the prefix cache only reuses *full* blocks. vLLM's CPU default is 128
      tokens, which hides most of a short stride (call + result ~256 tokens) from the cache;
      the CPU attention kernel refuses 16 ("No common block size for 16 (CPU_ATTN:
      [MultipleOf(32)])"), so 32 is the smallest that works.
    - ``enforce_eager``: no torch.compile, so the engine starts in seconds (compiling gives
      ~+35% decode but costs 18–77 s per start on this machine).
    - ``max_num_batched_tokens`` 4096: one scheduler step can prefill a 4k-token prompt.
    - ``max_num_seqs`` 32: room for 8–16 concurrent loops plus batched resamples.
    - ``max_model_len`` 8192: SmolLM2's trained context.
    - ``quiet``: vLLM logs errors only (its start-up warnings about tcmalloc, Triton and
      eager mode are expected here), its processes drop vLLM's and torch's FutureWarnings,
      torch's C++ warnings (``TORCH_CPP_LOG_LEVEL=ERROR``, if torch is not imported yet) and
      the weight-loading progress bars: a quiet engine prints nothing. Set
      ``VLLM_LOGGING_LEVEL`` or ``TORCH_CPP_LOG_LEVEL`` yourself to see more.
    - ``load_format`` ``"dummy"`` gives random weights (fast contract tests; output is noise).
    - ``drafting``: drafted (speculative) decoding, a draft the model verifies in one forward
      pass; under greedy decoding the output is the same tokens. Not arm F+spec's certified
      speculation of tool calls (``FlattenSettings.speculate``), which starts calls early and
      leaves decoding alone. ``"none"`` (default), ``"ngram"``
      (vLLM's prompt-lookup proposer: drafts the continuation of the last 2-4 tokens from
      earlier in the same prompt, e.g. the previous tool call), ``"suffix"`` (vLLM's
      suffix-tree proposer; needs the ``arctic-inference`` package), ``"window"`` (the
      harness's own proposer, :mod:`harness.engines.window_drafts`: drafts the window's
      predicted calls, ``GenerationSettings.draft_calls``, then falls back to prompt lookup).
      ``speculative_tokens`` (default 6) is the draft length per step.
    - ``draft_max_batch`` (window proposer only): it drafts nothing in a step where more
      than this many requests decode; 0 (the default) drafts at any load. Where a step of
      many requests is compute-bound, verifying their drafts can cost more than the tokens
      it saves; on this machine it did not in the latest runs (8, 12 and 16 loops:
      ``benchmarks/results/draft/``), so the default leaves drafting on. vLLM's own
      proposers have no such switch.
    - ``extra``: any further ``AsyncEngineArgs`` fields, passed through.
    - ``speculate``: the old name of ``drafting`` (deprecated: a DeprecationWarning; removed
      in the next release).
    """

    max_model_len: int = 8192
    block_size: int = 32
    kv_cache_gib: float = 2.0
    threads_bind: str | None = None
    start_method: str | None = None
    enforce_eager: bool = True
    enable_prefix_caching: bool = True
    max_num_seqs: int = 32
    max_num_batched_tokens: int = 4096
    dtype: str = "bfloat16"
    seed: int = 0
    load_format: str = "auto"
    quiet: bool = True
    drafting: str = "none"
    speculative_tokens: int = 6
    draft_max_batch: int = DRAFT_MAX_BATCH
    extra: Mapping[str, Any] = field(default_factory=dict)
    speculate: InitVar[str | None] = None

    def __post_init__(self, speculate: str | None) -> None:
        if speculate is not None:
            warnings.warn(_SPECULATE_RENAMED, DeprecationWarning, stacklevel=3)
            object.__setattr__(self, "drafting", speculate)

    @classmethod
    def from_kwargs(cls, base: VLLMSettings | None = None, **overrides: Any) -> VLLMSettings:
        """``base`` (or the defaults) with ``overrides``; unknown names are a ConfigError."""
        known = {f.name for f in fields(cls)} | {"speculate"}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ConfigError(
                f"Unknown VLLMSettings field(s) {unknown}; known: {sorted(known)}. "
                "Pass other AsyncEngineArgs through extra={...}."
            )
        return replace(base or cls(), **overrides)

    def engine_args(self, model: str) -> dict[str, Any]:
        """The ``AsyncEngineArgs`` keyword arguments these settings stand for."""
        args: dict[str, Any] = {
            "model": model,
            "tokenizer": model,
            "max_model_len": self.max_model_len,
            "block_size": self.block_size,
            "kv_cache_memory_bytes": int(self.kv_cache_gib * (1 << 30)),
            "enforce_eager": self.enforce_eager,
            "enable_prefix_caching": self.enable_prefix_caching,
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "dtype": self.dtype,
            "seed": self.seed,
            "load_format": self.load_format,
            # Per-request timings and the prefix-cache counters come from vLLM's stats.
            "disable_log_stats": False,
            "use_tqdm_on_load": not self.quiet,  # "Loading safetensors checkpoint shards" bars
        }
        if self.draft_max_batch < 0:
            raise ConfigError(
                f"draft_max_batch must be 0 (no limit) or more, not {self.draft_max_batch}."
            )
        spec = speculative_config(self.drafting, self.speculative_tokens)
        if spec is not None:
            args["speculative_config"] = spec
        args.update(self.extra)
        return args

    def thread_plan(self) -> ThreadPlan:
        """Where the model threads run and why (see ``threads_bind``); a bad CPU list is a
        ConfigError."""
        try:
            return plan_threads(self.threads_bind)
        except ValueError as exc:
            raise ConfigError(
                f"threads_bind / VLLM_CPU_OMP_THREADS_BIND: {exc}; give CPUs this process may "
                "use, 'auto' or 'nobind'."
            ) from exc

    def environment(self) -> dict[str, str]:
        """Environment variables the engine process needs (set before it starts)."""
        env = {"VLLM_CPU_OMP_THREADS_BIND": self.thread_plan().bind}
        if self.quiet:
            env["VLLM_LOGGING_LEVEL"] = "ERROR"
            # torch's C++ warnings (the worker's "NUMA binding: Using MEMBIND policy ..."):
            # read when torch is first imported, so only a process that has not imported it yet
            env["TORCH_CPP_LOG_LEVEL"] = "ERROR"
        return env


#: The values of ``VLLMSettings.drafting`` (and of ``--drafting``).
DRAFTING = ("none", "ngram", "suffix", "window")
#: The old name of :data:`DRAFTING`.
SPECULATE = DRAFTING
_SPECULATE_RENAMED = (
    "VLLMSettings(speculate=...) is now drafting=... (drafted decoding; 'speculate' names arm "
    "F+spec's certified speculation of calls); the old name goes in the next release."
)


def speculative_config(method: str, tokens: int = 6) -> dict[str, Any] | None:
    """vLLM's ``speculative_config`` for ``method`` (``None`` for ``"none"``); a
    ConfigError names what is wrong or missing."""
    if method not in DRAFTING:
        raise ConfigError(f"Unknown drafting={method!r}; use one of {', '.join(DRAFTING)}.")
    if method == "none":
        return None
    if not 1 <= tokens <= 16:
        raise ConfigError(f"speculative_tokens must be 1-16, not {tokens}.")
    if method == "ngram":
        return {
            "method": "ngram",
            "num_speculative_tokens": tokens,
            "prompt_lookup_min": 2,
            "prompt_lookup_max": 4,
        }
    if method == "window":
        return {
            "method": "custom_class",
            "model": "harness.engines.window_drafts.WindowProposer",
            "num_speculative_tokens": tokens,
        }
    if importlib.util.find_spec("arctic_inference") is None:
        raise ConfigError(
            "drafting='suffix' needs vLLM's suffix proposer from the arctic-inference "
            "package: run `make suffix` in a checkout (it builds the CPU part; or pip install "
            "arctic-inference where CUDA torch is acceptable), or use --drafting window."
        )
    return {"method": "suffix", "num_speculative_tokens": tokens}


@dataclass(frozen=True)
class CacheStats:
    """Engine-wide prefix-cache counters since start: ``queries`` prompt tokens looked up,
    ``hits`` of them served from the cache, over ``requests`` scheduled requests."""

    requests: int = 0
    queries: int = 0
    hits: int = 0

    @property
    def hit_rate(self) -> float:
        return self.hits / self.queries if self.queries else 0.0


@dataclass(frozen=True)
class DraftStats:
    """Engine-wide speculative-decoding counters since start (all zero without
    ``drafting``): ``drafts`` verification steps that checked a draft, ``draft_tokens``
    drafted, ``accepted_tokens`` of them the model confirmed."""

    drafts: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0

    @property
    def tokens_per_step(self) -> float:
        """Tokens a verification step produced: its accepted draft tokens plus the one the
        model samples itself (1.0 when nothing is drafted)."""
        return 1.0 + self.accepted_tokens / self.drafts if self.drafts else 1.0

    def __sub__(self, other: DraftStats) -> DraftStats:
        return DraftStats(
            self.drafts - other.drafts,
            self.draft_tokens - other.draft_tokens,
            self.accepted_tokens - other.accepted_tokens,
        )


@dataclass
class _Counters:
    requests: int = 0
    queries: int = 0
    hits: int = 0
    drafts: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0

    def snapshot(self) -> CacheStats:
        return CacheStats(self.requests, self.queries, self.hits)

    def drafting(self) -> DraftStats:
        return DraftStats(self.drafts, self.draft_tokens, self.accepted_tokens)


@contextlib.contextmanager
def _quiet_warnings() -> Iterator[None]:
    """vLLM and torch emit FutureWarning/DeprecationWarning at import and start-up (their own
    deprecations, nothing a harness user can act on); keep them out of users' warning filters."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


def _import_vllm() -> None:
    try:
        with _quiet_warnings():
            import vllm.engine.arg_utils
            import vllm.v1.engine.async_llm  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"The in-process engine needs vLLM, which is not importable ({exc}); {_INSTALL_HINT}."
        ) from exc


def _apply_environment(settings: VLLMSettings) -> None:
    """Set the engine's environment; the user's own environment wins unless a setting was
    given explicitly (the thread binding's plan reads the environment itself)."""
    for key, value in settings.environment().items():
        if key == "VLLM_CPU_OMP_THREADS_BIND":  # the plan already read the environment's
            os.environ[key] = value
        else:
            os.environ.setdefault(key, value)
    # vLLM applies VLLM_LOGGING_LEVEL only after its import has logged its start-up warnings
    # (see harness._honour_vllm_log_level, which does the same for processes importing the
    # harness with the variable already set).
    level = os.environ.get("VLLM_LOGGING_LEVEL", "").upper()
    if level in ("ERROR", "CRITICAL"):
        logging.getLogger("vllm").setLevel(level)


def _in_asyncio() -> bool:
    """True when called from a running asyncio event loop (vLLM's front end needs one)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _model_folder(model: str | os.PathLike[str]) -> Path:
    folder = Path(model).expanduser()
    if not (folder / "config.json").is_file():
        raise ConfigError(
            f"{folder} is not a Hugging Face model folder (no config.json); pass a folder "
            "with config.json, weights and tokenizer, or run `harness engine prepare`."
        )
    return folder


def _launch(folder: Path, settings: VLLMSettings, counters: _Counters) -> Any:
    """Create the AsyncLLM (blocks while the engine core process loads the model).

    What ``AsyncLLM.from_engine_args`` does, with one change: the engine core and its worker
    are *forked* from this process (:func:`_start_method`), not spawned, so they inherit the
    vLLM already imported here instead of importing it twice more (engine ready in ~10 s
    instead of ~23 s on 2 cores). vLLM's CPU platform sets ``spawn`` while it builds the
    config; the method is chosen after that."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.usage.usage_lib import UsageContext
    from vllm.v1.engine.async_llm import AsyncLLM
    from vllm.v1.executor import Executor

    if settings.quiet:
        logging.getLogger("vllm").setLevel(logging.ERROR)
    try:
        engine_args = AsyncEngineArgs(**settings.engine_args(str(folder)))
    except TypeError as exc:
        raise ConfigError(f"Bad engine setting: {exc}; check VLLMSettings.extra.") from exc
    try:
        usage = UsageContext.ENGINE_CONTEXT
        vllm_config = engine_args.create_engine_config(usage)
        method = _start_method(settings.start_method)
        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = method
        if method == "fork":  # the tokenizer's threads do not survive a fork: say so up front
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        # A spawned engine core must not re-run the user's script; a forked one starts as a
        # fresh interpreter would (_as_fresh_interpreter).
        with spawn_without_main(), _forking(settings.quiet, settings.thread_plan()):
            return AsyncLLM(
                vllm_config=vllm_config,
                executor_class=Executor.get_class(vllm_config),
                log_requests=engine_args.enable_log_requests,
                log_stats=not engine_args.disable_log_stats,
                start_engine_loop=True,
                usage_context=usage,
                stat_loggers=[_stat_logger_factory(counters)],
            )
    except Exception as exc:
        check_fits(folder, settings)  # a KV cache too small for one request: say so, exit 2
        raise EngineDeadError(
            f"vLLM could not start on {folder}: {type(exc).__name__}: {exc}. "
            "See vLLM's log above for the root cause; check the model folder and "
            "VLLMSettings (block_size must be a multiple of 32 on CPU)."
        ) from exc


@contextlib.contextmanager
def _forking(quiet: bool, plan: ThreadPlan) -> Iterator[None]:
    global _forking_engine, _quiet_engine, _worker_plan
    _forking_engine, _quiet_engine, _worker_plan = True, quiet, plan
    try:
        yield
    finally:
        _forking_engine = False


#: The user's own choice of start method for vLLM's processes, read before vLLM (whose CPU
#: platform overwrites the variable with ``spawn``) is imported by the harness.
_USER_START_METHOD = os.environ.get("VLLM_WORKER_MULTIPROC_METHOD")

#: The values of ``VLLMSettings.start_method``.
START_METHODS = ("fork", "spawn")


def _start_method(setting: str | None = None) -> str:
    """``setting``, else the user's ``VLLM_WORKER_MULTIPROC_METHOD``, else ``fork`` (the
    engine core and worker inherit this process's imports), except in a Ray actor (vLLM
    spawns there: Ray's workers cannot fork)."""
    if setting is not None and setting not in START_METHODS:
        raise ConfigError(f"start_method must be one of {START_METHODS}, not {setting!r}.")
    if setting or _USER_START_METHOD:
        return setting or str(_USER_START_METHOD)
    try:
        from vllm.ray.lazy_utils import is_in_ray_actor
    except ImportError:  # pragma: no cover - an older vLLM layout
        return "spawn"
    return "spawn" if is_in_ray_actor() else "fork"  # type: ignore[no-untyped-call]


def describe_start_method(setting: str | None = None) -> tuple[str, str]:
    """The start method the engine would use (without importing vLLM) and why."""
    if setting is not None:
        _start_method(setting)  # validates
        return setting, "as asked (start_method)"
    if _USER_START_METHOD:
        return _USER_START_METHOD, "from VLLM_WORKER_MULTIPROC_METHOD"
    return "fork", (
        "the engine core and worker inherit this process's imports (about half the start "
        "time of spawn); the model threads are bound in the forked worker"
    )


#: True while this process forks vLLM's engine core (and forever in the forked engine core,
#: which forks the worker): only those forks are reset like a fresh interpreter.
_forking_engine = False
#: The forking engine's ``quiet`` setting, for :func:`_as_fresh_interpreter`.
_quiet_engine = True
#: The model threads' CPUs, applied in the forked worker (see :mod:`harness.engines._threads`).
_worker_plan: ThreadPlan | None = None
#: How many engine forks deep this process is: 1 in the engine core, 2 in its worker.
_engine_depth = 0


def _as_fresh_interpreter() -> None:
    """In a forked engine core or worker: what a spawned one would have started with.

    * No signal wakeup fd: the inherited one is the parent's event loop's (anyio/asyncio's
      signal handling), so a SIGTERM that vLLM sends its own processes at shutdown would reach
      the parent as if sent to it.
    * Python's default warning filters: the parent's may turn warnings into errors (pytest's
      ``filterwarnings = error``, ``python -W error``), and vLLM's worker start-up warns.
    * In the worker, the model threads' binding, which a spawned worker's OpenMP runtime
      reads from the environment at start-up and an inherited one never reads again
      (:func:`~harness.engines._threads.bind_this_process`).

    And one thing a spawned one lacks: it dies with its parent, even a SIGKILLed one
    (:mod:`harness.engines._pdeathsig`), so no engine core or worker outlives the process
    that opened the engine."""
    global _engine_depth
    if not _forking_engine:
        return
    _engine_depth += 1
    die_with_parent()
    with contextlib.suppress(ValueError, OSError):  # not the main thread: nothing was set
        signal.set_wakeup_fd(-1)
    warnings.resetwarnings()
    warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
        warnings.filterwarnings("ignore", category=category)
    if _quiet_engine:  # vLLM's and torch's own deprecations, as the front end ignores them
        warnings.filterwarnings("ignore", category=FutureWarning)
    if _engine_depth == 2 and _worker_plan is not None:
        bind_this_process(_worker_plan)


os.register_at_fork(after_in_child=_as_fresh_interpreter)


def _engine_processes() -> set[int]:
    """PIDs of the vLLM processes (engine core, workers) below this process."""
    try:
        import psutil  # a vLLM dependency
    except ImportError:  # pragma: no cover
        return set()
    pids = set()
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if child.name().startswith("VLLM"):
                pids.add(child.pid)
    return pids


def _terminate(pids: set[int], grace_s: float = 3.0) -> None:
    """End the still-running processes among ``pids`` (SIGTERM, then SIGKILL)."""
    try:
        import psutil
    except ImportError:  # pragma: no cover
        return
    alive = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(pid)
            if process.name().startswith("VLLM") and process.status() != psutil.STATUS_ZOMBIE:
                process.terminate()
                alive.append(process)
    _, still = psutil.wait_procs(alive, timeout=grace_s)
    for process in still:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(still, timeout=grace_s)


def _stat_logger_factory(counters: _Counters) -> Callable[[Any, int], Any]:
    """A vLLM stat logger that adds the scheduler's prefix-cache counters to ``counters``."""
    from vllm.v1.metrics.loggers import StatLoggerBase

    class _PrefixCacheCounter(StatLoggerBase):
        def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
            self.counters = counters

        def record(
            self,
            scheduler_stats: Any,
            iteration_stats: Any,
            mm_cache_stats: Any = None,
            engine_idx: int = 0,
        ) -> None:
            if scheduler_stats is None:
                return
            stats = scheduler_stats.prefix_cache_stats
            self.counters.requests += stats.requests
            self.counters.queries += stats.queries
            self.counters.hits += stats.hits
            spec = getattr(scheduler_stats, "spec_decoding_stats", None)
            if spec is not None:
                self.counters.drafts += spec.num_drafts
                self.counters.draft_tokens += spec.num_draft_tokens
                self.counters.accepted_tokens += spec.num_accepted_tokens

        def log_engine_initialized(self) -> None:
            return None

    return _PrefixCacheCounter


class VLLMEngine(ClosingContext):
    """One in-process vLLM engine shared by any number of concurrent loops.

    Create it with :meth:`start` (or :func:`open_default_engine`) inside an asyncio event loop;
    use it as an async context manager or call :meth:`aclose`.
    """

    name: str

    def __init__(
        self,
        llm: Any,
        model: Path,
        settings: VLLMSettings | None = None,
        counters: _Counters | None = None,
    ) -> None:
        self._llm: Any = llm
        self._tokenizer: Any = llm.get_tokenizer()
        self.model = model
        self.settings = settings or VLLMSettings()
        self.name = f"vllm:{model.name}"
        self._counters = counters or _Counters()
        self._ids = itertools.count()
        self._salt = uuid.uuid4().hex[:8]
        self._in_flight: dict[str, anyio.CancelScope] = {}
        self._closed = False
        self._drained: anyio.Event | None = None
        self._grammars: dict[tuple[str, bool], str] = {}
        self._pids: set[int] = set()
        self._drafts: DraftChannel | None = None

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    async def start(
        cls,
        model: str | os.PathLike[str],
        settings: VLLMSettings | None = None,
        **overrides: Any,
    ) -> VLLMEngine:
        """Load ``model`` (a local Hugging Face folder) and start the engine.

        ``overrides`` are :class:`VLLMSettings` fields. Loading blocks the event loop for the
        engine's start-up (seconds). Must run under asyncio (vLLM's front end is asyncio).
        """
        if not _in_asyncio():
            raise ConfigError(
                "VLLMEngine needs the asyncio event loop (vLLM's front end is asyncio); "
                "run under anyio's asyncio backend."
            )
        resolved = VLLMSettings.from_kwargs(settings, **overrides)
        folder = _model_folder(model)
        _apply_environment(resolved)
        channel = DraftChannel() if resolved.drafting == "window" else None
        if channel is not None:  # the forked worker's proposer reads these (window_drafts)
            os.environ[CHANNEL_ENV] = str(channel.path)
            os.environ[MAX_BATCH_ENV] = str(resolved.draft_max_batch)
        _import_vllm()
        counters = _Counters()
        before = _engine_processes()
        # No local variable may hold the AsyncLLM: importing vLLM leaves frames alive that
        # reach this one, and a leaked reference makes AsyncLLM.__del__ run at interpreter
        # exit (a TypeError from half-torn-down modules).
        try:
            llm = _launch(folder, resolved, counters)
        except BaseException:
            if channel is not None:
                channel.close()
            raise
        engine = cls(llm, folder, resolved, counters)
        del llm
        engine._pids = _engine_processes() - before
        engine._drafts = channel
        return engine

    async def aclose(self) -> None:
        """Fail every in-flight request with EngineDeadError, then shut vLLM down."""
        if self._closed:
            return
        self._closed = True
        for scope in list(self._in_flight.values()):
            scope.cancel()
        if self._in_flight:
            self._drained = anyio.Event()
            with anyio.CancelScope(shield=True), anyio.move_on_after(10):
                await self._drained.wait()
        if self._drafts is not None:
            self._drafts.close()
        llm, self._llm = self._llm, None
        if llm is not None:
            llm.shutdown()
            # vLLM 0.32 closes its ZMQ sockets but never terminates the client's ZMQ context,
            # which then warns (ResourceWarning) when collected. Terminate it here.
            ctx = getattr(getattr(llm.engine_core, "resources", None), "ctx", None)
            if ctx is not None and not getattr(ctx, "closed", True):
                with contextlib.suppress(Exception):
                    ctx.destroy(linger=0)
            # Drop the last reference now: AsyncLLM.__del__ calls shutdown again, and at
            # interpreter exit that raises a TypeError from half-torn-down modules.
            del llm
            gc.collect()
            # Reap the engine core process now (vLLM joins it, but it can linger as a zombie).
            multiprocessing.active_children()
        # If the engine core died (killed, OOM), its worker is orphaned and lingers for
        # minutes; end what is left of this engine's processes.
        if self._pids:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(_terminate, self._pids)

    @property
    def closed(self) -> bool:
        return self._closed

    # ------------------------------------------------------------------ introspection

    def cache_stats(self) -> CacheStats:
        """Engine-wide prefix-cache counters (see :class:`CacheStats`)."""
        return self._counters.snapshot()

    @property
    def drafts_calls(self) -> bool:
        """Whether this engine drafts ``GenerationSettings.draft_calls`` (``drafting="window"``)."""
        return self._drafts is not None

    @property
    def takes_tool_choice(self) -> bool:
        """``GenerationSettings.tool_choice`` is forced by the reply grammar (``"auto"``,
        ``"none"``, ``"required"``, a named tool; not an
        :class:`~harness.engines.base.OtherToolChoice` object)."""
        return True

    @property
    def draft_stats(self) -> DraftStats:
        """Engine-wide speculative-decoding counters (see :class:`DraftStats`)."""
        return self._counters.drafting()

    async def reset_prefix_cache(self) -> bool:
        """Empty the prefix cache (for measurements); True if vLLM reset it."""
        self._check_alive()
        return bool(await self._llm.reset_prefix_cache())

    def render_prompt(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], parallel: bool = False
    ) -> str:
        """The exact prompt text the model sees for this chat (chat template applied)."""
        rendered = _format.render_messages(messages, tools, parallel)
        return str(
            self._tokenizer.apply_chat_template(
                rendered, tokenize=False, add_generation_prompt=True
            )
        )

    def count_tokens(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False))

    # ------------------------------------------------------------------ generation

    async def check_health(self) -> None:
        """Return if the engine can serve; raise EngineDeadError if it is closed or dead."""
        self._check_alive()

    def _publish_drafts(
        self, ids: Sequence[int], tools: Sequence[ToolSpec], settings: GenerationSettings
    ) -> None:
        """Tokenise for the window proposer, each after the prompt's last tokens (so a reply's
        first step drafts too): the openings the reply grammar forces (a call of each tool it
        offers, or the answer when it offers none; not for a forced or free reply), then the
        replies ``settings.draft_calls`` predict (each alone, and all in one reply)."""
        texts: list[str] = []
        if settings.forced is None and settings.constrain and tools:
            offered = tools if settings.grammar_tools is None else settings.grammar_tools
            functions = _format.tool_functions(offered)
            texts += reply_openings(
                [str(f["name"]) for f in functions],
                [
                    next(iter((f.get("parameters") or {}).get("properties") or {}), None)
                    for f in functions
                ],
            )
        calls = settings.draft_calls
        texts += [_format.serialize_calls([c]) for c in calls]
        if len(calls) > 1:
            texts.append(_format.serialize_calls(calls))
        tail = list(ids[-PROMPT_TAIL:])
        self._drafts_publish(
            [tail + self._tokenizer.encode(t, add_special_tokens=False) for t in texts]
        )

    def _drafts_publish(self, sequences: Sequence[Sequence[int]]) -> None:
        if self._drafts is not None:
            self._drafts.publish(sequences)

    def _check_alive(self) -> None:
        if self._closed or self._llm is None:
            raise EngineDeadError(
                f"Engine {self.name} is closed; start a new one (VLLMEngine.start)."
            )
        if self._llm.errored:
            raise EngineDeadError(
                f"Engine {self.name} is dead (vLLM's engine core stopped); see vLLM's log for "
                "the cause and start a new engine."
            )

    def _grammar(
        self,
        tools: Sequence[ToolSpec],
        parallel: bool,
        max_calls: int | None = None,
        *,
        required: bool = False,
    ) -> str:
        """EBNF for a valid reply, with no free whitespace (so replies render byte-stably);
        ``required``: calls only (``tool_choice``)."""
        schema = _format.reply_schema(tools, parallel, max_calls, required=required)
        # Property order is the emitted key order: never sort the schema's keys.
        key = (json.dumps(schema, ensure_ascii=False), parallel)
        cached = self._grammars.get(key)
        if cached is None:
            import xgrammar

            try:
                cached = str(xgrammar.Grammar.from_json_schema(key[0], any_whitespace=False))
            except Exception as exc:
                raise EngineRequestError(
                    f"A tool's parameter schema cannot be compiled into a grammar ({exc}); "
                    "simplify the schema or pass constrain=False."
                ) from exc
            if len(self._grammars) > 64:
                self._grammars.clear()
            self._grammars[key] = cached
        return cached

    def _sampling_params(
        self,
        settings: GenerationSettings,
        tools: Sequence[ToolSpec],
        forced: str | None,
        budget: int,
        streaming: bool = False,
    ) -> Any:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

        structured = None
        max_tokens = settings.max_tokens
        chosen = None if forced is not None else _format.chosen_tools(settings, tools)
        if forced is not None:
            structured = StructuredOutputsParams(choice=[forced])
            # The grammar may spell the text in small tokens; never truncate a forced reply.
            max_tokens = max(max_tokens, len(forced.encode("utf-8")) + 8)
        elif chosen is not None:  # constrained, or a tool_choice to force
            structured = StructuredOutputsParams(
                grammar=self._grammar(
                    chosen[0],
                    settings.parallel_tool_calls,
                    settings.max_parallel_calls,
                    required=chosen[1],
                )
            )
        return SamplingParams(
            n=1,
            temperature=settings.temperature,
            seed=settings.seed,
            max_tokens=max(1, min(max_tokens, budget)),
            stop=list(settings.stop) or None,
            structured_outputs=structured,
            output_kind=(
                RequestOutputKind.CUMULATIVE if streaming else RequestOutputKind.FINAL_ONLY
            ),
        )

    def _request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: GenerationSettings,
        streaming: bool = False,
    ) -> tuple[str, str, list[int], Any, str | None]:
        """Render and check one request: its id, prompt text, token ids, sampling
        parameters and the forced reply (if any)."""
        self._check_alive()
        try:
            prompt = self.render_prompt(messages, tools, settings.parallel_tool_calls)
        except Exception as exc:
            raise EngineRequestError(f"Cannot render the chat: {exc}") from exc
        ids = self._tokenizer.encode(prompt, add_special_tokens=False)
        budget = self.settings.max_model_len - len(ids)
        if budget <= 0:
            raise ContextWindowExceeded(
                f"The prompt has {len(ids)} tokens, over the engine's max_model_len "
                f"{self.settings.max_model_len}; shorten the chat or raise max_model_len."
            )
        forced = _format.forced_text(settings, tools)
        if self._drafts is not None:
            self._publish_drafts(ids, tools, settings)
        from vllm.exceptions import VLLMClientError

        try:
            params = self._sampling_params(settings, tools, forced, budget, streaming)
        except (VLLMClientError, ValueError, TypeError) as exc:  # validated eagerly
            raise EngineRequestError(f"Bad generation settings: {exc}") from exc
        return f"{self._salt}-{next(self._ids)}", prompt, ids, params, forced

    async def generate(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: GenerationSettings,
    ) -> Completion:
        """Generate one assistant turn (see :class:`~harness.engines.base.Engine`)."""
        request_id, prompt, ids, params, forced = self._request(messages, tools, settings)
        final: Any = None
        async with contextlib.aclosing(self._outputs(request_id, ids, params)) as outputs:
            async for output in outputs:
                final = output
        return self._completion(self._last(final, request_id), prompt, settings, tools, forced)

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: GenerationSettings,
    ) -> AsyncGenerator[str | Completion, None]:
        """Generate one assistant turn, yielding its text as it is decoded, then the whole
        :class:`Completion` (the streaming extension,
        :class:`~harness.engines.base.StreamingEngine`). Closing the iterator early aborts
        the request in vLLM."""
        request_id, prompt, ids, params, forced = self._request(
            messages, tools, settings, streaming=True
        )
        final: Any = None
        sent = ""
        async with contextlib.aclosing(self._outputs(request_id, ids, params)) as outputs:
            async for output in outputs:
                final = output
                text = str(output.outputs[0].text)
                if len(text) > len(sent) and text.startswith(sent):
                    yield text[len(sent) :]
                    sent = text
        yield self._completion(self._last(final, request_id), prompt, settings, tools, forced)

    def _last(self, final: Any, request_id: str) -> Any:
        if final is None:
            raise EngineDeadError(
                f"Engine {self.name} gave no output for request {request_id}; it was closed "
                "while the request was in flight."
            )
        return final

    async def _outputs(
        self, request_id: str, ids: list[int], params: Any
    ) -> AsyncGenerator[Any, None]:
        """vLLM's outputs for one request (one, or one per step when streaming), its failures
        as harness errors; aborted in vLLM unless it ran to its end. Only the wait for the
        next output counts as in flight (``aclose`` cancels it): a cancel scope must not span
        a ``yield``."""
        from vllm.inputs.engine import tokens_input

        stream = self._llm.generate(tokens_input(ids), params, request_id)
        done = False
        try:
            async with contextlib.aclosing(stream):
                while True:
                    output = await self._next_output(request_id, stream)
                    if output is None:
                        break
                    yield output
            done = True
        finally:
            if not done and self._llm is not None:
                with anyio.CancelScope(shield=True):
                    with contextlib.suppress(Exception):
                        await self._llm.abort(request_id)

    async def _next_output(self, request_id: str, stream: Any) -> Any:
        """The request's next output from vLLM, or ``None`` at its end."""
        from vllm.exceptions import VLLMClientError
        from vllm.v1.engine.exceptions import EngineDeadError as VLLMDead
        from vllm.v1.engine.exceptions import EngineGenerateError

        if self._closed or self._llm is None:
            raise EngineDeadError(
                f"Engine {self.name} was closed while request {request_id} was in flight."
            )
        with anyio.CancelScope() as scope:
            self._in_flight[request_id] = scope
            try:
                return await stream.__anext__()
            except StopAsyncIteration:
                return None
            except VLLMDead as exc:
                raise EngineDeadError(
                    f"Engine {self.name} died while request {request_id} was in flight; "
                    "see vLLM's log for the cause and start a new engine."
                ) from exc
            except (VLLMClientError, ValueError, TypeError) as exc:
                raise EngineRequestError(f"vLLM rejected the request: {exc}") from exc
            except EngineGenerateError as exc:
                if self._llm is not None and self._llm.errored:
                    raise EngineDeadError(f"Engine {self.name} died: {exc.__cause__}") from exc
                raise EngineRequestError(
                    f"vLLM failed request {request_id}: {exc.__cause__!r}"
                ) from exc
            finally:
                self._in_flight.pop(request_id, None)
                if not self._in_flight and self._drained is not None:
                    self._drained.set()
        raise EngineDeadError(
            f"Engine {self.name} was closed while request {request_id} was in flight."
        )

    def _completion(
        self,
        final: Any,
        prompt: str,
        settings: GenerationSettings,
        tools: Sequence[ToolSpec],
        forced: str | None,
    ) -> Completion:
        output = final.outputs[0]
        text = str(output.text)
        if output.finish_reason == "abort":
            raise EngineRequestError(f"vLLM aborted request {final.request_id}.")
        usage = Usage(
            prompt_tokens=len(final.prompt_token_ids or ()),
            cached_tokens=int(final.num_cached_tokens or 0),
            completion_tokens=len(output.token_ids),
        )
        timings = _timings(final.metrics)
        truncated = output.finish_reason == "length"
        digest = token_digest(output.token_ids)
        if forced is not None:
            completion = _format.forced_completion(
                text, forced, settings, usage, timings, "the engine"
            )
            return replace(completion, token_digest=digest)
        parsed = _format.parse_reply(
            text, truncated=truncated, has_tools=bool(tools), salt=prompt[-512:]
        )
        return Completion(
            parsed.content, parsed.tool_calls, usage, timings, parsed.finish_reason, digest
        )


def _timings(metrics: Any) -> Timings:
    """Timings from vLLM's per-request stats (engine-core monotonic timestamps)."""
    if metrics is None:
        return Timings()
    queued = float(getattr(metrics, "queued_ts", 0.0))
    scheduled = float(getattr(metrics, "scheduled_ts", 0.0))
    first = float(getattr(metrics, "first_token_ts", 0.0))
    last = float(getattr(metrics, "last_token_ts", 0.0))
    arrival = float(getattr(metrics, "arrival_time", 0.0))

    def span(a: float, b: float) -> float:
        return max(0.0, b - a) if a and b else 0.0

    total = max(0.0, time.time() - arrival) if arrival else span(queued, last)
    return Timings(
        total_s=total,
        queue_s=span(queued, scheduled),
        prefill_s=span(scheduled, first),
        decode_s=span(first, last),
    )


@contextlib.asynccontextmanager
async def open_default_engine(
    model: str | os.PathLike[str] | None = None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    settings: VLLMSettings | None = None,
    **overrides: Any,
) -> AsyncIterator[VLLMEngine]:
    """Start the default engine: ``model`` (a local Hugging Face folder) or, if ``None``,
    the packaged SmolLM2-135M-Instruct, converted on first use (:func:`prepare_model`).
    ``overrides`` are :class:`VLLMSettings` fields. A ``kv_cache_gib`` too small for one
    request of ``max_model_len`` is a ConfigError before vLLM starts. Closes the engine on
    exit."""
    if model is None:
        from harness.engines.model import prepare_model

        path = await anyio.to_thread.run_sync(lambda: prepare_model(cache_dir))
    else:
        path = Path(model)
    resolved = VLLMSettings.from_kwargs(settings, **overrides)
    check_fits(path, resolved)  # before vLLM starts (seconds) and fails on it
    engine = await VLLMEngine.start(path, resolved)
    async with engine:
        yield engine
