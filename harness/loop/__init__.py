"""The ReAct loop runner: one driver, four arm strategies.

``S``   serial (:mod:`~harness.loop.serial`): one call per turn; block on its result; append
        it; generate again.
``F``   harness-flattened (:mod:`~harness.loop.flattened`): the same prompting and the same
        generation calls as S. Calls the certifier admits into a fan-out window are
        *withheld* (a constant marker stands in for each result), run concurrently (at window
        close, or from the moment they are emitted with ``flatten.eager``), and the whole
        window — every call and result, verbatim, in emitted order — enters the context at
        the absorb turn.
``P``   native parallel (:mod:`~harness.loop.parallel`): the model is asked to emit all
        independent calls of a step in one message; certified messages run concurrently,
        others in emitted order.
``P+V`` P plus the deterministic validator (:mod:`~harness.loop.validated`,
        :mod:`harness.certify.validator`); a rejected window is resampled, as one batch of candidates
        or one by one.

Policies: ``model`` lets the model choose its calls; ``gold`` forces the task's gold calls
through the engine's constrained decoding (every token still prefilled and decoded), so S and
F generate identical tokens and the dividend is measured at fixed accuracy.

Model mistakes (unknown tool, bad JSON, schema failures, tool errors, a reply cut at
``max_tokens``) are shown to the model as error results and bounded by ``max_model_errors``
consecutive mistakes, then :class:`~harness.errors.UsageLimitExceeded`. Every call id gets
exactly one result; cancelling the run cancels every tool still running.

Layout: :mod:`~harness.loop.config` (settings), :mod:`~harness.loop.driver` (:func:`run_loop`),
:mod:`~harness.loop.state` (:class:`~harness.loop.state.RunState`),
:mod:`harness.loop.arm_label` (:class:`~harness.loop.arm_label.ArmLabel`: ``S``, ``F``, ``F+eager``,
``F+spec``, ``P``, ``P+V`` as one typed value),
:mod:`~harness.loop.arm` (the arm protocol), one module per arm, and
:mod:`harness.certify.window` (the window every arm's certified calls live in).
"""

from __future__ import annotations

from harness.loop.arm_label import ARM_LABEL_NAMES, ARM_LABELS, ArmLabel
from harness.loop.config import (
    ARMS,
    Arm,
    FlattenSettings,
    LoopConfig,
    ParallelSettings,
    Policy,
    ResampleSettings,
)
from harness.loop.driver import LoopResult, run_loop

__all__ = (
    "ARMS",
    "ARM_LABELS",
    "ARM_LABEL_NAMES",
    "Arm",
    "ArmLabel",
    "FlattenSettings",
    "LoopConfig",
    "LoopResult",
    "ParallelSettings",
    "Policy",
    "ResampleSettings",
    "run_loop",
)
