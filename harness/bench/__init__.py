"""What ``harness bench`` (and ``harness run`` on the workload) runs: the workload, its jobs,
the bench runner, reports. A user's own tasks run through :mod:`harness.runs`, which this
package builds on (jobs, resume, the Ray pool) and which never imports it.

One module per concept:

- :mod:`~harness.bench.jobs` — one workload *job*: one task run once under one arm, policy and
  detector (a :class:`~harness.runs.jobs.JobSpec`), scored against its gold label;
- :mod:`~harness.bench.outcomes` — what a job's result means (solved, the model failed, the
  harness failed);
- :mod:`~harness.bench.workload` — the 48-task workspace workload and its families
  (``harness tasks`` lists it; private templates in ``_templates`` and ``_easy_templates``);
- :mod:`~harness.bench.bfcl` — BFCL's AST categories as tasks, with a scorer
  (``python -m harness.bench.bfcl``);
- :mod:`~harness.bench.runner` — ``harness bench``: the plan of jobs, resumable, in process or
  on Ray;
- :mod:`~harness.bench.segments` — the invocations of a resumable run;
- :mod:`~harness.bench.analysis`, :mod:`~harness.bench.report`,
  :mod:`~harness.bench.report_facts`, :mod:`~harness.bench.report_family` — from job records to
  the report (``harness bench --report-only DIR``).

The one-off measurements (soundness, crash/resume, proxy, speculation, fabric, scale, ...) are
not part of the package: they live in the repository's ``benchmarks/`` folder and run from a
checkout as ``python -m benchmarks.NAME``.
"""

from __future__ import annotations

__all__ = ()
