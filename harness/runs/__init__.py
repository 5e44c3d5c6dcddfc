"""The product's runner for a user's own tasks: ``harness run`` with a task of yours or a task
file.

:mod:`~harness.runs.task_file` reads a task file; :mod:`~harness.runs.batch` runs its tasks
under the chosen arms, as one batch that resumes; :mod:`~harness.runs.jobs` says what a job is
(:class:`~harness.runs.jobs.JobSpec`, its id, its JSON line and its journal);
:mod:`~harness.runs.resume` keeps a batch resumable (the results file, the plan, which jobs run
again); :mod:`~harness.runs.ray_pool` runs the jobs of a batch on a Ray cluster. The benchmark
(:mod:`harness.bench`) runs its workload with the same parts; nothing here imports it.
"""

from __future__ import annotations

__all__ = ()
