"""The workspace toolset: a seeded store, true effect annotations, latency, the manifest."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from harness.certify import SchemaSoundDetector, check_d1
from harness.certify.conflicts import overlaps
from harness.errors import ManifestError
from harness.messages import ToolCall
from harness.tools.execute import execute_call
from harness.toolsets.workspace import (
    FIELDS,
    MANIFEST_PATH,
    STATUSES,
    TOOL_NAMES,
    Latency,
    WorkspaceState,
    fingerprint,
    load_workspace_manifest,
    make_toolset,
    new_state,
)


def call(name: str, call_id: str = "c", **arguments: Any) -> ToolCall:
    return ToolCall(call_id, name, json.dumps(arguments, sort_keys=True))


async def run_serially(state: WorkspaceState, calls: list[ToolCall]) -> list[str]:
    toolset = make_toolset(state)
    return [(await execute_call(toolset, c)).content for c in calls]


async def run_concurrently(state: WorkspaceState, calls: list[ToolCall]) -> list[str]:
    toolset = make_toolset(state)
    out: dict[int, str] = {}

    async def one(index: int, c: ToolCall) -> None:
        out[index] = (await execute_call(toolset, c)).content

    async with anyio.create_task_group() as tg:
        for index, c in enumerate(calls):
            tg.start_soon(one, index, c)
    return [out[i] for i in range(len(calls))]


# ---------------------------------------------------------------------------------- store


def test_the_same_seed_builds_the_same_store_byte_for_byte() -> None:
    a, b = new_state(5), new_state(5)
    assert json.dumps(a.snapshot()) == json.dumps(b.snapshot())
    assert fingerprint(a) == fingerprint(b)
    assert fingerprint(new_state(6)) != fingerprint(a)


def test_documents_are_typed_and_titles_are_unique() -> None:
    state = new_state(1)
    docs = list(state.snapshot().values())
    assert len(docs) == 24
    assert len({d["title"] for d in docs}) == 24
    for doc in docs:
        assert doc["status"] in STATUSES
        assert 1 <= doc["priority"] <= 5
        assert doc["tags"] == sorted(doc["tags"])
        assert set(doc) == {"key", *FIELDS}


def test_next_pointers_form_one_path_through_every_document() -> None:
    state = new_state(2)
    heads = set(state.keys()) - {d["next"] for d in state.snapshot().values()}
    assert len(heads) == 1
    assert len(state.chain(heads.pop(), 100)) == len(state)


def test_a_snapshot_round_trips_to_the_same_fingerprint() -> None:
    state = new_state(3)
    state.update(state.keys()[0], notes=("x", "y"))
    again = WorkspaceState.from_snapshot(state.snapshot())
    assert again.fingerprint() == state.fingerprint()


def test_a_copy_is_independent_of_the_original() -> None:
    state = new_state(4)
    copy = state.copy()
    copy.update(state.keys()[0], owner="zed")
    assert copy.fingerprint() != state.fingerprint()


# ---------------------------------------------------------------------------------- tools


def test_the_toolset_has_the_documented_tools_and_effects() -> None:
    toolset = make_toolset(new_state(0))
    assert tuple(toolset) == TOOL_NAMES
    reads = {"list_docs", "read_doc", "get_field"}
    for name, tool in toolset.items():
        assert tool.effect.annotated
        assert tool.effect.read_only == (name in reads)
        assert not tool.effect.open_world
    assert not toolset["append_note"].effect.idempotent
    assert all(toolset[n].effect.idempotent for n in TOOL_NAMES if n != "append_note")
    args = {"key": "d1", "field": "owner"}
    assert toolset["get_field"].effect.reads(args) == frozenset({"doc:d1/owner"})
    reads = toolset["read_doc"].effect.reads(args)
    assert reads == frozenset({"doc:d1"})  # hierarchical: every field lies under it
    assert all(any(overlaps(r, f"doc:d1/{f}") for r in reads) for f in FIELDS)
    assert toolset["set_owner"].effect.targets(args) == frozenset({"doc:d1/owner"})
    assert toolset["append_note"].effect.targets(args) == frozenset({"doc:d1/notes"})
    assert toolset["list_docs"].effect.reads({}) == frozenset({"catalog"})


@pytest.mark.anyio
async def test_reads_return_plain_data_rendered_as_sorted_json() -> None:
    state = new_state(0)
    key = state.keys()[0]
    toolset = make_toolset(state)
    doc = await execute_call(toolset, call("read_doc", key=key))
    assert not doc.is_error
    assert json.loads(doc.content) == state.get(key).to_dict()
    assert doc.content == json.dumps(
        state.get(key).to_dict(), sort_keys=True, separators=(", ", ": ")
    )
    owner = await execute_call(toolset, call("get_field", key=key, field="owner"))
    assert json.loads(owner.content) == {"key": key, "owner": state.get(key).owner}
    listing = await execute_call(toolset, call("list_docs"))
    assert json.loads(listing.content) == state.keys()


@pytest.mark.anyio
async def test_writes_change_exactly_their_field() -> None:
    state = new_state(0)
    key = state.keys()[3]
    before = state.snapshot()
    await run_serially(
        state,
        [
            call("set_status", key=key, status="archived"),
            call("set_owner", key=key, owner="zoe"),
            call("set_priority", key=key, priority=2),
            call("add_tag", key=key, tag="urgent"),
            call("add_tag", key=key, tag="urgent"),
            call("append_note", key=key, text="one"),
            call("append_note", key=key, text="two"),
        ],
    )
    after = state.snapshot()
    assert {k: v for k, v in after.items() if k != key} == {
        k: v for k, v in before.items() if k != key
    }
    doc = after[key]
    assert (doc["status"], doc["owner"], doc["priority"]) == ("archived", "zoe", 2)
    assert doc["tags"] == sorted({*before[key]["tags"], "urgent"})
    assert doc["notes"] == ["one", "two"]


@pytest.mark.anyio
async def test_a_missing_key_or_a_bad_value_is_an_error_result_with_a_hint() -> None:
    toolset = make_toolset(new_state(0))
    missing = await execute_call(toolset, call("read_doc", key="d000"))
    assert missing.is_error
    assert "list_docs" in missing.content
    bad_status = await execute_call(toolset, call("set_status", key="d000", status="done"))
    assert bad_status.is_error
    assert bad_status.error_kind == "bad_arguments"
    state = new_state(0)
    toolset = make_toolset(state)
    too_high = await execute_call(toolset, call("set_priority", key=state.keys()[0], priority=9))
    assert too_high.is_error
    assert state.fingerprint() == new_state(0).fingerprint()


# ------------------------------------------------------------------ the effects are true


def _certified(calls: list[ToolCall]) -> bool:
    toolset = make_toolset(new_state(0))
    return not check_d1(toolset, calls)


def _windows(state: WorkspaceState) -> list[list[ToolCall]]:
    k = state.keys()
    return [
        [call("read_doc", f"r{i}", key=key) for i, key in enumerate(k[:5])],
        [call("set_status", f"s{i}", key=key, status="review") for i, key in enumerate(k[:4])],
        [call("append_note", f"n{i}", key=key, text="seen") for i, key in enumerate(k[:4])],
        [
            call("get_field", "g", key=k[0], field="owner"),
            call("set_status", "s", key=k[0], status="approved"),
            call("add_tag", "t", key=k[0], tag="x"),
            call("append_note", "n", key=k[1], text="y"),
            call("read_doc", "r", key=k[2]),
        ],
    ]


@pytest.mark.anyio
async def test_every_certified_window_gives_the_same_results_and_store_in_any_order() -> None:
    for window in _windows(new_state(0)):
        assert _certified(window)
        serial_state = new_state(0)
        serial = await run_serially(serial_state, window)
        concurrent_state = new_state(0)
        assert await run_concurrently(concurrent_state, window) == serial
        assert concurrent_state.fingerprint() == serial_state.fingerprint()
        for order in itertools.islice(itertools.permutations(range(len(window))), 24):
            state = new_state(0)
            results = await run_serially(state, [window[i] for i in order])
            assert [results[order.index(i)] for i in range(len(window))] == serial
            assert state.fingerprint() == serial_state.fingerprint()


@pytest.mark.anyio
async def test_windows_that_do_not_certify_really_depend_on_order() -> None:
    key = new_state(0).keys()[0]
    conflicts = [
        [call("append_note", "a", key=key, text="a"), call("append_note", "b", key=key, text="b")],
        [call("set_owner", "a", key=key, owner="x"), call("set_owner", "b", key=key, owner="y")],
        [
            call("get_field", "a", key=key, field="owner"),
            call("set_owner", "b", key=key, owner="x"),
        ],
        [call("read_doc", "a", key=key), call("add_tag", "b", key=key, tag="new")],
    ]
    for pair in conflicts:
        assert not _certified(pair)
        one, two = new_state(0), new_state(0)
        forward = await run_serially(one, pair)
        backward = await run_serially(two, pair[::-1])
        differs = one.fingerprint() != two.fingerprint() or forward != backward[::-1]
        assert differs, pair


# -------------------------------------------------------------------------------- latency


def test_a_fixed_latency_is_the_same_for_every_call() -> None:
    latency = Latency.of(0.5)
    assert latency.draw("read_doc", {"key": "a"}) == 0.5
    assert latency.draw("set_status", {"key": "b", "status": "review"}) == 0.5
    assert Latency.of(None).draw("read_doc", {}) == 0.0


def test_a_drawn_latency_depends_only_on_the_seed_and_the_call() -> None:
    latency = Latency(mean_s=0.5, sigma_s=0.15, seed=3)
    calls = [("read_doc", {"key": f"d{i}"}) for i in range(200)]
    first = [latency.draw(n, a) for n, a in calls]
    second = [latency.draw(n, a) for n, a in reversed(calls)][::-1]
    assert first == second
    assert first != [Latency(0.5, 0.15, seed=4).draw(n, a) for n, a in calls]
    assert len(set(first)) == len(first)
    mean = sum(first) / len(first)
    spread = (sum((x - mean) ** 2 for x in first) / len(first)) ** 0.5
    assert abs(mean - 0.5) < 0.05
    assert 0.10 < spread < 0.20
    assert min(first) >= 0.0


def test_a_latency_must_be_a_finite_non_negative_number() -> None:
    with pytest.raises(ValueError, match="sigma_s"):
        Latency(mean_s=0.5, sigma_s=-1.0)
    with pytest.raises(ValueError, match="mean_s"):
        Latency(mean_s=float("nan"))


@pytest.mark.anyio
async def test_every_tool_sleeps_its_drawn_latency_in_anyio(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr("harness.toolsets.workspace.tools.anyio.sleep", fake_sleep)
    latency = Latency(mean_s=0.4, sigma_s=0.1, seed=1)
    state = new_state(0)
    toolset = make_toolset(state, latency=latency)
    key = state.keys()[0]
    await execute_call(toolset, call("read_doc", key=key))
    await execute_call(toolset, call("set_owner", key=key, owner="zoe"))
    assert slept == [
        latency.draw("read_doc", {"key": key}),
        latency.draw("set_owner", {"key": key, "owner": "zoe"}),
    ]


# ------------------------------------------------------------------------------- manifest


def test_the_workspace_manifest_loads_and_names_only_real_tools_and_arguments() -> None:
    manifest = load_workspace_manifest()
    assert MANIFEST_PATH.name == "workspace.toml"
    assert set(manifest.skills) >= {"survey", "follow", "triage", "handover"}
    used = {t for s in manifest.skills.values() for p in s.phases for t in p.tools}
    assert used <= set(TOOL_NAMES)


def test_chain_phases_carry_a_result_placeholder_into_themselves() -> None:
    manifest = load_workspace_manifest()
    follow = manifest.skill("follow").phase("follow")
    assert not follow.is_fan_out
    assert follow.in_window_placeholders("read_doc") == ["key"]
    survey = manifest.skill("survey").phase("read")
    assert survey.is_fan_out
    assert survey.slot_count({"keys": ["a", "b", "c"]}) == 3


@pytest.mark.anyio
async def test_a_fan_out_skill_certifies_its_window_and_a_chain_skill_none() -> None:
    manifest = load_workspace_manifest()
    state = new_state(0)
    toolset = make_toolset(state)
    keys = state.keys()[:3]
    reads = [call("read_doc", f"r{i}", key=k) for i, k in enumerate(keys)]
    detector = SchemaSoundDetector()
    survey = manifest.skill("survey")
    cert = detector.certify(toolset, reads, survey.phase("read"), {"keys": keys})
    assert getattr(cert, "n", 0) == 3
    chain = manifest.skill("follow")
    rejected = detector.certify(toolset, reads, chain.phase("follow"), {})
    assert {"D2", "D3"} <= set(getattr(rejected, "conditions", set()))


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_malformed_manifest_names_the_file_the_phase_and_the_field(tmp_path: Path) -> None:
    good = MANIFEST_PATH.read_text(encoding="utf-8")
    bad_kind = _write(tmp_path, good.replace('kind = "chain"', 'kind = "serial"', 1))
    with pytest.raises(ManifestError, match=r"bad.toml.*'follow'.*'kind'.*'fan_out' or 'chain'"):
        load_workspace_manifest(bad_kind)
    bad_arg = _write(
        tmp_path, good.replace('"read_doc.key" = "input:keys"', '"read_doc.kee" = "input:keys"', 1)
    )
    with pytest.raises(
        ManifestError, match=r"'survey'.*'args.read_doc.kee'.*arguments are \['key'\]"
    ):
        load_workspace_manifest(bad_arg)
    bad_tool = _write(
        tmp_path, good.replace('tools = ["read_doc"]', 'tools = ["read_doc", "read_docs"]', 1)
    )
    with pytest.raises(ManifestError, match=r"unknown tool\(s\) \['read_docs'\]"):
        load_workspace_manifest(bad_tool)
    with pytest.raises(ManifestError, match="not valid TOML"):
        load_workspace_manifest(_write(tmp_path, "[skills.survey\n"))
    with pytest.raises(ManifestError, match="pass the manifest's path"):
        load_workspace_manifest(tmp_path / "missing.toml")
