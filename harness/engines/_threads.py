"""Which CPUs the engine's model threads run on, chosen for the machine, and made to hold in a
forked worker.

vLLM's CPU worker runs the model on OpenMP threads. vLLM's own default
(``VLLM_CPU_OMP_THREADS_BIND=auto``) keeps one core for the processes that are not the model
(the front end, the engine core's scheduler, the tokenizer) and binds one model thread per
physical core on the others; on a 2-core machine that is one model thread on one core.
:func:`plan_threads` makes the same choice from the CPUs this process may use (one logical CPU
per physical core, on the first NUMA node that has any), says why, and lets a setting or the
environment override it.

vLLM applies its binding through environment variables that the OpenMP runtime reads when it
is *loaded* (``OMP_NUM_THREADS``, ``GOMP_CPU_AFFINITY``/``OMP_PLACES``). The harness forks
vLLM's engine core and worker from a process that has already loaded torch and its OpenMP
runtime (it starts in half the time of a spawn), so in the worker those variables come too
late: without :func:`bind_this_process` the forked worker ran the model on as many threads as
the machine has CPUs, unbound — on 2 cores, two threads meeting at a barrier after every
operation, each waiting whenever anything else ran on the other core (the decode collapse of
issue 43). :func:`bind_this_process`, called in the forked worker, sets the thread count and
the CPU affinity at run time instead.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ("ThreadPlan", "bind_this_process", "parse_cpus", "plan_threads")

_SYS_CPU = Path("/sys/devices/system/cpu")


@dataclass(frozen=True)
class ThreadPlan:
    """The CPUs the model threads are bound to (one thread each; empty: not bound), the CPUs
    left to the front end and engine core, where the choice came from and why."""

    cpus: tuple[int, ...]
    reserved: tuple[int, ...]
    source: str  # "default", "setting" or "environment"
    reason: str

    @property
    def bind(self) -> str:
        """The choice as ``VLLM_CPU_OMP_THREADS_BIND`` spells it."""
        return ",".join(str(cpu) for cpu in self.cpus) if self.cpus else "nobind"

    @property
    def threads(self) -> int | None:
        """Model threads (``None``: the OpenMP runtime's own choice, unbound)."""
        return len(self.cpus) or None


def parse_cpus(text: str) -> tuple[int, ...]:
    """``"0-2,5"`` → ``(0, 1, 2, 5)``; a ValueError names what is wrong."""
    cpus: list[int] = []
    for part in text.replace(" ", "").split(","):
        first, dash, last = part.partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise ValueError(f"{text!r} is not a CPU list like '0-3' or '0,2'")
        cpus.extend(range(int(first), int(last) + 1) if dash else [int(first)])
    return tuple(dict.fromkeys(cpus))


def _allowed() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return list(range(os.cpu_count() or 1))


def _read(path: Path) -> str | None:
    with contextlib.suppress(OSError):
        return path.read_text().strip()
    return None


def _topology(cpu: int, root: Path) -> tuple[int, int, int]:
    """(NUMA node, package, core) of a logical CPU; unknown parts count as 0 / the CPU."""
    base = root / f"cpu{cpu}"
    nodes = sorted(p.name for p in base.glob("node[0-9]*")) if base.is_dir() else []
    node = int(nodes[0][4:]) if nodes else 0
    package = _read(base / "topology" / "physical_package_id")
    core = _read(base / "topology" / "core_id")
    return (
        node,
        int(package) if package and package.lstrip("-").isdigit() else 0,
        int(core) if core and core.isdigit() else cpu,
    )


def _one_per_core(cpus: Iterable[int], root: Path) -> list[int]:
    """One logical CPU per physical core (the highest-numbered sibling, as vLLM picks), on
    the first NUMA node that has any of ``cpus``."""
    placed = {cpu: _topology(cpu, root) for cpu in cpus}
    if not placed:
        return []
    first_node = min(node for node, _, _ in placed.values())
    cores: dict[tuple[int, int], int] = {}
    for cpu, (node, package, core) in sorted(placed.items()):
        if node == first_node:
            cores[(package, core)] = cpu  # the last sibling wins
    return sorted(cores.values())


def plan_threads(
    threads_bind: str | None,
    environ: Mapping[str, str] | None = None,
    allowed: Iterable[int] | None = None,
    sys_cpu: Path = _SYS_CPU,
) -> ThreadPlan:
    """The model threads' CPUs: ``threads_bind`` (a CPU list, ``"auto"`` or ``"nobind"``) if
    given, else ``VLLM_CPU_OMP_THREADS_BIND`` from ``environ`` if set, else the default rule
    (``"auto"``). A bad list is a ValueError."""
    env = os.environ if environ is None else environ
    cpus = sorted(_allowed() if allowed is None else allowed)
    if threads_bind is not None:
        choice, source = threads_bind, "setting"
    elif env.get("VLLM_CPU_OMP_THREADS_BIND"):
        choice, source = env["VLLM_CPU_OMP_THREADS_BIND"], "environment"
    else:
        choice, source = "auto", "default"
    if choice == "nobind":
        return ThreadPlan((), (), source, "not bound: the OpenMP runtime picks the threads")
    if choice != "auto":
        chosen = parse_cpus(choice)
        outside = sorted(set(chosen) - set(cpus))
        if outside:
            raise ValueError(f"CPUs {outside} are not among this process's CPUs {cpus}")
        rest = tuple(cpu for cpu in cpus if cpu not in chosen)
        return ThreadPlan(chosen, rest, source, f"{len(chosen)} model thread(s) as asked")
    cores = _one_per_core(cpus, sys_cpu)
    if len(cores) <= 1:
        return ThreadPlan(
            tuple(cores),
            (),
            source,
            "one core: the model thread shares it with the front end",
        )
    model, reserved = tuple(cores[:-1]), (cores[-1],)
    reason = (
        f"{len(cores)} physical cores: one model thread on each but CPU {reserved[0]}, kept "
        "for the front end and the engine core (vLLM's own rule); a model thread that "
        "shares its core waits at every barrier"
    )
    return ThreadPlan(model, reserved, source, reason)


def bind_this_process(plan: ThreadPlan) -> None:
    """In the (forked) model worker: run the model on ``plan.cpus``, one thread each.

    The affinity is the process's, so the OpenMP threads the runtime starts later inherit it;
    the thread count goes through torch (OpenMP's ``omp_set_num_threads``), which the
    already-loaded runtime honours where it ignores the environment."""
    if not plan.cpus:
        return
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setaffinity(0, plan.cpus)
    import torch

    torch.set_num_threads(len(plan.cpus))
