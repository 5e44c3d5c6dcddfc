"""``--ray`` and its options, shared by the commands that run their jobs on Ray: ``harness
bench`` and ``harness run --tasks FILE``."""

from __future__ import annotations

import argparse
import functools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from harness._commands._engine_args import EngineOptions, open_engine
from harness.errors import ConfigError

__all__ = ("add_ray_arguments", "check_ray_arguments", "open_ray_pool")


def add_ray_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("ray (optional extra: pip install 'agent-harness[ray]')")
    group.add_argument(
        "--ray",
        metavar="ADDRESS",
        default=None,
        help="run the jobs on a Ray cluster: its address (host:port or ray://host:port), or "
        "auto to start a local one; each worker opens its own engine from the engine options, "
        "this process writes the results",
    )
    group.add_argument(
        "--ray-workers",
        type=int,
        default=None,
        metavar="N",
        help="with --ray: job workers (Ray actors, one engine each, --concurrency jobs at a "
        "time); default one per alive node",
    )
    group.add_argument(
        "--ray-cpus",
        type=float,
        default=1.0,
        metavar="N",
        help="with --ray: Ray CPUs each worker reserves (default 1)",
    )
    group.add_argument(
        "--ray-journal",
        type=Path,
        default=None,
        metavar="DIR",
        help="with --ray: where each job's journal and store live, a directory every node "
        "sees (default OUT/ray-jobs); a job whose worker died resumes from it elsewhere",
    )


def check_ray_arguments(args: argparse.Namespace, *, batch_option: str | None = None) -> None:
    """Options that only mean something with ``--ray`` are refused without it; with
    ``batch_option`` (``harness run``), ``--ray`` needs that option (``--tasks FILE``)."""
    if args.ray is not None and batch_option and getattr(args, batch_option, None) is None:
        raise ConfigError(
            f"--ray runs a batch of tasks on a cluster: use it with --{batch_option} FILE (the "
            "seeded workload runs on Ray with `harness bench --ray`)."
        )
    if args.ray is None:
        given = [
            name
            for name, default in (("ray_workers", None), ("ray_cpus", 1.0), ("ray_journal", None))
            if getattr(args, name) != default
        ]
        if given:
            options = ", ".join("--" + g.replace("_", "-") for g in given)
            raise ConfigError(f"{options} only apply with --ray ADDRESS|auto.")
    elif args.ray_workers is not None and args.ray_workers < 1:
        raise ConfigError("--ray-workers must be at least 1.")
    elif args.ray_cpus <= 0:
        raise ConfigError("--ray-cpus must be more than 0.")


@asynccontextmanager
async def open_ray_pool(
    args: argparse.Namespace, runner: Any, out: Path, concurrency: int
) -> AsyncIterator[Any]:
    """Connect to (or start) the cluster, start the workers with ``args``' engine options,
    yield the :class:`~harness.runs.ray_pool.RayPool`; stop them (and a cluster this
    started) on exit."""
    from harness.runs.ray_pool import RayPool, connect, require_ray

    ray = require_ray()
    started = connect(args.ray)
    opener: Callable[[], Any] = functools.partial(open_engine, EngineOptions.from_args(args))
    try:
        async with RayPool(
            open_engine=opener,
            runner=runner,
            journal_root=args.ray_journal or out / "ray-jobs",
            concurrency=concurrency,
            workers=args.ray_workers,
            cpus=args.ray_cpus,
        ) as pool:
            yield pool
    finally:
        if started:
            ray.shutdown()
