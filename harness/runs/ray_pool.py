"""Jobs on a Ray cluster: a pool of *job workers*, one engine each, fed by one driver.

``harness bench --ray ADDRESS|auto`` runs its jobs here instead of in-process. The shape:

- **One worker per node** (by default; ``workers`` sets the count): a Ray actor that opens
  one engine when it starts — an in-process vLLM engine, or an HTTP client to shared servers,
  or the scripted double — and runs up to ``concurrency`` jobs at a time on it, as a local run
  does. The engine lives on an anyio event loop in a thread of the actor
  (:func:`anyio.from_thread.start_blocking_portal`), so it is opened and closed in one task.
- **The driver writes every result.** A worker returns the job's dict; the caller (the
  benchmark's driver loop) appends it to its ``results.jsonl``, under its lock and plan
  fingerprint, and advances its progress bar: a Ray run has the same files and the same report
  as a local one.
- **Every job is journaled on shared storage.** Job ``J`` runs in ``journal_root/<slug of J>/``
  — its workspace store on disk (``store.sqlite3``, keyed writes) and its write-ahead journal
  (``journal/``, :mod:`harness.journal`) — and each attempt appends a line (process id, node,
  host) to ``attempts.jsonl`` there. When a worker dies mid-job (its process killed, its node
  lost), the driver sends the job to another worker, which *resumes* it from the journal: a
  turn the journal holds is not generated again, a call with a journaled outcome is not run
  again, a call in doubt is retried only with its idempotency key. Ray restarts the dead actor
  (``max_restarts=-1``), on another node if its own is gone. A job that loses its worker
  :data:`MAX_ATTEMPTS` times raises :class:`~harness.errors.EngineDeadError`; finished jobs are
  in ``results.jsonl`` and the same command resumes.

Limits: ``journal_root`` must be one directory every node sees (a local cluster: any local
path; several machines: a shared file system). Its ``flock`` guards one writer per job only
where the file system honours ``flock`` across machines. The engine options must open the
same model on every node.

Ray is the optional extra ``ray`` (``pip install 'agent-harness[ray]'``); importing this module
works without it, and :func:`require_ray` says what to install.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import socket
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, ExitStack, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import anyio
from anyio.from_thread import start_blocking_portal

from harness._jsonl import append_line, open_append, read_jsonl
from harness.engines.base import Engine
from harness.errors import ConfigError, EngineDeadError

__all__ = (
    "CLOSE_TIMEOUT_S",
    "MAX_ATTEMPTS",
    "START_ATTEMPTS",
    "JobRunner",
    "RayPool",
    "connect",
    "job_directory",
    "read_attempts",
    "require_ray",
)

#: Workers a job may lose before the run gives up on it.
MAX_ATTEMPTS = 3
#: Tries to start a local cluster (Ray gives its node a fixed 30 s, which a loaded machine
#: can miss).
START_ATTEMPTS = 2
#: Seconds a worker has to close its engine when the pool is left on an error or a signal.
CLOSE_TIMEOUT_S = 10.0

EngineOpener = Callable[[], AbstractAsyncContextManager[Engine]]


class JobRunner(Protocol):
    """What a worker runs: one job by id, on the worker's engine, journaled in ``directory``.
    Pickled to every worker, so it carries only the plan (not the jobs it expands to)."""

    async def __call__(self, engine: Engine, job_id: str, directory: Path) -> dict[str, Any]: ...


def require_ray() -> ModuleType:
    """``import ray``, or a :class:`ConfigError` naming the extra to install."""
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "--ray needs Ray, which is not installed; install the optional extra: "
            "pip install 'agent-harness[ray]' (or pip install 'ray>=2.40')."
        ) from None
    return ray


def connect(address: str, *, num_cpus: int | None = None) -> bool:
    """Join the Ray cluster at ``address`` (``host:port`` or ``ray://host:port``), or with
    ``"auto"`` start a local one (all this machine's cores unless ``num_cpus``). Returns whether
    this call started the connection (the caller then ends it with ``ray.shutdown()``).

    Note: Ray's own ``ray.init(address="auto")`` joins a running cluster; here ``auto`` starts
    one, so ``harness bench --ray auto`` needs no ``ray start``."""
    ray = require_ray()
    if ray.is_initialized():
        return False
    options: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "logging_level": logging.WARNING,
        "configure_logging": True,
    }
    # Ray starts workers at niceness 15; a job worker is the workload (its tool latencies and
    # turns are what the benchmark measures), so it runs at the driver's priority.
    env = {"RAY_worker_niceness": "0"}
    path = os.environ.get("PYTHONPATH")
    if path:  # a checkout on the path (not installed): the workers need it too
        env["PYTHONPATH"] = path
    options["runtime_env"] = {"env_vars": env}
    if address == "auto":
        _start_local(ray, num_cpus, options)
        return True
    try:
        ray.init(address=address, **options)
    except Exception as exc:  # ConnectionError, RuntimeError, ValueError, or a bare Exception
        raise ConfigError(
            f"Could not reach the Ray cluster at {address!r} ({exc}); start one with "
            "`ray start --head` and pass the address it prints, or use --ray auto for a "
            "local cluster."
        ) from None
    return True


def _start_local(ray: ModuleType, num_cpus: int | None, options: dict[str, Any]) -> None:
    attempt = 1
    while True:
        try:
            ray.init(num_cpus=num_cpus, **options)
            return
        except Exception as exc:  # a bare Exception when the node misses Ray's 30 s
            with suppress(Exception):
                ray.shutdown()  # whatever part of the cluster did start
            if attempt == START_ATTEMPTS:
                raise EngineDeadError(
                    f"Ray could not start a local cluster ({START_ATTEMPTS} attempts): "
                    f"{_reason(exc)} On a busy machine try again later, or start one with "
                    "`ray start --head` and pass its address to --ray."
                ) from None
            attempt += 1


def job_directory(root: Path, job_id: str) -> Path:
    """``root/<job id with unsafe characters replaced>-<8 hex of its hash>`` (ids hold ``|``,
    ``+`` and ``/``; the hash keeps two ids that map to one name apart)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", job_id).strip("_")[:80]
    return root / f"{safe}-{hashlib.sha256(job_id.encode()).hexdigest()[:8]}"


class JobWorker:
    """The Ray actor: one engine, up to ``concurrency`` jobs at a time on it (a threaded actor
    whose calls block on the engine's event loop)."""

    def __init__(self, open_engine: EngineOpener, runner: JobRunner) -> None:
        self._runner = runner
        self._stack = ExitStack()
        self._portal = self._stack.enter_context(start_blocking_portal())
        self._engine: Engine = self._stack.enter_context(
            self._portal.wrap_async_context_manager(open_engine())
        )

    def where(self) -> dict[str, Any]:
        """This worker's process id, host and Ray node (an actor that answers is ready)."""
        import ray

        return {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "node": ray.get_runtime_context().get_node_id(),
        }

    def run(self, job_id: str, directory: str, fresh: bool) -> dict[str, Any]:
        """Run (or resume, from its journal in ``directory``) one job; ``fresh`` clears the
        directory first (a job run again after an error starts over, as it does locally)."""
        path = Path(directory)
        if fresh and path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True, exist_ok=True)
        with open_append(path / "attempts.jsonl") as log:
            append_line(log, {**self.where(), "job_id": job_id, "at": time.time()}, fsync=True)
        return self._portal.call(self._runner, self._engine, job_id, path)

    def close(self) -> None:
        """Close the engine and its event loop."""
        self._stack.close()


@dataclass
class _Slot:
    handle: Any
    index: int
    running: int = 0
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class RayPool:
    """Job workers on the connected Ray cluster (:func:`connect` first). Use as ``async with``:
    entering starts the workers and waits until each has opened its engine; leaving closes
    them. :meth:`run` runs one job on the least busy worker and returns its dict.

    ``workers``: how many (default: one per alive node); ``cpus``: Ray CPUs each reserves;
    ``concurrency``: jobs each runs at once (the local run's ``--concurrency``)."""

    open_engine: EngineOpener
    runner: JobRunner
    journal_root: Path
    concurrency: int = 8
    workers: int | None = None
    cpus: float = 1.0
    slots: list[_Slot] = field(default_factory=list, init=False)
    #: job id -> the attempts that lost their worker (what the report says was resumed).
    lost: dict[str, int] = field(default_factory=dict, init=False)

    async def __aenter__(self) -> RayPool:
        ray = require_ray()
        count = self.workers or sum(1 for n in ray.nodes() if n.get("Alive"))
        if count < 1:
            raise ConfigError("--ray-workers must be at least 1.")
        actor = ray.remote(
            num_cpus=self.cpus,
            max_restarts=-1,
            max_task_retries=0,
            max_concurrency=self.concurrency + 1,  # + one for where()
            scheduling_strategy="SPREAD",
        )(JobWorker)
        self.journal_root.mkdir(parents=True, exist_ok=True)
        self.slots = [_Slot(actor.remote(self.open_engine, self.runner), i) for i in range(count)]
        for slot in self.slots:
            try:
                slot.info = await slot.handle.where.remote()
            except ray.exceptions.RayError as exc:
                await self.__aexit__(EngineDeadError, None, None)
                raise EngineDeadError(
                    f"Ray worker {slot.index} of {count} could not open its engine: "
                    f"{_reason(exc)}; check the engine options on that node (the same model "
                    "must be available on every node)."
                ) from None
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Close every worker's engine, then end the workers. Leaving on an error or a
        cancellation (jobs may still run there) gives each :data:`CLOSE_TIMEOUT_S` to close:
        a job cut short is in its journal, which is what the journal is for."""
        ray = require_ray()
        with anyio.CancelScope(shield=True):
            for slot in self.slots:
                with (
                    anyio.move_on_after(None if not exc or exc[0] is None else CLOSE_TIMEOUT_S),
                    suppress(ray.exceptions.RayError),  # a dead worker has nothing to close
                ):
                    await slot.handle.close.remote()
                ray.kill(slot.handle)
        self.slots = []

    def describe(self) -> dict[str, Any]:
        """Workers (pid, host, node), and the jobs that lost a worker, for the report."""
        return {
            "workers": [s.info for s in self.slots],
            "nodes": len({s.info.get("node") for s in self.slots}),
            "concurrency_per_worker": self.concurrency,
            "journal_root": str(self.journal_root),
            "jobs_resumed_after_lost_worker": dict(self.lost),
        }

    @property
    def capacity(self) -> int:
        """Jobs in flight across the pool when every worker is busy."""
        return self.concurrency * len(self.slots)

    async def run(self, job_id: str, *, fresh: bool = False) -> dict[str, Any]:
        """Run ``job_id`` on the least busy worker; when that worker dies, resume it on another
        (up to :data:`MAX_ATTEMPTS` workers). Callers keep at most :attr:`capacity` in flight."""
        ray = require_ray()
        directory = str(job_directory(self.journal_root, job_id))
        tried: list[int] = []
        while True:
            slot = min(self.slots, key=lambda s: (s.index in tried, s.running, s.index))
            slot.running += 1
            try:
                job: dict[str, Any] = await slot.handle.run.remote(job_id, directory, fresh)
                return job
            except ray.exceptions.RayActorError as exc:
                tried.append(slot.index)
                self.lost[job_id] = len(tried)
                if len(tried) >= MAX_ATTEMPTS:
                    raise EngineDeadError(
                        f"Job {job_id!r} lost its Ray worker {len(tried)} times (last: "
                        f"{_reason(exc)}); its journal is in {directory}. Check the cluster's "
                        "nodes, then rerun the same command to resume."
                    ) from None
                fresh = False  # the next worker resumes from the journal
            finally:
                slot.running -= 1


def _reason(exc: BaseException) -> str:
    """One line for a Ray error: the exception a worker's constructor raised (the last line
    of Ray's traceback text), else Ray's own first line."""
    text = [line.strip() for line in re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).splitlines()]
    text = [line for line in text if line]
    if not text:
        return type(exc).__name__
    return (text[-1] if getattr(exc, "actor_init_failed", False) else text[0])[:300]


def read_attempts(directory: Path) -> list[dict[str, Any]]:
    """The attempts log of one job directory (one dict per worker that started it)."""
    path = directory / "attempts.jsonl"
    return read_jsonl(path)[0] if path.exists() else []
