"""Claims about harness.errors: one tree, context on every error, clean pickling."""

from __future__ import annotations

import copy
import pickle

import pytest

import harness
from harness import errors
from harness.errors import (
    ConfigError,
    ContextWindowExceeded,
    EngineDeadError,
    EngineError,
    EngineRequestError,
    HarnessError,
    Interrupted,
    JournalError,
    ManifestError,
    NodeFailed,
    ReplayDivergence,
    ToolsetError,
    UsageLimitExceeded,
)

ALL_ERRORS = [getattr(errors, name) for name in errors.__all__]

#: The tree drawn in the module docstring: class -> its direct parent.
DRAWN_TREE: dict[type[HarnessError], type[BaseException]] = {
    HarnessError: Exception,
    ConfigError: HarnessError,
    ManifestError: ConfigError,
    JournalError: ConfigError,
    ToolsetError: ConfigError,
    EngineError: HarnessError,
    EngineDeadError: EngineError,
    EngineRequestError: EngineError,
    ContextWindowExceeded: EngineRequestError,
    UsageLimitExceeded: HarnessError,
    Interrupted: HarnessError,
    NodeFailed: HarnessError,
    ReplayDivergence: HarnessError,
}


def test_every_exported_error_is_in_the_drawn_tree_and_nothing_else_is():
    assert set(ALL_ERRORS) == set(DRAWN_TREE)


@pytest.mark.parametrize("cls", list(DRAWN_TREE), ids=lambda c: c.__name__)
def test_each_error_has_the_parent_the_docstring_draws(cls):
    assert cls.__bases__ == (DRAWN_TREE[cls],)


@pytest.mark.parametrize("cls", list(DRAWN_TREE), ids=lambda c: c.__name__)
def test_each_error_appears_in_the_docstring_tree(cls):
    assert errors.__doc__ is not None
    assert cls.__name__ in errors.__doc__


@pytest.mark.parametrize("cls", ALL_ERRORS, ids=lambda c: c.__name__)
def test_every_error_pickles_with_its_message_and_context(cls):
    original = cls("Tool 'x' failed; fix it.", run_id="run-1", call_id="c7", tool="x", turn=3)
    restored = pickle.loads(pickle.dumps(original))
    assert type(restored) is cls
    assert restored.message == "Tool 'x' failed; fix it."
    assert (restored.run_id, restored.call_id, restored.tool, restored.turn) == (
        "run-1",
        "c7",
        "x",
        3,
    )
    assert str(restored) == str(original)
    assert restored.args == original.args


@pytest.mark.parametrize("cls", ALL_ERRORS, ids=lambda c: c.__name__)
def test_every_error_without_context_pickles_to_an_error_without_context(cls):
    restored = pickle.loads(pickle.dumps(cls("plain")))
    assert restored.context() == {}
    assert str(restored) == "plain"


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_errors_pickle_under_every_protocol(protocol):
    original = EngineDeadError("engine gone", run_id="r", turn=0)
    restored = pickle.loads(pickle.dumps(original, protocol=protocol))
    assert restored.context() == {"run_id": "r", "turn": 0}


def test_errors_survive_deepcopy_with_context():
    original = UsageLimitExceeded("out of turns", run_id="r", tool="t")
    assert copy.deepcopy(original).context() == {"run_id": "r", "tool": "t"}


def test_str_without_context_is_the_bare_message():
    assert str(HarnessError("Something happened.")) == "Something happened."


def test_str_includes_every_context_field_given():
    text = str(ToolsetError("Bad toolset.", run_id="r1", call_id="c2", tool="search", turn=4))
    assert text.startswith("Bad toolset.")
    for piece in ("run_id=r1", "call_id=c2", "tool=search", "turn=4"):
        assert piece in text


def test_turn_zero_is_context_not_absence():
    error = EngineRequestError("request failed", turn=0)
    assert error.context() == {"turn": 0}
    assert "turn=0" in str(error)


def test_context_leaves_out_fields_that_were_not_given():
    assert ManifestError("m", tool="t").context() == {"tool": "t"}


def test_catching_harness_error_catches_every_error():
    for cls in ALL_ERRORS:
        with pytest.raises(HarnessError):
            raise cls("boom")


def test_errors_are_re_exported_from_the_package():
    for cls in ALL_ERRORS:
        assert getattr(harness, cls.__name__) is cls
        assert cls.__name__ in harness.__all__
