"""Planner errors and the exit codes they map to.

Every error a user can cause is a ``PlannerError``; the CLI turns it into a message on stderr (or
a JSON error envelope) and an exit code, never a traceback. Leaf module: imports nothing from
mi400plan and nothing outside the standard library.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes, documented in the README."""

    OK = 0
    UNEXPECTED = 1
    USAGE = 2  # bad flags or values (Click uses 2 for its own usage errors too)
    PROFILE = 3  # bad profile file or unknown name
    CHECK_FAILED = 4  # with --check: nothing fits / over budget


class PlannerError(Exception):
    """Base class. ``code`` is a short machine-readable token used in the JSON envelope."""

    exit_code: ExitCode = ExitCode.USAGE
    code: str = "error"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class UsageError(PlannerError):
    """A flag value that cannot be used (bad unit, impossible combination)."""

    exit_code = ExitCode.USAGE
    code = "usage"


class ProfileError(PlannerError):
    """A profile file is malformed or fails validation. Names the file, line and field."""

    exit_code = ExitCode.PROFILE
    code = "bad_profile"

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        field: str | None = None,
        hint: str | None = None,
    ) -> None:
        where = path or "<profile>"
        if line is not None:
            where += f":{line}"
        if field:
            where += f" [{field}]"
        super().__init__(f"{where}: {message}", hint=hint)
        self.path = path
        self.line = line
        self.field = field


class UnknownNameError(PlannerError):
    """A profile name that is not in the catalog; carries close matches."""

    exit_code = ExitCode.PROFILE
    code = "unknown_name"

    def __init__(self, kind: str, name: str, matches: list[str], known: list[str]) -> None:
        msg = f"unknown {kind} {name!r}"
        if matches:
            msg += f"; did you mean {', '.join(repr(m) for m in matches)}?"
        super().__init__(msg, hint=f"known {kind}s: {', '.join(known)}" if known else None)
        self.kind = kind
        self.name = name
        self.matches = matches


class MissingValueError(PlannerError):
    """A computation needs a value the profile marks as not disclosed."""

    exit_code = ExitCode.PROFILE
    code = "not_disclosed"


class LayoutError(PlannerError):
    """A parallel layout that breaks a rule (TP must divide heads, ...). Says which rule."""

    exit_code = ExitCode.USAGE
    code = "invalid_layout"

    def __init__(self, message: str, *, rule: str | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.rule = rule
