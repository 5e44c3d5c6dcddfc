"""Certify an MCP server directly: the kit's contract for a server command, no adapter.

``harness certify --mcp-server "npx @modelcontextprotocol/server-filesystem {root}"`` (or
:class:`MCPServer` in Python) gives the certification kit (:mod:`harness.certkit`) what it
needs from a server it cannot import:

- **a fresh state per example.** The server runs confined to one directory of the kit's own
  (``{root}`` in the command and in ``env`` values is replaced by it; the server's working
  directory is it). A command with no ``{root}`` anywhere is refused (``ConfigError``): it
  names a directory of the user's, which every example would write while the kit diffs its
  own; ``no_root=True`` (``--no-root``) runs it anyway, for a server with no state on disk.
  Each new state empties the directory and copies ``seed_dir`` into it
  (by default a few files and directories, :data:`DEFAULT_SEED`);
  the server process is kept (a server that keeps its state in files, as the reference
  filesystem and memory servers do, needs nothing else), or restarted for every state with
  ``restart=True`` (a server that caches in memory).
- **a fingerprint and resources.** The state is the directory tree: every file's bytes,
  every directory, every link, never access or change times. Each entry is one resource,
  named ``file:`` and its path relative to the root (``file:notes/a.txt``), as an effects
  file with ``root`` and ``identity = { path = "path" }`` names what a tool touches
  (:mod:`harness.tools.effects_file`): the kit replaces the file's ``root`` with its own
  directory, so what it certifies holds for the real root.
- **one session per server, on a loop of its own.** An MCP session is bound to the event
  loop that opened it, while the kit runs every example in a fresh one: the session lives on
  a thread of its own (an anyio portal) and each tool call crosses to it, so calls still
  run concurrently.
- **result text the user marks as nondeterministic** (``nondeterministic``): each regular
  expression's matches (or a named preset: ``times``, ``temp-names``, ``uuids``) become
  ``<nondeterministic>`` before the kit compares results, so a file's birth time or a
  random temporary name is not a false alarm. A difference that is masked cannot be seen:
  mark only what is really noise. When results differ between two serial runs on fresh
  states and nothing masks them, the kit says so instead of blaming the declaration.
- **manners.** The server's stderr (banners, logs) goes to a log file in the kit's
  temporary directory, not the terminal (``show_server_log=True`` passes it through); a
  server that does not start is an error quoting the log's last lines (the directory and
  every server end when the :class:`MCPServer` closes).

The ``mcp`` SDK is the optional extra ``mcp``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

from harness.certkit._contract import CertifiableToolset
from harness.certkit.nondeterminism import normaliser
from harness.errors import ConfigError, ToolsetError
from harness.tools import Effect, Tool, Toolset
from harness.tools.effects_file import effects_from_dict, load_effects
from harness.tools.identity import InRoot

__all__ = ("DEFAULT_SEED", "MCPServer", "MCPServerState", "env_from_pairs")

#: The resource namespace of the files the kit sees (``file:a/b``).
NAMESPACE = "file:"

#: What the command and ``env`` values hold where the server takes the kit's directory.
ROOT = "{root}"

#: How many of the server log's last lines a start failure quotes.
LOG_TAIL = 20


#: What a fresh state holds when no ``seed_dir`` is given: a few files and directories, so
#: reads, edits and moves of existing entries are tried too (case, accents, nesting, empty).
DEFAULT_SEED: Mapping[str, str | None] = {
    "a.txt": "alpha\n",
    "Readme.md": "# readme\n",
    "caf\u00e9.txt": "accented\n",
    "notes/b.md": "beta\nsecond line\n",
    "notes/deep/c.txt": "gamma\n",
    "empty": None,  # a directory
}


@dataclass(frozen=True)
class MCPServerState:
    """One fresh state: the server's directory, emptied and seeded, and which server
    process it runs under (``generation`` counts restarts)."""

    root: Path
    generation: int


class _Running:
    """One server process and its session on the portal's loop, and its tools as the kit
    calls them (each call crosses to the portal)."""

    def __init__(self, stack: contextlib.ExitStack, toolset: Toolset) -> None:
        self.stack = stack
        self.toolset = toolset


class MCPServer:
    """An MCP server under certification (see the module docstring). Use it as a context
    manager; :meth:`certifiable` is what :func:`harness.certkit.check_toolset` takes.

    ``command``: the server's argv (a list, or one string split as a shell would), with
    ``{root}`` where the server takes its directory. ``env``: extra environment variables
    (values may hold ``{root}``). ``effects``: an effects file, or its parsed tables (its
    ``root`` is replaced by the kit's directory), or a mapping tool ->
    :class:`~harness.tools.Effect`; tools it does
    not name take the server's hints when ``trust_hints`` is true, else the worst case.
    ``seed_dir``: copied into every fresh state (default: :data:`DEFAULT_SEED`). ``restart``: a new server process for every
    state. ``nondeterministic``: presets or regular expressions masked in results.
    ``timeout_s``: each call's deadline. ``no_root``: accept a command and ``env`` with no
    ``{root}`` (refused otherwise: the server would write a directory of the user's).
    """

    def __init__(
        self,
        command: Sequence[str] | str,
        *,
        env: Mapping[str, str] | None = None,
        effects: str | Path | Mapping[str, Any] | None = None,
        trust_hints: bool = False,
        seed_dir: str | Path | None = None,
        restart: bool = False,
        nondeterministic: Sequence[str] = (),
        timeout_s: float = 30.0,
        show_server_log: bool = False,
        name: str | None = None,
        no_root: bool = False,
    ) -> None:
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not argv:
            raise ConfigError("--mcp-server needs a command, e.g. 'npx -y SERVER {root}'.")
        if "/" in argv[0] and not os.path.isabs(argv[0]):
            # the server starts in its own directory: a relative command is the caller's
            argv[0] = os.path.abspath(argv[0])
        self.argv = argv
        self.env = dict(env or {})
        self.effects_source = effects
        self.trust_hints = trust_hints
        self.seed_dir = None if seed_dir is None else Path(seed_dir)
        if self.seed_dir is not None and not self.seed_dir.is_dir():
            raise ConfigError(f"--seed-dir {str(self.seed_dir)!r} is not a directory.")
        self.restart = restart
        self.normalise = normaliser(nondeterministic)
        self.timeout_s = timeout_s
        self.show_server_log = show_server_log
        if not no_root and not any(ROOT in a for a in [*argv, *self.env.values()]):
            raise ConfigError(
                f"--mcp-server {' '.join(argv)!r} has no {ROOT}: the kit runs the server in "
                "a directory of its own and empties it for every example, so write {root} "
                "where the server takes its directory (e.g. 'mcp-server-filesystem {root}') "
                "or in an --mcp-env value (e.g. MEMORY_FILE_PATH={root}/memory.json); "
                "--no-root only for a server that keeps nothing on disk (it then writes "
                "wherever it writes)."
            )
        self.name = name or Path(argv[-1]).name or argv[0]
        self._stack: contextlib.ExitStack | None = None
        self._home: Path | None = None
        self._portal: Any = None
        self._log: TextIO | None = None
        self._running: _Running | None = None
        self._generation = 0
        self._effects: Mapping[str, Effect] | None = None
        #: The server's own hints per tool (MCP annotations), once it has started.
        self.hints: dict[str, Effect] = {}

    # ------------------------------------------------------------------ lifetime

    def __enter__(self) -> MCPServer:
        from anyio.from_thread import start_blocking_portal

        from harness.tools.mcp import _require_mcp

        _require_mcp()
        stack = contextlib.ExitStack()
        try:
            self._home = Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix="harness-mcp-"))
            )
            self.root.mkdir()
            self._log = stack.enter_context(open(self._home / "server.log", "a", encoding="utf-8"))
            self._portal = stack.enter_context(start_blocking_portal())
            self._effects = self._load_effects()
        except BaseException:
            stack.close()
            raise
        self._stack = stack
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop the server and remove the kit's directory (idempotent)."""
        self._stop()
        if self._stack is not None:
            stack, self._stack = self._stack, None
            stack.close()

    @property
    def root(self) -> Path:
        """The directory the server is confined to (the same for every state)."""
        if self._home is None:
            raise ConfigError("MCPServer is used outside its `with` block.")
        return self._home / "root"

    @property
    def server_log(self) -> Path | None:
        """Where the server's stderr went (``None`` before the server starts)."""
        return None if self._home is None else self._home / "server.log"

    def _load_effects(self) -> Mapping[str, Effect] | None:
        source = self.effects_source
        if source is None:
            return None
        # read first as `harness serve --effects` reads it (its own root): what the proxy
        # refuses (identity with no root, ...) is refused here with the same words
        if isinstance(source, Mapping) and "tools" in source:  # an effects file's tables
            effects_from_dict(source, "<effects>")
            return effects_from_dict(source, "<effects>", root=str(self.root))
        if isinstance(source, Mapping):
            return source
        load_effects(source)
        return load_effects(source, root=str(self.root))

    def _substitute(self, text: str) -> str:
        return text.replace("{root}", str(self.root))

    def _start(self) -> _Running:
        from harness.tools.mcp import open_mcp_toolset

        assert self._portal is not None
        argv = [self._substitute(a) for a in self.argv]
        env = {**os.environ, **{k: self._substitute(v) for k, v in self.env.items()}}
        errlog = sys.stderr if self.show_server_log else self._log
        stack = contextlib.ExitStack()
        manager = open_mcp_toolset(
            argv[0],
            argv[1:],
            env=env,
            cwd=str(self.root),
            name=self.name,
            effects=self._effects,
            trust_annotations=self.trust_hints,
            timeout_s=self.timeout_s,
            errlog=errlog,
        )
        try:
            served = stack.enter_context(self._portal.wrap_async_context_manager(manager))
        except BaseException as exc:
            stack.close()
            if isinstance(exc, ToolsetError) and exc.tool in (self._effects or {}):
                source = self.effects_source
                where = source if isinstance(source, str | Path) else "<effects>"
                raise ConfigError(
                    f"Effects file {where} does not fit the server's tools: {exc.message}"
                ) from None
            if isinstance(exc, ConfigError | ToolsetError):
                raise
            raise ToolsetError(
                f"The MCP server {' '.join(argv)!r} did not start: {type(exc).__name__}: "
                f"{exc}. {self._log_tail()}"
            ) from None
        self.hints = dict(served.hints)
        tools = [self._through(tool) for tool in served.values()]
        return _Running(stack, Toolset(tools, name=self.name))

    def _log_tail(self) -> str:
        """The server's last lines of stderr, for an error message (the log itself lives in
        the kit's temporary directory, removed when the kit ends)."""
        if self.show_server_log:
            return "Its output (stderr) is above."
        if self._log is not None:
            self._log.flush()
        try:
            lines = (self.server_log or Path()).read_text(encoding="utf-8").splitlines()
        except OSError:
            lines = []
        if not lines:
            return "It wrote nothing to stderr."
        tail = lines[-LOG_TAIL:]
        cut = f" (last {len(tail)} of {len(lines)} lines)" if len(lines) > len(tail) else ""
        return f"Its stderr{cut}:\n" + "\n".join("  " + line for line in tail)

    def _stop(self) -> None:
        running, self._running = self._running, None
        if running is not None:
            with contextlib.suppress(Exception):
                running.stack.close()

    def _through(self, tool: Tool) -> Tool:
        """The tool as the kit calls it: synchronously from the kit's loop (so it runs in a
        worker thread, concurrently with the window's other calls), crossing to the
        session's loop, its result text normalised."""
        fn = tool.fn
        assert fn is not None
        portal = self._portal
        normalise = self.normalise

        def call(**arguments: Any) -> str:
            from harness.tools.mcp import MCPToolError

            try:
                value = portal.call(functools.partial(fn, **arguments))
            except MCPToolError as exc:
                raise MCPToolError(normalise(str(exc))) from None
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            return normalise(text)

        call.__name__ = tool.name
        return replace(tool, fn=call)

    # ------------------------------------------------------------------ the kit's contract

    def new_state(self, seed: int) -> MCPServerState:
        """Empty the server's directory and copy ``seed_dir`` into it; restart the server
        when asked to (or when it is not running)."""
        root = self.root
        for entry in list(root.iterdir()):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        if self.seed_dir is not None:
            shutil.copytree(self.seed_dir, root, dirs_exist_ok=True, symlinks=True)
        else:
            for relative, content in DEFAULT_SEED.items():
                path = root / relative
                if content is None:
                    path.mkdir(parents=True, exist_ok=True)
                else:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(content, encoding="utf-8")
        if self.restart or self._running is None:
            self._stop()
            self._running = self._start()
            self._generation += 1
        return MCPServerState(root, self._generation)

    def make_toolset(self, state: MCPServerState) -> Toolset:
        if self._running is None or state.generation != self._generation:
            raise ToolsetError(
                "An MCP server state was used after a newer one replaced it (the kit runs "
                "one state at a time)."
            )
        return self._running.toolset

    def fingerprint(self, state: MCPServerState) -> Hashable:
        return tuple(sorted(self.resources(state).items()))

    def resources(self, state: MCPServerState) -> dict[str, str]:
        """One resource per entry under the root, ``file:`` + its relative path: a file's
        SHA-256, a directory, a link's target (never times: reading is not writing)."""
        out: dict[str, str] = {}
        for path in _walk(state.root):
            relative = path.relative_to(state.root).as_posix()
            if path.is_symlink():
                value = "link -> " + os.readlink(path)
            elif path.is_dir():
                value = "directory"
            else:
                try:
                    value = "file " + hashlib.sha256(path.read_bytes()).hexdigest()
                except OSError as exc:
                    value = f"unreadable ({exc.strerror})"
            out[NAMESPACE + relative] = value
        return out

    def example_values(self, state: MCPServerState) -> dict[str, list[str]]:
        """For each argument keyed as a path under the root (``identity = { path = "path" }``):
        the seeded entries and a few new names, each relative and absolute."""
        names = [p.relative_to(state.root).as_posix() for p in _walk(state.root)]
        names += ["new.txt", "new-dir/new.txt"]
        spelled = [*names, *(str(state.root / n) for n in names), "."]
        out: dict[str, list[str]] = {}
        for tool in self.make_toolset(state).values():
            for argument in _path_arguments(tool):
                out.setdefault(f"{tool.name}.{argument}", spelled)
        return out

    def certifiable(self) -> CertifiableToolset:
        """What :func:`harness.certkit.check_toolset` takes."""
        return CertifiableToolset(
            new_state=self.new_state,
            make_toolset=self.make_toolset,
            fingerprint=self.fingerprint,
            resources=self.resources,
            example_values=self.example_values,
            name=self.name,
        )


def _walk(root: Path) -> Iterator[Path]:
    """Every entry under ``root`` (not following links), sorted."""
    for directory, dirnames, filenames in os.walk(root):
        dirnames.sort()
        base = Path(directory)
        for name in sorted([*dirnames, *filenames]):
            yield base / name


def _path_arguments(tool: Tool) -> Iterator[str]:
    """The string arguments the tool's effect keys as paths under a root."""
    identity = tool.effect.identity or {}
    properties = tool.parameters.get("properties")
    for argument, key in identity.items():
        if not isinstance(key, InRoot):
            continue
        schema = properties.get(argument) if isinstance(properties, Mapping) else None
        if isinstance(schema, Mapping) and schema.get("type") == "string":
            yield argument


def env_from_pairs(pairs: Sequence[str], option: str = "--mcp-env") -> dict[str, str]:
    """``["KEY=VALUE", ...]`` (a command line's repeated ``--mcp-env``) as a mapping."""
    env: dict[str, str] = {}
    for item in pairs:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"{option} {item!r}: write KEY=VALUE.")
        env[key] = value
    return env
