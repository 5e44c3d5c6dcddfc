"""``--drafting`` and ``--draft-max-batch`` reach the engine of ``run``, ``serve`` and Ray
workers; a misuse is a one-line usage error (exit 2); the old spelling ``--speculate`` still
works for one release and says so on stderr."""

from __future__ import annotations

import argparse
from typing import Any

import anyio
import pytest

from harness._commands.cli import main
from harness.errors import ConfigError


def test_run_passes_the_proposer_and_its_load_switch_to_the_engine(
    opened_with: list[dict[str, Any]],
) -> None:
    task = ["run", "--task", "fan_out-00", "--arm", "S"]
    assert main([*task, "--drafting", "window", "--draft-max-batch", "4"]) == 0
    assert main([*task, "--drafting", "ngram"]) == 0
    assert main([*task, "--drafting", "none"]) == 0
    assert main([*task, "--draft-max-batch", "0"]) == 0
    assert opened_with[0] == {"drafting": "window", "draft_max_batch": 4}
    assert opened_with[1] == {"drafting": "ngram"}
    assert opened_with[2] == {}  # drafting off: the engine's own default (none)
    assert opened_with[3] == {"drafting": "window", "draft_max_batch": 0}


@pytest.mark.parametrize("command", ["run", "bench"])
def test_drafting_is_on_by_default_with_its_load_switch(
    command: str, opened_with: list[dict[str, Any]]
) -> None:
    from harness._commands._engine_args import (
        DEFAULT_DRAFT_MAX_BATCH,
        DEFAULT_DRAFTING,
        embedded_engine_overrides,
    )
    from harness._commands.cli import build_parser

    args = build_parser().parse_args([command])
    assert embedded_engine_overrides(args) == {
        "drafting": DEFAULT_DRAFTING,
        "draft_max_batch": DEFAULT_DRAFT_MAX_BATCH,
    }
    assert (DEFAULT_DRAFTING, DEFAULT_DRAFT_MAX_BATCH) == ("window", 8)
    assert main(["run", "--task", "fan_out-00", "--arm", "S"]) == 0
    assert opened_with == [{"drafting": "window", "draft_max_batch": 8}]


def test_the_load_switch_without_the_window_proposer_is_a_one_line_usage_error(
    opened_with: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", "--task", "fan_out-00", "--drafting", "ngram", "--draft-max-batch", "2"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--draft-max-batch is the window proposer's" in err
    assert err.count("\n") == 1
    assert opened_with == []  # refused before any engine started


@pytest.mark.parametrize("value", ["-1", "two"])
def test_a_load_switch_that_is_not_a_count_is_refused_by_the_parser(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", "--task", "fan_out-00", "--drafting", "window", "--draft-max-batch", value])
    assert exited.value.code == 2
    assert "argument --draft-max-batch" in capsys.readouterr().err


def test_serve_drafts_on_its_embedded_engine_only(opened_with: list[dict[str, Any]]) -> None:
    from harness._commands.serve import _engine

    async def open_once(args: argparse.Namespace) -> None:
        async with _engine(args, None):
            pass

    embedded = argparse.Namespace(
        upstream=None, drafting="window", draft_max_batch=3, model=None, kv_cache_gib=None
    )
    anyio.run(open_once, embedded)
    assert opened_with == [{"drafting": "window", "draft_max_batch": 3}]
    by_default = argparse.Namespace(
        upstream=None, drafting=None, draft_max_batch=None, model=None, kv_cache_gib=None
    )
    anyio.run(open_once, by_default)
    assert opened_with[1] == {"drafting": "window", "draft_max_batch": 8}
    # An upstream server decodes on its own: serve's default (no --drafting) is no conflict.
    from harness._commands.cli import build_parser

    served = build_parser().parse_args(["serve", "--upstream", "http://127.0.0.1:1/v1"])
    assert (served.drafting, served.draft_max_batch) == (None, None)
    upstream = argparse.Namespace(
        upstream=["http://127.0.0.1:1/v1"],
        drafting="none",
        draft_max_batch=3,
        model=None,
        kv_cache_gib=None,
    )
    with pytest.raises(
        ConfigError, match="--drafting and --draft-max-batch draft on the embedded engine"
    ):
        anyio.run(open_once, upstream)


def test_ray_workers_open_their_engines_with_the_proposer() -> None:
    from harness._commands._engine_args import EngineOptions

    options = EngineOptions.from_args(
        argparse.Namespace(engine="vllm", drafting="window", draft_max_batch=2)
    )
    assert (options.drafting, options.draft_max_batch) == ("window", 2)


def test_the_old_spelling_speculate_still_drafts_and_warns_on_stderr(
    opened_with: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--task", "fan_out-00", "--arm", "S", "--speculate", "ngram"]) == 0
    assert opened_with == [{"drafting": "ngram"}]
    assert "--speculate is deprecated, use --drafting" in capsys.readouterr().err


def test_the_old_settings_name_speculate_still_drafts_with_a_deprecation_warning() -> None:
    from harness.engines.vllm import VLLMSettings

    with pytest.warns(DeprecationWarning, match="drafting"):
        settings = VLLMSettings(speculate="window")
    assert settings.drafting == "window"
    with pytest.warns(DeprecationWarning, match="drafting"):
        assert VLLMSettings.from_kwargs(speculate="ngram").drafting == "ngram"
    assert VLLMSettings.from_kwargs(settings, seed=1).drafting == "window"
