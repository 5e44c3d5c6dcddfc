"""Claims about `harness serve` as a real process on loopback (no engine: an upstream that is
down), and about its bind check."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from harness.errors import ConfigError
from harness.proxy.serve import check_bind, is_loopback

ROOT = Path(__file__).resolve().parents[1]


def test_loopback_binds_need_no_key_and_others_do() -> None:
    assert is_loopback("127.0.0.1")
    assert is_loopback("::1")
    assert is_loopback("localhost")
    check_bind("127.0.0.1", None)
    check_bind("0.0.0.0", "key")
    with pytest.raises(ConfigError, match="API key"):
        check_bind("0.0.0.0", None)


def test_harness_serve_refuses_a_non_loopback_bind_without_an_api_key() -> None:
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_API_KEY"}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from harness._commands.cli import main; raise SystemExit(main())",
            "serve",
            "--host",
            "0.0.0.0",
            "--upstream",
            "http://127.0.0.1:9/v1",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode != 0
    assert "API key" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""  # it never listened


def test_harness_serve_listens_on_loopback_and_says_which_upstream_is_down() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk-never-shown"}
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from harness._commands.cli import main; raise SystemExit(main())",
            "serve",
            "--port",
            "0",
            "--upstream",
            "http://127.0.0.1:9/v1",
            "--upstream-retries",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        url = json.loads(line)["url"]
        assert url.startswith("http://127.0.0.1:")
        with httpx.Client(base_url=url, timeout=60) as client:
            health = client.get("/health")
            response = client.post(
                "/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            )
        assert health.status_code == 503  # the proxy answers; its upstream does not
        assert health.json()["upstream_status"] == "down"
        assert "http://127.0.0.1:9/v1" in health.json()["error"]
        assert response.status_code == 502
        message = response.json()["error"]["message"]
        assert "http://127.0.0.1:9/v1" in message
        assert "--upstream" in message  # harness serve's own option, not another command's
        assert "--base-url" not in message
        assert "sk-never-shown" not in response.text
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 143, err
    assert "sk-never-shown" not in err


EFFECTS_TOML = '[tools.read_doc]\nread_only = true\nread_targets = "doc:{key}"\n'
MANIFEST_TOML = """
[skills.survey]
[[skills.survey.phases]]
name = "read"
kind = "fan_out"
tools = ["read_doc"]
[[skills.survey.phases]]
name = "report"
kind = "chain"
tools = ["write_report"]
"""


@pytest.mark.parametrize(
    ("files", "fragment"),
    [
        ({"effects": EFFECTS_TOML}, "no --manifest"),
        ({"effects": EFFECTS_TOML, "manifest": MANIFEST_TOML}, "write_report"),
        (
            {"--drafting": "ngram"},
            "--drafting and --draft-max-batch draft on the embedded engine",
        ),
    ],
    ids=["effects-without-manifest", "manifest-naming-an-undeclared-tool", "drafting-upstream"],
)
def test_inconsistent_start_up_options_are_one_line_and_exit_2(
    tmp_path: Path, files: dict[str, str], fragment: str
) -> None:
    options = []
    for name, text in files.items():
        if name.startswith("--"):  # an option, not a file
            options += [name, text]
            continue
        path = tmp_path / f"{name}.toml"
        path.write_text(text, encoding="utf-8")
        options += [f"--{name}", str(path)]
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from harness._commands.cli import main; raise SystemExit(main())",
            "serve",
            "--port",
            "0",
            "--upstream",
            "http://127.0.0.1:9/v1",
            *options,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert fragment in done.stderr
    assert done.stdout == ""  # it never listened


@pytest.mark.anyio
async def test_served_over_http_a_conversation_waits_for_its_client_and_the_url_answers_at_once() -> (
    None
):
    # harness serve's server runs the app's lifespan, so a conversation waits for its client
    # between requests (the window's closing call comes back with no new generation: 4, 0, 1)
    # and stopping the server cancels it; the printed URL accepts connections at once.
    import anyio

    from harness.proxy import ProxyConfig, build_app
    from harness.proxy.serve import serve
    from harness.testing import ScriptedEngine
    from tests.test_proxy import EFFECTS, _manifest, client_loop, survey_script

    app = build_app(
        ScriptedEngine(survey_script),
        ProxyConfig(effects=EFFECTS, manifest=_manifest("model", False)),
    )
    urls: list[str] = []
    listening = anyio.Event()

    def on_listen(url: str) -> None:
        urls.append(url)
        listening.set()

    async with anyio.create_task_group() as group:
        group.start_soon(lambda: serve(app, "127.0.0.1", 0, on_listen=on_listen))
        await listening.wait()
        async with httpx.AsyncClient(base_url=urls[0], timeout=30) as client:
            messages, responses = await client_loop(client)
        group.cancel_scope.cancel()
    assert [r.headers["x-harness-generations"] for r in responses] == ["4", "0", "1"]
    assert messages[-1]["content"].startswith("done:")
    assert len(app.state.proxy.conversations) == 0


@pytest.mark.anyio
async def test_a_cancelled_server_leaves_the_next_server_in_the_same_loop_reachable() -> None:
    # a cancel must unregister the listening socket from the event loop before closing it:
    # the next server's socket gets the same descriptor, and a stale registration would leave
    # it never told of a connection (its clients would wait forever)
    import functools

    import anyio

    from harness.proxy import ProxyConfig, build_app
    from harness.proxy.serve import serve
    from harness.testing import ScriptedEngine

    for _ in range(3):
        app = build_app(ScriptedEngine(lambda messages, tools: "ok"), ProxyConfig())
        urls: list[str] = []
        listening = anyio.Event()

        def on_listen(url: str, urls: list[str] = urls, listening: anyio.Event = listening) -> None:
            urls.append(url)
            listening.set()

        served = functools.partial(serve, app, "127.0.0.1", 0, on_listen=on_listen)
        async with anyio.create_task_group() as group:
            group.start_soon(served)
            await listening.wait()
            async with httpx.AsyncClient(base_url=urls[0], timeout=5) as client:
                health = await client.get("/health")
            group.cancel_scope.cancel()
        assert health.status_code == 200
