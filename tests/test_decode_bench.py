"""The decode benchmark's own logic: variant specs, the pairing of a short and a long reply,
and the report's medians and ratios (nothing here starts an engine)."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.decode_bench import parse_variant, report, request, summarise


def test_a_variant_spec_splits_environment_variables_from_engine_settings() -> None:
    variant = parse_variant("harness:threads_bind=0-1,VLLM_WORKER_MULTIPROC_METHOD=spawn")
    assert variant.kind == "harness"
    assert variant.settings == {"threads_bind": "0-1"}
    assert variant.environment == {"VLLM_WORKER_MULTIPROC_METHOD": "spawn"}
    assert parse_variant("raw").environment == {}
    with pytest.raises(SystemExit, match="raw or harness"):
        parse_variant("llama")
    with pytest.raises(SystemExit, match="KEY=VALUE"):
        parse_variant("harness:fast")


def test_both_sides_get_the_same_request_and_the_forced_reply_grows_with_the_long_one() -> None:
    short, long = request("forced", "short", "t1", 128), request("forced", "long", "t1", 128)
    assert short["forced"]["name"] == long["forced"]["name"] == "write_doc"
    assert len(long["forced"]["arguments"]) > 10 * len(short["forced"]["arguments"])
    assert request("free", "long", "t1", 128)["max_tokens"] == 129
    assert request("free", "short", "t1", 128)["max_tokens"] == 1
    assert request("free", "long", "t1", 128) == request("free", "long", "t1", 128)


def _row(phase: str, text: str, variant: str, rate: float) -> dict[str, Any]:
    return {"phase": phase, "text": text, "variant": variant, "rate": rate,
            "engine_rate": rate, "loadavg": 2.0}  # fmt: skip


def test_the_summary_takes_medians_and_the_ratio_to_the_first_variant_in_the_same_phase() -> None:
    rows = [{"phase": "start", "variant": "raw", "ready_s": 30.0},
            {"phase": "start", "variant": "harness", "ready_s": 12.0}]  # fmt: skip
    rows += [_row("quiet", "free", "raw", r) for r in (20.0, 30.0, 25.0)]
    rows += [_row("quiet", "free", "harness", r) for r in (24.0, 1.0, 50.0)]
    rows += [_row("loaded", "free", "raw", 20.0), _row("loaded", "free", "harness", 10.0)]
    table = {(r["phase"], r["variant"]): r for r in summarise(rows, "raw")}
    assert table[("quiet", "raw")]["rate"] == 25.0
    assert table[("quiet", "harness")]["ratio"] == pytest.approx(24.0 / 25.0)
    assert table[("loaded", "harness")]["ratio"] == pytest.approx(0.5)
    text = report(rows, "python -m benchmarks.decode_bench")
    assert "| quiet | free | `harness` | 24.0 | 24.0 | 0.96 | 3 |" in text
    assert "- `harness`: 12.0 s" in text
