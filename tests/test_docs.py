"""The documentation is true to the code: its examples run, its commands parse, its references
are complete.

How the pages are read (the conventions are on docs/development.md):

- Every ```python block of README.md and docs/**/*.md runs as a script, from the repository's
  root, and must exit 0. When the next block is ```text title="Output", the script must print
  exactly that: nothing more (no log lines), nothing less.
- A block after the line ``<!-- example: engine -->`` needs the real in-process engine: it runs
  in the engine-marked job only.
- A ```console block after ``<!-- example: console -->`` is a session: each ``$ harness ...``
  command runs and must print exactly the lines that follow it (a run time such as
  ``(13.3 s)`` aside); a ``$ echo $?`` line after it shows its exit status (else 0).
- A block whose first line is a comment naming a test file (``# test_counters.py: ...``) is a
  pytest module: it runs under pytest and must pass.
- Every ``harness ...`` line of a ```bash / ```console block parses with the real parser.
- Every command of ``harness`` has a generated section on docs/cli.md, and every name of the
  package's ``__all__`` is rendered by a page of the API reference (docs/api/).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

import harness

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted([ROOT / "README.md", *DOCS.rglob("*.md")])

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`]*)$")
MARKER = re.compile(r"^<!--\s*example:\s*(?P<kind>[\w-]+)\s*-->$")
PYTEST_FILE = re.compile(r"^#\s*(?P<name>test_\w+\.py)\b")
#: Every kind of ``<!-- example: KIND -->`` marker the runner knows.
MARKER_KINDS = {"engine", "console"}
#: Languages a block may be fenced with. Python is ``python`` and nothing else, so no example
#: escapes being run under another name.
LANGUAGES = {"python", "text", "console", "bash", "toml", "json", "jsonl", "yaml"}
#: Third-party packages behind optional extras: an example that needs one that is not
#: installed is skipped with the reason, not failed (the no-extras CI job).
OPTIONAL = {
    "vllm", "torch", "transformers", "gguf", "matplotlib", "hypothesis", "bfcl_eval", "mcp",
    "starlette",
}  # fmt: skip
#: A structlog console line ("2026-01-01 12:00:00 [debug    ] turn ..."), colours stripped.
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?Z? \[\s*\w+\s*\] ")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
SHELL_STOP = {"|", "||", "&&", ";", ">", ">>", "<", "2>&1", "&"}


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: Path
    line: int
    lang: str
    info: str
    code: str
    marker: str | None
    end: int

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


@dataclass(frozen=True)
class Example:
    """A ```python block, with the output the page says it prints (if it says)."""

    block: Block
    output: str | None

    @property
    def engine(self) -> bool:
        return self.block.marker == "engine"

    @property
    def pytest_file(self) -> str | None:
        first = self.block.code.lstrip().split("\n", 1)[0]
        match = PYTEST_FILE.match(first)
        return match["name"] if match else None


def read_blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    previous = ""
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            if lines[i].strip():
                previous = lines[i].strip()
            i += 1
            continue
        indent, fence, info = opening["indent"], opening["fence"], opening["info"].strip()
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            stripped = lines[j].strip()
            if stripped.startswith(fence) and set(stripped) == {fence[0]}:
                break
            body.append(lines[j].removeprefix(indent))
            j += 1
        marker = MARKER.match(previous)
        blocks.append(
            Block(
                page=page,
                line=i + 1,
                lang=info.split(" ", 1)[0] if info else "",
                info=info,
                code="\n".join(body) + "\n",
                marker=marker["kind"] if marker else None,
                end=j + 1,
            )
        )
        previous = ""
        i = j + 1
    return blocks


def _is_output(block: Block) -> bool:
    return block.lang == "text" and re.search(r'title="Output"', block.info) is not None


def read_examples(page: Path) -> list[Example]:
    blocks = read_blocks(page)
    lines = page.read_text(encoding="utf-8").splitlines()
    examples = []
    for index, here in enumerate(blocks):
        if here.lang != "python":
            continue
        after = blocks[index + 1] if index + 1 < len(blocks) else None
        adjacent = after is not None and not any(
            line.strip() for line in lines[here.end : after.line - 1]
        )
        output = after.code if after is not None and adjacent and _is_output(after) else None
        examples.append(Example(here, output))
    return examples


ALL_BLOCKS = [block for page in PAGES for block in read_blocks(page)]
EXAMPLES = [example for page in PAGES for example in read_examples(page)]


def _params(engine: bool) -> list[object]:
    return [
        pytest.param(example, id=example.block.where)
        for example in EXAMPLES
        if example.engine == engine
    ]


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    # As if the script sat in the repository's root: the workspace and the benchmark import.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.pop("COLUMNS", None)
    return env


def _run(example: Example, tmp_path: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    name = example.pytest_file
    script = tmp_path / (name or "example.py")
    script.write_text(example.block.code, encoding="utf-8")
    command = [sys.executable, str(script)]
    if name is not None:
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(script)]
    return subprocess.run(
        command,
        cwd=ROOT,
        env=_environment(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.rstrip().splitlines()]


def _check(example: Example, done: subprocess.CompletedProcess[str]) -> None:
    where = example.block.where
    if done.returncode != 0:
        missing = re.search(r"ModuleNotFoundError: No module named '([\w.]+)'", done.stderr)
        if missing and missing[1].partition(".")[0] in OPTIONAL:
            pytest.skip(f"{where} needs the optional package {missing[1]!r}")
        # The harness's own message for a missing extra (a ConfigError naming it).
        extra = re.search(r"ConfigError: .*pip install 'agent-harness\[(\w+)\]'", done.stderr)
        if extra:
            pytest.skip(f"{where} needs the optional extra {extra[1]!r}")
        pytest.fail(
            f"{where}: the example exited with {done.returncode}.\n"
            f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}",
            pytrace=False,
        )
    if example.output is None or example.pytest_file is not None:
        return
    printed, shown = _lines(done.stdout), _lines(example.output)
    if printed == shown:
        return
    without_logs = [line for line in printed if not LOG_LINE.match(ANSI.sub("", line))]
    if without_logs == shown:
        pytest.xfail(
            "the example printed the page's output plus the library's structlog events: "
            "harness logs to stdout until library logging is silent by default (issue 17)"
        )
    pytest.fail(
        f"{where}: the example's output differs from the page's Output block.\n"
        f"--- the page shows\n{example.output}\n--- the example printed\n{done.stdout}"
        f"--- stderr\n{done.stderr}",
        pytrace=False,
    )


@pytest.mark.parametrize("example", _params(engine=False))
def test_the_python_example_runs_and_prints_what_the_page_shows(example, tmp_path):
    _check(example, _run(example, tmp_path, timeout=110))


@pytest.mark.engine
@pytest.mark.timeout(900)
@pytest.mark.parametrize("example", _params(engine=True))
def test_the_engine_example_runs_on_the_real_engine(example, tmp_path):
    _check(example, _run(example, tmp_path, timeout=850))


def test_the_pages_hold_examples_of_both_kinds():
    assert len(_params(engine=False)) >= 5
    assert len(_params(engine=True)) >= 1
    readme = [e for e in EXAMPLES if e.block.page.name == "README.md"]
    assert len(readme) == 1, "the README keeps to one short example"
    assert readme[0].output is not None, "the README's example shows its output"


def test_every_block_is_fenced_with_a_known_language():
    unknown = [f"{b.where}: {b.lang or '(none)'}" for b in ALL_BLOCKS if b.lang not in LANGUAGES]
    assert unknown == [], (
        "fence Python as ```python (it is run) and anything else with one of "
        f"{sorted(LANGUAGES)}: {unknown}"
    )


def test_every_example_marker_is_known_and_precedes_its_kind_of_block():
    for block in ALL_BLOCKS:
        if block.marker is not None:
            assert block.marker in MARKER_KINDS, f"{block.where}: unknown marker {block.marker!r}"
            wanted = "console" if block.marker == "console" else "python"
            assert block.lang == wanted, f"{block.where}: {block.marker!r} must precede ```{wanted}"


def test_the_block_reader_finds_markers_outputs_and_indented_fences(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "Intro.\n\n<!-- example: engine -->\n```python\nprint(1)\n```\n\n"
        '```text title="Output"\n1\n```\n\n- item\n\n    ```python\n    x = 2\n    ```\n\n'
        '```python\nprint(3)\n```\nprose\n```text title="Output"\n3\n```\n',
        encoding="utf-8",
    )
    first, second, third = read_examples(page)
    assert (first.engine, first.output) == (True, "1\n")
    assert (second.block.code, second.output, second.engine) == ("x = 2\n", None, False)
    assert third.output is None, "an Output block belongs to the block right above it"


def _sessions() -> list[tuple[str, str, str, int]]:
    """``(where, command, expected output, exit status)`` of every command of every marked
    console block; a ``$ echo $?`` line after a command gives its exit status (else 0)."""
    found: list[tuple[str, str, str, int]] = []
    for block in ALL_BLOCKS:
        if block.marker != "console":
            continue
        command: str | None = None
        output: list[str] = []
        for line in [*block.code.splitlines(), "$ "]:
            if line.startswith("$ "):
                if command == "echo $?" and found:
                    found[-1] = (*found[-1][:3], int(output[0]))
                elif command:
                    found.append((block.where, command, "\n".join(output), 0))
                command, output = line[2:].strip(), []
            else:
                output.append(line)
    return found


SESSIONS = _sessions()
#: A command's own run time ("22 claims: ... (13.3 s)") differs from run to run.
_RUN_TIME = re.compile(r"\(\d+(?:\.\d+)? s\)")


def _session_lines(text: str) -> list[str]:
    return [_RUN_TIME.sub("(N s)", line) for line in _lines(text)]


@pytest.mark.parametrize(
    ("where", "command", "expected", "status"), SESSIONS, ids=[s[0] for s in SESSIONS]
)
def test_the_console_session_prints_what_the_page_shows(where, command, expected, status):
    words = shlex.split(command)
    assert words[0] == "harness", f"{where}: a session runs harness commands only"
    done = subprocess.run(
        [sys.executable, "-m", "harness._commands.cli", *words[1:]],
        cwd=ROOT,
        env=_environment(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert done.returncode == status, (
        f"{where}: `{command}` exited {done.returncode}, the page shows {status}:\n{done.stderr}"
    )
    assert _session_lines(done.stdout) == _session_lines(expected), (
        f"{where}: `{command}` printed\n{done.stdout}\nbut the page shows\n{expected}"
    )


# -- commands ----------------------------------------------------------------------------------


def _command_lines() -> list[tuple[str, str]]:
    found = []
    for block in ALL_BLOCKS:
        if block.lang not in ("bash", "console"):
            continue
        joined = block.code.replace("\\\n", " ")
        for offset, line in enumerate(joined.splitlines()):
            text = line.strip()
            if block.lang == "console":
                if not text.startswith("$ "):
                    continue
                text = text[2:]
            words = shlex.split(text, comments=True)
            if words and (words[0] == "harness" or words[0].endswith("/harness")):
                found.append((f"{block.where}+{offset + 1}", text))
    return found


COMMAND_LINES = _command_lines()


@pytest.mark.parametrize(("where", "line"), COMMAND_LINES, ids=[w for w, _ in COMMAND_LINES])
def test_the_harness_command_line_in_the_docs_parses(where, line):
    from harness._commands.cli import build_parser

    words = shlex.split(line, comments=True)[1:]
    for index, word in enumerate(words):
        if word in SHELL_STOP or word.startswith((">", "2>")):
            words = words[:index]
            break
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            build_parser(words).parse_args(words)
    except SystemExit as exc:
        if exc.code not in (0, None):
            pytest.fail(
                f"{where}: `harness {' '.join(words)}` does not parse:\n{errors.getvalue()}"
            )


def test_the_docs_show_harness_commands():
    assert len(COMMAND_LINES) >= 20


# -- the command-line reference -------------------------------------------------------------------


def _load_hook(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"docs_hooks_{name}", DOCS / "_hooks" / f"{name}.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_command_of_harness_has_a_section_on_the_cli_page():
    cli_help = _load_hook("cli_help")
    page = (DOCS / "cli.md").read_text(encoding="utf-8")
    marked = [" ".join(m["path"].split()) for m in cli_help.MARKER.finditer(page)]
    commands = list(cli_help.command_parsers())
    missing = [f"harness {c}".strip() for c in commands if c not in marked]
    assert missing == [], (
        f"add a '<!-- harness-help: COMMAND -->' section to docs/cli.md for {missing}"
    )
    assert len(marked) == len(set(marked)), "a command has two sections on docs/cli.md"


def test_the_cli_page_shows_every_option_of_every_command():
    cli_help = _load_hook("cli_help")
    parsers = cli_help.command_parsers()
    page = cli_help.expand((DOCS / "cli.md").read_text(encoding="utf-8"), parsers)
    for path, parser in parsers.items():
        assert f"$ harness {path} --help".replace("  ", " ") in page
        for action in parser._actions:
            for option in action.option_strings:
                assert option in page, f"harness {path}: {option} is not on the CLI page"


def test_a_help_marker_that_names_no_command_is_an_error():
    cli_help = _load_hook("cli_help")
    with pytest.raises(ValueError, match="no command 'harness no-such-command'"):
        cli_help.expand("<!-- harness-help: no-such-command -->\n", cli_help.command_parsers())


def test_sphinx_roles_in_docstrings_become_optional_cross_references():
    pytest.importorskip("griffe")
    roles = _load_hook("docstring_roles")
    text = roles.to_autorefs(
        "See :class:`~harness.tools.Tool` and :func:`run_loop`.", "harness.loop"
    )
    assert '<autoref identifier="harness.tools.Tool" optional><code>Tool</code></autoref>' in text
    assert '<autoref identifier="harness.loop.run_loop" optional><code>run_loop</code>' in text
    assert ":class:" not in text
    assert ":func:" not in text


# -- the API reference ----------------------------------------------------------------------------


def _rendered_identifiers() -> list[str]:
    found = []
    for page in sorted((DOCS / "api").glob("*.md")):
        found += re.findall(r"^::: ([\w.]+)", page.read_text(encoding="utf-8"), re.MULTILINE)
    return found


def _renders(identifier: str, name: str, obj: object) -> bool:
    if identifier.endswith(f".{name}"):
        module_name = identifier.rsplit(".", 1)[0]
        with contextlib.suppress(ImportError):
            return getattr(importlib.import_module(module_name), name, None) is obj
    with contextlib.suppress(ImportError):
        module = importlib.import_module(identifier)
        return name in getattr(module, "__all__", ()) and getattr(module, name, None) is obj
    return False


def test_every_public_name_of_the_package_is_in_the_api_reference():
    identifiers = _rendered_identifiers()
    missing = []
    for name in harness.__all__:
        obj = getattr(harness, name)
        if not any(_renders(identifier, name, obj) for identifier in identifiers):
            missing.append(name)
    assert missing == [], (
        f"harness.__all__ names {missing}, which no page of docs/api/ renders: add "
        "'::: <module>' (a module whose __all__ lists them) to a page of docs/api/"
    )


# -- hand-written tables ---------------------------------------------------------------------------


def test_the_cost_model_page_lists_every_regime_parameter_with_its_option_and_nominal_value():
    from dataclasses import fields

    from harness.costmodel import Regime

    page = (DOCS / "cost-model.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(--[\w-]+)` \| `(\w+)` \| [^|]+ \| [^|]+ \| ([\d.]+) \|", page, re.M)
    nominal = Regime()
    assert sorted(key for _, key, _ in rows) == sorted(f.name for f in fields(Regime))
    frontier = _load_hook("cli_help").command_parsers()["frontier"]
    options = {o for action in frontier._actions for o in action.option_strings}
    for option, key, value in rows:
        assert option in options, f"docs/cost-model.md: harness frontier has no {option}"
        assert float(value) == getattr(nominal, key), f"docs/cost-model.md: nominal {key}"
