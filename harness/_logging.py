"""The library's loggers: silent unless the application configures logging.

Python's convention for a library is to emit into logging and let the application decide what
is shown. structlog's defaults print every event to stdout, so the harness does not log through
``structlog.get_logger`` directly; :func:`get_logger` returns a logger that routes each event:

- the application configured structlog (``structlog.configure``, as the ``harness`` CLI and
  ``structlog.testing.capture_logs`` do): the event goes through that configuration, with
  the logger's name under ``logger``;
- otherwise it goes to the standard library logger of the same name (``harness.ledger``,
  ``harness.fabric``), which shows nothing until the application configures ``logging``
  (e.g. ``logging.basicConfig(level=logging.DEBUG)``). The record's message is
  ``event key=value ...``; its ``harness_event`` attribute holds the event dict.

:func:`configure_cli_logging` is the CLI's setup (``-v``, ``--log-json``).
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog

__all__ = ("HarnessLogger", "configure_cli_logging", "get_logger")


class HarnessLogger:
    """A named logger with structlog's call shape: ``log.debug("event", key=value, ...)``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._stdlib = logging.getLogger(name)

    def _emit(self, level: int, method: str, event: str, fields: dict[str, Any]) -> None:
        if structlog.is_configured():
            getattr(structlog.get_logger(self.name), method)(event, logger=self.name, **fields)
        elif self._stdlib.isEnabledFor(level):
            text = " ".join([event, *(f"{key}={value!r}" for key, value in fields.items())])
            self._stdlib.log(level, "%s", text, extra={"harness_event": {"event": event, **fields}})

    def debug(self, event: str, **fields: Any) -> None:
        self._emit(logging.DEBUG, "debug", event, fields)

    def info(self, event: str, **fields: Any) -> None:
        self._emit(logging.INFO, "info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._emit(logging.WARNING, "warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._emit(logging.ERROR, "error", event, fields)


def get_logger(name: str) -> HarnessLogger:
    """The logger for one of the library's event streams (``harness.ledger``, ...)."""
    return HarnessLogger(name)


class _Stderr:
    """Whatever ``sys.stderr`` is at write time (a test's capture, a redirected stream)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_cli_logging(
    *, verbose: bool, json_lines: bool = False, stream: TextIO | None = None
) -> None:
    """The CLI's logging: warnings only, or every event with ``verbose``; to ``stream``
    (default: stderr), as readable lines or, with ``json_lines``, one JSON object per event."""
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if json_lines
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.DEBUG if verbose else logging.WARNING
        ),
        logger_factory=structlog.PrintLoggerFactory(stream or _Stderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
