"""JSON output: the versioned envelope, ``indent=2``, sorted keys, nothing else on stdout."""

from __future__ import annotations

import json
from typing import IO

from mi400plan.errors import PlannerError
from mi400plan.results.common import Envelope, ErrorItem, Result


def envelope_for(command: str, result: Result) -> Envelope:
    errors = [ErrorItem(code=code, message=message) for code, message in result.request_errors()]
    status = "error" if errors else "ok"
    return Envelope(command=command, status=status, data=result.model_dump(mode="json"), errors=errors)


def error_envelope(command: str, exc: PlannerError | Exception) -> Envelope:
    if isinstance(exc, PlannerError):
        item = ErrorItem(code=exc.code, message=exc.message, hint=exc.hint)
    else:
        item = ErrorItem(code="unexpected", message=f"{type(exc).__name__}: {exc}")
    return Envelope(command=command, status="error", data=None, errors=[item])


def dumps(env: Envelope) -> str:
    """The envelope as JSON text; bundled profile paths read ``<bundled>/...`` as in the tables."""
    from mi400plan.render.paths import portable

    return json.dumps(portable(env.model_dump(mode="json")), indent=2, sort_keys=True, allow_nan=False)


def write_envelope(command: str, result: Result, stream: IO[str]) -> None:
    stream.write(dumps(envelope_for(command, result)) + "\n")


def write_error(command: str, exc: PlannerError | Exception, stream: IO[str]) -> None:
    stream.write(dumps(error_envelope(command, exc)) + "\n")
