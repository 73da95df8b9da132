"""Atomic, exclusive file writes: a temporary file in the target's directory, then a hard link (create)
or ``os.replace`` (replace).

A crash leaves either the old file or the new one, never a half-written file. Creating a file that
must not exist yet is one atomic step (``link(2)`` fails with EEXIST when the name is taken, POSIX.1-2017
link()), so two processes saving to the same path cannot both succeed: the second gets
``FileExistsError``. An existing target that is not a regular file (a FIFO, a device node, a directory,
a symbolic link) is never replaced, even when replacing is asked for. Leaf module (standard library only).
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

# link(2) errors that mean "this file system has no hard links", not "the name is taken".
_NO_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS}


class NotRegularFileError(OSError):
    """The target exists and is not a regular file: it is left alone."""


def check_replaceable(path: str | os.PathLike[str]) -> None:
    """Raise ``NotRegularFileError`` when ``path`` exists and is not a regular file (``lstat``: a link
    to a device is refused like the device)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError:
        return  # unreadable: the write below reports the real error
    if not stat.S_ISREG(mode):
        kind = ("a directory" if stat.S_ISDIR(mode) else "a symbolic link" if stat.S_ISLNK(mode)
                else "a FIFO" if stat.S_ISFIFO(mode) else "a device node"
                if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
                else "not a regular file")
        raise NotRegularFileError(errno.EEXIST, f"exists and is {kind}, which is never replaced", str(path))


def write_atomic(path: str | os.PathLike[str], write: Callable[[IO[bytes]], None], *, replace: bool = True) -> None:
    """Write ``path`` with what ``write`` puts into the binary stream it is given.

    ``replace=False``: create it, failing with ``FileExistsError`` (and writing nothing) when the name
    exists, also when another process creates it meanwhile. ``replace=True``: create or replace a regular
    file. Either way an existing non-regular file raises ``NotRegularFileError``. The new file gets the
    usual mode (0666 less the umask), not ``mkstemp``'s 0600.
    """
    target = Path(path)
    check_replaceable(target)
    if not replace and os.path.lexists(target):
        raise FileExistsError(errno.EEXIST, "already exists", str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        if replace:
            check_replaceable(target)
            os.replace(tmp, target)
        else:
            _create(tmp, target)
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def _create(tmp: str, target: Path) -> None:
    """Give ``tmp``'s content the name ``target`` only if that name is free (one atomic step)."""
    try:
        os.link(tmp, target)
        return
    except FileExistsError:
        raise FileExistsError(errno.EEXIST, "already exists (created meanwhile by another process)", str(target)) from None
    except OSError as exc:
        if exc.errno not in _NO_LINKS:
            raise
    # No hard links here: claim the name exclusively (O_EXCL), then move the content over the claim.
    try:
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except FileExistsError:
        raise FileExistsError(errno.EEXIST, "already exists (created meanwhile by another process)", str(target)) from None
    os.replace(tmp, target)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
