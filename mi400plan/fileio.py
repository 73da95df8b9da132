"""Atomic file writes: a temporary file in the target's directory, then ``os.replace``.

A crash leaves either the old file or the new one, never a half-written file. Leaf module
(standard library only).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO


def write_atomic(path: str | os.PathLike[str], write: Callable[[IO[bytes]], None]) -> None:
    """Create or replace ``path`` with what ``write`` puts into the binary stream it is given.

    The new file gets the usual mode (0666 less the umask), not ``mkstemp``'s 0600.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
