"""Claims about `harness run` on your own task and your own batch, on the scripted engine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness import ConfigError
from harness._commands.cli import main
from harness.loop.task import GoldCall
from harness.runs.task_file import failures, load_task_file, parse_inputs, task_from_dict
from harness.tools.ref import load_toolset
from tests import user_toolset
from tests.user_toolset import MANIFEST_TOML

KEYS = ["a", "b", "c"]
GOLD = [
    [{"name": "read_doc", "arguments": {"key": k}} for k in KEYS],
    {"name": "write_doc", "arguments": {"key": "summary", "body": "a + b + c"}},
]


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    path = tmp_path / "skills.toml"
    path.write_text(MANIFEST_TOML)
    return path


def write_tasks(path: Path, count: int = 3) -> Path:
    lines = [
        json.dumps(
            {
                "id": f"t{i}",
                "prompt": "Read a, b, c and write a summary.",
                "skill": "report",
                "inputs": {"keys": KEYS},
                "gold_calls": GOLD,
                "gold_answer": "written",
            }
        )
        for i in range(count)
    ]
    path.write_text("# my tasks\n" + "\n".join(lines) + "\n")
    return path


def one_task(manifest: Path, *extra: str) -> list[str]:
    return [
        "run", "--toolset", "tests.user_toolset:make_toolset", "--manifest", str(manifest),
        "--skill", "report", "--prompt", "Read a, b, c.", "--inputs", json.dumps({"keys": KEYS}),
        "--engine", "scripted", *extra,
    ]  # fmt: skip


def test_your_own_task_runs_under_S_and_F_by_default_and_F_certifies_its_window(
    manifest: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = write_tasks(manifest.parent / "one.jsonl", 1)
    argv = [
        "run", "--toolset", "tests.user_toolset:make_toolset", "--manifest", str(manifest),
        "--tasks", str(tasks), "--out", str(manifest.parent / "out"), "--engine", "scripted",
        "--policy", "gold", "--json",
    ]  # fmt: skip
    assert main(argv) == 0
    jobs = {j["label"]: j for j in json.loads(capsys.readouterr().out)}
    assert set(jobs) == {"S", "F"}
    assert [len(w["call_ids"]) for w in jobs["F"]["windows"]] == [3]
    assert jobs["S"]["windows"] == []
    assert jobs["S"]["success"]
    assert jobs["F"]["success"]
    assert jobs["S"]["messages"] == jobs["F"]["messages"]  # what the model saw, message for message
    assert jobs["F"]["messages"][-1] == {"role": "assistant", "content": "written"}


def test_one_task_from_the_prompt_needs_a_real_engine_under_the_model_policy(
    manifest: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The scripted engine replays gold calls only, so --prompt (no gold calls, the model
    # policy) is refused on it; docs/your-tasks.md shows the run on the real engine.
    assert main(one_task(manifest)) == 2
    assert "--engine scripted only replays gold calls" in capsys.readouterr().err


def test_a_toolset_in_a_file_path_loads(tmp_path: Path) -> None:
    source = tmp_path / "mytools.py"
    source.write_text(
        "from harness import Toolset, tool\n\n"
        "@tool(read_only=True)\nasync def ping() -> str:\n    '''Ping.'''\n    return 'pong'\n\n"
        "toolset = Toolset([ping])\n"
    )
    factory = load_toolset(f"{source}:toolset")
    assert list(factory()) == ["ping"]
    assert factory() is factory()  # an instance is shared; a factory makes fresh ones


def test_a_factory_gives_each_run_a_fresh_toolset() -> None:
    factory = load_toolset("tests.user_toolset:make_toolset")
    assert factory() is not factory()


@pytest.mark.parametrize(
    ("ref", "says"),
    [
        ("tests.user_toolset", "is not MODULE:ATTR"),
        ("no_such_module_xyz:toolset", "module 'no_such_module_xyz' not found"),
        ("tests.user_toolset:nope", "has no attribute 'nope'"),
        ("tests.user_toolset:not_a_toolset", "is a int, not a Toolset"),
        ("tests.user_toolset:returns_a_string", "returned a str, not a harness.Toolset"),
        ("tests.user_toolset:needs_an_argument", "calling the factory raised TypeError"),
        ("missing/file.py:toolset", "no file 'missing/file.py'"),
    ],
)
def test_every_bad_toolset_reference_is_a_clear_error(ref: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says.replace("(", r"\(")):
        load_toolset(ref)


def test_a_module_that_fails_to_import_is_a_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(ConfigError, match="importing it raised RuntimeError: boom"):
        load_toolset(f"{broken}:toolset")


def test_inputs_are_a_json_object_or_a_file_holding_one(tmp_path: Path) -> None:
    assert parse_inputs('{"keys": ["a"]}') == {"keys": ["a"]}
    path = tmp_path / "in.json"
    path.write_text('{"n": 2}')
    assert parse_inputs(f"@{path}") == {"n": 2}
    with pytest.raises(ConfigError, match="not valid JSON"):
        parse_inputs("{keys: 1}")
    with pytest.raises(ConfigError, match="must be a JSON object"):
        parse_inputs("[1, 2]")
    with pytest.raises(ConfigError, match="Cannot read --inputs file"):
        parse_inputs(f"@{tmp_path / 'missing.json'}")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--toolset", "tests.user_toolset:nope", "--prompt", "x"], "has no attribute 'nope'"),
        (["--toolset", "nomod_zz:t", "--prompt", "x"], "module 'nomod_zz' not found"),
        (["--toolset", "tests.user_toolset:toolset"], "needs --prompt TEXT"),
        (["--prompt", "x"], "needs --toolset MODULE:ATTR"),
        (["--task", "fan_out-00", "--prompt", "x"], "Pass one or the other"),
        (["--toolset", "tests.user_toolset:toolset", "--prompt", "x", "--latency", "1"], "--latency apply to the seeded workload"),
        (["--toolset", "tests.user_toolset:toolset", "--prompt", "x", "--inputs", "{bad"], "--inputs is not valid JSON"),
        (["--toolset", "tests.user_toolset:toolset", "--prompt", "x", "--skill", "report"], "pass --manifest FILE too"),
        (["--toolset", "tests.user_toolset:toolset", "--prompt", "x", "--manifest", "MANIFEST", "--skill", "nope"], "no skill named 'nope'; skills here: report, other"),
        (["--toolset", "tests.user_toolset:toolset", "--prompt", "x", "--manifest", "MANIFEST"], "choose one with --skill NAME (report, other)"),
        (["--toolset", "tests.user_toolset:toolset", "--prompt", "x", "--manifest", "missing.toml"], "does not exist"),
        (["--toolset", "tests.user_toolset:toolset", "--prompt", "x", "--out", "d"], "--out is for a batch"),
        (["--toolset", "tests.user_toolset:toolset", "--prompt", "x", "--policy", "gold"], "have none"),
        (["--toolset", "tests.user_toolset:toolset", "--tasks", "TASKS", "--prompt", "x"], "drop --prompt"),
        (["--toolset", "tests.user_toolset:toolset", "--tasks", "missing.jsonl"], "does not exist"),
        (["--toolset", "tests.user_toolset:toolset", "--prompt", "x", "--seed", "1"], "--seed apply to the seeded workload"),
    ],
)  # fmt: skip
def test_every_bad_option_of_your_own_task_exits_2_with_one_line(
    argv: list[str], says: str, manifest: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = write_tasks(manifest.parent / "t.jsonl")
    argv = [{"MANIFEST": str(manifest), "TASKS": str(tasks)}.get(a, a) for a in argv]
    assert main(["run", *argv, "--engine", "scripted"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert "Traceback" not in err
    assert says in err


@pytest.mark.parametrize(
    ("content", "suffix", "says"),
    [
        ('{"id": "a", "prompt": "x"}\n{"id": "a", "prompt": "y"}\n', ".jsonl", "appears twice"),
        ('{"id": "a"\n', ".jsonl", "line 1: not valid JSON"),
        ('{"id": "a", "prompt": "x", "colour": 1}\n', ".jsonl", "unknown field(s) ['colour']"),
        ('{"prompt": "x"}\n', ".jsonl", "field 'id' is required"),
        ('{"id": "a", "prompt": "x", "inputs": [1]}\n', ".jsonl", "field 'inputs' must be an object"),
        ('{"id": "a", "prompt": "x", "max_turns": 0}\n', ".jsonl", "'max_turns' must be a whole number"),
        ('{"id": "a", "prompt": "x", "gold_calls": [{"arguments": {}}]}\n', ".jsonl", "gold_calls[0]: each gold call"),
        ('[1, 2]\n', ".jsonl", "a task is an object"),
        ("\n# nothing\n", ".jsonl", "holds no tasks"),
        ("[[tasks]]\nid = 'a'\n", ".toml", "field 'prompt' is required"),
        ("tasks = 3\n", ".toml", "holds only [[tasks]] tables"),
        ("[[tasks\n", ".toml", "not valid TOML"),
        ("id,prompt\n", ".csv", "name it .jsonl"),
        ('{"id": "a"}', ".json", "a JSON array of tasks"),
        ('[{"id": "a"', ".json", "not valid JSON"),
        ('[{"id": "a"}]', ".json", "task #1: field 'prompt' is required"),
    ],
)  # fmt: skip
def test_every_bad_task_file_is_a_config_error_naming_the_place(
    content: str, suffix: str, says: str, tmp_path: Path
) -> None:
    path = tmp_path / f"tasks{suffix}"
    path.write_text(content)
    with pytest.raises(ConfigError) as caught:
        load_task_file(path)
    assert says in str(caught.value)


def test_a_toml_task_file_reads_like_a_jsonl_one(tmp_path: Path) -> None:
    path = tmp_path / "tasks.toml"
    path.write_text(
        '[[tasks]]\nid = "t0"\nprompt = "Read."\nskill = "report"\ninputs = { keys = ["a"] }\n'
        'gold_answer = "done"\n[[tasks.gold_calls]]\nname = "read_doc"\narguments = { key = "a" }\n'
    )
    (task,) = load_task_file(path)
    assert task.inputs == {"keys": ["a"]}
    assert [c.name for c in task.gold_calls] == ["read_doc"]
    assert task.gold_answer == "done"


def batch(manifest: Path, tasks: Path, out: Path, *extra: str) -> list[str]:
    return [
        "run", "--toolset", "tests.user_toolset:make_toolset", "--manifest", str(manifest),
        "--tasks", str(tasks), "--out", str(out), "--engine", "scripted", "--policy", "gold",
        *extra,
    ]  # fmt: skip


def results(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_a_batch_writes_results_and_a_rerun_resumes_without_running_finished_jobs(
    manifest: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks, out = write_tasks(manifest.parent / "tasks.jsonl"), manifest.parent / "out"
    assert main(batch(manifest, tasks, out, "--concurrency", "2")) == 0
    first = results(out)
    assert sorted(j["job_id"] for j in first) == sorted(
        f"t{i}|{arm}|gold" for i in range(3) for arm in ("S", "F")
    )
    assert all(j["success"] for j in first)
    assert "6 run now, 0 kept from before" in capsys.readouterr().out
    before = len(user_toolset.STORES)
    assert main(batch(manifest, tasks, out)) == 0
    assert "0 run now, 6 kept from before" in capsys.readouterr().out
    assert len(results(out)) == 6
    assert len(user_toolset.STORES) == before + 2  # only the up-front checks built toolsets


def test_a_batch_refuses_a_directory_holding_another_plans_results(
    manifest: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks, out = write_tasks(manifest.parent / "tasks.jsonl"), manifest.parent / "out"
    assert main(batch(manifest, tasks, out, "--arm", "S")) == 0
    capsys.readouterr()
    write_tasks(tasks, 2)  # the task file changed
    assert main(batch(manifest, tasks, out, "--arm", "S")) == 2
    assert "holds results of another plan" in capsys.readouterr().err


def test_a_run_is_scored_against_its_tasks_gold_label() -> None:
    (task,) = [
        task_from_dict(
            {"id": "t", "prompt": "x", "gold_calls": GOLD, "gold_answer": "Written"}, "here"
        )
    ]
    made = [
        GoldCall(g["name"], g["arguments"]).to_tool_call(f"c{i}") for i, g in enumerate(GOLD[0])
    ]
    assert failures(task, made, "all WRITTEN") == [
        'gold call write_doc({"body": "a + b + c", "key": "summary"}) not made'
    ]
    assert failures(task, made, "nothing")[-1] == "the answer does not contain 'Written'"
    unscored = task_from_dict({"id": "u", "prompt": "x"}, "here")
    assert failures(unscored, [], None) == []


def test_a_task_naming_an_unknown_skill_is_refused_naming_the_skills(
    manifest: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = manifest.parent / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "a", "prompt": "x", "skill": "nope"}) + "\n")
    assert main(batch(manifest, tasks, manifest.parent / "out")) == 2
    assert "no skill named 'nope'; skills here: report, other" in capsys.readouterr().err


def scripted_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    """A model that reads a, b, c one per turn, writes the summary, then answers."""
    done = sum(1 for m in messages if m["role"] == "tool")
    if done < len(KEYS):
        return {"name": "read_doc", "arguments": {"key": KEYS[done]}}
    if done == len(KEYS):
        return {"name": "write_doc", "arguments": {"key": "summary", "body": "a + b + c"}}
    return "Summary written."


def test_one_task_from_the_prompt_runs_S_and_F_with_a_window_in_F(
    manifest: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextlib import asynccontextmanager

    from harness._commands import run_user
    from harness.testing import ScriptedEngine

    @asynccontextmanager
    async def engine(args: Any) -> Any:  # the model policy, played by a script
        async with ScriptedEngine(script=scripted_model) as scripted:
            yield scripted

    monkeypatch.setattr(run_user, "open_engine", engine)
    argv = [a for a in one_task(manifest) if a not in ("--engine", "scripted")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    rows = {
        r.split()[0]: r.split()
        for r in out.splitlines()
        if r.strip()[:2] in ("S ", "F ") and "answer:" not in r
    }
    assert rows["S"][3] == "-"
    assert rows["F"][3] == "3"  # one certified window of the three reads
    assert rows["S"][-1] == rows["F"][-1] == "-"  # finished, and no gold label to check
    assert "ok -: the run finished; the task has no gold label" in out
    assert "F answer: Summary written." in out


def test_the_manifest_guided_levers_narrow_your_own_tasks_prompt_and_grammar(
    manifest: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--skill-tools offers only the skill's tools (not append_log), --open-slots makes the
    input-sourced key an enum of the task's keys and, turn by turn, of the keys not yet read;
    the same narrowing in S and F; a batch records the levers in its plan."""
    from contextlib import asynccontextmanager

    from harness._commands import run_user
    from harness.testing import ScriptedEngine

    engines: list[ScriptedEngine] = []

    @asynccontextmanager
    async def engine(args: Any) -> Any:  # the model policy, played by a script
        async with ScriptedEngine(script=scripted_model) as scripted:
            engines.append(scripted)
            yield scripted

    monkeypatch.setattr(run_user, "open_engine", engine)
    argv = [a for a in one_task(manifest) if a not in ("--engine", "scripted")]
    assert main([*argv, "--skill-tools", "--open-slots"]) == 0
    assert "F answer: Summary written." in capsys.readouterr().out
    requests = engines[-1].requests
    names = {s["function"]["name"] for r in requests for s in r.tools}
    assert names == {"read_doc", "write_doc"}  # the skill's tools only
    read = next(s for s in requests[0].tools if s["function"]["name"] == "read_doc")
    assert read["function"]["parameters"]["properties"]["key"]["enum"] == KEYS
    second = requests[1].settings.grammar_tools  # after reading a: only b and c are open
    assert second is not None
    open_read = next(s for s in second if s["function"]["name"] == "read_doc")
    assert open_read["function"]["parameters"]["properties"]["key"]["enum"] == KEYS[1:]
    assert main(argv) == 0  # without the levers: every tool, no enum
    plain = engines[-1].requests
    assert {s["function"]["name"] for s in plain[0].tools} == {
        "read_doc",
        "write_doc",
        "append_log",
    }
    capsys.readouterr()
    tasks, out = write_tasks(manifest.parent / "tasks.jsonl", 1), manifest.parent / "out"
    assert main([*batch(manifest, tasks, out), "--open-slots"]) == 0
    plan = json.loads((out / "plan.json").read_text())
    assert plan["settings"]["open_slots"] is True
    assert "skill_tools" not in plan["settings"]  # unset levers leave old plans' fingerprints


def test_the_docs_note_store_example_runs_with_the_levers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/examples (the toolset and skill docs/your-tasks.md runs on the real engine) loads,
    validates and, replaying its gold calls with the levers on, certifies the reads in F."""
    examples = Path(__file__).resolve().parents[1] / "docs" / "examples"
    keys = ["alpha", "beta", "gamma"]
    tasks = tmp_path / "notes.jsonl"
    gold = [[{"name": "read_note", "arguments": {"key": k}} for k in keys],
            {"name": "write_note", "arguments": {"key": "digest", "text": "all three"}}]  # fmt: skip
    tasks.write_text(json.dumps({"id": "n", "prompt": "Digest alpha, beta, gamma.",
                                 "inputs": {"keys": keys, "target": "digest"},
                                 "gold_calls": gold}) + "\n")  # fmt: skip
    argv = ["run", "--toolset", f"{examples / 'notes_tools.py'}:make_toolset", "--manifest",
            str(examples / "skills.toml"), "--tasks", str(tasks), "--out", str(tmp_path / "o"),
            "--engine", "scripted", "--policy", "gold", "--skill-tools", "--open-slots",
            "--json"]  # fmt: skip
    assert main(argv) == 0
    jobs = {j["label"]: j for j in json.loads(capsys.readouterr().out)}
    assert jobs["S"]["success"]
    assert jobs["F"]["success"]
    assert [len(w["call_ids"]) for w in jobs["F"]["windows"]] == [3]


@pytest.mark.parametrize(
    ("keys", "says"),
    [
        (["a"], "F: did not flatten: 1 window(s) of 1 call, closed by slot_closure x1"),
        ([], "F: did not flatten: no call joined a certified window"),
    ],
)
def test_when_F_does_not_flatten_the_table_says_why(
    manifest: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    keys: list[str],
    says: str,
) -> None:
    from contextlib import asynccontextmanager

    from harness._commands import run_user
    from harness.testing import ScriptedEngine

    def one_read(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        done = sum(1 for m in messages if m["role"] == "tool")
        return {"name": "read_doc", "arguments": {"key": "a"}} if done == 0 else "Done."

    @asynccontextmanager
    async def engine(args: Any) -> Any:
        async with ScriptedEngine(script=one_read) as scripted:
            yield scripted

    monkeypatch.setattr(run_user, "open_engine", engine)
    argv = [
        "run", "--toolset", "tests.user_toolset:make_toolset", "--manifest", str(manifest),
        "--skill", "report", "--prompt", "Read a.", "--inputs", json.dumps({"keys": keys}),
    ]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert says in out
    assert "S: did not flatten" not in out  # only F arms are told
